//! Idempotency keys for money-moving endpoints (CONTRACT §5). A key is claimed in its
//! own short transaction, so a concurrent retry sees "in progress" and is refused; the
//! result is stored in the same transaction as the order it created, so a stored
//! response exists exactly when the order does. A claim left behind by a crash expires
//! and can be taken over; as its work never committed, nothing is done twice.

use crate::{Conn, StoreError};
use sqlx::Row;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// This request owns the key now and must do the work.
    Acquired,
    /// The key already finished with these parameters: answer this again.
    Done { status: i64, body: String },
    /// The first request with this key is still executing.
    InProgress,
    /// The key was used with different parameters.
    ParametersDiffer,
}

pub struct Key<'a> {
    pub project_id: &'a str,
    pub endpoint: &'a str,
    pub key: &'a str,
    pub request_hash: &'a str,
}

pub async fn claim(
    conn: &mut Conn,
    k: &Key<'_>,
    now: i64,
    claim_until: i64,
    expires_at: i64,
) -> Result<Claim, StoreError> {
    // An expired key is forgotten, so the client may reuse it.
    sqlx::query("DELETE FROM idempotency_keys WHERE project_id = $1 AND endpoint = $2 AND idem_key = $3 AND expires_at < $4")
        .bind(k.project_id)
        .bind(k.endpoint)
        .bind(k.key)
        .bind(now)
        .execute(&mut *conn)
        .await?;
    let inserted = sqlx::query(
        "INSERT INTO idempotency_keys (project_id, endpoint, idem_key, request_hash, state, claimed_until, \
         created_at, expires_at) VALUES ($1, $2, $3, $4, 'executing', $5, $6, $7) ON CONFLICT DO NOTHING",
    )
    .bind(k.project_id)
    .bind(k.endpoint)
    .bind(k.key)
    .bind(k.request_hash)
    .bind(claim_until)
    .bind(now)
    .bind(expires_at)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(Claim::Acquired);
    }
    let row = sqlx::query(
        "SELECT request_hash, state, response_status, response_body, claimed_until FROM idempotency_keys \
         WHERE project_id = $1 AND endpoint = $2 AND idem_key = $3",
    )
    .bind(k.project_id)
    .bind(k.endpoint)
    .bind(k.key)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(StoreError::NotFound("idempotency key"))?;
    let hash: String = row.try_get("request_hash")?;
    if hash != k.request_hash {
        return Ok(Claim::ParametersDiffer);
    }
    let state: String = row.try_get("state")?;
    if state == "done" {
        return Ok(Claim::Done {
            status: row
                .try_get::<Option<i64>, _>("response_status")?
                .unwrap_or(200),
            body: row
                .try_get::<Option<String>, _>("response_body")?
                .unwrap_or_default(),
        });
    }
    let claimed_until: i64 = row.try_get("claimed_until")?;
    if claimed_until >= now {
        return Ok(Claim::InProgress);
    }
    // The previous owner died mid-request; take the claim over if nobody else did.
    let taken = sqlx::query(
        "UPDATE idempotency_keys SET claimed_until = $1 WHERE project_id = $2 AND endpoint = $3 \
         AND idem_key = $4 AND state = 'executing' AND claimed_until = $5",
    )
    .bind(claim_until)
    .bind(k.project_id)
    .bind(k.endpoint)
    .bind(k.key)
    .bind(claimed_until)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    Ok(if taken == 1 {
        Claim::Acquired
    } else {
        Claim::InProgress
    })
}

/// Stores the response; call in the transaction that made the change.
pub async fn complete(
    conn: &mut Conn,
    k: &Key<'_>,
    status: i64,
    body: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE idempotency_keys SET state = 'done', response_status = $1, response_body = $2 \
         WHERE project_id = $3 AND endpoint = $4 AND idem_key = $5",
    )
    .bind(status)
    .bind(body)
    .bind(k.project_id)
    .bind(k.endpoint)
    .bind(k.key)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Gives the key back after a request that changed nothing (a validation error), so the
/// client can correct the cause and retry with the same key.
pub async fn release(conn: &mut Conn, k: &Key<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "DELETE FROM idempotency_keys WHERE project_id = $1 AND endpoint = $2 AND idem_key = $3 AND state = 'executing'",
    )
    .bind(k.project_id)
    .bind(k.endpoint)
    .bind(k.key)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Deletes up to `batch` expired keys.
pub async fn purge_expired(conn: &mut Conn, now: i64, batch: i64) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM idempotency_keys WHERE (project_id, endpoint, idem_key) IN \
         (SELECT project_id, endpoint, idem_key FROM idempotency_keys WHERE expires_at < $1 LIMIT $2)",
    )
    .bind(now)
    .bind(batch)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected())
}
