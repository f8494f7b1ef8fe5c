//! SQLite backups (`issuing admin backup` / `restore`): an online copy with `VACUUM INTO`
//! and the checks a backup file must pass before it replaces a database.

use crate::{Conn, Store, StoreError};
use sqlx::{Connection, Row};

/// Copies a consistent snapshot of the SQLite database into `path` (which must not
/// exist, or be empty). One read transaction: writers go on meanwhile (WAL).
pub async fn vacuum_into(store: &Store, path: &str) -> Result<(), StoreError> {
    if store.sqlite_path().is_none() {
        return Err(StoreError::Config("VACUUM INTO is for SQLite".into()));
    }
    let mut conn = store.conn().await?;
    sqlx::query("VACUUM INTO $1")
        .bind(path)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// A read-only connection to the SQLite file at `path`.
pub async fn open_read_only(path: &str) -> Result<Conn, StoreError> {
    sqlx::any::install_default_drivers();
    Ok(Conn::connect(&format!("sqlite://{path}?mode=ro")).await?)
}

/// Why a file cannot serve as a backup; None when it can.
pub async fn problem(conn: &mut Conn) -> Result<Option<String>, StoreError> {
    let verdict: String = sqlx::query("PRAGMA quick_check")
        .fetch_one(&mut *conn)
        .await?
        .try_get(0)?;
    if verdict != "ok" {
        return Ok(Some(format!("damaged: {verdict}")));
    }
    let n: i64 = sqlx::query(
        "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'",
    )
    .fetch_one(&mut *conn)
    .await?
    .try_get("n")?;
    Ok((n == 0).then(|| "not a database of this service".to_owned()))
}
