//! Webhook subscriptions of a project. Every query is scoped by project.

use crate::query::{find_page, placeholders, Filter, Source};
use crate::writer::{AsBatch, BatchConn, Param, Part, RowRead};
use crate::{Backend, Conn, StoreError};
use issuing_wire::PageRequest;
use sqlx::Row;

pub const SORT_KEYS: &[&str] = &["created_at"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionRecord {
    pub id: String,
    pub project_id: String,
    pub url: String,
    pub title: String,
    /// Empty means every event type.
    pub event_types: Vec<String>,
    pub active: bool,
    pub created_at: i64,
    pub updated_at: i64,
    pub deactivated_at: Option<i64>,
    pub deactivated_reason: Option<String>,
}

pub(crate) fn from_row(r: &impl RowRead) -> Result<SubscriptionRecord, StoreError> {
    let types = r.text("event_types")?;
    Ok(SubscriptionRecord {
        id: r.text("id")?,
        project_id: r.text("project_id")?,
        url: r.text("url")?,
        title: r.text("title")?,
        event_types: serde_json::from_str(&types)
            .map_err(|e| StoreError::Corrupt(format!("subscription event_types: {e}")))?,
        active: r.int("active")? != 0,
        created_at: r.int("created_at")?,
        updated_at: r.int("updated_at")?,
        deactivated_at: r.opt_int("deactivated_at")?,
        deactivated_reason: r.opt_text("deactivated_reason")?,
    })
}

/// Serialises subscription changes of one project (the active-subscription limit is
/// checked under it). SQLite's write transaction already serialises everything.
pub async fn lock_project(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
) -> Result<(), StoreError> {
    if backend == Backend::Postgres {
        sqlx::query("SELECT id FROM projects WHERE id = $1 FOR UPDATE")
            .bind(project_id)
            .fetch_optional(&mut *conn)
            .await?;
    }
    Ok(())
}

pub async fn count_active(conn: &mut Conn, project_id: &str) -> Result<i64, StoreError> {
    let row = sqlx::query(
        "SELECT COUNT(*) AS n FROM webhook_subscriptions WHERE project_id = $1 AND active = 1",
    )
    .bind(project_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok(row.try_get("n")?)
}

pub async fn insert(conn: &mut Conn, s: &SubscriptionRecord) -> Result<(), StoreError> {
    let types = serde_json::Value::from(s.event_types.clone()).to_string();
    sqlx::query(
        "INSERT INTO webhook_subscriptions (id, project_id, url, title, event_types, active, \
         created_at, updated_at, deactivated_at, deactivated_reason) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(&s.id)
    .bind(&s.project_id)
    .bind(&s.url)
    .bind(&s.title)
    .bind(types)
    .bind(i64::from(s.active))
    .bind(s.created_at)
    .bind(s.updated_at)
    .bind(s.deactivated_at)
    .bind(&s.deactivated_reason)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

pub async fn get(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
) -> Result<Option<SubscriptionRecord>, StoreError> {
    let row = sqlx::query("SELECT * FROM webhook_subscriptions WHERE project_id = $1 AND id = $2")
        .bind(project_id)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// The project's active subscriptions (at most `MAX_ACTIVE_SUBSCRIPTIONS`, enforced on
/// insert), for fan-out.
pub async fn active(
    conn: &mut BatchConn<'_>,
    project_id: &str,
) -> Result<Vec<SubscriptionRecord>, StoreError> {
    let rows = conn.together(&[active_part(project_id)]).await?;
    active_of(rows.iter().flatten())
}

/// `active` as a part of a batch's statement (`BatchConn::together`).
pub fn active_part(project_id: &str) -> Part<'_> {
    Part::Select {
        sql: "SELECT id, project_id, url, title, event_types, active, created_at, updated_at, \
              deactivated_at, deactivated_reason FROM webhook_subscriptions \
              WHERE project_id = $1 AND active = 1 ORDER BY id"
            .to_owned(),
        params: vec![project_id.into()],
    }
}

/// The subscriptions of the rows of an `active_part`.
pub fn active_of<'r>(
    rows: impl IntoIterator<Item = &'r crate::writer::Row>,
) -> Result<Vec<SubscriptionRecord>, StoreError> {
    rows.into_iter().map(from_row).collect()
}

/// Deactivates a subscription and ends its pending deliveries as failed, in the
/// caller's transaction. Returns false when it was already inactive.
pub async fn deactivate(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    id: &str,
    reason: &str,
    now: i64,
) -> Result<bool, StoreError> {
    let done = conn
        .execute(
            "UPDATE webhook_subscriptions SET active = 0, deactivated_at = $1, deactivated_reason = $2, \
             updated_at = $1 WHERE project_id = $3 AND id = $4 AND active = 1",
            &[now.into(), reason.into(), project_id.into(), id.into()],
        )
        .await?;
    if done == 0 {
        return Ok(false);
    }
    fail_pending_deliveries(conn, project_id, id, reason, now).await?;
    Ok(true)
}

pub async fn find(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    page: &PageRequest,
) -> Result<(Vec<SubscriptionRecord>, i64), StoreError> {
    let f = Filter::for_project("project_id", project_id);
    let (rows, total) = find_page(
        conn,
        backend,
        f,
        Source::table("webhook_subscriptions"),
        ("created_at", false),
        page,
    )
    .await?;
    let items = rows.iter().map(from_row).collect::<Result<_, _>>()?;
    Ok((items, total))
}

/// Locks the rows of these subscriptions ((project, id)) until the caller's transaction
/// ends. The webhook outcomes writer (`workers/outcomes.rs`) takes them before it
/// touches any of their deliveries, as an unsubscribe (`deactivate`) and the `failing`
/// deactivation (`deactivate_failing`) do by updating the row first: whatever writes
/// a subscription's row and its deliveries in one transaction then takes the row first,
/// so on PostgreSQL two of them never hold what the other waits for (deadlock_detected,
/// 40P01, which answered an unsubscribe with 500). One statement per batch of outcomes;
/// `FOR NO KEY UPDATE` is the lock an UPDATE of the row takes anyway, and unlike
/// `FOR UPDATE` lets fan-out's inserts of deliveries (whose foreign key takes
/// `FOR KEY SHARE` on the subscription) go on meanwhile. In (project, id) order.
/// SQLite's write transaction already serialises everything.
pub async fn lock_rows(
    conn: &mut BatchConn<'_>,
    subs: &std::collections::BTreeSet<(&str, &str)>,
) -> Result<(), StoreError> {
    if conn.backend() != Backend::Postgres || subs.is_empty() {
        return Ok(());
    }
    let mut by_project: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (project, id) in subs {
        by_project.entry(project).or_default().push(id);
    }
    let parts: Vec<Part<'_>> = by_project
        .into_iter()
        .map(|(project, ids)| {
            let mut params: Vec<Param<'_>> = vec![Param::from(project)];
            params.extend(ids.iter().map(|id| Param::from(*id)));
            Part::Select {
                sql: format!(
                    "SELECT id FROM webhook_subscriptions WHERE project_id = $1 AND id IN ({}) \
                     ORDER BY id FOR NO KEY UPDATE",
                    placeholders(2, ids.len())
                ),
                params,
            }
        })
        .collect();
    conn.together(&parts).await?;
    Ok(())
}

/// Why a subscription was deactivated because its receiver kept failing (CONTRACT §13).
pub const FAILING: &str = "failing";

/// A receiver answered an attempt with success: the subscription is healthy again.
pub async fn note_success(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    id: &str,
) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE webhook_subscriptions SET failing_since = NULL \
         WHERE project_id = $1 AND id = $2 AND failing_since IS NOT NULL",
        &[project_id.into(), id.into()],
    )
    .await?;
    Ok(())
}

/// A receiver failed an attempt: starts the failing clock unless it runs already.
/// Returns since when every attempt has failed, while the subscription is active.
pub async fn note_failure(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    id: &str,
    now: i64,
) -> Result<Option<i64>, StoreError> {
    conn.execute(
        "UPDATE webhook_subscriptions SET failing_since = $1 \
         WHERE project_id = $2 AND id = $3 AND failing_since IS NULL AND active = 1",
        &[now.into(), project_id.into(), id.into()],
    )
    .await?;
    let row = conn
        .row(
            "SELECT failing_since FROM webhook_subscriptions \
             WHERE project_id = $1 AND id = $2 AND active = 1",
            &[project_id.into(), id.into()],
        )
        .await?;
    Ok(row
        .map(|r| r.opt_int("failing_since"))
        .transpose()?
        .flatten())
}

/// Deactivates the subscription as `failing` if every attempt has failed since before
/// `cutoff`, and ends its pending deliveries as failed. Returns whether it did.
pub async fn deactivate_failing(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
    cutoff: i64,
    now: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE webhook_subscriptions SET active = 0, deactivated_at = $1, deactivated_reason = $2, \
         updated_at = $1 WHERE project_id = $3 AND id = $4 AND active = 1 \
         AND failing_since IS NOT NULL AND failing_since <= $5",
    )
    .bind(now)
    .bind(FAILING)
    .bind(project_id)
    .bind(id)
    .bind(cutoff)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(false);
    }
    fail_pending_deliveries(&mut conn.as_batch(), project_id, id, FAILING, now).await?;
    Ok(true)
}

/// Active subscriptions whose every attempt has failed since before `cutoff`, as
/// (project_id, id); at most `limit`, longest failing first.
pub async fn failing_before(
    conn: &mut Conn,
    cutoff: i64,
    limit: i64,
) -> Result<Vec<(String, String)>, StoreError> {
    let rows = sqlx::query(
        "SELECT project_id, id FROM webhook_subscriptions \
         WHERE active = 1 AND failing_since IS NOT NULL AND failing_since <= $1 \
         ORDER BY failing_since LIMIT $2",
    )
    .bind(cutoff)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|r| Ok((r.try_get("project_id")?, r.try_get("id")?)))
        .collect()
}

/// A deactivated or deleted subscription's pending deliveries fail: nothing will try them.
async fn fail_pending_deliveries(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    subscription_id: &str,
    reason: &str,
    now: i64,
) -> Result<u64, StoreError> {
    conn.execute(
        "UPDATE webhook_deliveries SET state = 'failed', next_attempt_at = NULL, completed_at = $1, \
         updated_at = $1, last_error = COALESCE(last_error, $2) \
         WHERE project_id = $3 AND subscription_id = $4 AND state = 'pending'",
        &[now.into(), reason.into(), project_id.into(), subscription_id.into()],
    )
    .await
}
