use issuing_wire::{ApiError, ErrorSlug};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// The SQLite batch writer's own connection (`writer/sqlite.rs`).
    #[error("database error: {0}")]
    Sqlite(rusqlite::Error),
    #[error("unique constraint violated")]
    Conflict,
    #[error("account {account_id} has insufficient funds")]
    InsufficientFunds { account_id: String },
    #[error("account {account_id} would pass the largest balance the ledger holds")]
    BalanceLimit { account_id: String },
    #[error("not found: {0}")]
    NotFound(&'static str),
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("the lease on order {0} was lost to another worker")]
    LeaseLost(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A group commit batch failed as a whole (see `group_commit.rs`).
    #[error("group commit: {0}")]
    Batch(String),
}

impl StoreError {
    /// Turns driver-level unique violations into `Conflict` so callers can answer 409s.
    pub(crate) fn from_write(e: sqlx::Error) -> Self {
        match e.as_database_error() {
            Some(db) if db.is_unique_violation() => StoreError::Conflict,
            _ => StoreError::Database(e),
        }
    }
}

/// Storage failures that reach a handler unplanned are internal errors; the cause is
/// logged by the HTTP layer, never sent to the client.
impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::InsufficientFunds { .. } => {
                ApiError::new(ErrorSlug::InsufficientFunds, "Insufficient funds")
            }
            StoreError::BalanceLimit { .. } => ApiError::new(
                ErrorSlug::AmountAboveMaximum,
                "The amount would take an account past the largest balance the ledger holds",
            ),
            other => {
                tracing::error!(error = %other, "storage error");
                ApiError::internal()
            }
        }
    }
}
