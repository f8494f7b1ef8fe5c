//! Spend controls a project sets (CONTRACT §11): authorization rules with every version
//! kept, the log of their results, and the project's decision endpoint. Every change
//! bumps the project's `controls_revision` in its own transaction, so every process's
//! cache of compiled rules notices it with the next authorization's card read.

use crate::query::{find_page, Filter, Source};
use crate::writer::{BatchConn, RowRead};
use crate::{Backend, Conn, StoreError};
use issuing_wire::PageRequest;
use sqlx::any::AnyRow;
use sqlx::Row;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleRecord {
    pub id: String,
    pub project_id: String,
    pub name: String,
    /// JSON list of conditions as the API shows them.
    pub conditions: serde_json::Value,
    pub mode: String,
    pub priority: i64,
    /// None: every card of the project.
    pub card_ids: Option<Vec<String>>,
    pub version: i64,
    pub created_at: i64,
    pub updated_at: i64,
}

fn json_column<T: serde::de::DeserializeOwned>(
    r: &impl RowRead,
    column: &str,
) -> Result<Option<T>, StoreError> {
    r.opt_text(column)?
        .map(|text| serde_json::from_str(&text))
        .transpose()
        .map_err(|e| StoreError::Corrupt(format!("auth rule {column}: {e}")))
}

fn rule_from_row(r: &impl RowRead) -> Result<RuleRecord, StoreError> {
    Ok(RuleRecord {
        id: r.text("id")?,
        project_id: r.text("project_id")?,
        name: r.text("name")?,
        conditions: json_column(r, "conditions")?.unwrap_or_default(),
        mode: r.text("mode")?,
        priority: r.int("priority")?,
        card_ids: json_column(r, "card_ids")?,
        version: r.int("version")?,
        created_at: r.int("created_at")?,
        updated_at: r.int("updated_at")?,
    })
}

/// Raises the project's controls revision (and, on PostgreSQL, locks the project's row
/// until the caller's transaction ends, so rule changes of one project take turns).
pub async fn bump_revision(conn: &mut Conn, project_id: &str) -> Result<i64, StoreError> {
    let row = sqlx::query(
        "UPDATE projects SET controls_revision = controls_revision + 1 WHERE id = $1 \
         RETURNING controls_revision",
    )
    .bind(project_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok(row.try_get("controls_revision")?)
}

/// Rules of the project that are not `inactive` (for the limit of 50).
pub async fn count_enabled(conn: &mut Conn, project_id: &str) -> Result<i64, StoreError> {
    let row = sqlx::query(
        "SELECT COUNT(*) AS n FROM auth_rules WHERE project_id = $1 AND deleted_at IS NULL \
         AND mode <> 'inactive'",
    )
    .bind(project_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok(row.try_get("n")?)
}

/// Writes a new rule, or a rule's next version (`r.version` > 1), and keeps the version.
pub async fn save_rule(conn: &mut Conn, r: &RuleRecord) -> Result<(), StoreError> {
    let conditions = r.conditions.to_string();
    let card_ids = r
        .card_ids
        .as_ref()
        .map(|ids| serde_json::Value::from(ids.clone()).to_string());
    if r.version == 1 {
        sqlx::query(
            "INSERT INTO auth_rules (id, project_id, name, conditions, mode, priority, card_ids, \
             version, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&r.id)
        .bind(&r.project_id)
        .bind(&r.name)
        .bind(&conditions)
        .bind(&r.mode)
        .bind(r.priority)
        .bind(&card_ids)
        .bind(r.version)
        .bind(r.created_at)
        .bind(r.updated_at)
        .execute(&mut *conn)
        .await
        .map_err(StoreError::from_write)?;
    } else {
        let done = sqlx::query(
            "UPDATE auth_rules SET name = $1, conditions = $2, mode = $3, priority = $4, \
             card_ids = $5, version = $6, updated_at = $7 \
             WHERE project_id = $8 AND id = $9 AND version = $10 AND deleted_at IS NULL",
        )
        .bind(&r.name)
        .bind(&conditions)
        .bind(&r.mode)
        .bind(r.priority)
        .bind(&card_ids)
        .bind(r.version)
        .bind(r.updated_at)
        .bind(&r.project_id)
        .bind(&r.id)
        .bind(r.version - 1)
        .execute(&mut *conn)
        .await?;
        if done.rows_affected() != 1 {
            return Err(StoreError::Conflict);
        }
    }
    sqlx::query(
        "INSERT INTO auth_rule_versions (rule_id, version, project_id, name, conditions, mode, \
         priority, card_ids, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&r.id)
    .bind(r.version)
    .bind(&r.project_id)
    .bind(&r.name)
    .bind(&conditions)
    .bind(&r.mode)
    .bind(r.priority)
    .bind(&card_ids)
    .bind(r.updated_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// A rule of the project that was not deleted.
pub async fn get_rule(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
) -> Result<Option<RuleRecord>, StoreError> {
    let row = sqlx::query(
        "SELECT * FROM auth_rules WHERE project_id = $1 AND id = $2 AND deleted_at IS NULL",
    )
    .bind(project_id)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(rule_from_row).transpose()
}

/// Deletes a rule (it stops being evaluated; its versions and results stay). False
/// when there was none.
pub async fn delete_rule(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
    now: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE auth_rules SET deleted_at = $1, updated_at = $1 \
         WHERE project_id = $2 AND id = $3 AND deleted_at IS NULL",
    )
    .bind(now)
    .bind(project_id)
    .bind(id)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

pub const RULE_SORT_KEYS: &[&str] = &["created_at", "updated_at", "priority"];

/// The project's rules, optionally of some modes, newest first by default.
pub async fn find_rules(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    modes: &[String],
    page: &PageRequest,
) -> Result<(Vec<RuleRecord>, i64), StoreError> {
    let mut f = Filter::for_project("project_id", project_id);
    f.texts("mode", modes);
    let sort = match page.sort_by {
        "updated_at" => ("updated_at", false),
        "priority" => ("priority", false),
        _ => ("created_at", false),
    };
    let source = Source {
        select: "*",
        from: "(SELECT * FROM auth_rules WHERE deleted_at IS NULL) live_rules",
        id: "id",
    };
    let (rows, total) = find_page(conn, backend, f, source, sort, page).await?;
    Ok((
        rows.iter().map(rule_from_row).collect::<Result<_, _>>()?,
        total,
    ))
}

/// Every rule of the project that is evaluated (not inactive, not deleted), with the
/// revision they were read at.
pub async fn enabled_rules(
    conn: &mut BatchConn<'_>,
    project_id: &str,
) -> Result<Vec<RuleRecord>, StoreError> {
    let rows = conn
        .rows(
            "SELECT * FROM auth_rules WHERE project_id = $1 AND deleted_at IS NULL \
             AND mode <> 'inactive' ORDER BY priority, created_at, id",
            &[project_id.into()],
        )
        .await?;
    rows.iter().map(rule_from_row).collect()
}

/// One match of a rule, for the results log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleResult {
    pub id: String,
    pub project_id: String,
    pub rule_id: String,
    pub version: i64,
    pub transaction_id: String,
    pub card_id: String,
    pub mode: String,
    /// `declined` or `none`.
    pub decided: String,
    pub evaluated_at: i64,
}

/// Adds rule results to `inserts` (a batch writer's), as `insert_results` records them.
pub fn add_results(inserts: &mut crate::query::Inserts, results: &[RuleResult]) {
    use crate::query::Cell;
    let rows = results
        .iter()
        .map(|r| {
            vec![
                Cell::text(&r.id),
                Cell::text(&r.project_id),
                Cell::text(&r.rule_id),
                Cell::int(r.version),
                Cell::text(&r.transaction_id),
                Cell::text(&r.card_id),
                Cell::text(&r.mode),
                Cell::text(&r.decided),
                Cell::int(r.evaluated_at),
            ]
        })
        .collect();
    inserts.add(
        "INSERT INTO auth_rule_results (id, project_id, rule_id, version, transaction_id, card_id, \
         mode, decided, evaluated_at)",
        rows,
    );
}

/// Records the matches of one authorization in one statement (at most one per rule of
/// the project, so bounded by the rule limit).
pub async fn insert_results(conn: &mut Conn, results: &[RuleResult]) -> Result<(), StoreError> {
    if results.is_empty() {
        return Ok(());
    }
    const COLUMNS: usize = 9;
    let values: Vec<String> = (0..results.len())
        .map(|i| {
            let params: Vec<String> = (1..=COLUMNS)
                .map(|c| format!("${}", i * COLUMNS + c))
                .collect();
            format!("({})", params.join(", "))
        })
        .collect();
    let sql = format!(
        "INSERT INTO auth_rule_results (id, project_id, rule_id, version, transaction_id, card_id, \
         mode, decided, evaluated_at) VALUES {}",
        values.join(", ")
    );
    let mut q = sqlx::query(&sql);
    for r in results {
        q = q
            .bind(&r.id)
            .bind(&r.project_id)
            .bind(&r.rule_id)
            .bind(r.version)
            .bind(&r.transaction_id)
            .bind(&r.card_id)
            .bind(&r.mode)
            .bind(&r.decided)
            .bind(r.evaluated_at);
    }
    q.execute(&mut *conn).await?;
    Ok(())
}

/// The project's rule results, newest first, optionally of one rule or transaction.
pub async fn find_results(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    rule_ids: &[String],
    transaction_ids: &[String],
    page: &PageRequest,
) -> Result<(Vec<RuleResult>, i64), StoreError> {
    let mut f = Filter::for_project("project_id", project_id);
    f.texts("rule_id", rule_ids);
    f.texts("transaction_id", transaction_ids);
    let (rows, total) = find_page(
        conn,
        backend,
        f,
        Source::table("auth_rule_results"),
        ("evaluated_at", false),
        page,
    )
    .await?;
    let items = rows
        .iter()
        .map(result_from_row)
        .collect::<Result<_, StoreError>>()?;
    Ok((items, total))
}

fn result_from_row(r: &AnyRow) -> Result<RuleResult, StoreError> {
    Ok(RuleResult {
        id: r.try_get("id")?,
        project_id: r.try_get("project_id")?,
        rule_id: r.try_get("rule_id")?,
        version: r.try_get("version")?,
        transaction_id: r.try_get("transaction_id")?,
        card_id: r.try_get("card_id")?,
        mode: r.try_get("mode")?,
        decided: r.try_get("decided")?,
        evaluated_at: r.try_get("evaluated_at")?,
    })
}

/// A recorded match with the name its rule had in the version that matched (the rule
/// may have been renamed or deleted since; its versions stay).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleMatch {
    pub result: RuleResult,
    pub rule_name: Option<String>,
}

/// The matches recorded for some transactions of the project, newest first, at most
/// `limit`: the console shows those of the transactions on its page (on the
/// `(project_id, transaction_id)` index), however many a card has in all.
pub async fn results_of_transactions(
    conn: &mut Conn,
    project_id: &str,
    transaction_ids: &[String],
    limit: i64,
) -> Result<Vec<RuleMatch>, StoreError> {
    if transaction_ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut f = Filter::for_project("r.project_id", project_id);
    f.texts("r.transaction_id", transaction_ids);
    let limit = f.push(crate::query::Arg::Int(limit));
    // `evaluated_at + 0`: no index gives that order, so the rows come from the page's
    // transactions by index and are sorted after. Ordered by the column itself,
    // PostgreSQL's generic plan walked the project's every result newest first,
    // filtering by transaction (16 ms for 10,000 results idle, 50-80 ms under the
    // bench's load, linear in the project's results; docs/benchmarks.md).
    let sql = format!(
        "SELECT r.*, v.name AS rule_name FROM auth_rule_results r \
         LEFT JOIN auth_rule_versions v ON v.rule_id = r.rule_id AND v.version = r.version{} \
         ORDER BY r.evaluated_at + 0 DESC, r.id DESC LIMIT {limit}",
        f.where_sql()
    );
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|r| {
            Ok(RuleMatch {
                result: result_from_row(r)?,
                rule_name: r.try_get("rule_name")?,
            })
        })
        .collect()
}

/// A project's decision endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionEndpoint {
    pub project_id: String,
    pub url: String,
    pub timeout_ms: i64,
    pub on_timeout: String,
    pub mode: String,
    pub created_at: i64,
    pub updated_at: i64,
}

pub async fn get_endpoint(
    conn: &mut BatchConn<'_>,
    project_id: &str,
) -> Result<Option<DecisionEndpoint>, StoreError> {
    let row = conn
        .row(
            "SELECT * FROM decision_endpoints WHERE project_id = $1",
            &[project_id.into()],
        )
        .await?;
    row.map(|r| {
        Ok(DecisionEndpoint {
            project_id: r.text("project_id")?,
            url: r.text("url")?,
            timeout_ms: r.int("timeout_ms")?,
            on_timeout: r.text("on_timeout")?,
            mode: r.text("mode")?,
            created_at: r.int("created_at")?,
            updated_at: r.int("updated_at")?,
        })
    })
    .transpose()
}

/// Sets (inserts or replaces) the project's decision endpoint.
pub async fn put_endpoint(conn: &mut Conn, e: &DecisionEndpoint) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO decision_endpoints (project_id, url, timeout_ms, on_timeout, mode, created_at, \
         updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7) \
         ON CONFLICT (project_id) DO UPDATE SET url = excluded.url, timeout_ms = excluded.timeout_ms, \
         on_timeout = excluded.on_timeout, mode = excluded.mode, updated_at = excluded.updated_at",
    )
    .bind(&e.project_id)
    .bind(&e.url)
    .bind(e.timeout_ms)
    .bind(&e.on_timeout)
    .bind(&e.mode)
    .bind(e.created_at)
    .bind(e.updated_at)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Removes the project's decision endpoint; false when it had none.
pub async fn delete_endpoint(conn: &mut Conn, project_id: &str) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM decision_endpoints WHERE project_id = $1")
        .bind(project_id)
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() == 1)
}
