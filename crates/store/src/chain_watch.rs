//! The chain watcher's per-address state: a cursor (the newest block timestamp whose
//! transfers are all credited), so a poll reads only what is new, and the time the
//! address may be polled next. Claiming an address moves that time forward, so other
//! processes pass over it meanwhile; a process that dies simply lets it come due again.

use crate::{Backend, Conn, StoreError};
use sqlx::Row;

/// A deposit address due for a poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    pub address: String,
    pub project_id: String,
    pub cursor_ms: Option<i64>,
}

/// Starts watching a project's address (at once); nothing when it is watched already.
pub async fn add(
    conn: &mut Conn,
    project_id: &str,
    address: &str,
    network: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO chain_watch (address, project_id, network, next_poll_at, created_at) \
         VALUES ($1, $2, $3, $4, $4) ON CONFLICT (address) DO NOTHING",
    )
    .bind(address)
    .bind(project_id)
    .bind(network)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Claims up to `limit` addresses due at `now`, most overdue first, and makes them due
/// again at `next_poll_at`. PostgreSQL's `SKIP LOCKED` lets several processes claim
/// different addresses at once; SQLite serialises claims under its write lock.
pub async fn claim_due(
    conn: &mut Conn,
    backend: Backend,
    network: &str,
    now: i64,
    next_poll_at: i64,
    limit: i64,
) -> Result<Vec<Watched>, StoreError> {
    let lock = match backend {
        Backend::Postgres => " FOR UPDATE SKIP LOCKED",
        Backend::Sqlite => "",
    };
    let sql = format!(
        "SELECT address, project_id, cursor_ms FROM chain_watch \
         WHERE network = $1 AND next_poll_at <= $2 ORDER BY next_poll_at, address LIMIT $3{lock}"
    );
    let rows = sqlx::query(&sql)
        .bind(network)
        .bind(now)
        .bind(limit)
        .fetch_all(&mut *conn)
        .await?;
    let mut claimed = Vec::with_capacity(rows.len());
    for r in &rows {
        let w = Watched {
            address: r.try_get("address")?,
            project_id: r.try_get("project_id")?,
            cursor_ms: r.try_get("cursor_ms")?,
        };
        sqlx::query(
            "UPDATE chain_watch SET next_poll_at = $1 WHERE address = $2 AND project_id = $3",
        )
        .bind(next_poll_at)
        .bind(&w.address)
        .bind(&w.project_id)
        .execute(&mut *conn)
        .await?;
        claimed.push(w);
    }
    Ok(claimed)
}

/// Moves the cursor forward to `cursor_ms` (never back: a slower process polling the
/// same address cannot undo a faster one's progress).
pub async fn advance(
    conn: &mut Conn,
    project_id: &str,
    address: &str,
    cursor_ms: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE chain_watch SET cursor_ms = $1 \
         WHERE address = $2 AND project_id = $3 AND (cursor_ms IS NULL OR cursor_ms < $1)",
    )
    .bind(cursor_ms)
    .bind(address)
    .bind(project_id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// Ends a poll: when to poll next, and the error that cut it short (`None`: it succeeded).
pub async fn finish(
    conn: &mut Conn,
    project_id: &str,
    address: &str,
    now: i64,
    next_poll_at: i64,
    error: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE chain_watch SET next_poll_at = $1, last_polled_at = $2, last_error = $3 \
         WHERE address = $4 AND project_id = $5",
    )
    .bind(next_poll_at)
    .bind(now)
    .bind(error)
    .bind(address)
    .bind(project_id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The project's watched address and its cursor, for operators and tests.
pub async fn of_project(
    conn: &mut Conn,
    project_id: &str,
) -> Result<Option<(Watched, Option<String>)>, StoreError> {
    let row = sqlx::query(
        "SELECT address, project_id, cursor_ms, last_error FROM chain_watch WHERE project_id = $1",
    )
    .bind(project_id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(r) = row else {
        return Ok(None);
    };
    Ok(Some((
        Watched {
            address: r.try_get("address")?,
            project_id: r.try_get("project_id")?,
            cursor_ms: r.try_get("cursor_ms")?,
        },
        r.try_get("last_error")?,
    )))
}

/// Makes a claimed address due at `next_poll_at` without polling it (the watcher backs
/// off before reaching it).
pub async fn postpone(
    conn: &mut Conn,
    project_id: &str,
    address: &str,
    next_poll_at: i64,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE chain_watch SET next_poll_at = $1 WHERE address = $2 AND project_id = $3")
        .bind(next_poll_at)
        .bind(address)
        .bind(project_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}
