//! The SQLite writer's thread: one rusqlite connection to the database file, owned by
//! one thread, that runs batch writers' transactions one after another.
//!
//! Why a thread of its own: sqlx hands every SQLite statement to its connection's
//! worker thread and back, ~100 µs a statement on this project's machines against a few
//! µs for a cached rusqlite statement on the thread that owns the connection. A batch is
//! one hand-over here, whatever its statements.
//!
//! The connection is set up as the pool's are (WAL, `synchronous=NORMAL` with the
//! shared log fsync of `wal_sync.rs`, foreign keys, no checkpoint on commit), and a
//! transaction takes this process's write turn before `BEGIN IMMEDIATE`, like every other
//! writer of the process, so the lock passes between them in order.
//!
//! Bounded: `QUEUE` transactions wait for the thread; their senders wait beyond.

use super::conn::{sqlite_error, BatchConn};
use crate::wal_sync::WalSync;
use crate::{Durable, StoreError};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Mutex};

const QUEUE: usize = 64;
/// Statements kept prepared: every statement of every batch writer, with room.
const STATEMENT_CACHE: usize = 256;

type Job = Box<dyn FnOnce(&mut rusqlite::Connection) + Send>;

pub(crate) struct SqliteWriter {
    jobs: mpsc::Sender<Job>,
    turn: Arc<Mutex<()>>,
    wal: Arc<WalSync>,
}

impl SqliteWriter {
    /// Opens the writer's connection to `path` and starts its thread, which ends when the
    /// writer is dropped.
    pub(crate) fn start(
        path: &str,
        turn: Arc<Mutex<()>>,
        wal: Arc<WalSync>,
    ) -> Result<SqliteWriter, StoreError> {
        let conn = rusqlite::Connection::open(path).map_err(sqlite_error)?;
        // As the pool's connections (`db.rs`), and: statement journals in memory (an
        // insert that fires triggers journals the pages it changes, which on a file
        // cost a write each: a fifth of a batch's inserts); a larger page cache, as
        // every batch walks the hot tables' indexes.
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; \
             PRAGMA busy_timeout=30000; PRAGMA wal_autocheckpoint=0; PRAGMA cache_size=-65536; PRAGMA temp_store=MEMORY;",
        )
        .map_err(sqlite_error)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        let (jobs, mut queue) = mpsc::channel::<Job>(QUEUE);
        let runtime = tokio::runtime::Handle::try_current().ok();
        std::thread::Builder::new()
            .name("sqlite-writer".into())
            .spawn(move || {
                let mut conn = conn;
                // Tokio's timers and tasks stay usable from a job (none is expected).
                let _runtime = runtime.as_ref().map(tokio::runtime::Handle::enter);
                while let Some(job) = futures::executor::block_on(queue.recv()) {
                    job(&mut conn);
                }
            })
            .map_err(|e| StoreError::Config(format!("cannot start the SQLite writer: {e}")))?;
        Ok(SqliteWriter { jobs, turn, wal })
    }

    /// Runs `f` in one transaction on the writer's thread: committed if it answers `Ok`
    /// (then durable once the `Durable` is waited for), rolled back otherwise.
    pub(crate) async fn run<T, F>(&self, f: F) -> Result<(T, Durable), StoreError>
    where
        F: for<'c> FnOnce(BatchConn<'c>) -> BoxFuture<'c, Result<T, StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let (turn, wal) = (self.turn.clone(), self.wal.clone());
        let job: Job = Box::new(move |conn| {
            let result = futures::executor::block_on(async move {
                let _turn = turn.lock().await;
                transaction(conn, f, wal).await
            });
            // The caller may have gone; the transaction stands either way.
            let _ = reply.send(result);
        });
        self.jobs
            .send(job)
            .await
            .map_err(|_| StoreError::Batch("the SQLite writer has stopped".into()))?;
        answer.await.unwrap_or_else(|_| {
            Err(StoreError::Batch(
                "the SQLite writer dropped a batch".into(),
            ))
        })
    }
}

async fn transaction<T, F>(
    conn: &mut rusqlite::Connection,
    f: F,
    wal: Arc<WalSync>,
) -> Result<(T, Durable), StoreError>
where
    F: for<'c> FnOnce(BatchConn<'c>) -> BoxFuture<'c, Result<T, StoreError>>,
{
    conn.execute_batch("BEGIN IMMEDIATE")
        .map_err(sqlite_error)?;
    let ran = AssertUnwindSafe(f(BatchConn::Sqlite(conn)))
        .catch_unwind()
        .await;
    let value = match ran {
        Ok(Ok(value)) => value,
        Ok(Err(e)) => {
            rollback(conn);
            return Err(e);
        }
        Err(_) => {
            rollback(conn);
            tracing::error!("a batch of the SQLite writer panicked; rolled back");
            return Err(StoreError::Batch("the batch panicked".into()));
        }
    };
    // Readers that see this commit wait until it is durable (`wal_sync.rs`).
    let writing = wal.writing();
    if let Err(e) = conn.execute_batch("COMMIT") {
        rollback(conn);
        return Err(sqlite_error(e));
    }
    Ok((value, Durable::new(Some(wal), Some(writing))))
}

fn rollback(conn: &mut rusqlite::Connection) {
    if !conn.is_autocommit() {
        if let Err(e) = conn.execute_batch("ROLLBACK") {
            tracing::error!(error = %e, "the SQLite writer could not roll back");
        }
    }
}
