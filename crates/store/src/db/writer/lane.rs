//! A PostgreSQL batch writer's own connection, outside the pool: a writer that holds
//! its hot rows for a whole batch should not wait for a pooled connection behind the
//! requests it serves. Opened on first use, and again after it failed. (SQLite's batches
//! all run on the writer's thread.)
//!
//! Its next transaction is begun with the commit of the one before (`COMMIT; BEGIN`, one
//! round trip): a batch then pays two round trips for its transaction, not three (a round
//! trip costs a writer 0.25–1 ms on a loaded machine, docs/benchmarks.md). Between
//! batches the connection sits idle in a transaction that has run nothing: it holds no
//! lock, no snapshot and no transaction id, so it keeps nothing from vacuum or from
//! migrations (`pg_stat_activity` shows it as `idle in transaction`; the connection
//! turns `idle_in_transaction_session_timeout` off for itself).
//!
//! Every lane commit waits for the log flush, so it reports itself to the process's
//! `Commits`: the replay guard's rows written before it was sent are durable once it
//! returned, and the requests it answers need no barrier of their own. The commit
//! makes sure of it: it sets `synchronous_commit` on for its transaction (whatever the
//! database's default, or a batch's `BatchConn::commit_without_flush`, which belongs on
//! pooled connections), and, since a commit waits for the flush only if its transaction
//! has an id and wrote to the log and a batch that only read has neither, it carries a
//! transactional logical message (as the replay guard's barrier does), a few bytes.

use super::BatchConn;
use crate::{Commits, Durable, Store, StoreError};
use futures::future::BoxFuture;
use futures::FutureExt;
use sqlx::{AnyConnection, Executor};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

/// A commit that waits for the log flush, even after a batch that only read or asked
/// not to (see the module's comment); an error in it rolls the batch back.
const COMMIT: &str = "SET LOCAL synchronous_commit = on; \
    SELECT CAST(pg_logical_emit_message(true, 'issuing_commit', '') AS TEXT); COMMIT; BEGIN";

#[derive(Clone, Default)]
pub struct Lane(Arc<tokio::sync::Mutex<Option<Open>>>);

impl std::fmt::Debug for Lane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lane").finish_non_exhaustive()
    }
}

/// The lane's connection, whether a transaction is begun on it already, and the
/// store's epoch when it was opened.
struct Open {
    conn: AnyConnection,
    begun: bool,
    epoch: u64,
}

impl Lane {
    /// `f` in one transaction on the lane's connection (PostgreSQL): committed (durable
    /// once this returns) if it answers `Ok`, rolled back otherwise.
    pub(crate) async fn run<T, F>(&self, store: &Store, f: F) -> Result<(T, Durable), StoreError>
    where
        F: for<'c> FnOnce(BatchConn<'c>) -> BoxFuture<'c, Result<T, StoreError>>,
    {
        let mut own = self.0.lock().await;
        let epoch = store.epoch();
        // Opened before the database was lost or moved: surely broken, or on the old host.
        if own.as_ref().is_some_and(|open| open.epoch != epoch) {
            *own = None;
        }
        let open = match own.as_mut() {
            Some(open) => open,
            None => {
                let mut conn = store.connect_own().await?;
                // Idle in its begun transaction between batches, by design.
                conn.execute("SET idle_in_transaction_session_timeout = 0")
                    .await?;
                own.insert(Open {
                    conn,
                    begun: false,
                    epoch,
                })
            }
        };
        let (result, usable) = open.transaction(store.commits(), f).await;
        if !usable {
            // Opened again by the next batch: a fresh connection costs little and is
            // surely clean.
            if let Err(e) = &result {
                tracing::warn!(error = %e, "a batch writer's connection is dropped after an error");
            }
            *own = None;
        }
        result
    }
}

impl Open {
    /// The transaction's outcome, and whether the connection may serve the next batch
    /// (then with its transaction begun).
    async fn transaction<T, F>(
        &mut self,
        commits: &Commits,
        f: F,
    ) -> (Result<(T, Durable), StoreError>, bool)
    where
        F: for<'c> FnOnce(BatchConn<'c>) -> BoxFuture<'c, Result<T, StoreError>>,
    {
        if !self.begun {
            if let Err(e) = self.conn.execute("BEGIN").await {
                return (Err(e.into()), false);
            }
        }
        // Until the next BEGIN is known to have run, none is.
        self.begun = false;
        let ran = AssertUnwindSafe(f(BatchConn::Sqlx(&mut self.conn)))
            .catch_unwind()
            .await;
        let failed = match ran {
            Ok(Ok(value)) => {
                // PostgreSQL runs the BEGIN only if the COMMIT succeeded, and answers
                // only once the commit is flushed (synchronous_commit on). The mark is
                // taken before the commit is sent: it covers what returned before.
                let mark = commits.mark();
                return match self.conn.execute(COMMIT).await {
                    Ok(_) => {
                        commits.flushed(mark);
                        self.begun = true;
                        (Ok((value, Durable::new(None, None))), true)
                    }
                    Err(e) => (Err(e.into()), false),
                };
            }
            Ok(Err(e)) => e,
            Err(_) => {
                tracing::error!("a write batch panicked; rolled back");
                StoreError::Batch("the batch panicked".into())
            }
        };
        // A statement's error leaves the connection usable, but one of the database's
        // own (a broken connection among them) drops it.
        let usable = !matches!(failed, StoreError::Database(_) | StoreError::Unavailable(_))
            && self.conn.execute("ROLLBACK; BEGIN").await.is_ok();
        self.begun = usable;
        (Err(failed), usable)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// On PostgreSQL: a committed batch is seen by other connections, a failed one (our
    /// error or the database's) leaves nothing, and the lane's next batch runs in a
    /// transaction of its own.
    pub(crate) async fn batches_commit_or_leave_nothing(store: &Store) {
        let mut conn = store.conn().await.unwrap();
        sqlx::query("CREATE TABLE lane_test (id TEXT PRIMARY KEY)")
            .execute(&mut *conn)
            .await
            .unwrap();
        let lane = Lane::default();
        let before = store.commits().ticket();
        let (_, durable) = store
            .write_batch_in(&lane, insert("a", false))
            .await
            .unwrap();
        durable.wait().await.unwrap();
        assert_eq!(ids(&mut conn).await, ["a"], "committed, seen elsewhere");
        assert!(
            store.commits().covers(before),
            "a lane commit covers what came before"
        );
        let after = store.commits().ticket();
        let refused = store.write_batch_in(&lane, insert("b", true)).await;
        assert!(matches!(refused, Err(StoreError::Corrupt(_))));
        assert_eq!(ids(&mut conn).await, ["a"], "the failed batch left nothing");
        let duplicate = store.write_batch_in(&lane, insert("a", false)).await;
        assert!(duplicate.is_err(), "a key in use fails its batch");
        assert!(
            !store.commits().covers(after),
            "a failed batch covers nothing"
        );
        // A batch that only read still commits with a flush, so it covers too.
        let (_, _) = store
            .write_batch_in(&lane, |mut c| {
                Box::pin(async move { c.rows("SELECT id FROM lane_test", &[]).await.map(drop) })
            })
            .await
            .unwrap();
        assert!(store.commits().covers(after));
        let (_, durable) = store
            .write_batch_in(&lane, insert("c", false))
            .await
            .unwrap();
        durable.wait().await.unwrap();
        assert_eq!(ids(&mut conn).await, ["a", "c"]);
        // The lane's connection is between batches, in a transaction that holds
        // nothing: the table can still be dropped (an error, not a hang, if it could
        // not).
        let idle = sqlx::query(
            "SELECT COUNT(*) AS n FROM pg_stat_activity \
             WHERE state = 'idle in transaction' AND backend_xid IS NULL AND backend_xmin IS NULL",
        )
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        assert!(sqlx::Row::try_get::<i64, _>(&idle, "n").unwrap() >= 1);
        for sql in [
            "SET lock_timeout = '5s'",
            "DROP TABLE lane_test",
            "RESET lock_timeout",
        ] {
            sqlx::query(sql).execute(&mut *conn).await.unwrap();
        }
    }

    /// A batch that inserts `id`, then fails (`StoreError::Corrupt`) if `fail`.
    fn insert(
        id: &'static str,
        fail: bool,
    ) -> impl for<'c> FnOnce(BatchConn<'c>) -> BoxFuture<'c, Result<(), StoreError>> {
        move |mut c| {
            Box::pin(async move {
                c.execute("INSERT INTO lane_test (id) VALUES ($1)", &[id.into()])
                    .await?;
                if fail {
                    return Err(StoreError::Corrupt("failed on purpose".into()));
                }
                Ok(())
            })
        }
    }

    async fn ids(conn: &mut crate::Conn) -> Vec<String> {
        sqlx::query_scalar("SELECT id FROM lane_test ORDER BY id")
            .fetch_all(&mut *conn)
            .await
            .unwrap()
    }
}
