//! Deposit addresses: the derivation index each project holds for good, and the address
//! derived from it. The index comes from a counter that only counts up (under its row
//! lock on PostgreSQL, the write lock on SQLite), so no two projects ever share one,
//! even when several processes create projects at once.

use crate::{Conn, StoreError};
use sqlx::Row;

const TRON_INDEX_COUNTER: &str = "tron_deposit_index";

/// A project's deposit index and address as stored (either may still be missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DepositSlot {
    pub project_id: String,
    pub deposit_index: Option<i64>,
    pub deposit_address: Option<String>,
}

fn slot(r: &sqlx::any::AnyRow) -> Result<DepositSlot, sqlx::Error> {
    Ok(DepositSlot {
        project_id: r.try_get("id")?,
        deposit_index: r.try_get("deposit_index")?,
        deposit_address: r.try_get("deposit_address")?,
    })
}

/// The project's slot; `lock` is a row-lock clause (`Store::for_update`) so that two
/// processes assigning an address to one project serialise.
pub async fn slot_of(
    conn: &mut Conn,
    project_id: &str,
    lock: &str,
) -> Result<Option<DepositSlot>, StoreError> {
    let sql =
        format!("SELECT id, deposit_index, deposit_address FROM projects WHERE id = $1{lock}");
    let row = sqlx::query(&sql)
        .bind(project_id)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.as_ref().map(slot).transpose()?)
}

/// Projects that have no deposit address yet, oldest first, at most `limit`.
pub async fn without_address(conn: &mut Conn, limit: i64) -> Result<Vec<String>, StoreError> {
    let rows = sqlx::query(
        "SELECT id FROM projects WHERE deposit_address IS NULL ORDER BY created_at, id LIMIT $1",
    )
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .iter()
        .map(|r| r.try_get("id"))
        .collect::<Result<_, _>>()?)
}

/// Takes the next derivation index. Inside the caller's transaction: if it rolls back,
/// the index was never handed out and the next caller gets it.
pub async fn allocate_index(conn: &mut Conn) -> Result<i64, StoreError> {
    let row = sqlx::query(
        "UPDATE chain_counters SET next_value = next_value + 1 WHERE name = $1 \
         RETURNING next_value",
    )
    .bind(TRON_INDEX_COUNTER)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(StoreError::NotFound("deposit index counter"))?;
    let next: i64 = row.try_get("next_value")?;
    Ok(next - 1)
}

/// Records the project's index; false when it already has one (never replaced).
pub async fn set_index(conn: &mut Conn, project_id: &str, index: i64) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE projects SET deposit_index = $1 WHERE id = $2 AND deposit_index IS NULL",
    )
    .bind(index)
    .bind(project_id)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(done.rows_affected() == 1)
}

/// Records the address derived from the project's index; false when the project has
/// another index or already an address.
pub async fn set_address(
    conn: &mut Conn,
    project_id: &str,
    index: i64,
    address: &str,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE projects SET deposit_address = $1 \
         WHERE id = $2 AND deposit_index = $3 AND deposit_address IS NULL",
    )
    .bind(address)
    .bind(project_id)
    .bind(index)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(done.rows_affected() == 1)
}

/// The address the project used before derived addresses (never watched), if any.
pub async fn legacy_address(
    conn: &mut Conn,
    project_id: &str,
) -> Result<Option<String>, StoreError> {
    let row = sqlx::query("SELECT legacy_deposit_address FROM projects WHERE id = $1")
        .bind(project_id)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row
        .map(|r| r.try_get::<Option<String>, _>("legacy_deposit_address"))
        .transpose()?
        .flatten())
}
