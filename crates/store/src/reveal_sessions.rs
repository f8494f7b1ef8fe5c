//! Reveal sessions (CONTRACT §16): short-lived, single-use permissions to show one
//! card's details to a cardholder's browser. Our own page's sessions are found by the
//! SHA-256 of their token, never by the token; a session is used by one conditional
//! UPDATE, so two requests (in one process or several sharing a database) can never
//! both use it.

use crate::{Conn, StoreError};
use sqlx::any::AnyRow;
use sqlx::Row;

/// A session shown by our own page (`/reveal/{token}`).
pub const PAGE: &str = "page";
/// A session shown by Lithic's embed (no token of ours).
pub const LITHIC_EMBED: &str = "lithic_embed";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RevealSession {
    pub id: String,
    pub project_id: String,
    pub card_id: String,
    pub kind: String,
    pub target_origin: String,
    pub created_at: i64,
    pub expires_at: i64,
    pub used_at: Option<i64>,
}

pub struct NewRevealSession<'a> {
    pub id: &'a str,
    pub project_id: &'a str,
    pub card_id: &'a str,
    /// None for a provider's session.
    pub token_hash: Option<&'a str>,
    pub kind: &'a str,
    pub target_origin: &'a str,
    pub created_at: i64,
    pub expires_at: i64,
}

fn from_row(r: &AnyRow) -> Result<RevealSession, StoreError> {
    Ok(RevealSession {
        id: r.try_get("id")?,
        project_id: r.try_get("project_id")?,
        card_id: r.try_get("card_id")?,
        kind: r.try_get("kind")?,
        target_origin: r.try_get("target_origin")?,
        created_at: r.try_get("created_at")?,
        expires_at: r.try_get("expires_at")?,
        used_at: r.try_get("used_at")?,
    })
}

const COLUMNS: &str =
    "id, project_id, card_id, kind, target_origin, created_at, expires_at, used_at";

pub async fn insert(conn: &mut Conn, s: &NewRevealSession<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO reveal_sessions (id, project_id, card_id, token_hash, kind, target_origin, \
         created_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(s.id)
    .bind(s.project_id)
    .bind(s.card_id)
    .bind(s.token_hash)
    .bind(s.kind)
    .bind(s.target_origin)
    .bind(s.created_at)
    .bind(s.expires_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// The session of a token hash, used or not (a GET is judged before it may use it).
pub async fn by_token(
    conn: &mut Conn,
    token_hash: &str,
) -> Result<Option<RevealSession>, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM reveal_sessions WHERE token_hash = $1"
    ))
    .bind(token_hash)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// Uses the session: marks it used at `now` if it is unused and not expired, and answers
/// it; None when it was used already (by another request too) or has expired. Call in
/// the transaction that records the view.
pub async fn consume(
    conn: &mut Conn,
    token_hash: &str,
    now: i64,
) -> Result<Option<RevealSession>, StoreError> {
    let row = sqlx::query(&format!(
        "UPDATE reveal_sessions SET used_at = $2 \
         WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2 \
         RETURNING {COLUMNS}"
    ))
    .bind(token_hash)
    .bind(now)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// A project's session by its id (scoped by project).
pub async fn get(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
) -> Result<Option<RevealSession>, StoreError> {
    let row = sqlx::query(&format!(
        "SELECT {COLUMNS} FROM reveal_sessions WHERE project_id = $1 AND id = $2"
    ))
    .bind(project_id)
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// Deletes up to `batch` sessions that expired before `before`; answers how many.
pub async fn purge_expired(conn: &mut Conn, before: i64, batch: i64) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM reveal_sessions WHERE id IN \
         (SELECT id FROM reveal_sessions WHERE expires_at < $1 LIMIT $2)",
    )
    .bind(before)
    .bind(batch)
    .execute(&mut *conn)
    .await?
    .rows_affected())
}
