//! Webhook deliveries: one row per (event, subscription), which is also the delivery
//! worker's queue. A worker claims one attempt at a time with a lease and a fresh
//! token; the attempt's outcome is written only while that token still holds the lease,
//! so an attempt is never recorded twice, and a crashed worker's claim simply expires.

use crate::query::{find_page, placeholders, Filter, Source};
use crate::writer::{AsBatch, BatchConn, Param, RowRead};
use crate::{Backend, Conn, StoreError};
use issuing_domain::ids::new_id;
use issuing_wire::PageRequest;
use sqlx::Row;

pub const SORT_KEYS: &[&str] = &["created_at", "updated_at"];
pub const STATES: &[&str] = &["pending", "succeeded", "failed"];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRecord {
    pub id: String,
    pub project_id: String,
    pub event_id: String,
    pub subscription_id: String,
    pub event_type: String,
    pub state: String,
    pub attempts: i64,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub last_attempt_at: Option<i64>,
    pub next_attempt_at: Option<i64>,
    pub window_start: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub completed_at: Option<i64>,
}

pub(crate) fn from_row(r: &impl RowRead) -> Result<DeliveryRecord, StoreError> {
    Ok(DeliveryRecord {
        id: r.text("id")?,
        project_id: r.text("project_id")?,
        event_id: r.text("event_id")?,
        subscription_id: r.text("subscription_id")?,
        event_type: r.text("event_type")?,
        state: r.text("state")?,
        attempts: r.int("attempts")?,
        last_status: r.opt_int("last_status")?,
        last_error: r.opt_text("last_error")?,
        last_attempt_at: r.opt_int("last_attempt_at")?,
        next_attempt_at: r.opt_int("next_attempt_at")?,
        window_start: r.int("window_start")?,
        created_at: r.int("created_at")?,
        updated_at: r.int("updated_at")?,
        completed_at: r.opt_int("completed_at")?,
    })
}

/// Creates one pending delivery per active subscription of the project that wants this
/// event type. Runs in the event's own transaction: a subscription receives exactly the
/// events committed while it was active. Returns how many were created.
pub async fn fan_out(
    conn: &mut Conn,
    project_id: &str,
    event_id: &str,
    event_type: &str,
    now: i64,
) -> Result<usize, StoreError> {
    let subs = crate::subscriptions::active(&mut conn.as_batch(), project_id).await?;
    let mut n = 0;
    for sub in subs
        .iter()
        .filter(|s| issuing_domain::webhooks::wants(&s.event_types, event_type))
    {
        sqlx::query(
            "INSERT INTO webhook_deliveries (id, project_id, event_id, subscription_id, event_type, \
             state, attempts, next_attempt_at, window_start, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $6, $6, $6)",
        )
        .bind(new_id())
        .bind(project_id)
        .bind(event_id)
        .bind(&sub.id)
        .bind(event_type)
        .bind(now)
        .execute(&mut *conn)
        .await?;
        n += 1;
    }
    Ok(n)
}

/// A pending delivery's row under `INSERT_PENDING`: `fan_out`'s row, for many events.
pub(crate) fn new_pending(
    project_id: &str,
    event_id: &str,
    subscription_id: &str,
    event_type: &str,
    now: i64,
) -> Vec<crate::query::Cell> {
    use crate::query::Cell;
    vec![
        Cell::text(new_id()),
        Cell::text(project_id),
        Cell::text(event_id),
        Cell::text(subscription_id),
        Cell::text(event_type),
        Cell::text("pending"),
        Cell::int(0),
        Cell::int(now),
        Cell::int(now),
        Cell::int(now),
        Cell::int(now),
    ]
}

/// The head of `new_pending` rows (`query::Inserts`).
pub(crate) const INSERT_PENDING: &str =
    "INSERT INTO webhook_deliveries (id, project_id, event_id, subscription_id, event_type, \
     state, attempts, next_attempt_at, window_start, created_at, updated_at)";

/// A claimed attempt: the delivery and what is needed to send it.
#[derive(Debug, Clone)]
pub struct Claimed {
    pub delivery: DeliveryRecord,
    /// The lease token this attempt's outcome must be written with.
    pub token: String,
    pub locked_until: i64,
}

/// Claims up to `limit` due deliveries (oldest due first) whose subscription is not in
/// `skip` (subscriptions this process already sends to at its per-subscription limit).
/// One statement and one token for the batch; each outcome is still fenced on
/// (delivery, token). Deliveries of a suspended project are passed over: they stay
/// pending, untouched, until it is resumed. PostgreSQL's `SKIP LOCKED` lets several
/// processes claim different deliveries at once; SQLite serialises claims under its
/// write lock.
pub async fn claim_due(
    conn: &mut BatchConn<'_>,
    now: i64,
    lease_until: i64,
    skip: &[String],
    limit: i64,
) -> Result<Vec<Claimed>, StoreError> {
    let lock = match conn.backend() {
        Backend::Postgres => " FOR UPDATE SKIP LOCKED",
        Backend::Sqlite => "",
    };
    let skip_sql = if skip.is_empty() {
        String::new()
    } else {
        format!(
            " AND subscription_id NOT IN ({})",
            placeholders(5, skip.len())
        )
    };
    let sql = format!(
        "UPDATE webhook_deliveries SET locked_until = $1, locked_by = $2, attempts = attempts + 1, \
         last_attempt_at = $3, updated_at = $3 WHERE id IN \
         (SELECT id FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= $3 \
          AND (locked_until IS NULL OR locked_until < $3){skip_sql}{NOT_SUSPENDED} \
          ORDER BY next_attempt_at, id LIMIT $4{lock}) \
         RETURNING *"
    );
    let token = new_id();
    let mut params: Vec<Param<'_>> = vec![
        lease_until.into(),
        token.as_str().into(),
        now.into(),
        limit.max(1).into(),
    ];
    params.extend(skip.iter().map(Param::from));
    let rows = conn.rows(&sql, &params).await?;
    let mut claimed = rows
        .iter()
        .map(|row| {
            Ok(Claimed {
                delivery: from_row(row)?,
                token: token.clone(),
                locked_until: lease_until,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    // RETURNING gives no order: send the oldest due first.
    claimed.sort_by(|a, b| {
        (a.delivery.next_attempt_at, &a.delivery.id)
            .cmp(&(b.delivery.next_attempt_at, &b.delivery.id))
    });
    Ok(claimed)
}

/// Leaves out deliveries of suspended projects (few, so the subquery is small).
const NOT_SUSPENDED: &str =
    " AND project_id NOT IN (SELECT id FROM projects WHERE status <> 'active')";

/// What an attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// `pending` (retry at `next_attempt_at`), `succeeded` or `failed`.
    pub state: &'static str,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub next_attempt_at: Option<i64>,
}

/// Writes an attempt's outcome and releases the claim. Fenced by the claim token: when
/// the lease was lost (or the delivery was ended meanwhile, by unsubscribe), nothing is
/// written and false is returned.
pub async fn record(
    conn: &mut BatchConn<'_>,
    claimed: &Claimed,
    outcome: &Outcome,
    now: i64,
) -> Result<bool, StoreError> {
    let completed_at = (outcome.state != "pending").then_some(now);
    let done = conn
        .execute(
            "UPDATE webhook_deliveries SET state = $1, last_status = $2, last_error = $3, \
             next_attempt_at = $4, completed_at = $5, updated_at = $6, locked_until = NULL, locked_by = NULL \
             WHERE id = $7 AND project_id = $8 AND locked_by = $9 AND state = 'pending'",
            &[
                outcome.state.into(),
                outcome.last_status.into(),
                (&outcome.last_error).into(),
                outcome.next_attempt_at.into(),
                completed_at.into(),
                now.into(),
                claimed.delivery.id.as_str().into(),
                claimed.delivery.project_id.as_str().into(),
                claimed.token.as_str().into(),
            ],
        )
        .await?;
    Ok(done == 1)
}

/// `record` for succeeded attempts of one claimed batch (one project, one claim token,
/// one status) in one statement: the outcome writer's usual batch is tens of them, and
/// one round trip each made its batches slow enough that recording fell behind the
/// deliveries. Returns the ids whose claim still held; the others recorded nothing.
pub async fn record_succeeded(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    token: &str,
    last_status: Option<i64>,
    ids: &[&str],
    now: i64,
) -> Result<std::collections::HashSet<String>, StoreError> {
    if ids.is_empty() {
        return Ok(std::collections::HashSet::new());
    }
    // One variable each: a batch writer's batch (64) is far below SQLite's bound.
    debug_assert!(ids.len() <= 1_000, "{} ids in one statement", ids.len());
    // SQLite's planner, without statistics, walks the project's index (every delivery
    // the project ever had) rather than look each id up; `+` keeps it off that index.
    let project = match conn.backend() {
        Backend::Sqlite => "+project_id",
        Backend::Postgres => "project_id",
    };
    let sql = format!(
        "UPDATE webhook_deliveries SET state = 'succeeded', last_status = $1, last_error = NULL, \
         next_attempt_at = NULL, completed_at = $2, updated_at = $2, locked_until = NULL, locked_by = NULL \
         WHERE id IN ({}) AND {project} = $3 AND locked_by = $4 AND state = 'pending' RETURNING id",
        placeholders(5, ids.len())
    );
    let mut params: Vec<Param<'_>> = vec![
        last_status.into(),
        now.into(),
        project_id.into(),
        token.into(),
    ];
    params.extend(ids.iter().map(|id| Param::from(*id)));
    let rows = conn.rows(&sql, &params).await?;
    rows.iter().map(|r| r.text("id")).collect()
}

/// Gives a claim back untouched (the attempt was never sent), due again at once.
pub async fn release(conn: &mut Conn, claimed: &Claimed) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE webhook_deliveries SET locked_until = NULL, locked_by = NULL, attempts = attempts - 1 \
         WHERE id = $1 AND locked_by = $2",
    )
    .bind(&claimed.delivery.id)
    .bind(&claimed.token)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The earliest time a delivery can be claimed (a leased one when its lease ends), so
/// an idle worker knows how long to sleep. Suspended projects' deliveries do not count.
pub async fn next_due(conn: &mut Conn) -> Result<Option<i64>, StoreError> {
    let sql = format!(
        "SELECT MIN(CASE WHEN locked_until IS NOT NULL AND locked_until > next_attempt_at \
         THEN locked_until ELSE next_attempt_at END) AS due \
         FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL{NOT_SUSPENDED}"
    );
    let row = sqlx::query(&sql).fetch_one(&mut *conn).await?;
    Ok(row.try_get::<Option<i64>, _>("due")?)
}

/// When a suspended project is resumed: its pending deliveries get a fresh retry window
/// (`webhook_max_age` counts from `now`), so the time they waited is not held against
/// them. Returns how many.
pub async fn restart_windows_of_project(
    conn: &mut Conn,
    project_id: &str,
    now: i64,
) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "UPDATE webhook_deliveries SET window_start = $1, updated_at = $1 \
         WHERE project_id = $2 AND state = 'pending'",
    )
    .bind(now)
    .bind(project_id)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected())
}

/// What a worker needs to send a claimed delivery.
#[derive(Debug, Clone)]
pub struct SendInfo {
    pub url: String,
    pub subscription_active: bool,
    pub payload: serde_json::Value,
}

/// What sending each of `claimed` needs, by delivery id, in one query: its event's
/// payload and its subscription's URL and state. A delivery whose event or
/// subscription is gone is left out.
pub async fn send_infos(
    conn: &mut BatchConn<'_>,
    claimed: &[&DeliveryRecord],
) -> Result<std::collections::HashMap<String, SendInfo>, StoreError> {
    let ids: Vec<&str> = claimed.iter().map(|d| d.id.as_str()).collect();
    let rows = conn
        .rows_by_keys(
            "webhook_deliveries d JOIN events e ON e.id = d.event_id AND e.project_id = d.project_id \
             JOIN webhook_subscriptions s ON s.id = d.subscription_id AND s.project_id = d.project_id",
            "d.id AS delivery_id, e.payload AS payload, s.url AS url, s.active AS active",
            "d.id",
            "1 = $1",
            &[1_i64.into()],
            &ids,
            false,
        )
        .await?;
    rows.iter()
        .map(|row| {
            Ok((
                row.text("delivery_id")?,
                SendInfo {
                    url: row.text("url")?,
                    subscription_active: row.int("active")? != 0,
                    payload: serde_json::from_str(&row.text("payload")?)
                        .map_err(|e| StoreError::Corrupt(format!("event payload: {e}")))?,
                },
            ))
        })
        .collect()
}

pub async fn get(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
) -> Result<Option<DeliveryRecord>, StoreError> {
    let row = sqlx::query("SELECT * FROM webhook_deliveries WHERE project_id = $1 AND id = $2")
        .bind(project_id)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(from_row).transpose()
}

#[derive(Debug, Default, Clone)]
pub struct DeliveryFilter {
    pub subscription_ids: Vec<String>,
    pub event_types: Vec<String>,
    pub states: Vec<String>,
    pub event_ids: Vec<String>,
}

pub async fn find(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    filter: &DeliveryFilter,
    page: &PageRequest,
) -> Result<(Vec<DeliveryRecord>, i64), StoreError> {
    let mut f = Filter::for_project("project_id", project_id);
    f.texts("subscription_id", &filter.subscription_ids);
    f.texts("event_type", &filter.event_types);
    f.texts("state", &filter.states);
    f.texts("event_id", &filter.event_ids);
    let sort = match page.sort_by {
        "updated_at" => ("updated_at", false),
        _ => ("created_at", false),
    };
    let (rows, total) = find_page(
        conn,
        backend,
        f,
        Source::table("webhook_deliveries"),
        sort,
        page,
    )
    .await?;
    let items = rows.iter().map(from_row).collect::<Result<_, _>>()?;
    Ok((items, total))
}

/// Queues one delivery again with the same id and a fresh retry window. Only
/// deliveries of active subscriptions can be queued. Returns false when there is no
/// such delivery of an active subscription in this project.
pub async fn redeliver(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
    now: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = $1, window_start = $1, \
         completed_at = NULL, updated_at = $1 \
         WHERE project_id = $2 AND id = $3 AND subscription_id IN \
         (SELECT id FROM webhook_subscriptions WHERE project_id = $2 AND active = 1)",
    )
    .bind(now)
    .bind(project_id)
    .bind(id)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Queues again every failed delivery (of active subscriptions) that ended at or after
/// `since`, optionally of one subscription; at most `limit` of them, oldest first, so a
/// caller can page through a large backlog by calling again. Returns how many.
pub async fn redeliver_failed_since(
    conn: &mut Conn,
    project_id: &str,
    since: i64,
    subscription_id: Option<&str>,
    limit: i64,
    now: i64,
) -> Result<u64, StoreError> {
    let by_sub = if subscription_id.is_some() {
        " AND subscription_id = $5"
    } else {
        ""
    };
    let sql = format!(
        "UPDATE webhook_deliveries SET state = 'pending', next_attempt_at = $1, window_start = $1, \
         completed_at = NULL, updated_at = $1 WHERE id IN \
         (SELECT id FROM webhook_deliveries WHERE project_id = $2 AND state = 'failed' \
          AND completed_at >= $3{by_sub} AND subscription_id IN \
          (SELECT id FROM webhook_subscriptions WHERE project_id = $2 AND active = 1) \
          ORDER BY completed_at, id LIMIT $4)"
    );
    let mut q = sqlx::query(&sql)
        .bind(now)
        .bind(project_id)
        .bind(since)
        .bind(limit);
    if let Some(s) = subscription_id {
        q = q.bind(s);
    }
    Ok(q.execute(&mut *conn).await?.rows_affected())
}
