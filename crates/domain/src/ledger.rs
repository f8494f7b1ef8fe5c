//! The ledger's rules. Money moves only as transfers: a set of legs whose amounts sum to
//! zero, each leg changing one account. Customer accounts (a project's master balance, a
//! card's funds) can never go negative; only the contra accounts that stand for the world
//! outside (the chain deposits come from, the card network) and a project's debt may.

use issuing_wire::Amount;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccountKind {
    /// The project's USDT master balance.
    Master,
    /// Funds loaded onto one card, free to spend.
    Card,
    /// A card's funds held by open authorizations: spent unless released.
    CardHold,
    /// Topups paid from the master balance whose provider call has not finished yet:
    /// no longer the project's to spend, not yet on the card.
    InFlight,
    /// Fees the platform earned from a project.
    FeeIncome,
    /// Contra account for confirmed on-chain deposits; its balance is minus all deposits.
    DepositSource,
    /// Contra account for money that left through the card network (settled spends).
    Network,
    /// What the project owes: a real network's clearing the card and the master balance
    /// could not pay. Never positive; the wire's master balance is master + debt.
    Debt,
    /// What the project fronts for its cardholders' disputes (CONTRACT §15): provisional
    /// credits leave it, the network's payment of a won dispute and a taken-back credit
    /// return to it. Negative while credits are outstanding.
    Dispute,
}

impl AccountKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            AccountKind::Master => "master",
            AccountKind::Card => "card",
            AccountKind::CardHold => "card_hold",
            AccountKind::InFlight => "in_flight",
            AccountKind::FeeIncome => "fee_income",
            AccountKind::DepositSource => "deposit_source",
            AccountKind::Network => "network",
            AccountKind::Debt => "debt",
            AccountKind::Dispute => "dispute",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [
            AccountKind::Master,
            AccountKind::Card,
            AccountKind::CardHold,
            AccountKind::InFlight,
            AccountKind::FeeIncome,
            AccountKind::DepositSource,
            AccountKind::Network,
            AccountKind::Debt,
            AccountKind::Dispute,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }

    pub const fn may_go_negative(self) -> bool {
        matches!(
            self,
            AccountKind::DepositSource
                | AccountKind::Network
                | AccountKind::Debt
                | AccountKind::Dispute
        )
    }
}

/// Why money moved. The master account's history (`project/txs`) shows these as `type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransferKind {
    Deposit,
    CardIssueFee,
    CardTopup,
    TopupFee,
    CardWithdraw,
    Refund,
    /// An authorization holds card funds.
    CardAuthHold,
    /// A hold released: reversal, expiry, the unused part of a clearing, a closed card.
    CardHoldRelease,
    /// Card funds leave to the card network (clearing, force post).
    CardSpend,
    /// The card network returns funds to the card.
    CardRefund,
    /// What a real network's clearing or force post took beyond the card's funds: from
    /// the master balance, and what that lacked from the project's debt.
    CardShortfall,
    /// A dispute's credit to the card: a provisional credit (from the dispute account)
    /// or a won dispute's without one (from the network).
    DisputeCredit,
    /// A provisional credit taken back from the card after a lost or withdrawn dispute.
    DisputeDebit,
    /// What a taken-back credit found missing on the card: from the master balance, then
    /// the project's debt.
    DisputeShortfall,
    /// The network pays a won dispute back to the dispute account that fronted it.
    DisputeWon,
}

impl TransferKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            TransferKind::Deposit => "deposit",
            TransferKind::CardIssueFee => "card_issue",
            TransferKind::CardTopup => "card_topup",
            TransferKind::TopupFee => "fee",
            TransferKind::CardWithdraw => "card_withdraw",
            TransferKind::Refund => "refund",
            TransferKind::CardAuthHold => "card_auth_hold",
            TransferKind::CardHoldRelease => "card_hold_release",
            TransferKind::CardSpend => "card_spend",
            TransferKind::CardRefund => "card_refund",
            TransferKind::CardShortfall => "card_shortfall",
            TransferKind::DisputeCredit => "dispute_credit",
            TransferKind::DisputeDebit => "dispute_debit",
            TransferKind::DisputeShortfall => "dispute_shortfall",
            TransferKind::DisputeWon => "dispute_won",
        }
    }
}

/// One side of a transfer: `amount` is added to the account (negative takes money out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leg<A> {
    pub account: A,
    pub amount: Amount,
}

/// A balanced set of legs. The constructor is the only way to build one, so an
/// unbalanced transfer cannot reach storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer<A> {
    kind: TransferKind,
    legs: Vec<Leg<A>>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    #[error("transfer legs do not sum to zero")]
    Unbalanced,
    #[error("a transfer needs at least two non-zero legs")]
    Empty,
}

impl<A> Transfer<A> {
    pub fn new(kind: TransferKind, legs: Vec<Leg<A>>) -> Result<Self, TransferError> {
        let legs: Vec<_> = legs
            .into_iter()
            .filter(|l| l.amount.micros() != 0)
            .collect();
        if legs.len() < 2 {
            return Err(TransferError::Empty);
        }
        let sum = legs
            .iter()
            .try_fold(0i64, |acc, l| acc.checked_add(l.amount.micros()));
        if sum != Some(0) {
            return Err(TransferError::Unbalanced);
        }
        Ok(Transfer { kind, legs })
    }

    /// Moves `amount` (positive) from one account to another.
    pub fn simple(
        kind: TransferKind,
        from: A,
        to: A,
        amount: Amount,
    ) -> Result<Self, TransferError> {
        Self::new(
            kind,
            vec![
                Leg {
                    account: from,
                    amount: Amount::from_micros(-amount.micros()),
                },
                Leg {
                    account: to,
                    amount,
                },
            ],
        )
    }

    pub fn kind(&self) -> TransferKind {
        self.kind
    }

    pub fn legs(&self) -> &[Leg<A>] {
        &self.legs
    }
}

/// Who pays what a real network settles beyond a card's hold: the card's free funds,
/// then the project's master balance, then the project's debt. All in micro-units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shortfall {
    pub from_card: i64,
    pub from_master: i64,
    pub from_debt: i64,
}

/// Splits `excess` (what a clearing or force post takes beyond the hold) over the card's
/// free funds and the master balance; what neither holds becomes debt. A network that
/// settles does not take "no", so the whole excess is always paid.
pub fn shortfall(excess: i64, card: i64, master: i64) -> Shortfall {
    debug_assert!(excess >= 0 && card >= 0 && master >= 0);
    let from_card = excess.min(card.max(0));
    let from_master = (excess - from_card).min(master.max(0));
    let s = Shortfall {
        from_card,
        from_master,
        from_debt: excess - from_card - from_master,
    };
    debug_assert_eq!(s.from_card + s.from_master + s.from_debt, excess);
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_shortfall_is_paid_card_first_then_master_then_debt(
            excess in 0i64..1_000_000_000,
            card in 0i64..1_000_000_000,
            master in 0i64..1_000_000_000,
        ) {
            let s = shortfall(excess, card, master);
            prop_assert!(s.from_card >= 0 && s.from_master >= 0 && s.from_debt >= 0);
            prop_assert_eq!(s.from_card + s.from_master + s.from_debt, excess);
            prop_assert!(s.from_card <= card && s.from_master <= master);
            // The master balance pays only once the card is empty, debt only once both are.
            prop_assert!(s.from_master == 0 || s.from_card == card);
            prop_assert!(s.from_debt == 0 || (s.from_card == card && s.from_master == master));
        }
    }

    #[test]
    fn a_shortfall_takes_the_card_to_zero_then_the_master_balance() {
        let s = shortfall(50, 10, 15);
        assert_eq!((s.from_card, s.from_master, s.from_debt), (10, 15, 25));
        let s = shortfall(5, 10, 15);
        assert_eq!((s.from_card, s.from_master, s.from_debt), (5, 0, 0));
    }

    #[test]
    fn transfers_must_balance() {
        let a = |m| Amount::from_micros(m);
        assert!(Transfer::new(
            TransferKind::Deposit,
            vec![
                Leg {
                    account: 1,
                    amount: a(5)
                },
                Leg {
                    account: 2,
                    amount: a(-4)
                }
            ]
        )
        .is_err());
        assert_eq!(
            Transfer::<u8>::new(TransferKind::Deposit, vec![]),
            Err(TransferError::Empty)
        );
        let t = Transfer::simple(TransferKind::Deposit, 1, 2, a(7)).unwrap();
        assert_eq!(t.legs().iter().map(|l| l.amount.micros()).sum::<i64>(), 0);
    }

    #[test]
    fn only_contra_accounts_may_go_negative() {
        assert!(!AccountKind::Master.may_go_negative());
        assert!(!AccountKind::Card.may_go_negative());
        assert!(AccountKind::DepositSource.may_go_negative());
        assert!(AccountKind::Debt.may_go_negative());
        assert_eq!(AccountKind::parse("debt"), Some(AccountKind::Debt));
        assert_eq!(
            AccountKind::parse("fee_income"),
            Some(AccountKind::FeeIncome)
        );
    }
}
