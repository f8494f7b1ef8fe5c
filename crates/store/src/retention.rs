//! Retention (CONTRACT §13): what the delivery queue and the outbox leave behind once it
//! no longer matters. Final webhook deliveries (`succeeded`, `failed`) are deleted when
//! they completed before a cutoff, and events once none of their deliveries is left.
//! The ledger, orders, card transactions and chain deposits are never touched here.
//!
//! Every function deletes at most `batch` rows in the caller's transaction, through an
//! index, so a caller can keep each transaction (and on SQLite the write lock) short
//! and work through a backlog batch by batch.

use crate::query::placeholders;
use crate::{Conn, StoreError};
use sqlx::Row;

/// The most rows one call deletes: bounds the statements' parameters too.
pub const MAX_BATCH: i64 = 1_000;

/// Deletes up to `batch` deliveries that reached a final state before `before`, then
/// those of their events that no delivery refers to any more. Returns (deliveries,
/// events) deleted.
pub async fn purge_final_deliveries(
    conn: &mut Conn,
    before: i64,
    batch: i64,
) -> Result<(u64, u64), StoreError> {
    let batch = batch.clamp(1, MAX_BATCH);
    // The outer conditions repeat the inner ones: on PostgreSQL a delivery queued again
    // (wh/redeliver) after the subquery read it is re-checked and kept.
    let rows = sqlx::query(
        "DELETE FROM webhook_deliveries WHERE id IN \
         (SELECT id FROM webhook_deliveries WHERE completed_at IS NOT NULL AND completed_at < $1 \
          ORDER BY completed_at LIMIT $2) \
         AND completed_at IS NOT NULL AND completed_at < $1 \
         RETURNING event_id",
    )
    .bind(before)
    .bind(batch)
    .fetch_all(&mut *conn)
    .await?;
    let deliveries = rows.len() as u64;
    let mut events: Vec<String> = rows
        .iter()
        .map(|r| r.try_get::<String, _>("event_id"))
        .collect::<Result<_, _>>()?;
    events.sort_unstable();
    events.dedup();
    let events = delete_events_without_deliveries(conn, &events).await?;
    Ok((deliveries, events))
}

/// Where a scan for events that never had a delivery stopped: (created_at, id).
pub type EventCursor = Option<(i64, String)>;

/// Events created before `before` that have no delivery (no subscription wanted them
/// when they happened): looks at up to `batch` events after `cursor`, oldest first, and
/// deletes those without a delivery. Events that still have deliveries are left to
/// `purge_final_deliveries`, which deletes them with their last delivery, so the scan
/// moves on and never reads them again. Returns the events deleted and the new cursor
/// (None once the scan reached `before`: start again from the beginning next time).
pub async fn purge_undelivered_events(
    conn: &mut Conn,
    before: i64,
    cursor: &EventCursor,
    batch: i64,
) -> Result<(u64, EventCursor), StoreError> {
    let batch = batch.clamp(1, MAX_BATCH);
    let (after_at, after_id) = cursor.clone().unwrap_or((i64::MIN, String::new()));
    let rows = sqlx::query(
        "SELECT id, created_at FROM events WHERE created_at < $1 \
         AND (created_at > $2 OR (created_at = $2 AND id > $3)) \
         ORDER BY created_at, id LIMIT $4",
    )
    .bind(before)
    .bind(after_at)
    .bind(&after_id)
    .bind(batch)
    .fetch_all(&mut *conn)
    .await?;
    let mut next = None;
    let mut ids = Vec::with_capacity(rows.len());
    for r in &rows {
        let id: String = r.try_get("id")?;
        next = Some((r.try_get::<i64, _>("created_at")?, id.clone()));
        ids.push(id);
    }
    let deleted = delete_events_without_deliveries(conn, &ids).await?;
    let cursor = if (rows.len() as i64) < batch {
        None
    } else {
        next
    };
    Ok((deleted, cursor))
}

async fn delete_events_without_deliveries(
    conn: &mut Conn,
    ids: &[String],
) -> Result<u64, StoreError> {
    if ids.is_empty() {
        return Ok(0);
    }
    let sql = format!(
        "DELETE FROM events WHERE id IN ({}) AND NOT EXISTS \
         (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = events.id)",
        placeholders(1, ids.len())
    );
    let mut q = sqlx::query(&sql);
    for id in ids {
        q = q.bind(id);
    }
    Ok(q.execute(&mut *conn).await?.rows_affected())
}
