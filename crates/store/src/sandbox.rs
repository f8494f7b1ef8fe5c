//! The sandbox provider's own records (see the `sandbox_provider_ops` table).

use crate::writer::{BatchConn, RowRead};
use crate::{Conn, StoreError};
use sqlx::Row;

/// Records an operation under its idempotency key unless one exists; returns the
/// provider card id and amount of the operation that holds the key (the first one).
pub async fn record_op(
    conn: &mut BatchConn<'_>,
    idempotency_key: &str,
    operation: &str,
    provider_card_id: &str,
    amount: Option<i64>,
    now: i64,
) -> Result<(String, Option<i64>, bool), StoreError> {
    let inserted = conn
        .execute(
            "INSERT INTO sandbox_provider_ops (idempotency_key, operation, provider_card_id, amount, \
             created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            &[
                idempotency_key.into(),
                operation.into(),
                provider_card_id.into(),
                amount.into(),
                now.into(),
            ],
        )
        .await?
        == 1;
    let row = conn
        .row(
            "SELECT provider_card_id, amount FROM sandbox_provider_ops WHERE idempotency_key = $1",
            &[idempotency_key.into()],
        )
        .await?
        .ok_or(StoreError::NotFound("sandbox operation"))?;
    Ok((
        row.text("provider_card_id")?,
        row.opt_int("amount")?,
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
