//! Which TRC20 transfers credit a project's master balance. A chain watcher reports
//! every transfer that touches a deposit address; only an incoming `Transfer` of the
//! configured USDT contract, at least the minimum deposit, is a deposit. Everything else
//! is ignored for a named reason, so the watcher can log and count it.

use issuing_wire::{Amount, MICROS_PER_UNIT};

/// The chain the deposits arrive on (the `network` column of recorded deposits).
pub const TRON: &str = "tron";

/// USDT on Tron mainnet.
pub const MAINNET_USDT_CONTRACT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";

/// Below this, an incoming transfer is dust (address-poisoning spam, mostly) and is not
/// credited unless the operator lowers `ISSUING_TRON_MIN_DEPOSIT`.
pub const DEFAULT_MIN_DEPOSIT: Amount = Amount::from_micros(MICROS_PER_UNIT);

/// The largest single deposit credited: far above any real one, and it keeps the sum of
/// deposits inside the ledger's bounds. A bigger `value` is reported, never credited.
pub const MAX_DEPOSIT: Amount = Amount::from_micros(1_000_000_000 * MICROS_PER_UNIT);

/// One TRC20 transfer as a TronGrid-compatible API reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trc20Transfer {
    pub transaction_id: String,
    /// The event type: `Transfer` (or `Approval`, which moves nothing).
    pub kind: String,
    /// The token contract's address.
    pub token: String,
    pub from: String,
    pub to: String,
    /// Token units as a decimal integer string (USDT: 6 decimals, so micro-USDT).
    pub value: String,
    /// Milliseconds since the epoch.
    pub block_timestamp: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ignored {
    /// Not a `Transfer` event.
    NotATransfer,
    /// Another token than the configured USDT contract.
    OtherToken,
    /// Money leaving the deposit address (or sent to itself).
    Outgoing,
    /// Neither to nor from the address: the API answered about another account.
    Unrelated,
    /// Below the configured minimum deposit.
    BelowMinimum,
    /// `value` is not a plain positive integer, or above `MAX_DEPOSIT`.
    BadValue,
    /// The transaction id is not 64 hex digits.
    BadTransactionId,
}

impl Ignored {
    /// The metric label and log field of the reason.
    pub const fn as_str(self) -> &'static str {
        match self {
            Ignored::NotATransfer => "not_a_transfer",
            Ignored::OtherToken => "other_token",
            Ignored::Outgoing => "outgoing",
            Ignored::Unrelated => "unrelated",
            Ignored::BelowMinimum => "below_minimum",
            Ignored::BadValue => "bad_value",
            Ignored::BadTransactionId => "bad_transaction_id",
        }
    }

    pub const ALL: [Ignored; 7] = [
        Ignored::NotATransfer,
        Ignored::OtherToken,
        Ignored::Outgoing,
        Ignored::Unrelated,
        Ignored::BelowMinimum,
        Ignored::BadValue,
        Ignored::BadTransactionId,
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Credit(Amount),
    Ignore(Ignored),
}

/// Judges one transfer reported for deposit address `address`.
pub fn classify(t: &Trc20Transfer, address: &str, contract: &str, minimum: Amount) -> Verdict {
    let verdict = if t.kind != "Transfer" {
        Err(Ignored::NotATransfer)
    } else if t.token != contract {
        Err(Ignored::OtherToken)
    } else if t.from == address {
        Err(Ignored::Outgoing)
    } else if t.to != address {
        Err(Ignored::Unrelated)
    } else if !is_transaction_id(&t.transaction_id) {
        Err(Ignored::BadTransactionId)
    } else {
        match token_units(&t.value) {
            None => Err(Ignored::BadValue),
            Some(a) if a < minimum => Err(Ignored::BelowMinimum),
            Some(a) => Ok(a),
        }
    };
    match verdict {
        Ok(amount) => Verdict::Credit(amount),
        Err(reason) => Verdict::Ignore(reason),
    }
}

/// A 6-decimal token `value` as an amount: digits only, positive, at most `MAX_DEPOSIT`.
pub fn token_units(value: &str) -> Option<Amount> {
    if value.is_empty() || value.len() > 18 || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let micros: i64 = value.parse().ok()?;
    let amount = Amount::from_micros(micros);
    (micros > 0 && amount <= MAX_DEPOSIT).then_some(amount)
}

/// A Tron transaction id: 64 hex digits (any case).
pub fn is_transaction_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: &str = "TUEZSdKsoDHQMeZwihtdoBiN46zxhGWYdH";
    const OTHER: &str = "TSeJkUh4Qv67VNFwY8LaAxERygNdy6NQZK";

    fn transfer(from: &str, to: &str, value: &str) -> Trc20Transfer {
        Trc20Transfer {
            transaction_id: "ab".repeat(32),
            kind: "Transfer".into(),
            token: MAINNET_USDT_CONTRACT.into(),
            from: from.into(),
            to: to.into(),
            value: value.into(),
            block_timestamp: 1,
        }
    }

    fn judge(t: &Trc20Transfer) -> Verdict {
        classify(t, ME, MAINNET_USDT_CONTRACT, DEFAULT_MIN_DEPOSIT)
    }

    #[test]
    fn incoming_usdt_is_credited_in_micro_units() {
        assert_eq!(
            judge(&transfer(OTHER, ME, "12500000")),
            Verdict::Credit(Amount::from_micros(12_500_000))
        );
        assert_eq!(
            judge(&transfer(OTHER, ME, "1000000")),
            Verdict::Credit(DEFAULT_MIN_DEPOSIT)
        );
    }

    #[test]
    fn everything_else_is_ignored_with_a_reason() {
        let ignore = |t: &Trc20Transfer| match judge(t) {
            Verdict::Ignore(r) => Some(r),
            Verdict::Credit(_) => None,
        };
        assert_eq!(
            ignore(&transfer(ME, OTHER, "5000000")),
            Some(Ignored::Outgoing)
        );
        assert_eq!(
            ignore(&transfer(ME, ME, "5000000")),
            Some(Ignored::Outgoing)
        );
        assert_eq!(
            ignore(&transfer(OTHER, OTHER, "5000000")),
            Some(Ignored::Unrelated)
        );
        assert_eq!(
            ignore(&transfer(OTHER, ME, "999999")),
            Some(Ignored::BelowMinimum)
        );
        let mut t = transfer(OTHER, ME, "5000000");
        t.token = OTHER.into();
        assert_eq!(ignore(&t), Some(Ignored::OtherToken));
        let mut t = transfer(OTHER, ME, "5000000");
        t.kind = "Approval".into();
        assert_eq!(ignore(&t), Some(Ignored::NotATransfer));
        let mut t = transfer(OTHER, ME, "5000000");
        t.transaction_id = "xyz".into();
        assert_eq!(ignore(&t), Some(Ignored::BadTransactionId));
        for bad in ["", "-5", "1.5", "0", "1e9", " 5", "99999999999999999999"] {
            assert_eq!(
                ignore(&transfer(OTHER, ME, bad)),
                Some(Ignored::BadValue),
                "{bad}"
            );
        }
    }

    #[test]
    fn values_above_the_largest_deposit_are_refused() {
        assert_eq!(token_units("1000000000000000"), Some(MAX_DEPOSIT));
        assert_eq!(token_units("1000000000000001"), None);
    }
}
