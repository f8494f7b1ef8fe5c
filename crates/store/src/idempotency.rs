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

/// A key as stored, for a writer that decides many requests' keys in its own
/// transaction (`lookup_many`, `store_many`) instead of claiming each in one of its own.
#[derive(Debug, Clone)]
pub struct Stored {
    pub request_hash: String,
    pub state: String,
    pub response_status: Option<i64>,
    pub response_body: Option<String>,
    pub claimed_until: i64,
    pub expires_at: i64,
}

impl Stored {
    /// What a request with `request_hash` finds under this key at `now`: `None` when the
    /// key is free (never used, expired, or claimed by a request that died).
    pub fn claim(&self, request_hash: &str, now: i64) -> Option<Claim> {
        if self.expires_at < now {
            return None;
        }
        if self.request_hash != request_hash {
            return Some(Claim::ParametersDiffer);
        }
        if self.state == "done" {
            return Some(Claim::Done {
                status: self.response_status.unwrap_or(200),
                body: self.response_body.clone().unwrap_or_default(),
            });
        }
        (self.claimed_until >= now).then_some(Claim::InProgress)
    }
}

/// The stored keys among `keys` of one project and endpoint.
pub async fn lookup_many(
    conn: &mut crate::writer::BatchConn<'_>,
    project_id: &str,
    endpoint: &str,
    keys: &[&str],
) -> Result<std::collections::HashMap<String, Stored>, StoreError> {
    let mut found = conn
        .together(&[crate::writer::Part::Keys(lookup(
            project_id,
            endpoint,
            keys.to_vec(),
        ))])
        .await?;
    stored_of(found.pop().unwrap_or_default())
}

/// `lookup_many` as a lookup to run with others (`BatchConn::together`); its
/// rows go to `stored_of`.
pub fn lookup<'a>(
    project_id: &'a str,
    endpoint: &'a str,
    keys: Vec<&'a str>,
) -> crate::writer::Lookup<'a> {
    crate::writer::Lookup {
        table: "idempotency_keys",
        columns: "idem_key, request_hash, state, response_status, response_body, claimed_until, expires_at",
        key: "idem_key",
        scope: "project_id = $1 AND endpoint = $2",
        scope_params: vec![project_id.into(), endpoint.into()],
        keys,
    }
}

/// The stored keys `lookup`'s rows hold, by key.
pub fn stored_of(
    rows: Vec<crate::writer::Row>,
) -> Result<std::collections::HashMap<String, Stored>, StoreError> {
    use crate::writer::RowRead;
    let mut stored = std::collections::HashMap::with_capacity(rows.len());
    for row in rows {
        stored.insert(
            row.text("idem_key")?,
            Stored {
                request_hash: row.text("request_hash")?,
                state: row.text("state")?,
                response_status: row.opt_int("response_status")?,
                response_body: row.opt_text("response_body")?,
                claimed_until: row.int("claimed_until")?,
                expires_at: row.int("expires_at")?,
            },
        );
    }
    Ok(stored)
}

/// A finished request's key and answer, for `store_many`.
pub struct Finished<'a> {
    pub key: Key<'a>,
    pub status: i64,
    pub body: String,
    pub now: i64,
    pub expires_at: i64,
}

/// Stores finished requests' keys with their answers, replacing what `lookup_many`
/// found free (an expired key, a dead request's claim). Call in the transaction that
/// made their changes, after deciding on what `lookup_many` answered in it.
/// `replacing`: whether `lookup_many` found any of them stored (else nothing is deleted
/// first). A key taken meanwhile by a request outside the writer is not replaced: the
/// insert then fails with `Conflict`, and so does the batch. The keys are added to
/// `inserts`.
pub async fn store_many(
    conn: &mut crate::writer::BatchConn<'_>,
    finished: &[Finished<'_>],
    replacing: bool,
    inserts: &mut crate::query::Inserts,
) -> Result<(), StoreError> {
    use crate::query::Cell;
    if finished.is_empty() {
        return Ok(());
    }
    if replacing {
        delete_free(conn, finished).await?;
    }
    let rows: Vec<Vec<Cell>> = finished
        .iter()
        .map(|f| {
            vec![
                Cell::text(f.key.project_id),
                Cell::text(f.key.endpoint),
                Cell::text(f.key.key),
                Cell::text(f.key.request_hash),
                Cell::text("done"),
                Cell::int(f.status),
                Cell::text(&f.body),
                Cell::int(f.now),
                Cell::int(f.now),
                Cell::int(f.expires_at),
            ]
        })
        .collect();
    inserts.add(
        "INSERT INTO idempotency_keys (project_id, endpoint, idem_key, request_hash, state, \
         response_status, response_body, claimed_until, created_at, expires_at)",
        rows,
    );
    Ok(())
}

/// Deletes the expired keys and dead claims among `finished`'s keys.
async fn delete_free(
    conn: &mut crate::writer::BatchConn<'_>,
    finished: &[Finished<'_>],
) -> Result<(), StoreError> {
    use crate::writer::Param;
    let now = finished.iter().map(|f| f.now).min().unwrap_or(0);
    let mut params: Vec<Param<'_>> = vec![now.into()];
    let mut ors = Vec::with_capacity(finished.len());
    for f in finished {
        let at = params.len();
        params.extend([
            Param::from(f.key.project_id),
            f.key.endpoint.into(),
            f.key.key.into(),
        ]);
        ors.push(format!(
            "(project_id = ${} AND endpoint = ${} AND idem_key = ${})",
            at + 1,
            at + 2,
            at + 3
        ));
    }
    let sql = format!(
        "DELETE FROM idempotency_keys WHERE ({}) \
         AND (expires_at < $1 OR (state = 'executing' AND claimed_until < $1))",
        ors.join(" OR ")
    );
    conn.execute(&sql, &params).await?;
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
