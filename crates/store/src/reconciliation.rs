//! Settlement reconciliation (CONTRACT §17): the settlements this service applied
//! (`applied_settlements`), the sandbox provider's own settlement records
//! (`sandbox_settlement_records`), and each reconciliation's result per
//! (subprovider, date) (`reconciliations`).

use crate::{Conn, StoreError};
use sqlx::any::AnyRow;
use sqlx::Row;

/// One clearing, force post or refund, as applied here or as the sandbox provider
/// settled it. `amount` is in micro-units, always positive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settlement {
    pub subprovider_code: String,
    pub event_token: String,
    pub project_id: String,
    pub transaction_id: String,
    pub card_id: String,
    /// `clearing` or `refund`.
    pub kind: String,
    pub amount: i64,
    pub settled_at: i64,
    /// The UTC date of `settled_at`, `YYYY-MM-DD`.
    pub settled_on: String,
}

const COLUMNS: &str = "subprovider_code, event_token, project_id, transaction_id, card_id, kind, \
     amount, settled_at, settled_on";

fn settlement(r: &AnyRow) -> Result<Settlement, StoreError> {
    Ok(Settlement {
        subprovider_code: r.try_get("subprovider_code")?,
        event_token: r.try_get("event_token")?,
        project_id: r.try_get("project_id")?,
        transaction_id: r.try_get("transaction_id")?,
        card_id: r.try_get("card_id")?,
        kind: r.try_get("kind")?,
        amount: r.try_get("amount")?,
        settled_at: r.try_get("settled_at")?,
        settled_on: r.try_get("settled_on")?,
    })
}

async fn insert(conn: &mut Conn, table: &str, s: &Settlement) -> Result<(), StoreError> {
    sqlx::query(&format!(
        "INSERT INTO {table} ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
    ))
    .bind(&s.subprovider_code)
    .bind(&s.event_token)
    .bind(&s.project_id)
    .bind(&s.transaction_id)
    .bind(&s.card_id)
    .bind(&s.kind)
    .bind(s.amount)
    .bind(s.settled_at)
    .bind(&s.settled_on)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// Records a settlement applied here, in the transaction that moves its money.
pub async fn record_applied(conn: &mut Conn, s: &Settlement) -> Result<(), StoreError> {
    insert(conn, "applied_settlements", s).await
}

/// Records a settlement in the sandbox provider's books.
pub async fn record_sandbox(conn: &mut Conn, s: &Settlement) -> Result<(), StoreError> {
    insert(conn, "sandbox_settlement_records", s).await
}

async fn on_date(
    conn: &mut Conn,
    table: &str,
    code: &str,
    date: &str,
) -> Result<Vec<Settlement>, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM {table} WHERE subprovider_code = $1 AND settled_on = $2 \
         ORDER BY settled_at, event_token"
    ))
    .bind(code)
    .bind(date)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(settlement).collect()
}

/// The settlements applied here for `code` on the UTC date `date`.
pub async fn applied_on(
    conn: &mut Conn,
    code: &str,
    date: &str,
) -> Result<Vec<Settlement>, StoreError> {
    on_date(conn, "applied_settlements", code, date).await
}

/// The sandbox provider's settlement records for `code` on `date`.
pub async fn sandbox_on(
    conn: &mut Conn,
    code: &str,
    date: &str,
) -> Result<Vec<Settlement>, StoreError> {
    on_date(conn, "sandbox_settlement_records", code, date).await
}

/// The settlements applied here to one transaction, oldest first.
pub async fn applied_for_tx(
    conn: &mut Conn,
    project_id: &str,
    transaction_id: &str,
) -> Result<Vec<Settlement>, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM applied_settlements WHERE project_id = $1 AND transaction_id = $2 \
         ORDER BY settled_at, event_token"
    ))
    .bind(project_id)
    .bind(transaction_id)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(settlement).collect()
}

/// Removes a record from the sandbox provider's books; answers whether it was there.
pub async fn delete_sandbox(
    conn: &mut Conn,
    code: &str,
    event_token: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "DELETE FROM sandbox_settlement_records WHERE subprovider_code = $1 AND event_token = $2",
    )
    .bind(code)
    .bind(event_token)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Changes the amount of a record in the sandbox provider's books; answers whether it
/// was there.
pub async fn set_sandbox_amount(
    conn: &mut Conn,
    code: &str,
    event_token: &str,
    amount: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE sandbox_settlement_records SET amount = $3 \
         WHERE subprovider_code = $1 AND event_token = $2",
    )
    .bind(code)
    .bind(event_token)
    .bind(amount)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A reconciliation of one subprovider's settlements on one date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reconciliation {
    pub subprovider_code: String,
    pub report_date: String,
    /// `running`, `done` or `failed`.
    pub status: String,
    pub matched_count: i64,
    pub matched_cents: i64,
    pub missing_here: i64,
    pub missing_there: i64,
    pub amount_mismatch: i64,
    /// JSON array of the breaks.
    pub breaks: serde_json::Value,
    pub error: Option<String>,
    pub started_at: i64,
    pub finished_at: Option<i64>,
}

fn reconciliation(r: &AnyRow) -> Result<Reconciliation, StoreError> {
    let breaks: String = r.try_get("breaks")?;
    Ok(Reconciliation {
        subprovider_code: r.try_get("subprovider_code")?,
        report_date: r.try_get("report_date")?,
        status: r.try_get("status")?,
        matched_count: r.try_get("matched_count")?,
        matched_cents: r.try_get("matched_cents")?,
        missing_here: r.try_get("missing_here")?,
        missing_there: r.try_get("missing_there")?,
        amount_mismatch: r.try_get("amount_mismatch")?,
        breaks: serde_json::from_str(&breaks)
            .map_err(|e| StoreError::Corrupt(format!("reconciliation breaks: {e}")))?,
        error: r.try_get("error")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
    })
}

const RECON_COLUMNS: &str = "subprovider_code, report_date, status, matched_count, matched_cents, \
     missing_here, missing_there, amount_mismatch, breaks, error, started_at, finished_at";

/// Claims the reconciliation of (`code`, `date`) for the daily job: a new row, or a
/// failed one, or a `running` one started before `stale_before` (its process died).
/// Answers whether this caller holds it now.
pub async fn claim(
    conn: &mut Conn,
    code: &str,
    date: &str,
    now: i64,
    stale_before: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO reconciliations (subprovider_code, report_date, status, started_at) \
         VALUES ($1, $2, 'running', $3) ON CONFLICT (subprovider_code, report_date) DO NOTHING",
    )
    .bind(code)
    .bind(date)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 1 {
        return Ok(true);
    }
    let done = sqlx::query(
        "UPDATE reconciliations SET status = 'running', started_at = $3 \
         WHERE subprovider_code = $1 AND report_date = $2 \
         AND (status = 'failed' OR (status = 'running' AND started_at < $4))",
    )
    .bind(code)
    .bind(date)
    .bind(now)
    .bind(stale_before)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Stores a reconciliation's result, replacing what was kept for its date.
pub async fn save(conn: &mut Conn, r: &Reconciliation) -> Result<(), StoreError> {
    sqlx::query(&format!(
        "INSERT INTO reconciliations ({RECON_COLUMNS}) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) \
         ON CONFLICT (subprovider_code, report_date) DO UPDATE SET status = excluded.status, \
         matched_count = excluded.matched_count, matched_cents = excluded.matched_cents, \
         missing_here = excluded.missing_here, missing_there = excluded.missing_there, \
         amount_mismatch = excluded.amount_mismatch, breaks = excluded.breaks, \
         error = excluded.error, started_at = excluded.started_at, \
         finished_at = excluded.finished_at"
    ))
    .bind(&r.subprovider_code)
    .bind(&r.report_date)
    .bind(&r.status)
    .bind(r.matched_count)
    .bind(r.matched_cents)
    .bind(r.missing_here)
    .bind(r.missing_there)
    .bind(r.amount_mismatch)
    .bind(r.breaks.to_string())
    .bind(&r.error)
    .bind(r.started_at)
    .bind(r.finished_at)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The latest results, newest date first.
pub async fn list(conn: &mut Conn, limit: i64) -> Result<Vec<Reconciliation>, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT {RECON_COLUMNS} FROM reconciliations \
         ORDER BY report_date DESC, subprovider_code LIMIT $1"
    ))
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(reconciliation).collect()
}

/// The latest finished result of each subprovider, for the metric.
pub async fn latest_done(conn: &mut Conn) -> Result<Vec<Reconciliation>, StoreError> {
    let rows = sqlx::query(&format!(
        "SELECT {RECON_COLUMNS} FROM reconciliations r WHERE status = 'done' AND report_date = \
         (SELECT MAX(report_date) FROM reconciliations l \
          WHERE l.subprovider_code = r.subprovider_code AND l.status = 'done') \
         ORDER BY subprovider_code"
    ))
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(reconciliation).collect()
}
