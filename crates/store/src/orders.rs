//! Orders: the unified record of every asynchronous or state-changing operation, and
//! also the job queue the order worker drains (`next_attempt_at`, leases).

use crate::query::Filter;
use crate::writer::{AsBatch, BatchConn, Param, Part, RowRead};
use crate::{Backend, Conn, StoreError};
use sqlx::Row;

#[derive(Debug, Clone, PartialEq)]
pub struct OrderRecord {
    pub id: String,
    pub project_id: String,
    pub order_type: String,
    pub status: String,
    pub card_id: Option<String>,
    pub balance_before: Option<i64>,
    pub balance_after: Option<i64>,
    pub last_error: Option<String>,
    pub last_error_slug: Option<String>,
    pub data: serde_json::Value,
    pub issue_status: Option<String>,
    pub topup_status: Option<String>,
    pub is_issued: Option<bool>,
    pub provider_card_status: Option<String>,
    pub attempts: i64,
    /// When the worker should next run this order; None once it needs no more work.
    pub next_attempt_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub completed_at: Option<i64>,
    pub failed_at: Option<i64>,
}

pub(crate) fn from_row(r: &impl RowRead) -> Result<OrderRecord, StoreError> {
    let data = r.text("data")?;
    Ok(OrderRecord {
        id: r.text("id")?,
        project_id: r.text("project_id")?,
        order_type: r.text("order_type")?,
        status: r.text("status")?,
        card_id: r.opt_text("card_id")?,
        balance_before: r.opt_int("balance_before")?,
        balance_after: r.opt_int("balance_after")?,
        last_error: r.opt_text("last_error")?,
        last_error_slug: r.opt_text("last_error_slug")?,
        data: serde_json::from_str(&data)
            .map_err(|e| StoreError::Corrupt(format!("order data: {e}")))?,
        issue_status: r.opt_text("issue_status")?,
        topup_status: r.opt_text("topup_status")?,
        is_issued: r.opt_int("is_issued")?.map(|v| v != 0),
        provider_card_status: r.opt_text("provider_card_status")?,
        attempts: r.int("attempts")?,
        next_attempt_at: r.opt_int("next_attempt_at")?,
        created_at: r.int("created_at")?,
        updated_at: r.int("updated_at")?,
        completed_at: r.opt_int("completed_at")?,
        failed_at: r.opt_int("failed_at")?,
    })
}

pub async fn insert(conn: &mut Conn, o: &OrderRecord) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO orders (id, project_id, order_type, status, card_id, balance_before, balance_after, \
         last_error, last_error_slug, data, issue_status, topup_status, is_issued, provider_card_status, \
         attempts, next_attempt_at, created_at, updated_at, completed_at, failed_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)",
    )
    .bind(&o.id)
    .bind(&o.project_id)
    .bind(&o.order_type)
    .bind(&o.status)
    .bind(&o.card_id)
    .bind(o.balance_before)
    .bind(o.balance_after)
    .bind(&o.last_error)
    .bind(&o.last_error_slug)
    .bind(o.data.to_string())
    .bind(&o.issue_status)
    .bind(&o.topup_status)
    .bind(o.is_issued.map(i64::from))
    .bind(&o.provider_card_status)
    .bind(o.attempts)
    .bind(o.next_attempt_at)
    .bind(o.created_at)
    .bind(o.updated_at)
    .bind(o.completed_at)
    .bind(o.failed_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// Adds many orders to `inserts` (a batch writer's), as `insert` writes one.
/// `leased`: the orders are inserted leased to a worker (`worker_id`, until), as a
/// claim would leave them (the caller counts the claim's attempt in `attempts`).
pub fn insert_many(
    inserts: &mut crate::query::Inserts,
    orders: &[OrderRecord],
    leased: Option<(&str, i64)>,
) {
    use crate::query::Cell;
    let rows: Vec<Vec<Cell>> = orders
        .iter()
        .map(|o| {
            vec![
                Cell::text(&o.id),
                Cell::text(&o.project_id),
                Cell::text(&o.order_type),
                Cell::text(&o.status),
                Cell::Text(o.card_id.clone()),
                Cell::Int(o.balance_before),
                Cell::Int(o.balance_after),
                Cell::Text(o.last_error.clone()),
                Cell::Text(o.last_error_slug.clone()),
                Cell::text(o.data.to_string()),
                Cell::Text(o.issue_status.clone()),
                Cell::Text(o.topup_status.clone()),
                Cell::Int(o.is_issued.map(i64::from)),
                Cell::Text(o.provider_card_status.clone()),
                Cell::int(o.attempts),
                Cell::Int(o.next_attempt_at),
                Cell::int(o.created_at),
                Cell::int(o.updated_at),
                Cell::Int(o.completed_at),
                Cell::Int(o.failed_at),
                Cell::Int(leased.map(|(_, until)| until)),
                Cell::Text(leased.map(|(worker, _)| worker.to_owned())),
            ]
        })
        .collect();
    inserts.add(
        "INSERT INTO orders (id, project_id, order_type, status, card_id, balance_before, balance_after, \
         last_error, last_error_slug, data, issue_status, topup_status, is_issued, provider_card_status, \
         attempts, next_attempt_at, created_at, updated_at, completed_at, failed_at, locked_until, \
         locked_by)",
        rows,
    );
}

/// What happens to the worker's lease when a step is saved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lease {
    /// Keep working on the order: the lease is renewed until `until`.
    Renew { until: i64 },
    /// Done with it for now (finished, or a retry is scheduled).
    Release,
}

/// Writes every mutable field of an order the worker holds. Fenced by the lease: if
/// another worker took the order over (this one stalled past its lease), nothing is
/// written and `LeaseLost` tells the caller to roll its transaction back, so a step is
/// never applied twice.
pub async fn save_step(
    conn: &mut Conn,
    o: &OrderRecord,
    worker_id: &str,
    lease: Lease,
) -> Result<(), StoreError> {
    save_step_on(&mut conn.as_batch(), o, worker_id, lease).await
}

/// An order's step as its worker saves it, with what becomes of the lease: many are
/// saved together by `steps_part`, each as `save_step` saves one.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a> {
    pub order: &'a OrderRecord,
    pub worker: &'a str,
    pub lease: Lease,
}

/// The orders' data as text, for `steps_part` to bind.
pub fn step_datas(steps: &[Step<'_>]) -> Vec<String> {
    steps.iter().map(|s| s.order.data.to_string()).collect()
}

/// Saves many orders' steps, each fenced on its worker's lease as `save_step` is, as a
/// part of a batch's statement (`BatchConn::together`): one `UPDATE … RETURNING id` per
/// order, each found by its key (a generic plan of one `UPDATE … FROM` a list may walk
/// the project's orders). `datas` is `step_datas(steps)`; `saved` says which were saved.
pub fn steps_part<'a>(steps: &[Step<'a>], datas: &'a [String]) -> Part<'a> {
    let sql = format!("{SAVE_STEP} RETURNING id");
    Part::Writes(
        steps
            .iter()
            .zip(datas)
            .map(|(step, data)| (sql.clone(), step_params(step, data)))
            .collect(),
    )
}

/// Writes every mutable field of an order and its lease, fenced on the worker's lease:
/// `step_params` binds it.
const SAVE_STEP: &str = "UPDATE orders SET status = $1, balance_after = $2, last_error = $3, \
    last_error_slug = $4, data = $5, issue_status = $6, topup_status = $7, is_issued = $8, \
    provider_card_status = $9, attempts = $10, next_attempt_at = $11, updated_at = $12, \
    completed_at = $13, failed_at = $14, locked_until = $15, locked_by = $16 \
    WHERE id = $17 AND project_id = $18 AND locked_by = $19";

/// `SAVE_STEP`'s parameters for `step` (`data` is its order's data as text).
fn step_params<'a>(step: &Step<'a>, data: &'a str) -> Vec<Param<'a>> {
    let o = step.order;
    let (locked_until, locked_by) = match step.lease {
        Lease::Renew { until } => (Some(until), Some(step.worker)),
        Lease::Release => (None, None),
    };
    let mut params = saved_columns(o, data);
    params.extend([
        Param::from(locked_until),
        locked_by.into(),
        o.id.as_str().into(),
        o.project_id.as_str().into(),
        step.worker.into(),
    ]);
    params
}

/// Which of `steps` were saved, from the rows of their `steps_part`.
pub fn saved(steps: &[Step<'_>], rows: &[crate::writer::Row]) -> Result<Vec<bool>, StoreError> {
    let saved: std::collections::HashSet<String> = rows
        .iter()
        .map(|r| r.text("id"))
        .collect::<Result<_, _>>()?;
    Ok(steps.iter().map(|s| saved.contains(&s.order.id)).collect())
}

/// The columns a saved step writes, in the order of the saves' statements (`data` is
/// the order's data as text).
fn saved_columns<'a>(o: &'a OrderRecord, data: &'a str) -> Vec<Param<'a>> {
    vec![
        o.status.as_str().into(),
        o.balance_after.into(),
        (&o.last_error).into(),
        (&o.last_error_slug).into(),
        data.into(),
        (&o.issue_status).into(),
        (&o.topup_status).into(),
        o.is_issued.map(i64::from).into(),
        (&o.provider_card_status).into(),
        o.attempts.into(),
        o.next_attempt_at.into(),
        o.updated_at.into(),
        o.completed_at.into(),
        o.failed_at.into(),
    ]
}

/// `save_step` on a batch writer's connection.
pub async fn save_step_on(
    conn: &mut BatchConn<'_>,
    o: &OrderRecord,
    worker_id: &str,
    lease: Lease,
) -> Result<(), StoreError> {
    let data = o.data.to_string();
    let step = Step {
        order: o,
        worker: worker_id,
        lease,
    };
    let done = conn.execute(SAVE_STEP, &step_params(&step, &data)).await?;
    if done == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost(o.id.clone()))
    }
}

pub async fn get(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
) -> Result<Option<OrderRecord>, StoreError> {
    let row = sqlx::query("SELECT * FROM orders WHERE project_id = $1 AND id = $2")
        .bind(project_id)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// Takes the lease on the next runnable order: due, and not leased by a live worker.
/// On PostgreSQL `SKIP LOCKED` lets workers of several processes claim different orders
/// at once; SQLite serialises claims under its write lock. A crashed worker's lease
/// simply expires and the order is claimed again.
pub async fn claim_next(
    conn: &mut Conn,
    backend: Backend,
    worker_id: &str,
    now: i64,
    lease_until: i64,
) -> Result<Option<OrderRecord>, StoreError> {
    let lock = match backend {
        Backend::Postgres => " FOR UPDATE SKIP LOCKED",
        Backend::Sqlite => "",
    };
    let sql = format!(
        "UPDATE orders SET locked_until = $1, locked_by = $2, attempts = attempts + 1 WHERE id = \
         (SELECT id FROM orders WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= $3 \
          AND (locked_until IS NULL OR locked_until < $3) ORDER BY next_attempt_at, id LIMIT 1{lock}) \
         RETURNING *"
    );
    let row = sqlx::query(&sql)
        .bind(lease_until)
        .bind(worker_id)
        .bind(now)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// Takes the lease on up to `limit` runnable orders at once, oldest due first (as
/// `claim_next`, in one statement).
pub async fn claim_many(
    conn: &mut BatchConn<'_>,
    worker_id: &str,
    now: i64,
    lease_until: i64,
    limit: i64,
) -> Result<Vec<OrderRecord>, StoreError> {
    let lock = match conn.backend() {
        Backend::Postgres => " FOR UPDATE SKIP LOCKED",
        Backend::Sqlite => "",
    };
    let sql = format!(
        "UPDATE orders SET locked_until = $1, locked_by = $2, attempts = attempts + 1 WHERE id IN \
         (SELECT id FROM orders WHERE next_attempt_at IS NOT NULL AND next_attempt_at <= $3 \
          AND (locked_until IS NULL OR locked_until < $3) ORDER BY next_attempt_at, id LIMIT $4{lock}) \
         RETURNING *"
    );
    let rows = conn
        .rows(
            &sql,
            &[
                lease_until.into(),
                worker_id.into(),
                now.into(),
                limit.into(),
            ],
        )
        .await?;
    let mut claimed = rows.iter().map(from_row).collect::<Result<Vec<_>, _>>()?;
    // RETURNING gives no order: the oldest due first.
    claimed.sort_by(|a, b| (a.next_attempt_at, &a.id).cmp(&(b.next_attempt_at, &b.id)));
    Ok(claimed)
}

/// Hands a claimed order back (a stopping server cut its step short): due again at
/// once for any worker, and the claim does not count as an attempt. A step that
/// committed meanwhile already released it, and then this changes nothing.
pub async fn release(conn: &mut Conn, id: &str, worker_id: &str) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE orders SET locked_until = NULL, locked_by = NULL, attempts = attempts - 1 \
         WHERE id = $1 AND locked_by = $2",
    )
    .bind(id)
    .bind(worker_id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The earliest time any order is due, so an idle worker knows how long it may sleep.
pub async fn next_due(conn: &mut Conn) -> Result<Option<i64>, StoreError> {
    let row = sqlx::query(
        "SELECT MIN(next_attempt_at) AS due FROM orders WHERE next_attempt_at IS NOT NULL",
    )
    .fetch_one(&mut *conn)
    .await?;
    Ok(row.try_get::<Option<i64>, _>("due")?)
}

/// Orders of one card, newest first (bounded).
pub async fn for_card(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    card_id: &str,
    limit: i64,
) -> Result<Vec<OrderRecord>, StoreError> {
    let mut f = Filter::for_project("project_id", project_id);
    f.eq("card_id", crate::query::Arg::Text(card_id.to_owned()));
    let page = issuing_wire::PageRequest {
        skip: 0,
        limit,
        sort_by: "created_at",
        sort_dir: issuing_wire::SortDir::Desc,
    };
    let where_sql = f.where_sql();
    let page_sql = f.page_sql(backend, "created_at", false, "id", &page);
    let sql = format!("SELECT * FROM orders{where_sql}{page_sql}");
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(from_row).collect()
}
