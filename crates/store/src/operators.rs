//! The console's operators, their sessions and the login lockout (CONTRACT §12).
//! Passwords arrive here already hashed (Argon2id, in the server crate); sessions are
//! kept by the SHA-256 of their cookie value, so a copy of the database opens none.

use crate::{Conn, StoreError};
use sqlx::any::AnyRow;
use sqlx::Row;

pub const ROLES: &[&str] = &["admin", "operator", "viewer"];
pub const ACTIVE: &str = "active";
pub const DISABLED: &str = "disabled";

#[derive(Clone, PartialEq, Eq)]
pub struct OperatorRecord {
    pub id: String,
    pub email: String,
    /// `admin`, `operator` or `viewer`.
    pub role: String,
    /// Projects a viewer may read; empty: every project.
    pub projects: Vec<String>,
    pub password_hash: String,
    /// `active` or `disabled`.
    pub status: String,
    pub created_at: i64,
    pub updated_at: i64,
    pub disabled_at: Option<i64>,
}

impl std::fmt::Debug for OperatorRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorRecord")
            .field("email", &self.email)
            .field("role", &self.role)
            .field("projects", &self.projects)
            .field("status", &self.status)
            .finish_non_exhaustive()
    }
}

fn operator_from_row(r: &AnyRow) -> Result<OperatorRecord, StoreError> {
    let projects: String = r.try_get("projects")?;
    Ok(OperatorRecord {
        id: r.try_get("id")?,
        email: r.try_get("email")?,
        role: r.try_get("role")?,
        projects: serde_json::from_str(&projects)
            .map_err(|e| StoreError::Corrupt(format!("operator projects: {e}")))?,
        password_hash: r.try_get("password_hash")?,
        status: r.try_get("status")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
        disabled_at: r.try_get("disabled_at")?,
    })
}

/// `Conflict` when the email is taken.
pub async fn insert(conn: &mut Conn, o: &OperatorRecord) -> Result<(), StoreError> {
    let projects = serde_json::to_string(&o.projects)
        .map_err(|e| StoreError::Corrupt(format!("operator projects: {e}")))?;
    sqlx::query(
        "INSERT INTO console_operators (id, email, role, projects, password_hash, status, \
         created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
    )
    .bind(&o.id)
    .bind(&o.email)
    .bind(&o.role)
    .bind(projects)
    .bind(&o.password_hash)
    .bind(&o.status)
    .bind(o.created_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

pub async fn get_by_email(
    conn: &mut Conn,
    email: &str,
) -> Result<Option<OperatorRecord>, StoreError> {
    let row = sqlx::query("SELECT * FROM console_operators WHERE email = $1")
        .bind(email)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(operator_from_row).transpose()
}

/// Every operator, by email (bounded).
pub async fn list(conn: &mut Conn, limit: i64) -> Result<Vec<OperatorRecord>, StoreError> {
    let rows = sqlx::query("SELECT * FROM console_operators ORDER BY email LIMIT $1")
        .bind(limit)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(operator_from_row).collect()
}

/// Disables an operator and ends its sessions. False when there is no such operator.
pub async fn disable(conn: &mut Conn, email: &str, now: i64) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE console_operators SET status = $1, disabled_at = COALESCE(disabled_at, $2), \
         updated_at = $2 WHERE email = $3",
    )
    .bind(DISABLED)
    .bind(now)
    .bind(email)
    .execute(&mut *conn)
    .await?;
    end_sessions_of(conn, email).await?;
    Ok(done.rows_affected() == 1)
}

/// Replaces an operator's password hash and ends its sessions. False when there is no
/// such operator.
pub async fn set_password(
    conn: &mut Conn,
    email: &str,
    password_hash: &str,
    now: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE console_operators SET password_hash = $1, updated_at = $2 WHERE email = $3",
    )
    .bind(password_hash)
    .bind(now)
    .bind(email)
    .execute(&mut *conn)
    .await?;
    end_sessions_of(conn, email).await?;
    Ok(done.rows_affected() == 1)
}

async fn end_sessions_of(conn: &mut Conn, email: &str) -> Result<(), StoreError> {
    sqlx::query(
        "DELETE FROM console_sessions WHERE operator_id IN \
         (SELECT id FROM console_operators WHERE email = $1)",
    )
    .bind(email)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// A live session and its operator (active, not expired).
#[derive(Debug, Clone)]
pub struct Session {
    pub token_hash: String,
    pub operator: OperatorRecord,
    pub csrf_token: String,
    pub flash: Option<String>,
    pub expires_at: i64,
    /// When its operator's last request was noted (`touch_session`).
    pub last_seen_at: i64,
}

pub struct NewSession<'a> {
    pub token_hash: &'a str,
    pub operator_id: &'a str,
    pub csrf_token: &'a str,
    pub created_at: i64,
    pub expires_at: i64,
}

pub async fn create_session(conn: &mut Conn, s: &NewSession<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO console_sessions (token_hash, operator_id, csrf_token, created_at, expires_at, \
         last_seen_at) VALUES ($1, $2, $3, $4, $5, $4)",
    )
    .bind(s.token_hash)
    .bind(s.operator_id)
    .bind(s.csrf_token)
    .bind(s.created_at)
    .bind(s.expires_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// The session with this token hash if it is live at `now` (not expired, and used
/// after `idle_since`) and its operator is active: a disabled operator's sessions end
/// at their next request.
pub async fn session(
    conn: &mut Conn,
    token_hash: &str,
    now: i64,
    idle_since: i64,
) -> Result<Option<Session>, StoreError> {
    let row = sqlx::query(
        "SELECT o.*, s.token_hash, s.csrf_token, s.flash, s.expires_at AS session_expires_at, \
         s.last_seen_at FROM console_sessions s JOIN console_operators o ON o.id = s.operator_id \
         WHERE s.token_hash = $1 AND s.expires_at > $2 AND o.status = $3 AND s.last_seen_at > $4",
    )
    .bind(token_hash)
    .bind(now)
    .bind(ACTIVE)
    .bind(idle_since)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(r) = row else {
        return Ok(None);
    };
    Ok(Some(Session {
        token_hash: r.try_get("token_hash")?,
        operator: operator_from_row(&r)?,
        csrf_token: r.try_get("csrf_token")?,
        flash: r.try_get("flash")?,
        expires_at: r.try_get("session_expires_at")?,
        last_seen_at: r.try_get("last_seen_at")?,
    }))
}

/// Notes that the session's operator made a request at `now` (the idle timeout counts
/// from it).
pub async fn touch_session(conn: &mut Conn, token_hash: &str, now: i64) -> Result<(), StoreError> {
    sqlx::query("UPDATE console_sessions SET last_seen_at = $1 WHERE token_hash = $2")
        .bind(now)
        .bind(token_hash)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Ends every session of an operator (a lockout while signed in).
pub async fn end_sessions(conn: &mut Conn, email: &str) -> Result<(), StoreError> {
    end_sessions_of(conn, email).await
}

pub async fn delete_session(conn: &mut Conn, token_hash: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM console_sessions WHERE token_hash = $1")
        .bind(token_hash)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Sets (or, with None, clears) the message the session's next page shows once.
pub async fn set_flash(
    conn: &mut Conn,
    token_hash: &str,
    flash: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE console_sessions SET flash = $1 WHERE token_hash = $2")
        .bind(flash)
        .bind(token_hash)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Deletes up to `batch` sessions that expired or were idle since `idle_before`, and
/// login-failure rows (per email and per address) whose window and lock are both over;
/// returns how many rows went.
pub async fn purge_expired(
    conn: &mut Conn,
    now: i64,
    idle_before: i64,
    window_start_before: i64,
    batch: i64,
) -> Result<u64, StoreError> {
    let sessions = sqlx::query(
        "DELETE FROM console_sessions WHERE token_hash IN \
         (SELECT token_hash FROM console_sessions WHERE expires_at <= $1 OR last_seen_at <= $2 \
          LIMIT $3)",
    )
    .bind(now)
    .bind(idle_before)
    .bind(batch)
    .execute(&mut *conn)
    .await?
    .rows_affected();
    let mut failures = 0;
    for by in [FailuresOf::Email, FailuresOf::Address] {
        let (table, key) = by.table();
        failures += sqlx::query(&format!(
            "DELETE FROM {table} WHERE {key} IN \
             (SELECT {key} FROM {table} WHERE window_start <= $1 \
              AND (locked_until IS NULL OR locked_until <= $2) LIMIT $3)"
        ))
        .bind(window_start_before)
        .bind(now)
        .bind(batch)
        .execute(&mut *conn)
        .await?
        .rows_affected();
    }
    Ok(sessions + failures)
}

/// What failed logins are counted by: the email tried (its lockout), or the address
/// that tried (so one address cannot lock operators out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailuresOf {
    Email,
    Address,
}

impl FailuresOf {
    /// The table and its key column (fixed names, never input).
    fn table(self) -> (&'static str, &'static str) {
        match self {
            FailuresOf::Email => ("console_login_failures", "email"),
            FailuresOf::Address => ("console_address_failures", "address"),
        }
    }
}

/// Until when logins for this email are refused, if they are at `now`.
pub async fn locked_until(
    conn: &mut Conn,
    email: &str,
    now: i64,
) -> Result<Option<i64>, StoreError> {
    blocked_until(conn, FailuresOf::Email, email, now).await
}

/// Until when logins by `key` (an email or an address) are refused, if they are at `now`.
pub async fn blocked_until(
    conn: &mut Conn,
    by: FailuresOf,
    key: &str,
    now: i64,
) -> Result<Option<i64>, StoreError> {
    let (table, column) = by.table();
    let row = sqlx::query(&format!(
        "SELECT locked_until FROM {table} WHERE {column} = $1 AND locked_until > $2"
    ))
    .bind(key)
    .bind(now)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row
        .map(|r| r.try_get::<Option<i64>, _>("locked_until"))
        .transpose()?
        .flatten())
}

/// The lockout rule: `max_failures` failures within `window` micros lock the email for
/// `lock` micros, after which counting starts again.
#[derive(Debug, Clone, Copy)]
pub struct Lockout {
    pub max_failures: i64,
    pub window: i64,
    pub lock: i64,
}

/// Counts one failed login for `email`; answers the lock's end when this failure
/// locked the email. Call inside a write transaction.
pub async fn record_failure(
    conn: &mut Conn,
    email: &str,
    now: i64,
    rule: Lockout,
) -> Result<Option<i64>, StoreError> {
    count_failure(conn, FailuresOf::Email, email, now, rule).await
}

/// Counts one failed login by `key` (an email or an address); answers the lock's end
/// when this failure locked it. Call inside a write transaction.
pub async fn count_failure(
    conn: &mut Conn,
    by: FailuresOf,
    key: &str,
    now: i64,
    rule: Lockout,
) -> Result<Option<i64>, StoreError> {
    let (table, column) = by.table();
    // A failure outside the current window starts a new one.
    let row = sqlx::query(&format!(
        "INSERT INTO {table} ({column}, failures, window_start) VALUES ($1, 1, $2) \
         ON CONFLICT ({column}) DO UPDATE SET \
           failures = CASE WHEN {table}.window_start <= $3 THEN 1 \
                      ELSE {table}.failures + 1 END, \
           window_start = CASE WHEN {table}.window_start <= $3 THEN $2 \
                          ELSE {table}.window_start END \
         RETURNING failures"
    ))
    .bind(key)
    .bind(now)
    .bind(now - rule.window)
    .fetch_one(&mut *conn)
    .await?;
    let failures: i64 = row.try_get("failures")?;
    if failures < rule.max_failures {
        return Ok(None);
    }
    let until = now + rule.lock;
    sqlx::query(&format!(
        "UPDATE {table} SET locked_until = $1, failures = 0, window_start = $2 WHERE {column} = $3"
    ))
    .bind(until)
    .bind(now)
    .bind(key)
    .execute(&mut *conn)
    .await?;
    Ok(Some(until))
}

/// Forgets the failures of an email: after a successful login, or when an admin
/// unlocks it.
pub async fn clear_failures(conn: &mut Conn, email: &str) -> Result<(), StoreError> {
    clear(conn, FailuresOf::Email, email).await
}

/// Forgets the failures counted by `key` (an email or an address).
pub async fn clear(conn: &mut Conn, by: FailuresOf, key: &str) -> Result<(), StoreError> {
    let (table, column) = by.table();
    sqlx::query(&format!("DELETE FROM {table} WHERE {column} = $1"))
        .bind(key)
        .execute(&mut *conn)
        .await?;
    Ok(())
}
