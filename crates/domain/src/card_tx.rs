//! Card transactions (CONTRACT §9): one authorization's life, or one posting without
//! an authorization. The rules here decide which network message applies to which
//! state and how a clearing splits into ledger moves; storage and HTTP live elsewhere.

/// `card_tx_data.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxKind {
    Auth,
    Reversal,
    Refund,
    /// A dispute's movement on the card (CONTRACT §15): a credit or a taken-back credit.
    Other,
}

impl TxKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            TxKind::Auth => "auth",
            TxKind::Reversal => "reversal",
            TxKind::Refund => "refund",
            TxKind::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            TxKind::Auth,
            TxKind::Reversal,
            TxKind::Refund,
            TxKind::Other,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }
}

/// `card_tx_data.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxStatus {
    Pending,
    Approved,
    Declined,
}

impl TxStatus {
    pub const fn as_str(self) -> &'static str {
        match self {
            TxStatus::Pending => "pending",
            TxStatus::Approved => "approved",
            TxStatus::Declined => "declined",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [TxStatus::Pending, TxStatus::Approved, TxStatus::Declined]
            .into_iter()
            .find(|k| k.as_str() == s)
    }
}

/// `transaction_created_<type>_<status>` for a new transaction,
/// `transaction_updated_<type>_<status>` for a change.
pub fn tx_type(created: bool, kind: TxKind, status: TxStatus) -> String {
    let verb = if created { "created" } else { "updated" };
    format!("transaction_{verb}_{}_{}", kind.as_str(), status.as_str())
}

/// Why an authorization was declined (`card_tx_data.failure_reason`).
pub const DECLINE_INSUFFICIENT_FUNDS: &str = "insufficient_funds";
pub const DECLINE_CARD_NOT_ACTIVE: &str = "card_not_active";
/// A hold released because it was never cleared in time.
pub const REASON_EXPIRED: &str = "expired";
/// A hold released because its card was closed.
pub const REASON_CARD_CLOSED: &str = "card_closed";

/// Whether an open authorization (pending, with funds held) is in this state.
pub fn is_open_auth(kind: TxKind, status: TxStatus) -> bool {
    kind == TxKind::Auth && status == TxStatus::Pending
}

/// Whether refunds may be posted against this transaction: a cleared authorization (or
/// a force post, which is born cleared).
pub fn is_refundable(kind: TxKind, status: TxStatus) -> bool {
    kind == TxKind::Auth && status == TxStatus::Approved
}

/// How a clearing of `bill` against a hold of `held` moves money (micro-units, all ≥ 0):
/// `from_hold` goes from the hold to the network, `released` from the hold back to the
/// card, `from_card` from the card's free funds to the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clearing {
    pub from_hold: i64,
    pub released: i64,
    pub from_card: i64,
}

pub fn clearing(held: i64, bill: i64) -> Clearing {
    debug_assert!(held >= 0 && bill >= 0);
    let from_hold = bill.min(held);
    let c = Clearing {
        from_hold,
        released: held - from_hold,
        from_card: bill - from_hold,
    };
    // Every held micro-unit is either spent or released, and the bill is paid in full.
    debug_assert_eq!(c.from_hold + c.released, held);
    debug_assert_eq!(c.from_hold + c.from_card, bill);
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names() {
        assert_eq!(
            tx_type(true, TxKind::Auth, TxStatus::Pending),
            "transaction_created_auth_pending"
        );
        assert_eq!(
            tx_type(false, TxKind::Reversal, TxStatus::Approved),
            "transaction_updated_reversal_approved"
        );
        assert_eq!(TxKind::parse("refund"), Some(TxKind::Refund));
        assert_eq!(TxStatus::parse("nope"), None);
        assert!(is_open_auth(TxKind::Auth, TxStatus::Pending));
        assert!(!is_refundable(TxKind::Auth, TxStatus::Pending));
        assert!(!is_refundable(TxKind::Refund, TxStatus::Approved));
    }

    proptest! {
        #[test]
        fn clearing_conserves_money(held in 0i64..1_000_000_000, bill in 0i64..1_000_000_000) {
            let c = clearing(held, bill);
            prop_assert!(c.from_hold >= 0 && c.released >= 0 && c.from_card >= 0);
            prop_assert_eq!(c.from_hold + c.released, held);
            prop_assert_eq!(c.from_hold + c.from_card, bill);
            prop_assert!(c.released == 0 || c.from_card == 0);
        }
    }
}
