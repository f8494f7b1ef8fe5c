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
    // One statement: the row this call inserted, or else the one holding the key.
    let sql = match conn.backend() {
        crate::Backend::Postgres => {
            "WITH new AS (INSERT INTO sandbox_provider_ops (idempotency_key, operation, \
             provider_card_id, amount, created_at) VALUES ($1, $2, $3, $4, $5) \
             ON CONFLICT DO NOTHING RETURNING provider_card_id, amount) \
             SELECT provider_card_id, amount, 1 AS inserted FROM new UNION ALL \
             SELECT provider_card_id, amount, 0 AS inserted FROM sandbox_provider_ops \
             WHERE idempotency_key = $1 AND NOT EXISTS (SELECT 1 FROM new)"
        }
        // Two cached statements on the writer's thread cost microseconds.
        crate::Backend::Sqlite => {
            let inserted = conn
                .execute(
                    "INSERT INTO sandbox_provider_ops (idempotency_key, operation, provider_card_id, \
                     amount, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
                    &[
                        idempotency_key.into(),
                        operation.into(),
                        provider_card_id.into(),
                        amount.into(),
                        now.into(),
                    ],
                )
                .await?;
            let row = conn
                .row(
                    "SELECT provider_card_id, amount FROM sandbox_provider_ops WHERE idempotency_key = $1",
                    &[idempotency_key.into()],
                )
                .await?
                .ok_or(StoreError::NotFound("sandbox operation"))?;
            return Ok((
                row.text("provider_card_id")?,
                row.opt_int("amount")?,
                inserted == 1,
            ));
        }
    };
    let row = conn
        .row(
            sql,
            &[
                idempotency_key.into(),
                operation.into(),
                provider_card_id.into(),
                amount.into(),
                now.into(),
            ],
        )
        .await?
        .ok_or(StoreError::NotFound("sandbox operation"))?;
    Ok((
        row.text("provider_card_id")?,
        row.opt_int("amount")?,
        row.int("inserted")? == 1,
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
