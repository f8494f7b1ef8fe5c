//! Chain transfers credited to projects. The row's primary key (network, transaction
//! id, address) is what makes a credit happen once: the row is inserted first, in the
//! transaction that posts the ledger transfer, and a second insert of the same transfer
//! (another page, a restart, another process) finds it and credits nothing.

use crate::{Conn, StoreError};
use issuing_wire::Amount;
use sqlx::Row;

/// A chain transfer about to be credited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainDeposit {
    pub network: String,
    pub transaction_id: String,
    /// The project's deposit address it was sent to.
    pub address: String,
    pub project_id: String,
    pub from_address: String,
    /// The token contract.
    pub token: String,
    pub amount: Amount,
    /// Milliseconds since the epoch.
    pub block_timestamp: i64,
    /// `watcher` or `simulated`.
    pub source: String,
}

/// Records the transfer unless it is recorded already; returns whether this call did.
/// On PostgreSQL a concurrent insert of the same transfer waits for the first to commit
/// (then finds it) or roll back (then inserts it).
pub async fn record(conn: &mut Conn, d: &ChainDeposit, now: i64) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO chain_deposits (network, transaction_id, address, project_id, from_address, \
         token, amount, block_timestamp, source, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
         ON CONFLICT (network, transaction_id, address) DO NOTHING",
    )
    .bind(&d.network)
    .bind(&d.transaction_id)
    .bind(&d.address)
    .bind(&d.project_id)
    .bind(&d.from_address)
    .bind(&d.token)
    .bind(d.amount.micros())
    .bind(d.block_timestamp)
    .bind(&d.source)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Points the recorded transfer at the ledger transfer that credited it.
pub async fn link_transfer(
    conn: &mut Conn,
    d: &ChainDeposit,
    transfer_id: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE chain_deposits SET transfer_id = $1 \
         WHERE network = $2 AND transaction_id = $3 AND address = $4 AND project_id = $5",
    )
    .bind(transfer_id)
    .bind(&d.network)
    .bind(&d.transaction_id)
    .bind(&d.address)
    .bind(&d.project_id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// What was recorded for a transfer, and the ledger transfer that credited it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub amount: Amount,
    pub from_address: String,
    pub transfer_id: Option<String>,
}

pub async fn get(
    conn: &mut Conn,
    project_id: &str,
    network: &str,
    transaction_id: &str,
    address: &str,
) -> Result<Option<Recorded>, StoreError> {
    let row = sqlx::query(
        "SELECT amount, from_address, transfer_id FROM chain_deposits \
         WHERE project_id = $1 AND network = $2 AND transaction_id = $3 AND address = $4",
    )
    .bind(project_id)
    .bind(network)
    .bind(transaction_id)
    .bind(address)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(r) = row else {
        return Ok(None);
    };
    Ok(Some(Recorded {
        amount: Amount::from_micros(r.try_get("amount")?),
        from_address: r.try_get("from_address")?,
        transfer_id: r.try_get("transfer_id")?,
    }))
}

/// The project's deposit transfer with this reference, if one was posted (by the watcher
/// or by an operator's `admin deposit --reference`).
pub async fn deposit_with_reference(
    conn: &mut Conn,
    project_id: &str,
    reference: &str,
) -> Result<Option<String>, StoreError> {
    let row = sqlx::query(
        "SELECT id FROM transfers WHERE project_id = $1 AND kind = 'deposit' AND reference = $2",
    )
    .bind(project_id)
    .bind(reference)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.map(|r| r.try_get("id")).transpose()?)
}

/// How many chain deposits the project has had credited.
pub async fn count_of_project(conn: &mut Conn, project_id: &str) -> Result<i64, StoreError> {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM chain_deposits WHERE project_id = $1")
        .bind(project_id)
        .fetch_one(&mut *conn)
        .await?;
    Ok(row.try_get("n")?)
}
