use issuing_wire::{ApiError, ErrorSlug};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(sqlx::Error),
    /// No database server answers, or the one answering no longer accepts writes (a
    /// failover under way): the request may succeed when retried. Built from
    /// `sqlx::Error` by `From`, so every `?` on a query keeps it typed.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
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

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if lost_database(&e) {
            StoreError::Unavailable(e.to_string())
        } else {
            StoreError::Database(e)
        }
    }
}

/// Whether `e` says the database is out of reach rather than that a statement failed:
/// the connection broke or could not be made (I/O, TLS, the pool's timeout), or the
/// server is shutting down, starting, or in recovery (SQLSTATE class 08, 57P01–57P03),
/// or no longer accepts writes (25006, a primary demoted under a pooled connection).
fn lost_database(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            code.starts_with("08") || matches!(&*code, "57P01" | "57P02" | "57P03" | "25006")
        }),
        _ => false,
    }
}

impl StoreError {
    /// Turns driver-level unique violations into `Conflict` so callers can answer 409s.
    pub(crate) fn from_write(e: sqlx::Error) -> Self {
        match e.as_database_error() {
            Some(db) if db.is_unique_violation() => StoreError::Conflict,
            _ => e.into(),
        }
    }

    /// The failure of a batch, once for each of its callers: an outage stays one (the
    /// callers answer 503 and retry), anything else is the batch's failure.
    pub fn repeat(&self) -> StoreError {
        match self {
            StoreError::Unavailable(why) => StoreError::Unavailable(why.clone()),
            other => StoreError::Batch(other.to_string()),
        }
    }

    /// Whether the database was out of reach (`Unavailable`).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_))
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
            StoreError::Unavailable(why) => {
                tracing::debug!(error = %why, "the database is unavailable; answered 503");
                ApiError::unavailable()
            }
            other => {
                tracing::error!(error = %other, "storage error");
                ApiError::internal()
            }
        }
    }
}
