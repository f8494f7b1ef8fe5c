//! Reports: the jobs that build a project's files, their chunks, their download links,
//! and the keyset pages of rows a build reads. Every query on project data is scoped
//! by `project_id`. A build holds its report by a lease (`locked_by`, `locked_until`)
//! as the order worker holds an order: every write of a build is fenced on it, so a
//! build that stalled past its lease and was taken over writes nothing more.

use crate::card_txs::CardTxRecord;
use crate::cards::CardRecord;
use crate::disputes::DisputeRecord;
use crate::{Backend, Conn, StoreError};
use sqlx::any::AnyRow;
use sqlx::Row;

pub const PROCESSING: &str = "processing";
pub const READY: &str = "ready";
pub const FAILED: &str = "failed";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportRecord {
    pub id: String,
    pub project_id: String,
    pub report_type: String,
    pub format: String,
    pub from_at: i64,
    pub to_at: i64,
    pub status: String,
    pub row_count: Option<i64>,
    pub size: Option<i64>,
    pub sha256: Option<String>,
    pub last_error: Option<String>,
    pub created_by: String,
    pub attempts: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub ready_at: Option<i64>,
    pub expires_at: Option<i64>,
}

const COLUMNS: &str = "id, project_id, report_type, format, from_at, to_at, status, row_count, \
    size, sha256, last_error, created_by, attempts, created_at, updated_at, ready_at, expires_at";

fn from_row(r: &AnyRow) -> Result<ReportRecord, StoreError> {
    Ok(ReportRecord {
        id: r.try_get("id")?,
        project_id: r.try_get("project_id")?,
        report_type: r.try_get("report_type")?,
        format: r.try_get("format")?,
        from_at: r.try_get("from_at")?,
        to_at: r.try_get("to_at")?,
        status: r.try_get("status")?,
        row_count: r.try_get("row_count")?,
        size: r.try_get("size")?,
        sha256: r.try_get("sha256")?,
        last_error: r.try_get("last_error")?,
        created_by: r.try_get("created_by")?,
        attempts: r.try_get("attempts")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
        ready_at: r.try_get("ready_at")?,
        expires_at: r.try_get("expires_at")?,
    })
}

pub async fn insert(conn: &mut Conn, r: &ReportRecord) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO reports (id, project_id, report_type, format, from_at, to_at, status, \
         created_by, attempts, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(&r.id)
    .bind(&r.project_id)
    .bind(&r.report_type)
    .bind(&r.format)
    .bind(r.from_at)
    .bind(r.to_at)
    .bind(&r.status)
    .bind(&r.created_by)
    .bind(r.attempts)
    .bind(r.created_at)
    .bind(r.updated_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// A project's report by its id.
pub async fn get(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
) -> Result<Option<ReportRecord>, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM reports WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// Takes the lease on the oldest report still processing that no live build holds
/// (a build cut short by a restart or a crash is taken again once its lease is over).
/// On PostgreSQL `SKIP LOCKED` lets several processes claim different reports at once.
pub async fn claim_next(
    conn: &mut Conn,
    backend: Backend,
    worker_id: &str,
    now: i64,
    lease_until: i64,
) -> Result<Option<ReportRecord>, StoreError> {
    let lock = match backend {
        Backend::Postgres => " FOR UPDATE SKIP LOCKED",
        Backend::Sqlite => "",
    };
    let sql = format!(
        "UPDATE reports SET locked_until = $1, locked_by = $2, attempts = attempts + 1 WHERE id = \
         (SELECT id FROM reports WHERE status = 'processing' \
          AND (locked_until IS NULL OR locked_until < $3) ORDER BY created_at, id LIMIT 1{lock}) \
         RETURNING {COLUMNS}"
    );
    let row = sqlx::query(&sql)
        .bind(lease_until)
        .bind(worker_id)
        .bind(now)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// Whether a report waits for a build (read first, so an idle worker's poll takes no
/// write lock).
pub async fn claimable(conn: &mut Conn, now: i64) -> Result<bool, StoreError> {
    let row = sqlx::query(
        "SELECT id FROM reports WHERE status = 'processing' \
         AND (locked_until IS NULL OR locked_until < $1) LIMIT 1",
    )
    .bind(now)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.is_some())
}

/// Renews the build's lease; `LeaseLost` when another worker holds the report now (or
/// it is no longer processing). Call first in each of the build's transactions.
pub async fn renew(
    conn: &mut Conn,
    id: &str,
    worker_id: &str,
    lease_until: i64,
) -> Result<(), StoreError> {
    let done = sqlx::query(
        "UPDATE reports SET locked_until = $1 \
         WHERE id = $2 AND locked_by = $3 AND status = 'processing'",
    )
    .bind(lease_until)
    .bind(id)
    .bind(worker_id)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if done == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost(id.to_owned()))
    }
}

/// Hands a report back (a stopping server cut its build short): claimable again at
/// once, and the build does not count as an attempt.
pub async fn release(conn: &mut Conn, id: &str, worker_id: &str) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE reports SET locked_until = NULL, locked_by = NULL, attempts = attempts - 1 \
         WHERE id = $1 AND locked_by = $2 AND status = 'processing'",
    )
    .bind(id)
    .bind(worker_id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Deletes up to `batch` chunks of a report; answers how many.
pub async fn delete_chunks(conn: &mut Conn, id: &str, batch: i64) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM report_chunks WHERE report_id = $1 AND seq IN \
         (SELECT seq FROM report_chunks WHERE report_id = $1 ORDER BY seq LIMIT $2)",
    )
    .bind(id)
    .bind(batch)
    .execute(&mut *conn)
    .await?
    .rows_affected())
}

pub async fn insert_chunk(
    conn: &mut Conn,
    id: &str,
    seq: i64,
    data: &str,
) -> Result<(), StoreError> {
    sqlx::query("INSERT INTO report_chunks (report_id, seq, data) VALUES ($1, $2, $3)")
        .bind(id)
        .bind(seq)
        .bind(data)
        .execute(&mut *conn)
        .await
        .map_err(StoreError::from_write)?;
    Ok(())
}

/// A report's chunk `seq`, or None past its last.
pub async fn chunk(conn: &mut Conn, id: &str, seq: i64) -> Result<Option<String>, StoreError> {
    let row = sqlx::query("SELECT data FROM report_chunks WHERE report_id = $1 AND seq = $2")
        .bind(id)
        .bind(seq)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.map(|r| r.try_get("data")).transpose()?)
}

/// How a build ended.
pub struct Finished<'a> {
    pub status: &'a str,
    pub row_count: Option<i64>,
    pub size: Option<i64>,
    pub sha256: Option<&'a str>,
    pub last_error: Option<&'a str>,
    pub now: i64,
    pub expires_at: i64,
}

/// Records the end of a build, fenced on its lease; `LeaseLost` when another worker
/// holds the report now.
pub async fn finish(
    conn: &mut Conn,
    id: &str,
    worker_id: &str,
    f: &Finished<'_>,
) -> Result<(), StoreError> {
    let ready_at = (f.status == READY).then_some(f.now);
    let done = sqlx::query(
        "UPDATE reports SET status = $1, row_count = $2, size = $3, sha256 = $4, last_error = $5, \
         updated_at = $6, ready_at = $7, expires_at = $8, locked_by = NULL, locked_until = NULL \
         WHERE id = $9 AND locked_by = $10 AND status = 'processing'",
    )
    .bind(f.status)
    .bind(f.row_count)
    .bind(f.size)
    .bind(f.sha256)
    .bind(f.last_error)
    .bind(f.now)
    .bind(ready_at)
    .bind(f.expires_at)
    .bind(id)
    .bind(worker_id)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if done == 1 {
        Ok(())
    } else {
        Err(StoreError::LeaseLost(id.to_owned()))
    }
}

/// A download link's report: (report id, project id, expires_at).
pub struct TokenRecord {
    pub report_id: String,
    pub project_id: String,
    pub expires_at: i64,
}

pub async fn insert_token(
    conn: &mut Conn,
    token_hash: &str,
    report: &ReportRecord,
    now: i64,
    expires_at: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO report_tokens (token_hash, report_id, project_id, created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(token_hash)
    .bind(&report.id)
    .bind(&report.project_id)
    .bind(now)
    .bind(expires_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

pub async fn by_token(
    conn: &mut Conn,
    token_hash: &str,
) -> Result<Option<TokenRecord>, StoreError> {
    let row = sqlx::query(
        "SELECT report_id, project_id, expires_at FROM report_tokens WHERE token_hash = $1",
    )
    .bind(token_hash)
    .fetch_optional(&mut *conn)
    .await?;
    row.map(|r| {
        Ok(TokenRecord {
            report_id: r.try_get("report_id")?,
            project_id: r.try_get("project_id")?,
            expires_at: r.try_get("expires_at")?,
        })
    })
    .transpose()
}

/// Deletes up to `batch` download links that expired before `before`.
pub async fn purge_expired_tokens(
    conn: &mut Conn,
    before: i64,
    batch: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM report_tokens WHERE token_hash IN \
         (SELECT token_hash FROM report_tokens WHERE expires_at < $1 LIMIT $2)",
    )
    .bind(before)
    .bind(batch)
    .execute(&mut *conn)
    .await?
    .rows_affected())
}

/// Deletes up to `batch` chunks of one report whose file expired before `before`, and
/// the report itself (with its links) once its chunks are gone. Answers (chunks,
/// reports) deleted; (0, 0) when no report has expired.
pub async fn purge_expired(
    conn: &mut Conn,
    before: i64,
    batch: i64,
) -> Result<(u64, u64), StoreError> {
    let row = sqlx::query(
        "SELECT id FROM reports WHERE expires_at IS NOT NULL AND expires_at < $1 \
         ORDER BY expires_at LIMIT 1",
    )
    .bind(before)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else {
        return Ok((0, 0));
    };
    let id: String = row.try_get("id")?;
    let chunks = delete_chunks(conn, &id, batch).await?;
    if (chunks as i64) < batch {
        sqlx::query("DELETE FROM report_tokens WHERE report_id = $1")
            .bind(&id)
            .execute(&mut *conn)
            .await?;
        sqlx::query("DELETE FROM reports WHERE id = $1")
            .bind(&id)
            .execute(&mut *conn)
            .await?;
        return Ok((chunks, 1));
    }
    Ok((chunks, 0))
}

/// Where a build's reading stands: the last row written, by (created_at, id) and, for
/// ledger entries, the entry's id within its transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: i64,
    pub id: String,
    pub entry_id: i64,
}

impl Cursor {
    /// Before every row created at or after `from`.
    pub fn start(from: i64) -> Cursor {
        Cursor {
            created_at: from.saturating_sub(1),
            id: String::new(),
            entry_id: 0,
        }
    }
}

/// The next page of a project's card transactions created in [from, to] after
/// `cursor`, oldest first, each with its card's currency.
pub async fn card_tx_page(
    conn: &mut Conn,
    project_id: &str,
    to: i64,
    cursor: &Cursor,
    limit: i64,
) -> Result<Vec<(CardTxRecord, Option<String>)>, StoreError> {
    let rows = sqlx::query(
        "SELECT t.*, c.card_currency AS report_card_currency FROM card_transactions t \
         LEFT JOIN cards c ON c.id = t.card_id AND c.project_id = t.project_id \
         WHERE t.project_id = $1 AND t.created_at <= $2 \
         AND (t.created_at > $3 OR (t.created_at = $3 AND t.id > $4)) \
         ORDER BY t.created_at, t.id LIMIT $5",
    )
    .bind(project_id)
    .bind(to)
    .bind(cursor.created_at)
    .bind(&cursor.id)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|r| {
            Ok((
                crate::card_txs::from_row(r)?,
                r.try_get("report_card_currency")?,
            ))
        })
        .collect()
}

/// The next page of a project's rows of `table` (one with `project_id`, `created_at`
/// and a text `id`) created in [from, to] after `cursor`, oldest first.
async fn rows_page<T>(
    conn: &mut Conn,
    table: &'static str,
    (project_id, to): (&str, i64),
    cursor: &Cursor,
    limit: i64,
    read: fn(&sqlx::any::AnyRow) -> Result<T, StoreError>,
) -> Result<Vec<T>, StoreError> {
    let sql = format!(
        "SELECT * FROM {table} WHERE project_id = $1 AND created_at <= $2 \
         AND (created_at > $3 OR (created_at = $3 AND id > $4)) \
         ORDER BY created_at, id LIMIT $5"
    );
    let rows = sqlx::query(&sql)
        .bind(project_id)
        .bind(to)
        .bind(cursor.created_at)
        .bind(&cursor.id)
        .bind(limit)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(read).collect()
}

/// The next page of a project's cards created in [from, to] after `cursor`.
pub async fn cards_page(
    conn: &mut Conn,
    project_id: &str,
    to: i64,
    cursor: &Cursor,
    limit: i64,
) -> Result<Vec<CardRecord>, StoreError> {
    rows_page(conn, "cards", (project_id, to), cursor, limit, |r| {
        crate::cards::from_row(r)
    })
    .await
}

/// The next page of a project's disputes created in [from, to] after `cursor`.
pub async fn disputes_page(
    conn: &mut Conn,
    project_id: &str,
    to: i64,
    cursor: &Cursor,
    limit: i64,
) -> Result<Vec<DisputeRecord>, StoreError> {
    rows_page(
        conn,
        "disputes",
        (project_id, to),
        cursor,
        limit,
        crate::disputes::from_row,
    )
    .await
}

/// One ledger entry with its transfer and account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRow {
    pub entry_id: i64,
    pub transfer_id: String,
    pub transfer_kind: String,
    pub order_id: Option<String>,
    pub account_id: String,
    pub account_kind: String,
    pub card_id: Option<String>,
    pub currency: String,
    pub amount: i64,
    pub balance_after: i64,
    /// The transfer's.
    pub created_at: i64,
}

/// The next page of the entries of a project's transfers created in [from, to] after
/// `cursor`, by transfer (oldest first) and entry. Both the transfer and the account
/// must be the project's.
pub async fn ledger_page(
    conn: &mut Conn,
    project_id: &str,
    to: i64,
    cursor: &Cursor,
    limit: i64,
) -> Result<Vec<LedgerRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT e.id AS entry_id, t.id AS transfer_id, t.kind AS transfer_kind, t.order_id, \
         a.id AS account_id, a.kind AS account_kind, a.card_id, a.currency, e.amount, \
         e.balance_after, t.created_at \
         FROM transfers t JOIN entries e ON e.transfer_id = t.id \
         JOIN accounts a ON a.id = e.account_id \
         WHERE t.project_id = $1 AND a.project_id = $1 AND t.created_at <= $2 \
         AND (t.created_at > $3 OR (t.created_at = $3 AND (t.id > $4 OR (t.id = $4 AND e.id > $5)))) \
         ORDER BY t.created_at, t.id, e.id LIMIT $6",
    )
    .bind(project_id)
    .bind(to)
    .bind(cursor.created_at)
    .bind(&cursor.id)
    .bind(cursor.entry_id)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(LedgerRow {
                entry_id: r.try_get("entry_id")?,
                transfer_id: r.try_get("transfer_id")?,
                transfer_kind: r.try_get("transfer_kind")?,
                order_id: r.try_get("order_id")?,
                account_id: r.try_get("account_id")?,
                account_kind: r.try_get("account_kind")?,
                card_id: r.try_get("card_id")?,
                currency: r.try_get("currency")?,
                amount: r.try_get("amount")?,
                balance_after: r.try_get("balance_after")?,
                created_at: r.try_get("created_at")?,
            })
        })
        .collect()
}

/// A report by its id alone, for the console (which then checks the operator may see
/// its project).
pub async fn by_id(conn: &mut Conn, id: &str) -> Result<Option<ReportRecord>, StoreError> {
    let row = sqlx::query(&format!("SELECT {COLUMNS} FROM reports WHERE id = $1"))
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(from_row).transpose()
}
