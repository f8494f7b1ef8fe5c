//! Projects and their API keys.

use crate::{ledger, Conn, StoreError};
use sqlx::any::AnyRow;
use sqlx::Row;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectRecord {
    pub id: String,
    pub name: String,
    pub deposit_address: Option<String>,
    /// The child index (0/n) `deposit_address` derives from; None until assigned.
    pub deposit_index: Option<i64>,
    /// The random address of a project created before derived addresses (migration 7);
    /// nothing watches it, but support answers questions about it.
    pub legacy_deposit_address: Option<String>,
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
    /// None until an address is derived (see `deposit_addresses`).
    pub deposit_address: Option<&'a str>,
    pub api_key: &'a str,
    pub secret_enc: &'a str,
    pub created_at: i64,
}

pub(crate) fn project_from_row(r: &AnyRow) -> Result<ProjectRecord, sqlx::Error> {
    Ok(ProjectRecord {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        deposit_address: r.try_get("deposit_address")?,
        deposit_index: r.try_get("deposit_index")?,
        legacy_deposit_address: r.try_get("legacy_deposit_address")?,
        status: r.try_get("status")?,
        created_at: r.try_get("created_at")?,
    })
}

/// An API key as the operator sees it: never its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyInfo {
    pub api_key: String,
    pub project_id: String,
    pub created_at: i64,
    /// NULL: no expiry. Set by a rotation's grace period.
    pub expires_at: Option<i64>,
    pub revoked_at: Option<i64>,
}

impl KeyInfo {
    /// Whether requests with this key are accepted at `now` (project status aside).
    pub fn valid_at(&self, now: i64) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|e| e > now)
    }
}

fn key_info_from_row(r: &AnyRow) -> Result<KeyInfo, sqlx::Error> {
    Ok(KeyInfo {
        api_key: r.try_get("api_key")?,
        project_id: r.try_get("project_id")?,
        created_at: r.try_get("created_at")?,
        expires_at: r.try_get("expires_at")?,
        revoked_at: r.try_get("revoked_at")?,
    })
}

/// The condition for a key `k` that is valid at `$n`: not revoked and not expired.
fn valid_key(n: u32) -> String {
    format!("k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > ${n})")
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

/// The key if it is valid now: a revoked or expired key is `None`, like an unknown one.
/// Read from the database on every request (no cache), so a revocation, an expiry or a
/// suspension takes effect at once in every process.
pub async fn find_api_key(
    conn: &mut Conn,
    api_key: &str,
) -> Result<Option<ApiKeyRecord>, StoreError> {
    let sql = format!("{KEY_COLUMNS} WHERE k.api_key = $1 AND {}", valid_key(2));
    let row = sqlx::query(&sql)
        .bind(api_key)
        .bind(issuing_domain::time::now_micros())
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

/// Like `get`, with a row-lock clause (`Store::for_update`): serialises operator changes
/// to one project's keys and status.
pub async fn get_locked(
    conn: &mut Conn,
    id: &str,
    lock: &str,
) -> Result<Option<ProjectRecord>, StoreError> {
    let sql = format!("SELECT * FROM projects WHERE id = $1{lock}");
    let row = sqlx::query(&sql)
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

/// The project's keys that are valid now, **newest first**: the first one seals webhooks,
/// so after a rotation receivers get the new key at once, grace period or not.
pub async fn api_keys_of(
    conn: &mut Conn,
    project_id: &str,
) -> Result<Vec<ApiKeyRecord>, StoreError> {
    let sql = format!(
        "{KEY_COLUMNS} WHERE k.project_id = $1 AND {} ORDER BY k.created_at DESC, k.api_key DESC",
        valid_key(2)
    );
    let rows = sqlx::query(&sql)
        .bind(project_id)
        .bind(issuing_domain::time::now_micros())
        .fetch_all(&mut *conn)
        .await?;
    Ok(rows.iter().map(key_from_row).collect::<Result<_, _>>()?)
}

/// Sets a project's status (`active` or `suspended`). False when there is no such project.
pub async fn set_status(conn: &mut Conn, id: &str, status: &str) -> Result<bool, StoreError> {
    let done = sqlx::query("UPDATE projects SET status = $1 WHERE id = $2")
        .bind(status)
        .bind(id)
        .execute(&mut *conn)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Adds an API key to an existing project (a rotation). No expiry.
pub async fn add_api_key(
    conn: &mut Conn,
    project_id: &str,
    api_key: &str,
    secret_enc: &str,
    created_at: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO api_keys (api_key, project_id, secret_enc, created_at) VALUES ($1, $2, $3, $4)",
    )
    .bind(api_key)
    .bind(project_id)
    .bind(secret_enc)
    .bind(created_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// Makes every key of the project that is valid at `now` expire at `until` at the latest
/// (an earlier expiry is kept). Returns until when the last of them stays valid (`None`
/// when the project had no valid key).
pub async fn expire_keys_of(
    conn: &mut Conn,
    project_id: &str,
    until: i64,
    now: i64,
) -> Result<Option<i64>, StoreError> {
    sqlx::query(
        "UPDATE api_keys SET expires_at = $1 WHERE project_id = $2 AND revoked_at IS NULL \
         AND (expires_at IS NULL OR expires_at > $1)",
    )
    .bind(until)
    .bind(project_id)
    .execute(&mut *conn)
    .await?;
    let sql = format!(
        "SELECT MAX(k.expires_at) AS until FROM api_keys k WHERE k.project_id = $1 AND {}",
        valid_key(2)
    );
    let row = sqlx::query(&sql)
        .bind(project_id)
        .bind(now)
        .fetch_one(&mut *conn)
        .await?;
    Ok(row.try_get::<Option<i64>, _>("until")?)
}

/// One key, whatever its state. `lock` is a row-lock clause (`Store::for_update`).
pub async fn get_key(
    conn: &mut Conn,
    api_key: &str,
    lock: &str,
) -> Result<Option<KeyInfo>, StoreError> {
    let sql = format!("SELECT * FROM api_keys WHERE api_key = $1{lock}");
    let row = sqlx::query(&sql)
        .bind(api_key)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.as_ref().map(key_info_from_row).transpose()?)
}

/// Every key of a project, revoked and expired ones included, oldest first.
pub async fn list_keys(conn: &mut Conn, project_id: &str) -> Result<Vec<KeyInfo>, StoreError> {
    let rows =
        sqlx::query("SELECT * FROM api_keys WHERE project_id = $1 ORDER BY created_at, api_key")
            .bind(project_id)
            .fetch_all(&mut *conn)
            .await?;
    Ok(rows
        .iter()
        .map(key_info_from_row)
        .collect::<Result<_, _>>()?)
}

/// Revokes a key at `now`. False when it does not exist or was already revoked.
pub async fn revoke_key(conn: &mut Conn, api_key: &str, now: i64) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE api_keys SET revoked_at = $1 WHERE api_key = $2 AND revoked_at IS NULL",
    )
    .bind(now)
    .bind(api_key)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}
