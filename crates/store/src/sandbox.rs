//! The sandbox provider's own records (see the `sandbox_provider_ops` table).

use crate::writer::{BatchConn, RowRead};
use crate::{Conn, StoreError};
use sqlx::Row;

/// An operation for the books, under its idempotency key.
#[derive(Debug, Clone, Copy)]
pub struct Op<'a> {
    pub key: &'a str,
    pub operation: &'a str,
    pub provider_card_id: &'a str,
    pub amount: Option<i64>,
    pub now: i64,
}

/// Records each operation under its idempotency key unless one holds it already (an
/// earlier one, or one before it in `ops`); answers, in order, the provider card id of
/// the operation that holds each key. PostgreSQL: one statement (a round trip per
/// operation made the books' batches a dozen round trips inside one transaction);
/// SQLite: two cached statements each, on the writer's thread.
pub async fn record_ops(
    conn: &mut BatchConn<'_>,
    ops: &[Op<'_>],
) -> Result<Vec<String>, StoreError> {
    if conn.backend() == crate::Backend::Sqlite {
        let mut cards = Vec::with_capacity(ops.len());
        for op in ops {
            cards.push(record_one(conn, op).await?);
        }
        return Ok(cards);
    }
    let input: Vec<serde_json::Value> = ops
        .iter()
        .enumerate()
        .map(|(i, op)| {
            serde_json::json!({
                "i": i, "k": op.key, "op": op.operation, "card": op.provider_card_id,
                "amount": op.amount, "at": op.now,
            })
        })
        .collect();
    let input = serde_json::Value::from(input).to_string();
    // A key held before this statement is found in the table; one inserted by it (by
    // its first operation, a later one of the same key does nothing) is found among
    // the inserted rows, which the statement's own reads of the table do not see. The
    // table is read by a subquery per key, an index lookup: as a join, the planner
    // chose to scan the whole table (the input's size is unknown to it).
    let rows = conn
        .rows(
            "WITH input AS (SELECT * FROM json_to_recordset(CAST($1 AS json)) \
               AS x(i BIGINT, k TEXT, op TEXT, card TEXT, amount BIGINT, at BIGINT)), \
             new AS (INSERT INTO sandbox_provider_ops (idempotency_key, operation, \
               provider_card_id, amount, created_at) \
               SELECT k, op, card, amount, at FROM input ORDER BY i \
               ON CONFLICT DO NOTHING RETURNING idempotency_key, provider_card_id) \
             SELECT input.i, COALESCE(new.provider_card_id, \
               (SELECT old.provider_card_id FROM sandbox_provider_ops old \
                WHERE old.idempotency_key = input.k)) AS provider_card_id \
             FROM input LEFT JOIN new ON new.idempotency_key = input.k ORDER BY input.i",
            &[input.as_str().into()],
        )
        .await?;
    if rows.len() != ops.len() {
        return Err(StoreError::Corrupt(format!(
            "the books answered {} of {} operations",
            rows.len(),
            ops.len()
        )));
    }
    rows.iter()
        .map(|r| {
            r.opt_text("provider_card_id")?
                .ok_or(StoreError::NotFound("sandbox operation"))
        })
        .collect()
}

/// SQLite: records `op` unless its key is held; the provider card id of the operation
/// that holds the key.
async fn record_one(conn: &mut BatchConn<'_>, op: &Op<'_>) -> Result<String, StoreError> {
    conn.execute(
        "INSERT INTO sandbox_provider_ops (idempotency_key, operation, provider_card_id, \
         amount, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        &[
            op.key.into(),
            op.operation.into(),
            op.provider_card_id.into(),
            op.amount.into(),
            op.now.into(),
        ],
    )
    .await?;
    conn.row(
        "SELECT provider_card_id FROM sandbox_provider_ops WHERE idempotency_key = $1",
        &[op.key.into()],
    )
    .await?
    .ok_or(StoreError::NotFound("sandbox operation"))?
    .text("provider_card_id")
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Each key keeps its first operation: one recorded before, and one earlier in the
    /// same batch; new keys are recorded once each.
    pub(crate) async fn ops_keep_the_first_of_each_key(store: &crate::Store) {
        let op = |key, card| Op {
            key,
            operation: "topup",
            provider_card_id: card,
            amount: Some(5),
            now: 1,
        };
        let batch = |ops: Vec<Op<'static>>| {
            store.write_batch(move |mut c| Box::pin(async move { record_ops(&mut c, &ops).await }))
        };
        let (cards, durable) = batch(vec![op("ops-a", "card-1")]).await.unwrap();
        durable.wait().await.unwrap();
        assert_eq!(cards, ["card-1"]);
        let (cards, durable) = batch(vec![
            op("ops-b", "card-2"),
            op("ops-a", "card-3"),
            op("ops-b", "card-4"),
            op("ops-c", "card-5"),
        ])
        .await
        .unwrap();
        durable.wait().await.unwrap();
        assert_eq!(cards, ["card-2", "card-1", "card-2", "card-5"]);
        let mut conn = store.conn().await.unwrap();
        assert_eq!(count_ops(&mut conn, "ops-", "topup").await.unwrap(), 3);
    }
}
