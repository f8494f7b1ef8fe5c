//! Replay protection's durable parts. On PostgreSQL a request's (API key, path,
//! request_timestamp) is remembered in `replay_guard` while the timestamp is inside the
//! acceptance window, so a copy is refused by every process sharing the database; the
//! server inserts many requests' rows in one statement (`remember_many`). On SQLite the
//! guard lives in the one server process's memory and only its *ceiling* is durable:
//! every accepted timestamp is below it, so after a restart everything below it is
//! refused (see issuing-api's replay module).

use crate::{Conn, StoreError};
use sqlx::Row;
use std::collections::HashSet;

/// Rows per `remember_many` statement: 4 parameters each, far below every backend's limit.
pub const MAX_BATCH: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub api_key: String,
    pub path: String,
    pub request_timestamp: i64,
    pub expires_at: i64,
}

/// Records up to `MAX_BATCH` requests in one statement; returns, per entry, whether it was
/// new. Entries must be distinct (the caller answers in-batch copies itself).
pub async fn remember_many(conn: &mut Conn, entries: &[Entry]) -> Result<Vec<bool>, StoreError> {
    assert!(entries.len() <= MAX_BATCH, "replay batch over its bound");
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let mut sql = String::from(
        "INSERT INTO replay_guard (api_key, path, request_timestamp, expires_at) VALUES ",
    );
    for i in 0..entries.len() {
        let p = i * 4;
        if i > 0 {
            sql.push(',');
        }
        sql.push_str(&format!("(${}, ${}, ${}, ${})", p + 1, p + 2, p + 3, p + 4));
    }
    sql.push_str(" ON CONFLICT DO NOTHING RETURNING api_key, path, request_timestamp");
    let mut query = sqlx::query(&sql);
    for e in entries {
        query = query
            .bind(&e.api_key)
            .bind(&e.path)
            .bind(e.request_timestamp)
            .bind(e.expires_at);
    }
    let rows = query.fetch_all(&mut *conn).await?;
    let mut fresh = HashSet::with_capacity(rows.len());
    for r in rows {
        let key: String = r.try_get("api_key")?;
        let path: String = r.try_get("path")?;
        let ts: i64 = r.try_get("request_timestamp")?;
        fresh.insert((key, path, ts));
    }
    Ok(entries
        .iter()
        .map(|e| fresh.contains(&(e.api_key.clone(), e.path.clone(), e.request_timestamp)))
        .collect())
}

/// A connection of the replay guard's own (PostgreSQL) whose commits do not wait for
/// the log flush (`synchronous_commit = off`): a guard row is seen by every process at
/// once, and a request accepted by it is answered only after a `barrier` sent once the
/// row's insert returned (the server's replay guard, `durable.rs`).
pub async fn connect_unflushed(store: &crate::Store) -> Result<Conn, StoreError> {
    use sqlx::Executor;
    let mut conn = store.connect_own().await?;
    conn.execute("SET synchronous_commit = off").await?;
    Ok(conn)
}

/// A connection for `barrier`, whose commits wait for the flush whatever the
/// database's default.
pub async fn connect_barrier(store: &crate::Store) -> Result<Conn, StoreError> {
    use sqlx::Executor;
    let mut conn = store.connect_own().await?;
    conn.execute("SET synchronous_commit = on").await?;
    Ok(conn)
}

/// A commit that writes to the log and returns once the log is flushed past it, so
/// every commit that returned before it was sent is durable when it returns (the log
/// is flushed in order). A transactional logical message: it takes a transaction id
/// and writes a record (a commit with neither is not flushed), needs no table and no
/// privilege, and leaves nothing behind.
pub async fn barrier(conn: &mut Conn) -> Result<(), StoreError> {
    use sqlx::Executor;
    conn.execute("SELECT CAST(pg_logical_emit_message(true, 'issuing_barrier', '') AS TEXT)")
        .await?;
    Ok(())
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

const CEILING_KEY: &str = "replay_ceiling_micros";

/// The durable ceiling of accepted request timestamps, if one was ever written.
pub async fn ceiling(conn: &mut Conn) -> Result<Option<i64>, StoreError> {
    let value = crate::settings::get(conn, CEILING_KEY).await?;
    Ok(value.and_then(|v| v.parse().ok()))
}

/// Raises the durable ceiling to `micros` (never lowers it). Committed before it returns.
pub async fn raise_ceiling(conn: &mut Conn, micros: i64) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO settings (key, value) VALUES ($1, $2) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value \
         WHERE CAST(settings.value AS BIGINT) < CAST(excluded.value AS BIGINT)",
    )
    .bind(CEILING_KEY)
    .bind(micros.to_string())
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Whether the table holds requests still inside their window (on SQLite: left by a
/// version that kept the guard in this table).
pub async fn any_unexpired(conn: &mut Conn, now: i64) -> Result<bool, StoreError> {
    let row = sqlx::query(
        "SELECT COUNT(*) AS n FROM (SELECT 1 FROM replay_guard WHERE expires_at >= $1 LIMIT 1) t",
    )
    .bind(now)
    .fetch_one(&mut *conn)
    .await?;
    Ok(row.try_get::<i64, _>("n")? > 0)
}

const HANDOVER_SEED_KEY: &str = "replay_handover_seed";
const HANDOVER_CEILING_KEY: &str = "replay_handover_ceiling";
/// Rows per insert statement of the handover: 3 parameters each.
const HANDOVER_CHUNK: usize = 300;

/// What a SQLite server stopped gracefully left for its successor: the requests it
/// accepted that are still inside the window, as (hash of API key and path under
/// `seed`, request_timestamp, expires_at), and its ceiling at that moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handover {
    pub seed: String,
    /// The durable ceiling when the handover was written.
    pub ceiling: i64,
    pub entries: Vec<(i64, i64, i64)>,
}

/// Writes the handover (SQLite only), replacing any earlier one, in the caller's
/// transaction. The ceiling recorded is the durable one, read in the same transaction.
pub async fn write_handover(
    conn: &mut Conn,
    seed: &str,
    entries: &[(i64, i64, i64)],
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM replay_handover")
        .execute(&mut *conn)
        .await?;
    for chunk in entries.chunks(HANDOVER_CHUNK) {
        let mut sql = String::from(
            "INSERT INTO replay_handover (key_hash, request_timestamp, expires_at) VALUES ",
        );
        for i in 0..chunk.len() {
            let p = i * 3;
            if i > 0 {
                sql.push(',');
            }
            sql.push_str(&format!("(${}, ${}, ${})", p + 1, p + 2, p + 3));
        }
        let mut q = sqlx::query(&sql);
        for (hash, ts, exp) in chunk {
            q = q.bind(*hash).bind(*ts).bind(*exp);
        }
        q.execute(&mut *conn).await?;
    }
    let ceiling = ceiling(conn).await?.unwrap_or(0);
    for (key, value) in [
        (HANDOVER_SEED_KEY, seed.to_owned()),
        (HANDOVER_CEILING_KEY, ceiling.to_string()),
    ] {
        sqlx::query(
            "INSERT INTO settings (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )
        .bind(key)
        .bind(value)
        .execute(&mut *conn)
        .await?;
    }
    Ok(())
}

/// Takes the handover a predecessor left, if any: reads the entries still inside their
/// window at `now` and deletes it all, in the caller's transaction, so it is used once.
pub async fn take_handover(conn: &mut Conn, now: i64) -> Result<Option<Handover>, StoreError> {
    let seed = crate::settings::get(conn, HANDOVER_SEED_KEY).await?;
    let ceiling = crate::settings::get(conn, HANDOVER_CEILING_KEY).await?;
    let handover = match (seed, ceiling.and_then(|c| c.parse::<i64>().ok())) {
        (Some(seed), Some(ceiling)) => {
            let rows = sqlx::query(
                "SELECT key_hash, request_timestamp, expires_at FROM replay_handover \
                 WHERE expires_at >= $1",
            )
            .bind(now)
            .fetch_all(&mut *conn)
            .await?;
            let entries = rows
                .iter()
                .map(|r| {
                    Ok((
                        r.try_get("key_hash")?,
                        r.try_get("request_timestamp")?,
                        r.try_get("expires_at")?,
                    ))
                })
                .collect::<Result<_, sqlx::Error>>()?;
            Some(Handover {
                seed,
                ceiling,
                entries,
            })
        }
        _ => None,
    };
    sqlx::query("DELETE FROM replay_handover")
        .execute(&mut *conn)
        .await?;
    sqlx::query("DELETE FROM settings WHERE key IN ($1, $2)")
        .bind(HANDOVER_SEED_KEY)
        .bind(HANDOVER_CEILING_KEY)
        .execute(&mut *conn)
        .await?;
    Ok(handover)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// On PostgreSQL: a row committed on an unflushed connection is seen at once by
    /// others, and the log is flushed past it once a barrier sent afterwards returned.
    pub(crate) async fn a_barrier_flushes_what_committed_before_it(store: &crate::Store) {
        let mut unflushed = connect_unflushed(store).await.unwrap();
        let setting: String = sqlx::query_scalar("SHOW synchronous_commit")
            .fetch_one(&mut unflushed)
            .await
            .unwrap();
        assert_eq!(setting, "off");
        let entry = Entry {
            api_key: "barrier-key".into(),
            path: "/api/v2/cards/topup".into(),
            request_timestamp: 1,
            expires_at: 2,
        };
        assert_eq!(
            remember_many(&mut unflushed, std::slice::from_ref(&entry))
                .await
                .unwrap(),
            [true]
        );
        let written: String = sqlx::query_scalar("SELECT pg_current_wal_insert_lsn()::text")
            .fetch_one(&mut unflushed)
            .await
            .unwrap();
        let mut other = store.conn().await.unwrap();
        assert_eq!(
            remember_many(&mut other, std::slice::from_ref(&entry))
                .await
                .unwrap(),
            [false],
            "a copy is refused before the row is flushed"
        );
        let mut barrier_conn = connect_barrier(store).await.unwrap();
        barrier(&mut barrier_conn).await.unwrap();
        let flushed: bool =
            sqlx::query_scalar("SELECT pg_current_wal_flush_lsn() >= CAST($1 AS pg_lsn)")
                .bind(&written)
                .fetch_one(&mut *other)
                .await
                .unwrap();
        assert!(flushed, "the log is flushed past the row");
        sqlx::query("DELETE FROM replay_guard WHERE api_key = 'barrier-key'")
            .execute(&mut *other)
            .await
            .unwrap();
    }
}
