//! What `issuing admin verify-ledger` can find wrong (`ledger::verify`, and the
//! dispute checks of `disputes::verify`), in one type both name.

/// A ledger inconsistency found by `verify`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    UnbalancedTransfer {
        transfer_id: String,
        sum: i64,
    },
    BalanceDiffers {
        account_id: String,
        kind: String,
        balance: i64,
        entries_sum: i64,
    },
    /// A card's hold account differs from the sum its open authorizations still hold.
    HeldDiffers {
        card_id: String,
        held: i64,
        open_auths: i64,
    },
    Negative {
        account_id: String,
        kind: String,
        balance: i64,
    },
    /// A project's debt is not minus its recorded shortfalls less their repayments (the
    /// entries of `card_shortfall` transfers and of the credits that repaid it), or is
    /// positive.
    DebtDiffers {
        project_id: String,
        debt: i64,
        recorded: i64,
    },
    /// A project owes debt while its master account holds money that should have
    /// repaid it.
    DebtBesideFunds {
        project_id: String,
        debt: i64,
        master: i64,
    },
    /// A card's usage kept for a UTC day or hour and an MCC (`card_usage`, what limits
    /// read) differs from what its transactions of that bucket count.
    UsageDiffers {
        card_id: String,
        /// The bucket's width and start, microseconds.
        span: i64,
        bucket: i64,
        mcc: String,
        kept: (i64, i64),
        counted: (i64, i64),
    },
    /// A row points at a row that does not exist: an entry at its transfer or account,
    /// a transfer or an event at its project (PostgreSQL keeps no foreign keys there).
    Orphan {
        table: String,
        id: String,
        column: String,
        missing: String,
    },
    /// A dispute's movements do not match its state: (credited, paid back to the dispute
    /// account, taken back) expected and found.
    DisputeDiffers {
        dispute_id: String,
        status: String,
        expected: (i64, i64, i64),
        actual: (i64, i64, i64),
    },
    /// A project's dispute account is not minus its open provisional credits.
    DisputeAccountDiffers {
        project_id: String,
        balance: i64,
        fronted: i64,
    },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::UnbalancedTransfer { transfer_id, sum } => {
                write!(f, "transfer {transfer_id} does not balance: legs sum to {sum} micro-units")
            }
            Mismatch::BalanceDiffers { account_id, kind, balance, entries_sum } => write!(
                f,
                "account {account_id} ({kind}) has balance {balance} but its entries sum to {entries_sum}"
            ),
            Mismatch::HeldDiffers { card_id, held, open_auths } => write!(
                f,
                "card {card_id} holds {held} but its open authorizations hold {open_auths}"
            ),
            Mismatch::Negative { account_id, kind, balance } => {
                write!(f, "account {account_id} ({kind}) is negative: {balance}")
            }
            Mismatch::DebtDiffers { project_id, debt, recorded } => write!(
                f,
                "project {project_id} has debt {debt} but its shortfalls less repayments are {recorded} (a debt is never positive)"
            ),
            Mismatch::DebtBesideFunds { project_id, debt, master } => write!(
                f,
                "project {project_id} has debt {debt} while its master account holds {master}"
            ),
            Mismatch::UsageDiffers { card_id, span, bucket, mcc, kept, counted } => write!(
                f,
                "card {card_id} keeps usage {kept:?} (amount, count) for the {span} µs from {bucket} and MCC '{mcc}' but its transactions count {counted:?}"
            ),
            Mismatch::Orphan { table, id, column, missing } => write!(
                f,
                "{table} row {id} has {column} {missing}, which does not exist"
            ),
            Mismatch::DisputeDiffers { dispute_id, status, expected, actual } => write!(
                f,
                "dispute {dispute_id} ({status}) should have moved {expected:?} (credited, paid back, taken back) but moved {actual:?}"
            ),
            Mismatch::DisputeAccountDiffers { project_id, balance, fronted } => write!(
                f,
                "project {project_id}'s dispute account holds {balance} but its open provisional credits are {fronted}"
            ),
        }
    }
}
