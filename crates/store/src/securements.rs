//! 3-D Secure and OTP challenges (`card_securements`). A challenge is created `pending`
//! with an expiry; answering it is one conditional update, so of two concurrent answers
//! exactly one wins, and an expired or already answered challenge can never change.

use crate::{Conn, StoreError};
use sqlx::any::AnyRow;
use sqlx::Row;

/// `state` before an answer.
pub const PENDING: &str = "pending";
/// `state` after cards/3ds/confirm with `confirm: true`.
pub const CONFIRMED: &str = "confirmed";
/// `state` after cards/3ds/confirm with `confirm: false`.
pub const DECLINED: &str = "declined";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurementRecord {
    pub id: String,
    pub project_id: String,
    pub card_id: String,
    /// `OOB` or `OTP`.
    pub method: String,
    /// `pending`, `confirmed` or `declined`.
    pub state: String,
    /// Micro-units of `currency`.
    pub amount: i64,
    /// ISO 4217, upper case.
    pub currency: String,
    /// The merchant object (`name`, `country`).
    pub merchant: serde_json::Value,
    pub created_at: i64,
    pub expires_at: i64,
    pub answered_at: Option<i64>,
}

fn from_row(r: &AnyRow) -> Result<SecurementRecord, StoreError> {
    let merchant: String = r.try_get("merchant")?;
    Ok(SecurementRecord {
        id: r.try_get("id")?,
        project_id: r.try_get("project_id")?,
        card_id: r.try_get("card_id")?,
        method: r.try_get("method")?,
        state: r.try_get("state")?,
        amount: r.try_get("amount")?,
        currency: r.try_get("currency")?,
        merchant: serde_json::from_str(&merchant)
            .map_err(|e| StoreError::Corrupt(format!("card_securements.merchant: {e}")))?,
        created_at: r.try_get("created_at")?,
        expires_at: r.try_get("expires_at")?,
        answered_at: r.try_get("answered_at")?,
    })
}

pub async fn insert(conn: &mut Conn, s: &SecurementRecord) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO card_securements (id, project_id, card_id, method, state, amount, currency, \
         merchant, created_at, expires_at, answered_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
    )
    .bind(&s.id)
    .bind(&s.project_id)
    .bind(&s.card_id)
    .bind(&s.method)
    .bind(&s.state)
    .bind(s.amount)
    .bind(&s.currency)
    .bind(s.merchant.to_string())
    .bind(s.created_at)
    .bind(s.expires_at)
    .bind(s.answered_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// The project's securement; None for an unknown id or one of another project.
pub async fn get(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
) -> Result<Option<SecurementRecord>, StoreError> {
    let row = sqlx::query("SELECT * FROM card_securements WHERE project_id = $1 AND id = $2")
        .bind(project_id)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// Answers a pending, unexpired securement of this card: sets `state` (`confirmed` or
/// `declined`) and `answered_at`. False when nothing matched: unknown, another project's
/// or card's, already answered (possibly by a concurrent request a moment ago), or
/// expired (`expires_at < now`).
pub async fn answer(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
    id: &str,
    state: &str,
    now: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE card_securements SET state = $1, answered_at = $2 \
         WHERE id = $3 AND project_id = $4 AND card_id = $5 AND state = 'pending' \
         AND expires_at >= $2",
    )
    .bind(state)
    .bind(now)
    .bind(id)
    .bind(project_id)
    .bind(card_id)
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}
