//! Cardholders: the KYC record of one user under one subprovider.

use crate::query::{find_page, Filter, Source};
use crate::{Backend, Conn, StoreError};
use issuing_domain::kyc::{KycState, RegistrationStatus};
use issuing_wire::PageRequest;
use sqlx::any::AnyRow;
use sqlx::Row;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardholderRecord {
    pub id: String,
    pub project_id: String,
    pub user_id: String,
    pub external_user_id: String,
    pub subprovider_code: String,
    pub product_code: Option<String>,
    pub registration_status: String,
    pub kyc_status: String,
    pub kyc_level: String,
    /// KYC data as JSON sealed under the master key; None until submitted.
    pub kyc_enc: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub registered_at: Option<i64>,
    pub activated_at: Option<i64>,
}

impl CardholderRecord {
    /// Sets the registration and KYC states (not yet saved).
    pub fn set_kyc_state(&mut self, outcome: &KycState, now: i64) {
        self.registration_status = outcome.registration_status.as_str().to_owned();
        self.kyc_status = outcome.kyc_status.as_str().to_owned();
        self.kyc_level = outcome.kyc_level.as_str().to_owned();
        self.updated_at = now;
        if outcome.registration_status == RegistrationStatus::Active {
            self.registered_at.get_or_insert(now);
            self.activated_at.get_or_insert(now);
        }
    }
}

pub const SORT_KEYS: &[&str] = &[
    "cardholder_id",
    "user_id",
    "subprovider_code",
    "product_code",
    "registration_status",
    "kyc_status",
    "created_at",
    "updated_at",
    "registered_at",
    "activated_at",
];

#[derive(Debug, Default, Clone)]
pub struct CardholderFilter {
    pub cardholder_ids: Vec<String>,
    pub external_user_ids: Vec<String>,
    pub user_ids: Vec<String>,
    pub subprovider_codes: Vec<String>,
    pub product_codes: Vec<String>,
    pub registration_statuses: Vec<String>,
    pub kyc_statuses: Vec<String>,
}

fn from_row(r: &AnyRow) -> Result<CardholderRecord, sqlx::Error> {
    Ok(CardholderRecord {
        id: r.try_get("id")?,
        project_id: r.try_get("project_id")?,
        user_id: r.try_get("user_id")?,
        external_user_id: r.try_get("external_user_id")?,
        subprovider_code: r.try_get("subprovider_code")?,
        product_code: r.try_get("product_code")?,
        registration_status: r.try_get("registration_status")?,
        kyc_status: r.try_get("kyc_status")?,
        kyc_level: r.try_get("kyc_level")?,
        kyc_enc: r.try_get("kyc_enc")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
        registered_at: r.try_get("registered_at")?,
        activated_at: r.try_get("activated_at")?,
    })
}

/// `Conflict` when the user already has a cardholder under this subprovider.
pub async fn insert(conn: &mut Conn, c: &CardholderRecord) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO cardholders (id, project_id, user_id, external_user_id, subprovider_code, \
         product_code, registration_status, kyc_status, kyc_level, kyc_enc, created_at, updated_at, \
         registered_at, activated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
    )
    .bind(&c.id)
    .bind(&c.project_id)
    .bind(&c.user_id)
    .bind(&c.external_user_id)
    .bind(&c.subprovider_code)
    .bind(&c.product_code)
    .bind(&c.registration_status)
    .bind(&c.kyc_status)
    .bind(&c.kyc_level)
    .bind(&c.kyc_enc)
    .bind(c.created_at)
    .bind(c.updated_at)
    .bind(c.registered_at)
    .bind(c.activated_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// Stores newly submitted KYC data and the states it led to.
pub async fn update_kyc(conn: &mut Conn, c: &CardholderRecord) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE cardholders SET registration_status = $1, kyc_status = $2, kyc_level = $3, kyc_enc = $4, \
         updated_at = $5, registered_at = $6, activated_at = $7 WHERE id = $8 AND project_id = $9",
    )
    .bind(&c.registration_status)
    .bind(&c.kyc_status)
    .bind(&c.kyc_level)
    .bind(&c.kyc_enc)
    .bind(c.updated_at)
    .bind(c.registered_at)
    .bind(c.activated_at)
    .bind(&c.id)
    .bind(&c.project_id)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

pub async fn get(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
) -> Result<Option<CardholderRecord>, StoreError> {
    let row = sqlx::query("SELECT * FROM cardholders WHERE project_id = $1 AND id = $2")
        .bind(project_id)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(row.as_ref().map(from_row).transpose()?)
}

/// The (registration, KYC) statuses of each of the project's cardholders `ids` that
/// exists.
pub async fn statuses(
    conn: &mut crate::writer::BatchConn<'_>,
    project_id: &str,
    ids: &[&str],
) -> Result<std::collections::HashMap<String, (String, String)>, StoreError> {
    let mut found = conn
        .together(&[crate::writer::Part::Keys(statuses_lookup(
            project_id,
            ids.to_vec(),
        ))])
        .await?;
    statuses_of(found.pop().unwrap_or_default())
}

/// `statuses` as a lookup to run with others; its rows go to `statuses_of`.
pub fn statuses_lookup<'a>(project_id: &'a str, ids: Vec<&'a str>) -> crate::writer::Lookup<'a> {
    crate::writer::Lookup::project_rows(
        "cardholders",
        "id, registration_status, kyc_status",
        project_id,
        ids,
    )
}

/// Each cardholder's (registration, KYC) status, by id, from `statuses_lookup`'s rows.
pub fn statuses_of(
    rows: Vec<crate::writer::Row>,
) -> Result<std::collections::HashMap<String, (String, String)>, StoreError> {
    use crate::writer::RowRead;
    let mut statuses = std::collections::HashMap::with_capacity(rows.len());
    for row in rows {
        statuses.insert(
            row.text("id")?,
            (row.text("registration_status")?, row.text("kyc_status")?),
        );
    }
    Ok(statuses)
}

pub async fn get_for_user(
    conn: &mut Conn,
    project_id: &str,
    external_user_id: &str,
    subprovider_code: &str,
) -> Result<Option<CardholderRecord>, StoreError> {
    let row = sqlx::query(
        "SELECT * FROM cardholders WHERE project_id = $1 AND external_user_id = $2 AND subprovider_code = $3",
    )
    .bind(project_id)
    .bind(external_user_id)
    .bind(subprovider_code)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.as_ref().map(from_row).transpose()?)
}

pub async fn find(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    filter: &CardholderFilter,
    page: &PageRequest,
) -> Result<(Vec<CardholderRecord>, i64), StoreError> {
    let mut f = Filter::for_project("project_id", project_id);
    f.texts("id", &filter.cardholder_ids);
    f.texts("external_user_id", &filter.external_user_ids);
    f.texts("user_id", &filter.user_ids);
    f.texts("subprovider_code", &filter.subprovider_codes);
    f.texts("product_code", &filter.product_codes);
    f.texts("registration_status", &filter.registration_statuses);
    f.texts("kyc_status", &filter.kyc_statuses);
    let sort = match page.sort_by {
        "cardholder_id" => ("id", true),
        "user_id" => ("user_id", true),
        "subprovider_code" => ("subprovider_code", true),
        "product_code" => ("product_code", true),
        "registration_status" => ("registration_status", true),
        "kyc_status" => ("kyc_status", true),
        "updated_at" => ("updated_at", false),
        "registered_at" => ("registered_at", false),
        "activated_at" => ("activated_at", false),
        _ => ("created_at", false),
    };
    let (rows, total) =
        find_page(conn, backend, f, Source::table("cardholders"), sort, page).await?;
    Ok((rows.iter().map(from_row).collect::<Result<_, _>>()?, total))
}
