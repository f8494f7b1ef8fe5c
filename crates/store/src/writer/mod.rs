//! Batch writers' transactions (docs/architecture.md, "One writer per hot account"):
//! `Store::write_batch` runs a batch's statements in one transaction on the backend's
//! fastest path, through a `BatchConn`: on SQLite the writer's own rusqlite connection
//! and thread (`sqlite.rs`), on PostgreSQL a pooled connection.

mod conn;
mod sqlite;

pub use conn::{AsBatch, BatchConn, Param, Row, RowRead};
pub(crate) use sqlite::SqliteWriter;

use crate::{Backend, Durable, Store, StoreError};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::panic::AssertUnwindSafe;

impl Store {
    /// Runs `f` in one write transaction: committed if it answers `Ok`, rolled back
    /// otherwise. Answers once committed; the commit may be announced only after the
    /// `Durable` is waited for. SQLite runs every batch on one thread, one at a time;
    /// PostgreSQL batches run on pooled connections, as many at once as callers.
    pub async fn write_batch<T, F>(&self, f: F) -> Result<(T, Durable), StoreError>
    where
        F: for<'c> FnOnce(BatchConn<'c>) -> BoxFuture<'c, Result<T, StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        if self.backend() == Backend::Sqlite {
            return self.sqlite_writer()?.run(f).await;
        }
        let mut tx = self.begin().await?;
        let ran = AssertUnwindSafe(f(BatchConn::Sqlx(&mut tx)))
            .catch_unwind()
            .await;
        match ran {
            Ok(Ok(value)) => Ok((value, tx.commit_deferred().await?)),
            Ok(Err(e)) => {
                // Dropping the transaction rolls it back too.
                let _ = tx.rollback().await;
                Err(e)
            }
            Err(_) => {
                let _ = tx.rollback().await;
                tracing::error!("a write batch panicked; rolled back");
                Err(StoreError::Batch("the batch panicked".into()))
            }
        }
    }
}
