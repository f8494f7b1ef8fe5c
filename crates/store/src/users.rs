//! Users: the project's end customers, unique per (project, external_user_id).

use crate::query::{find_page, placeholders, Filter, Source};
use crate::writer::{BatchConn, Param, RowRead};
use crate::{Backend, Conn, StoreError};
use issuing_wire::PageRequest;
use sqlx::any::AnyRow;
use sqlx::Row;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    pub id: String,
    pub project_id: String,
    pub external_user_id: String,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Default, Clone)]
pub struct UserFilter {
    pub external_user_ids: Vec<String>,
    pub user_ids: Vec<String>,
    pub created_from: Option<i64>,
    pub created_to: Option<i64>,
}

pub const SORT_KEYS: &[&str] = &["user_id", "external_user_id", "created_at", "updated_at"];

pub(crate) fn from_row(r: &AnyRow) -> Result<UserRecord, sqlx::Error> {
    Ok(UserRecord {
        id: r.try_get("id")?,
        project_id: r.try_get("project_id")?,
        external_user_id: r.try_get("external_user_id")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

/// Inserts the user; `StoreError::Conflict` when the external id is taken in the project.
pub async fn insert(conn: &mut Conn, u: &UserRecord) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO users (id, project_id, external_user_id, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&u.id)
    .bind(&u.project_id)
    .bind(&u.external_user_id)
    .bind(u.created_at)
    .bind(u.updated_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// Columns of a user row, in the order `insert_many` binds them.
const COLUMNS: usize = 5;

/// Inserts `users` in one statement, skipping any whose external id is taken in its
/// project (by a row before, or by an earlier one of `users`); answers the ids inserted.
/// Any other failure (a taken id) fails the statement: nothing is inserted.
pub async fn insert_many(
    conn: &mut BatchConn<'_>,
    users: &[&UserRecord],
) -> Result<std::collections::HashSet<String>, StoreError> {
    if users.is_empty() {
        return Ok(std::collections::HashSet::new());
    }
    // Five variables a user: a batch writer's batch (64) is far below SQLite's bound.
    debug_assert!(
        users.len() <= 1_000,
        "{} users in one statement",
        users.len()
    );
    let rows: Vec<String> = (0..users.len())
        .map(|i| format!("({})", placeholders(i * COLUMNS + 1, COLUMNS)))
        .collect();
    let sql = format!(
        "INSERT INTO users (id, project_id, external_user_id, created_at, updated_at) VALUES {} \
         ON CONFLICT (project_id, external_user_id) DO NOTHING RETURNING id",
        rows.join(", ")
    );
    let mut params: Vec<Param<'_>> = Vec::with_capacity(users.len() * COLUMNS);
    for u in users {
        params.extend([
            Param::from(u.id.as_str()),
            u.project_id.as_str().into(),
            u.external_user_id.as_str().into(),
            u.created_at.into(),
            u.updated_at.into(),
        ]);
    }
    debug_assert_eq!(params.len(), users.len() * COLUMNS);
    let inserted = conn.rows(&sql, &params).await?;
    inserted.iter().map(|r| r.text("id")).collect()
}

pub async fn get_by_external_id(
    conn: &mut Conn,
    project_id: &str,
    external_user_id: &str,
) -> Result<Option<UserRecord>, StoreError> {
    let row = sqlx::query("SELECT * FROM users WHERE project_id = $1 AND external_user_id = $2")
        .bind(project_id)
        .bind(external_user_id)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.as_ref().map(from_row).transpose()?)
}

pub async fn find(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    filter: &UserFilter,
    page: &PageRequest,
) -> Result<(Vec<UserRecord>, i64), StoreError> {
    let mut f = Filter::for_project("project_id", project_id);
    f.texts("external_user_id", &filter.external_user_ids);
    f.texts("id", &filter.user_ids);
    f.at_least("created_at", filter.created_from);
    f.at_most("created_at", filter.created_to);
    let sort = match page.sort_by {
        "user_id" => ("id", true),
        "external_user_id" => ("external_user_id", true),
        "updated_at" => ("updated_at", false),
        _ => ("created_at", false),
    };
    let (rows, total) = find_page(conn, backend, f, Source::table("users"), sort, page).await?;
    let users = rows.iter().map(from_row).collect::<Result<_, _>>()?;
    Ok((users, total))
}
