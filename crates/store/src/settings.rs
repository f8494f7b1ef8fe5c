//! Small server-wide facts kept in the database (for example whether the demo project
//! was already created), so every process sharing the database agrees on them.

use crate::{Conn, StoreError};
use sqlx::Row;

pub async fn get(conn: &mut Conn, key: &str) -> Result<Option<String>, StoreError> {
    let row = sqlx::query("SELECT value FROM settings WHERE key = $1")
        .bind(key)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.map(|r| r.try_get("value")).transpose()?)
}

/// Inserts the value unless the key exists; returns whether this call inserted it.
pub async fn insert_if_absent(conn: &mut Conn, key: &str, value: &str) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
    )
    .bind(key)
    .bind(value)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}
