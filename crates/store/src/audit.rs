//! The audit log (every console action and every `issuing admin` command) and the
//! results of ledger verifications. Audit rows are only ever appended: the schema's
//! triggers refuse an UPDATE or DELETE.

use crate::console::Scope;
use crate::query::{Arg, Filter};
use crate::{Conn, StoreError};
use sqlx::any::AnyRow;
use sqlx::Row;

/// The migration that created the audit log.
const SINCE_MIGRATION: i64 = 10;
/// The actor of `issuing admin` commands.
pub const CLI: &str = "cli";
/// Longest result text kept (an error message); longer ones are cut.
pub const MAX_RESULT_LEN: usize = 500;

#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub id: i64,
    pub at: i64,
    pub actor: String,
    pub action: String,
    pub project_id: Option<String>,
    /// JSON object of the ids acted on.
    pub targets: serde_json::Value,
    pub result: String,
}

#[derive(Debug, Clone)]
pub struct NewAudit<'a> {
    pub at: i64,
    pub actor: &'a str,
    pub action: &'a str,
    pub project_id: Option<&'a str>,
    pub targets: &'a serde_json::Value,
    pub result: &'a str,
}

fn cut(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// Whether this database has the audit log (is migrated far enough).
pub async fn exists(store: &crate::Store) -> bool {
    sqlx::query("SELECT version FROM schema_migrations WHERE version = $1")
        .bind(SINCE_MIGRATION)
        .fetch_optional(store.pool())
        .await
        .ok()
        .flatten()
        .is_some()
}

pub async fn append(conn: &mut Conn, a: &NewAudit<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO audit_log (at, actor, action, project_id, targets, result) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(a.at)
    .bind(a.actor)
    .bind(a.action)
    .bind(a.project_id)
    .bind(a.targets.to_string())
    .bind(cut(a.result, MAX_RESULT_LEN))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// How many rows `actor` appended for `action` with `result` since `since` (the
/// console's reveals per hour).
pub async fn count_since(
    conn: &mut Conn,
    actor: &str,
    action: &str,
    result: &str,
    since: i64,
) -> Result<i64, StoreError> {
    let row = sqlx::query(
        "SELECT COUNT(*) AS n FROM audit_log WHERE actor = $1 AND action = $2 AND at > $3 \
         AND result = $4",
    )
    .bind(actor)
    .bind(action)
    .bind(since)
    .bind(result)
    .fetch_one(&mut *conn)
    .await?;
    Ok(row.try_get("n")?)
}

fn entry_from_row(r: &AnyRow) -> Result<AuditEntry, StoreError> {
    let targets: String = r.try_get("targets")?;
    Ok(AuditEntry {
        id: r.try_get("id")?,
        at: r.try_get("at")?,
        actor: r.try_get("actor")?,
        action: r.try_get("action")?,
        project_id: r.try_get("project_id")?,
        targets: serde_json::from_str(&targets)
            .map_err(|e| StoreError::Corrupt(format!("audit targets: {e}")))?,
        result: r.try_get("result")?,
    })
}

/// Newest first, before row `before` (keyset on the id). A scoped viewer sees only rows
/// of its projects; rows about no project are for unscoped readers.
pub async fn page(
    conn: &mut Conn,
    scope: &Scope,
    actor: Option<&str>,
    action: Option<&str>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditEntry>, StoreError> {
    let mut f = Filter::default();
    scope.restrict(&mut f, "project_id");
    if let Some(actor) = actor {
        f.eq("actor", Arg::Text(actor.to_owned()));
    }
    if let Some(action) = action {
        f.eq("action", Arg::Text(action.to_owned()));
    }
    if let Some(before) = before {
        f.less_than("id", Arg::Int(before));
    }
    let limit_p = f.push(Arg::Int(limit));
    let sql = format!(
        "SELECT * FROM audit_log{} ORDER BY id DESC LIMIT {limit_p}",
        f.where_sql()
    );
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(entry_from_row).collect()
}

/// One run of verify-ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    pub id: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub actor: String,
    pub problems: i64,
    /// The first problems, one a line.
    pub details: String,
}

pub struct NewVerification<'a> {
    pub started_at: i64,
    pub finished_at: i64,
    pub actor: &'a str,
    pub problems: i64,
    pub details: &'a str,
}

pub async fn record_verification(
    conn: &mut Conn,
    v: &NewVerification<'_>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO ledger_verifications (started_at, finished_at, actor, problems, details) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(v.started_at)
    .bind(v.finished_at)
    .bind(v.actor)
    .bind(v.problems)
    .bind(v.details)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub async fn last_verification(conn: &mut Conn) -> Result<Option<Verification>, StoreError> {
    let row = sqlx::query("SELECT * FROM ledger_verifications ORDER BY id DESC LIMIT 1")
        .fetch_optional(&mut *conn)
        .await?;
    let Some(r) = row else {
        return Ok(None);
    };
    Ok(Some(Verification {
        id: r.try_get("id")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
        actor: r.try_get("actor")?,
        problems: r.try_get("problems")?,
        details: r.try_get("details")?,
    }))
}
