//! The Lithic provider's records (CONTRACT §14): account holders of our cardholders,
//! Lithic transaction tokens and the card transactions they became, the transaction
//! events seen, and each subprovider's enrolment (sealed secrets).

use crate::{Conn, StoreError};
use sqlx::any::AnyRow;
use sqlx::Row;

/// A cardholder's Lithic account holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountHolder {
    pub cardholder_id: String,
    pub project_id: String,
    pub subprovider_code: String,
    pub external_id: String,
    pub token: Option<String>,
    pub account_token: Option<String>,
    pub status: Option<String>,
    /// A JSON list of Lithic's status reasons.
    pub status_reasons: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

fn holder_from_row(r: &AnyRow) -> Result<AccountHolder, sqlx::Error> {
    Ok(AccountHolder {
        cardholder_id: r.try_get("cardholder_id")?,
        project_id: r.try_get("project_id")?,
        subprovider_code: r.try_get("subprovider_code")?,
        external_id: r.try_get("external_id")?,
        token: r.try_get("token")?,
        account_token: r.try_get("account_token")?,
        status: r.try_get("status")?,
        status_reasons: r.try_get("status_reasons")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

/// Records the account holder row (external id only) unless it exists.
pub async fn insert_holder_if_absent(conn: &mut Conn, h: &AccountHolder) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO lithic_account_holders (cardholder_id, project_id, subprovider_code, \
         external_id, token, account_token, status, status_reasons, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (cardholder_id) DO NOTHING",
    )
    .bind(&h.cardholder_id)
    .bind(&h.project_id)
    .bind(&h.subprovider_code)
    .bind(&h.external_id)
    .bind(&h.token)
    .bind(&h.account_token)
    .bind(&h.status)
    .bind(&h.status_reasons)
    .bind(h.created_at)
    .bind(h.updated_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

pub async fn holder_of_cardholder(
    conn: &mut Conn,
    project_id: &str,
    cardholder_id: &str,
) -> Result<Option<AccountHolder>, StoreError> {
    let row = sqlx::query(
        "SELECT * FROM lithic_account_holders WHERE project_id = $1 AND cardholder_id = $2",
    )
    .bind(project_id)
    .bind(cardholder_id)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.as_ref().map(holder_from_row).transpose()?)
}

/// The account holder Lithic knows by `token`, or (when none has that token yet) the
/// one whose `external_id` Lithic reports for it.
pub async fn holder_by_token_or_external_id(
    conn: &mut Conn,
    subprovider_code: &str,
    token: &str,
    external_id: Option<&str>,
) -> Result<Option<AccountHolder>, StoreError> {
    let row = sqlx::query(
        "SELECT * FROM lithic_account_holders WHERE subprovider_code = $1 \
         AND (token = $2 OR external_id = $3) ORDER BY token IS NULL LIMIT 1",
    )
    .bind(subprovider_code)
    .bind(token)
    .bind(external_id.unwrap_or(""))
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.as_ref().map(holder_from_row).transpose()?)
}

/// Lithic's answer about an account holder.
pub struct HolderState<'a> {
    pub token: &'a str,
    pub account_token: Option<&'a str>,
    pub status: &'a str,
    pub status_reasons: &'a str,
    pub now: i64,
}

/// Records Lithic's token and status; the account token is kept once known.
pub async fn update_holder(
    conn: &mut Conn,
    cardholder_id: &str,
    s: &HolderState<'_>,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE lithic_account_holders SET token = $1, \
         account_token = COALESCE($2, account_token), status = $3, status_reasons = $4, \
         updated_at = $5 WHERE cardholder_id = $6",
    )
    .bind(s.token)
    .bind(s.account_token)
    .bind(s.status)
    .bind(s.status_reasons)
    .bind(s.now)
    .bind(cardholder_id)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// Remembers which card transaction a Lithic transaction became (first writer wins).
pub async fn map_transaction(
    conn: &mut Conn,
    subprovider_code: &str,
    token: &str,
    project_id: &str,
    transaction_id: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO lithic_transactions (subprovider_code, token, project_id, transaction_id, \
         created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (subprovider_code, token) DO NOTHING",
    )
    .bind(subprovider_code)
    .bind(token)
    .bind(project_id)
    .bind(transaction_id)
    .bind(now)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The card transaction (project id, transaction id) a Lithic transaction became.
pub async fn transaction_of(
    conn: &mut Conn,
    subprovider_code: &str,
    token: &str,
) -> Result<Option<(String, String)>, StoreError> {
    let row = sqlx::query(
        "SELECT project_id, transaction_id FROM lithic_transactions \
         WHERE subprovider_code = $1 AND token = $2",
    )
    .bind(subprovider_code)
    .bind(token)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(match row {
        Some(r) => Some((r.try_get("project_id")?, r.try_get("transaction_id")?)),
        None => None,
    })
}

/// The Lithic transaction token of one of our card transactions: the mapping an
/// event of it wrote, else the ASA request that made it (its network message id is
/// `lithic:asa:<token>`). Neither is indexed by our transaction: disputes, which ask,
/// are rare.
pub async fn token_of_transaction(
    conn: &mut Conn,
    subprovider_code: &str,
    project_id: &str,
    transaction_id: &str,
) -> Result<Option<String>, StoreError> {
    let row = sqlx::query(
        "SELECT token FROM lithic_transactions \
         WHERE subprovider_code = $1 AND project_id = $2 AND transaction_id = $3 \
         ORDER BY created_at LIMIT 1",
    )
    .bind(subprovider_code)
    .bind(project_id)
    .bind(transaction_id)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(r) = row {
        return Ok(Some(r.try_get("token")?));
    }
    let row = sqlx::query(
        "SELECT message_id FROM card_network_messages \
         WHERE project_id = $1 AND transaction_id = $2 AND message_id LIKE 'lithic:asa:%' \
         ORDER BY created_at LIMIT 1",
    )
    .bind(project_id)
    .bind(transaction_id)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(match row {
        Some(r) => {
            let id: String = r.try_get("message_id")?;
            id.strip_prefix("lithic:asa:").map(str::to_owned)
        }
        None => None,
    })
}

/// One transaction event seen.
pub struct SeenEvent<'a> {
    pub subprovider_code: &'a str,
    pub token: &'a str,
    pub event_type: &'a str,
    pub transaction_token: &'a str,
    /// `applied` or `ignored`.
    pub outcome: &'a str,
    pub now: i64,
}

pub async fn record_event(conn: &mut Conn, e: &SeenEvent<'_>) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO lithic_events (subprovider_code, token, event_type, transaction_token, \
         outcome, created_at) VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (subprovider_code, token) DO NOTHING",
    )
    .bind(e.subprovider_code)
    .bind(e.token)
    .bind(e.event_type)
    .bind(e.transaction_token)
    .bind(e.outcome)
    .bind(e.now)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// What became of an event already seen (`applied`, `ignored`), if it was.
pub async fn event_outcome(
    conn: &mut Conn,
    subprovider_code: &str,
    token: &str,
) -> Result<Option<String>, StoreError> {
    let row =
        sqlx::query("SELECT outcome FROM lithic_events WHERE subprovider_code = $1 AND token = $2")
            .bind(subprovider_code)
            .bind(token)
            .fetch_optional(&mut *conn)
            .await?;
    Ok(row.map(|r| r.try_get("outcome")).transpose()?)
}

/// A subprovider's enrolment with Lithic.
#[derive(Clone, PartialEq, Eq)]
pub struct Enrolment {
    pub subprovider_code: String,
    pub public_url: String,
    pub asa_url: String,
    pub events_url: String,
    pub asa_secret_enc: String,
    pub subscription_token: String,
    pub events_secret_enc: String,
    pub enrolled_at: i64,
    pub updated_at: i64,
}

impl std::fmt::Debug for Enrolment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Enrolment")
            .field("subprovider_code", &self.subprovider_code)
            .field("public_url", &self.public_url)
            .field("subscription_token", &self.subscription_token)
            .finish_non_exhaustive()
    }
}

fn enrolment_from_row(r: &AnyRow) -> Result<Enrolment, sqlx::Error> {
    Ok(Enrolment {
        subprovider_code: r.try_get("subprovider_code")?,
        public_url: r.try_get("public_url")?,
        asa_url: r.try_get("asa_url")?,
        events_url: r.try_get("events_url")?,
        asa_secret_enc: r.try_get("asa_secret_enc")?,
        subscription_token: r.try_get("subscription_token")?,
        events_secret_enc: r.try_get("events_secret_enc")?,
        enrolled_at: r.try_get("enrolled_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

/// Records (or replaces) a subprovider's enrolment.
pub async fn save_enrolment(conn: &mut Conn, e: &Enrolment) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO lithic_enrolments (subprovider_code, public_url, asa_url, events_url, \
         asa_secret_enc, subscription_token, events_secret_enc, enrolled_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (subprovider_code) DO UPDATE SET \
         public_url = $2, asa_url = $3, events_url = $4, asa_secret_enc = $5, \
         subscription_token = $6, events_secret_enc = $7, updated_at = $9",
    )
    .bind(&e.subprovider_code)
    .bind(&e.public_url)
    .bind(&e.asa_url)
    .bind(&e.events_url)
    .bind(&e.asa_secret_enc)
    .bind(&e.subscription_token)
    .bind(&e.events_secret_enc)
    .bind(e.enrolled_at)
    .bind(e.updated_at)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub async fn enrolment(
    conn: &mut Conn,
    subprovider_code: &str,
) -> Result<Option<Enrolment>, StoreError> {
    let row = sqlx::query("SELECT * FROM lithic_enrolments WHERE subprovider_code = $1")
        .bind(subprovider_code)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.as_ref().map(enrolment_from_row).transpose()?)
}
