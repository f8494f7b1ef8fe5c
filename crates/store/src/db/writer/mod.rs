//! Batch writers' transactions (docs/architecture.md, "One writer per hot account"):
//! `Store::write_batch` runs a batch's statements in one transaction on the backend's
//! fastest path, through a `BatchConn`: on SQLite the writer's own rusqlite connection
//! and thread (`sqlite.rs`), on PostgreSQL a pooled connection.

mod conn;
pub(crate) mod lane;
mod sqlite;
pub(crate) mod together;

pub use conn::{AsBatch, BatchConn, Param, Row, RowRead};
pub use lane::Lane;
pub(crate) use sqlite::SqliteWriter;
pub use together::{Lookup, Part};

use crate::{Backend, Durable, Store, StoreError};
use futures::future::BoxFuture;
use futures::FutureExt;
use sqlx::AnyConnection;
use std::panic::AssertUnwindSafe;

impl Store {
    /// `write_batch` on `lane`'s own connection (PostgreSQL); on SQLite the same as
    /// `write_batch`.
    pub async fn write_batch_in<T, F>(&self, lane: &Lane, f: F) -> Result<(T, Durable), StoreError>
    where
        F: for<'c> FnOnce(BatchConn<'c>) -> BoxFuture<'c, Result<T, StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        if self.backend() == Backend::Sqlite {
            return self.write_batch(f).await;
        }
        lane.run(self, f).await
    }

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
        let mut conn = self.conn().await?;
        in_transaction(&mut conn, f).await
    }
}

/// `f` in one PostgreSQL transaction on `conn`: committed (durable once it returns) if
/// `f` answers `Ok`, rolled back otherwise.
async fn in_transaction<T, F>(conn: &mut AnyConnection, f: F) -> Result<(T, Durable), StoreError>
where
    F: for<'c> FnOnce(BatchConn<'c>) -> BoxFuture<'c, Result<T, StoreError>>,
{
    let mut tx = sqlx::Connection::begin(conn).await?;
    let ran = AssertUnwindSafe(f(BatchConn::Sqlx(&mut tx)))
        .catch_unwind()
        .await;
    match ran {
        Ok(Ok(value)) => {
            tx.commit().await?;
            Ok((value, Durable::new(None, None)))
        }
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
