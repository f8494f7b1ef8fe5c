//! The sandbox provider's own records (see the `sandbox_provider_ops` table).

use crate::{Conn, StoreError};
use sqlx::Row;

/// Records an operation under its idempotency key unless one exists; returns the
/// provider card id and amount of the operation that holds the key (the first one).
pub async fn record_op(
    conn: &mut Conn,
    idempotency_key: &str,
    operation: &str,
    provider_card_id: &str,
    amount: Option<i64>,
    now: i64,
) -> Result<(String, Option<i64>, bool), StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO sandbox_provider_ops (idempotency_key, operation, provider_card_id, amount, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
    )
    .bind(idempotency_key)
    .bind(operation)
    .bind(provider_card_id)
    .bind(amount)
    .bind(now)
    .execute(&mut *conn)
    .await?
    .rows_affected()
        == 1;
    let row = sqlx::query(
        "SELECT provider_card_id, amount FROM sandbox_provider_ops WHERE idempotency_key = $1",
    )
    .bind(idempotency_key)
    .fetch_one(&mut *conn)
    .await?;
    Ok((
        row.try_get("provider_card_id")?,
        row.try_get("amount")?,
        inserted,
    ))
}

/// How many operations of a kind the sandbox provider performed for a key prefix
/// (tests use it to prove a card was issued exactly once).
pub async fn count_ops(
    conn: &mut Conn,
    key_prefix: &str,
    operation: &str,
) -> Result<i64, StoreError> {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM sandbox_provider_ops WHERE idempotency_key LIKE $1 AND operation = $2")
        .bind(format!("{key_prefix}%"))
        .bind(operation)
        .fetch_one(&mut *conn)
        .await?;
    Ok(row.try_get("n")?)
}
