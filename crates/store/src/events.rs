//! The outbox. Events are written in the same transaction as the state change they
//! report, together with one delivery per subscription active at that moment, so an
//! event and its deliveries exist exactly when the change committed. The delivery
//! worker sends them later.

use crate::subscriptions::SubscriptionRecord;
use crate::writer::AsBatch;
use crate::{Conn, StoreError};
use issuing_domain::ids::new_id;
use sqlx::Row;

pub struct NewEvent<'a> {
    pub project_id: &'a str,
    pub event_type: &'a str,
    pub card_id: Option<&'a str>,
    pub order_id: Option<&'a str>,
    /// The event's `data` (or the whole typed body for typed events).
    pub payload: &'a serde_json::Value,
    pub now: i64,
}

/// Writes the event and its deliveries. After the caller commits, it should wake this
/// process's delivery worker; other processes are woken by the NOTIFY sent here.
pub async fn insert(conn: &mut Conn, e: &NewEvent<'_>) -> Result<String, StoreError> {
    let id = new_id();
    sqlx::query(
        "INSERT INTO events (id, project_id, event_type, card_id, order_id, payload, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(&id)
    .bind(e.project_id)
    .bind(e.event_type)
    .bind(e.card_id)
    .bind(e.order_id)
    .bind(e.payload.to_string())
    .bind(e.now)
    .execute(&mut *conn)
    .await?;
    let fanned = crate::deliveries::fan_out(conn, e.project_id, &id, e.event_type, e.now).await?;
    if fanned > 0 {
        crate::wakeup::announce(&mut conn.as_batch(), crate::wakeup::Queue::Deliveries).await?;
    }
    Ok(id)
}

/// Adds many events and their deliveries to `inserts` (a batch writer's), each event's
/// project's active subscriptions known (read in the caller's transaction, as
/// `subscriptions::active_part`), and the PostgreSQL wake-up with the rows; answers how
/// many deliveries were queued. As `insert`, the caller wakes this process's delivery
/// worker after the commit when there are any.
pub fn insert_many<P: std::borrow::Borrow<str> + std::hash::Hash + Eq>(
    events: &[NewEvent<'_>],
    subscriptions: &std::collections::HashMap<P, Vec<SubscriptionRecord>>,
    inserts: &mut crate::query::Inserts,
) -> usize {
    let ids = add_events(events, inserts);
    deliveries_of(events, &ids, subscriptions, inserts)
}

/// Adds the events' rows to `inserts`; answers their ids.
fn add_events(events: &[NewEvent<'_>], inserts: &mut crate::query::Inserts) -> Vec<String> {
    use crate::query::Cell;
    let ids: Vec<String> = events.iter().map(|_| new_id()).collect();
    let rows: Vec<Vec<Cell>> = events
        .iter()
        .zip(&ids)
        .map(|(e, id)| {
            vec![
                Cell::text(id),
                Cell::text(e.project_id),
                Cell::text(e.event_type),
                Cell::Text(e.card_id.map(str::to_owned)),
                Cell::Text(e.order_id.map(str::to_owned)),
                Cell::text(e.payload.to_string()),
                Cell::int(e.now),
            ]
        })
        .collect();
    inserts.add(
        "INSERT INTO events (id, project_id, event_type, card_id, order_id, payload, created_at)",
        rows,
    );
    ids
}

/// Adds a delivery of each event (ids `ids`) to each of its project's subscriptions
/// that wants it, and their wake-up; answers how many.
fn deliveries_of<P: std::borrow::Borrow<str> + std::hash::Hash + Eq>(
    events: &[NewEvent<'_>],
    ids: &[String],
    subscriptions: &std::collections::HashMap<P, Vec<SubscriptionRecord>>,
    inserts: &mut crate::query::Inserts,
) -> usize {
    let mut deliveries = Vec::new();
    for (e, id) in events.iter().zip(ids) {
        let active = subscriptions
            .get(e.project_id)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        for sub in active
            .iter()
            .filter(|s| issuing_domain::webhooks::wants(&s.event_types, e.event_type))
        {
            deliveries.push(crate::deliveries::new_pending(
                e.project_id,
                id,
                &sub.id,
                e.event_type,
                e.now,
            ));
        }
    }
    let queued = deliveries.len();
    if queued > 0 {
        inserts.add(crate::deliveries::INSERT_PENDING, deliveries);
        crate::wakeup::announce_with(inserts, crate::wakeup::Queue::Deliveries);
    }
    queued
}

#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub id: String,
    pub event_type: String,
    pub card_id: Option<String>,
    pub order_id: Option<String>,
    pub payload: serde_json::Value,
    pub created_at: i64,
}

/// A project's events, oldest first (bounded by `limit`).
pub async fn list_for_project(
    conn: &mut Conn,
    project_id: &str,
    limit: i64,
) -> Result<Vec<EventRecord>, StoreError> {
    let rows =
        sqlx::query("SELECT * FROM events WHERE project_id = $1 ORDER BY created_at, id LIMIT $2")
            .bind(project_id)
            .bind(limit)
            .fetch_all(&mut *conn)
            .await?;
    rows.iter()
        .map(|r| {
            let payload: String = r.try_get("payload")?;
            Ok(EventRecord {
                id: r.try_get("id")?,
                event_type: r.try_get("event_type")?,
                card_id: r.try_get("card_id")?,
                order_id: r.try_get("order_id")?,
                payload: serde_json::from_str(&payload)
                    .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                created_at: r.try_get("created_at")?,
            })
        })
        .collect()
}
