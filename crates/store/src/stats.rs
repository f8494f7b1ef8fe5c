//! Counts for monitoring: how many orders there are by type and status, and how deep the
//! order and webhook delivery queues are. Every query aggregates in the database and
//! returns a bounded number of rows; the queue counts use the queues' partial indexes.

use crate::{Conn, Store, StoreError};
use sqlx::Row;

/// Orders of one type in one status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderCount {
    pub order_type: String,
    pub status: String,
    pub count: i64,
}

/// At most `max_groups` (type, status) pairs, most frequent first. Types and statuses
/// are a small fixed set written by the server itself; the bound only guards the caller
/// against a database that holds something else.
pub async fn orders_by_type_and_status(
    conn: &mut Conn,
    max_groups: i64,
) -> Result<Vec<OrderCount>, StoreError> {
    let rows = sqlx::query(
        "SELECT order_type, status, COUNT(*) AS n FROM orders \
         GROUP BY order_type, status ORDER BY n DESC, order_type, status LIMIT $1",
    )
    .bind(max_groups)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(OrderCount {
                order_type: r.try_get("order_type")?,
                status: r.try_get("status")?,
                count: r.try_get("n")?,
            })
        })
        .collect()
}

/// Orders the workers should be running now: due and not leased by a live worker.
pub async fn orders_due(conn: &mut Conn, now: i64) -> Result<i64, StoreError> {
    let row = sqlx::query(
        "SELECT COUNT(*) AS n FROM orders WHERE next_attempt_at IS NOT NULL \
         AND next_attempt_at <= $1 AND (locked_until IS NULL OR locked_until < $1)",
    )
    .bind(now)
    .fetch_one(&mut *conn)
    .await?;
    Ok(row.try_get("n")?)
}

/// The webhook delivery queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DeliveryQueue {
    /// Not yet delivered and still being tried (due now or waiting for a retry).
    pub pending: i64,
    /// Pending and due now, not claimed by a worker, of an active project: the backlog.
    pub due: i64,
    /// Given up (retries exhausted, 410 Gone, unsubscribed); kept for `wh/redeliver`.
    pub failed: i64,
}

pub async fn delivery_queue(conn: &mut Conn, now: i64) -> Result<DeliveryQueue, StoreError> {
    // A pending delivery is exactly one with a due time (finished ones have none).
    let row = sqlx::query(
        "SELECT COUNT(*) AS pending, \
         COUNT(CASE WHEN next_attempt_at <= $1 AND (locked_until IS NULL OR locked_until < $1) \
         AND project_id IN (SELECT id FROM projects WHERE status = 'active') THEN 1 END) AS due \
         FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL",
    )
    .bind(now)
    .fetch_one(&mut *conn)
    .await?;
    let failed = sqlx::query("SELECT COUNT(*) AS n FROM webhook_deliveries WHERE state = 'failed'")
        .fetch_one(&mut *conn)
        .await?;
    Ok(DeliveryQueue {
        pending: row.try_get("pending")?,
        due: row.try_get("due")?,
        failed: failed.try_get("n")?,
    })
}

/// A trivial query: the database is reachable and answers.
pub async fn ping(store: &Store) -> Result<(), StoreError> {
    let mut conn = store.conn().await?;
    sqlx::query("SELECT 1").execute(&mut *conn).await?;
    Ok(())
}

/// The connection pool right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolStats {
    /// Open connections, idle ones included.
    pub open: u32,
    pub idle: u32,
    /// The pool's upper bound.
    pub max: u32,
    /// No database host answers right now (PostgreSQL; `Store::availability`).
    pub unavailable: bool,
    /// Times the database stopped answering since the process started.
    pub outages: u64,
}

pub fn pool(store: &Store) -> PoolStats {
    let pool = store.pool();
    PoolStats {
        open: pool.size(),
        idle: u32::try_from(pool.num_idle()).unwrap_or(u32::MAX),
        max: pool.options().get_max_connections(),
        unavailable: store.availability().unavailable,
        outages: store.availability().outages,
    }
}
