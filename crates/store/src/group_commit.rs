//! Group commit: on SQLite, one writer task applies many concurrent operations in one
//! transaction.
//!
//! Each operation runs inside its own savepoint, so a failing operation is rolled back
//! alone and answers its own error while the rest of its batch commits. Every caller is
//! answered only after the batch's COMMIT is durable (after the shared fsync of the log,
//! `wal_sync.rs`); if the commit fails, every operation of the batch fails with it.
//!
//! Why on SQLite: every write transaction takes the one write lock, and sqlx's driver
//! costs a thread hand-over per statement. Applied one transaction each, every operation
//! pays for BEGIN, COMMIT, the pool and the lock's hand-over to the next writer; the
//! writer pays those once per batch (savepoints cost one statement per operation).
//!
//! Why not on PostgreSQL, where each operation runs in a transaction of its own (same
//! interface, no batching): measured with `issuing-bench`, a writer there runs every
//! operation's statements one round trip after another, where concurrent transactions
//! overlap everything but the part under a row lock. Batched top-ups and card issues
//! were no faster (one project's master balance is the bound either way), authorizations
//! on different cards needed 8 writers to match concurrent transactions, and a batch
//! holding a project's in-flight account for all of its operations halved the rate at
//! which the order workers could finish top-ups. See docs/benchmarks.md. (Those were
//! batches of each operation's own statements. The hot writes now have writers that
//! batch set-wise, a few statements per batch, on the writer's own connection, and are
//! faster on both backends: `issuing-server`'s `batch_writer.rs` and its users, the
//! master balance's moves, authorizations, webhook outcomes and the sandbox's books.
//! What is left here: decision webhook answers, rare next to those.)
//!
//! Operations only read and write through the connection they are given: they must not
//! open transactions of their own, and must take row locks in the ledger's lock order
//! like every other transaction.
//!
//! Bounded: the queue holds `QUEUE` operations (callers wait for room), a batch holds at
//! most `MAX_BATCH`.

use crate::{Conn, Store, StoreError};
use futures::FutureExt;
use sqlx::Executor;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// The most operations in one transaction. A batch holds the write lock until it
/// commits, so this also bounds how long it keeps other writers waiting.
pub const MAX_BATCH: usize = 64;
const QUEUE: usize = 1024;

/// What an operation returns: its result, borrowed from the writer's connection.
pub type OpFuture<'c, T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send + 'c>>;

type BoxFuture<'c, T> = Pin<Box<dyn Future<Output = T> + Send + 'c>>;

/// An operation, with the reply it owes its caller.
trait Job: Send {
    fn run<'c>(self: Box<Self>, conn: &'c mut Conn) -> BoxFuture<'c, Box<dyn Ran>>;
    /// The batch failed before this operation ran.
    fn abandon(self: Box<Self>, why: &StoreError);
}

/// An operation that ran; it answers once its batch's fate is known.
trait Ran: Send {
    fn succeeded(&self) -> bool;
    fn answer(self: Box<Self>, committed: Result<(), &StoreError>);
}

struct Op<F, T, E> {
    op: F,
    reply: oneshot::Sender<Result<T, E>>,
}

struct Done<T, E> {
    result: Result<T, E>,
    reply: oneshot::Sender<Result<T, E>>,
}

/// A failure shared by every operation of a batch, repeated to each caller.
fn batch_failed(why: &StoreError) -> StoreError {
    why.repeat()
}

impl<F, T, E> Job for Op<F, T, E>
where
    F: for<'c> FnOnce(&'c mut Conn) -> OpFuture<'c, T, E> + Send + 'static,
    T: Send + 'static,
    E: From<StoreError> + Send + 'static,
{
    fn run<'c>(self: Box<Self>, conn: &'c mut Conn) -> BoxFuture<'c, Box<dyn Ran>> {
        let Op { op, reply } = *self;
        Box::pin(async move {
            let result = op(conn).await;
            Box::new(Done { result, reply }) as Box<dyn Ran>
        })
    }

    fn abandon(self: Box<Self>, why: &StoreError) {
        // The caller may have gone; nobody is left to tell.
        let _ = self.reply.send(Err(E::from(batch_failed(why))));
    }
}

impl<T: Send, E: From<StoreError> + Send> Ran for Done<T, E> {
    fn succeeded(&self) -> bool {
        self.result.is_ok()
    }

    fn answer(self: Box<Self>, committed: Result<(), &StoreError>) {
        let result = match (self.result, committed) {
            (Ok(_), Err(why)) => Err(E::from(batch_failed(why))),
            (result, _) => result,
        };
        let _ = self.reply.send(result);
    }
}

/// The handle to one writer task. Cloning shares the writer.
#[derive(Clone)]
pub struct GroupCommit {
    /// The writer task's queue; None on PostgreSQL, where each operation runs in a
    /// transaction of its own on `store`.
    writer: Option<mpsc::Sender<Box<dyn Job>>>,
    stats: Arc<Stats>,
    store: Store,
}

/// How many batches and operations a writer has applied (committed or not).
#[derive(Debug, Default)]
pub struct Stats {
    pub batches: AtomicU64,
    pub operations: AtomicU64,
}

impl std::fmt::Debug for GroupCommit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupCommit").finish_non_exhaustive()
    }
}

impl GroupCommit {
    /// Starts the writer of one kind of operation on `store` (SQLite); on PostgreSQL
    /// there is none. It runs until every handle is dropped.
    pub fn start(store: Store, name: &'static str) -> GroupCommit {
        let stats = Arc::<Stats>::default();
        let writer = (store.backend() == crate::Backend::Sqlite).then(|| {
            let (jobs, queue) = mpsc::channel(QUEUE);
            tokio::spawn(write(store.clone(), queue, name, stats.clone()));
            jobs
        });
        GroupCommit {
            writer,
            stats,
            store,
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Runs `op` in the writer's next batch and answers its result once the batch is
    /// durable. An error from `op` rolls back what `op` wrote, and only that.
    pub async fn run<T, E, F>(&self, op: F) -> Result<T, E>
    where
        F: for<'c> FnOnce(&'c mut Conn) -> OpFuture<'c, T, E> + Send + 'static,
        T: Send + 'static,
        E: From<StoreError> + Send + 'static,
    {
        let Some(writer) = &self.writer else {
            self.stats.batches.fetch_add(1, Ordering::Relaxed);
            self.stats.operations.fetch_add(1, Ordering::Relaxed);
            return alone(&self.store, op).await;
        };
        let (reply, answer) = oneshot::channel();
        let job: Box<dyn Job> = Box::new(Op { op, reply });
        if writer.send(job).await.is_err() {
            return Err(E::from(StoreError::Batch("the writer has stopped".into())));
        }
        // A dropped reply means the operation panicked; its savepoint was rolled back.
        answer.await.unwrap_or_else(|_| {
            Err(E::from(StoreError::Batch(
                "the operation was abandoned".into(),
            )))
        })
    }
}

/// One operation in a transaction of its own, committed when it succeeds.
async fn alone<T, E, F>(store: &Store, op: F) -> Result<T, E>
where
    F: for<'c> FnOnce(&'c mut Conn) -> OpFuture<'c, T, E> + Send + 'static,
    E: From<StoreError>,
{
    let mut tx = store.begin().await.map_err(E::from)?;
    let value = op(&mut tx).await?;
    tx.commit()
        .await
        .map_err(|e| E::from(StoreError::from(e)))?;
    Ok(value)
}

async fn write(
    store: Store,
    mut queue: mpsc::Receiver<Box<dyn Job>>,
    name: &'static str,
    stats: Arc<Stats>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        stats.batches.fetch_add(1, Ordering::Relaxed);
        stats
            .operations
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        apply(&store, std::mem::take(&mut batch), name).await;
    }
}

/// One batch: BEGIN, each operation in a savepoint, COMMIT, then the answers. The
/// answers wait for durability in a task of their own, so the next batch can start
/// while this one's log is synced.
async fn apply(store: &Store, batch: Vec<Box<dyn Job>>, name: &'static str) {
    let mut tx = match store.begin().await {
        Ok(tx) => tx,
        Err(e) => {
            tracing::error!(writer = name, error = %e, "group commit could not begin");
            for job in batch {
                job.abandon(&e);
            }
            return;
        }
    };
    let mut ran: Vec<Box<dyn Ran>> = Vec::with_capacity(batch.len());
    let mut pending = batch.into_iter();
    let mut broken = None;
    // One savepoint name reused: after a success it is released and taken again in one
    // round trip; after a failure the rollback leaves it in place for the next one.
    let mut mark = Some("SAVEPOINT op");
    for job in pending.by_ref() {
        if let Some(mark) = mark {
            if let Err(e) = tx.execute(mark).await {
                let why = StoreError::from(e);
                job.abandon(&why);
                broken = Some(why);
                break;
            }
        }
        let done = AssertUnwindSafe(job.run(&mut tx)).catch_unwind().await;
        let succeeded = match &done {
            Ok(done) => done.succeeded(),
            Err(_) => {
                tracing::error!(writer = name, "a group commit operation panicked");
                false
            }
        };
        if let Ok(done) = done {
            ran.push(done);
        }
        if succeeded {
            mark = Some("RELEASE SAVEPOINT op; SAVEPOINT op");
        } else {
            if let Err(e) = tx.execute("ROLLBACK TO SAVEPOINT op").await {
                broken = Some(StoreError::from(e));
                break;
            }
            mark = None;
        }
    }
    if let Some(why) = broken {
        tracing::error!(writer = name, error = %why, "group commit batch abandoned");
        for job in pending {
            job.abandon(&why);
        }
        let _ = tx.rollback().await;
        for done in ran {
            done.answer(Err(&why));
        }
        return;
    }
    let committed = tx.commit_deferred().await;
    tokio::spawn(async move {
        let committed = match committed {
            Ok(durable) => durable.wait().await,
            Err(e) => Err(e),
        }
        .map_err(StoreError::from);
        if let Err(e) = &committed {
            tracing::error!(writer = name, error = %e, "group commit failed");
        }
        for done in ran {
            done.answer(committed.as_ref().map(|_| ()));
        }
    });
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    #[derive(Debug)]
    enum Failed {
        Refused(usize),
        Store(String),
    }

    impl From<StoreError> for Failed {
        fn from(e: StoreError) -> Self {
            Failed::Store(e.to_string())
        }
    }

    /// Every fifth operation writes, then fails; one writes, then panics. Each of them is
    /// rolled back alone, and the others of their batch commit.
    #[tokio::test]
    async fn a_failing_operation_fails_alone() {
        let dir = std::env::temp_dir().join(format!("group-commit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::connect(dir.join("db.sqlite").to_str().unwrap())
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let writer = GroupCommit::start(store.clone(), "test");
        let calls: Vec<_> = (0..40usize)
            .map(|i| {
                let writer = writer.clone();
                tokio::spawn(async move {
                    writer
                        .run(move |conn| {
                            Box::pin(async move {
                                sqlx::query("INSERT INTO settings (key, value) VALUES ($1, 'x')")
                                    .bind(format!("k{i}"))
                                    .execute(&mut *conn)
                                    .await
                                    .map_err(StoreError::from)?;
                                if i == 7 {
                                    panic!("operation 7 panics on purpose");
                                }
                                if i % 5 == 0 {
                                    return Err(Failed::Refused(i));
                                }
                                Ok(i)
                            })
                        })
                        .await
                })
            })
            .collect();
        for (i, call) in calls.into_iter().enumerate() {
            match (i, call.await.unwrap()) {
                (7, Err(Failed::Store(why))) => assert!(why.contains("abandoned"), "{why}"),
                (i, Err(Failed::Refused(n))) if i % 5 == 0 => assert_eq!(n, i),
                (i, Ok(n)) if i % 5 != 0 && i != 7 => assert_eq!(n, i),
                (i, other) => panic!("operation {i}: {other:?}"),
            }
        }
        let mut conn = store.conn().await.unwrap();
        let keys: Vec<String> = sqlx::query_scalar("SELECT key FROM settings WHERE key LIKE 'k%'")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
        let mut keys: Vec<usize> = keys.iter().map(|k| k[1..].parse().unwrap()).collect();
        keys.sort_unstable();
        let expected: Vec<usize> = (0..40).filter(|i| i % 5 != 0 && *i != 7).collect();
        assert_eq!(keys, expected);
        let stats = writer.stats();
        assert_eq!(stats.operations.load(Ordering::Relaxed), 40);
        assert!(
            stats.batches.load(Ordering::Relaxed) < 40,
            "operations queued together share a batch"
        );
        drop(conn);
        store.close().await;
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
