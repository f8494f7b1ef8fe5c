use super::filters;
use crate::pipeline::{reply, ApiResult, Caller, HttpError, Payload, RawRequest};
use crate::state::AppState;
use axum::extract::State;
use axum::Json;
use issuing_domain::ids::new_id;
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_domain::user::ExternalUserId;
use issuing_store::users::{self, UserFilter, UserRecord, SORT_KEYS};
use issuing_store::StoreError;
use issuing_wire::{Amount, ApiError, ErrorSlug, Page, PageRequest};
use serde::{Deserialize, Serialize};

#[derive(Serialize)]
pub(crate) struct User {
    user_id: String,
    external_user_id: String,
    project_id: String,
    /// Users hold no funds of their own in this service: money sits on the project's
    /// master balance and on cards.
    usdt_balance: Amount,
    deposit_addresses: Vec<String>,
    created_at: String,
    updated_at: String,
}

impl From<UserRecord> for User {
    fn from(u: UserRecord) -> Self {
        User {
            user_id: u.id,
            external_user_id: u.external_user_id,
            project_id: u.project_id,
            usdt_balance: Amount::ZERO,
            deposit_addresses: Vec::new(),
            created_at: to_rfc3339(u.created_at),
            updated_at: to_rfc3339(u.updated_at),
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct ByExternalId {
    #[serde(default)]
    external_user_id: Option<String>,
}

fn external_id(raw: Option<String>) -> Result<ExternalUserId, ApiError> {
    ExternalUserId::parse(raw.as_deref().unwrap_or(""))
}

pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Payload(req): Payload<ByExternalId>,
) -> ApiResult<User> {
    let external_user_id = external_id(req.external_user_id)?;
    let now = now_micros();
    let record = UserRecord {
        id: new_id(),
        project_id: caller.project_id,
        external_user_id: external_user_id.as_str().to_owned(),
        created_at: now,
        updated_at: now,
    };
    let mut conn = state.store.conn().await?;
    users::insert(&mut conn, &record)
        .await
        .map_err(|e| match e {
            StoreError::Conflict => {
                ApiError::new(ErrorSlug::UserAlreadyExists, "User already exists")
            }
            other => other.into(),
        })?;
    Ok(reply(User::from(record)))
}

pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Payload(req): Payload<ByExternalId>,
) -> ApiResult<User> {
    let external_user_id = external_id(req.external_user_id)?;
    let mut conn = state.store.conn().await?;
    let user = users::get_by_external_id(&mut conn, &caller.project_id, external_user_id.as_str())
        .await?
        .ok_or_else(|| ApiError::new(ErrorSlug::UserNotFound, "User not found"))?;
    Ok(reply(User::from(user)))
}

pub(crate) async fn find(
    State(state): State<AppState>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> Result<Json<Page<User>>, HttpError> {
    let page = PageRequest::parse(&req, SORT_KEYS)?;
    let filter = UserFilter {
        external_user_ids: filters::strings(&req, "external_user_id", "external_user_ids")?,
        user_ids: filters::strings(&req, "user_id", "user_ids")?,
        created_from: filters::instant(&req, "created_from")?,
        created_to: filters::instant(&req, "created_to")?,
    };
    let mut conn = state.store.conn().await?;
    let (items, total) = users::find(
        &mut conn,
        state.store.backend(),
        &caller.project_id,
        &filter,
        &page,
    )
    .await?;
    Ok(Json(Page::new(
        items.into_iter().map(User::from).collect(),
        total,
        &page,
    )))
}
