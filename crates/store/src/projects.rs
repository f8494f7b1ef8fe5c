//! Projects and their API keys.

use crate::{ledger, Conn, StoreError};
use sqlx::any::AnyRow;
use sqlx::Row;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectRecord {
    pub id: String,
    pub name: String,
    pub deposit_address: Option<String>,
    pub status: String,
    pub created_at: i64,
}

/// An API key with what the request pipeline needs to serve it. `secret_enc` is the
/// project's API secret sealed under the server master key.
#[derive(Clone)]
pub struct ApiKeyRecord {
    pub api_key: String,
    pub project_id: String,
    pub project_status: String,
    pub secret_enc: String,
}

impl std::fmt::Debug for ApiKeyRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKeyRecord")
            .field("project_id", &self.project_id)
            .field("project_status", &self.project_status)
            .finish_non_exhaustive()
    }
}

pub struct NewProject<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub deposit_address: &'a str,
    pub api_key: &'a str,
    pub secret_enc: &'a str,
    pub created_at: i64,
}

fn project_from_row(r: &AnyRow) -> Result<ProjectRecord, sqlx::Error> {
    Ok(ProjectRecord {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        deposit_address: r.try_get("deposit_address")?,
        status: r.try_get("status")?,
        created_at: r.try_get("created_at")?,
    })
}

const KEY_COLUMNS: &str =
    "SELECT k.api_key, k.project_id, k.secret_enc, p.status AS project_status \
     FROM api_keys k JOIN projects p ON p.id = k.project_id";

fn key_from_row(r: &AnyRow) -> Result<ApiKeyRecord, sqlx::Error> {
    Ok(ApiKeyRecord {
        api_key: r.try_get("api_key")?,
        project_id: r.try_get("project_id")?,
        project_status: r.try_get("project_status")?,
        secret_enc: r.try_get("secret_enc")?,
    })
}

/// Creates the project, its first API key and its ledger accounts. Call inside a
/// transaction so a project never exists without its accounts.
pub async fn create(conn: &mut Conn, p: &NewProject<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO projects (id, name, deposit_address, status, created_at) \
         VALUES ($1, $2, $3, 'active', $4)",
    )
    .bind(p.id)
    .bind(p.name)
    .bind(p.deposit_address)
    .bind(p.created_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    sqlx::query(
        "INSERT INTO api_keys (api_key, project_id, secret_enc, created_at) VALUES ($1, $2, $3, $4)",
    )
    .bind(p.api_key)
    .bind(p.id)
    .bind(p.secret_enc)
    .bind(p.created_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    ledger::open_project_accounts(conn, p.id, p.created_at).await
}

pub async fn find_api_key(
    conn: &mut Conn,
    api_key: &str,
) -> Result<Option<ApiKeyRecord>, StoreError> {
    let sql = format!("{KEY_COLUMNS} WHERE k.api_key = $1 AND k.revoked_at IS NULL");
    let row = sqlx::query(&sql)
        .bind(api_key)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.as_ref().map(key_from_row).transpose()?)
}

pub async fn get(conn: &mut Conn, id: &str) -> Result<Option<ProjectRecord>, StoreError> {
    let row = sqlx::query("SELECT * FROM projects WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.as_ref().map(project_from_row).transpose()?)
}

/// Every project, oldest first. For the operator CLI; bounded by `limit`.
pub async fn list(conn: &mut Conn, limit: i64) -> Result<Vec<ProjectRecord>, StoreError> {
    let rows = sqlx::query("SELECT * FROM projects ORDER BY created_at, id LIMIT $1")
        .bind(limit)
        .fetch_all(&mut *conn)
        .await?;
    Ok(rows
        .iter()
        .map(project_from_row)
        .collect::<Result<_, _>>()?)
}

/// The first API key of a project (used to print demo credentials and sign webhooks).
pub async fn api_keys_of(
    conn: &mut Conn,
    project_id: &str,
) -> Result<Vec<ApiKeyRecord>, StoreError> {
    let sql = format!(
        "{KEY_COLUMNS} WHERE k.project_id = $1 AND k.revoked_at IS NULL ORDER BY k.created_at"
    );
    let rows = sqlx::query(&sql)
        .bind(project_id)
        .fetch_all(&mut *conn)
        .await?;
    Ok(rows.iter().map(key_from_row).collect::<Result<_, _>>()?)
}
