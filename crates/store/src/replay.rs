//! Replay protection shared by every server process on one database: a request's
//! (API key, path, request_timestamp) is remembered while that timestamp is still inside
//! the acceptance window, so a copy of the request is refused wherever it lands.

use crate::{Conn, StoreError};

/// Records the request; returns false when the same triple was already seen.
pub async fn remember(
    conn: &mut Conn,
    api_key: &str,
    path: &str,
    request_timestamp: i64,
    expires_at: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO replay_guard (api_key, path, request_timestamp, expires_at) \
         VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
    )
    .bind(api_key)
    .bind(path)
    .bind(request_timestamp)
    .bind(expires_at)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Deletes up to `batch` expired entries; returns how many went.
pub async fn purge_expired(conn: &mut Conn, now: i64, batch: i64) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM replay_guard WHERE (api_key, path, request_timestamp) IN \
         (SELECT api_key, path, request_timestamp FROM replay_guard WHERE expires_at < $1 LIMIT $2)",
    )
    .bind(now)
    .bind(batch)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected())
}
