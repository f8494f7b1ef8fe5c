use super::filters;
use crate::pipeline::{reply, ApiResult, Caller, Payload, RawRequest};
use axum::extract::State;
use issuing_app::App;
use issuing_domain::ids::new_id;
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_domain::user::ExternalUserId;
use issuing_store::users::{self, UserFilter, UserRecord, SORT_KEYS};
use issuing_wire::api::{Page, User, UsersCreate, UsersGet};
use issuing_wire::{Amount, ApiError, ErrorSlug, PageRequest};

fn user_view(u: UserRecord) -> User {
    User {
        user_id: u.id,
        external_user_id: u.external_user_id,
        project_id: u.project_id,
        // Users hold no funds of their own in this service: money sits on the project's
        // master balance and on cards.
        usdt_balance: Amount::ZERO.into(),
        deposit_addresses: Vec::new(),
        created_at: to_rfc3339(u.created_at),
        updated_at: to_rfc3339(u.updated_at),
    }
}

pub(crate) async fn create(
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<UsersCreate>,
) -> ApiResult<User> {
    let external_user_id = ExternalUserId::parse(&req.external_user_id)?;
    let now = now_micros();
    let record = UserRecord {
        id: new_id(),
        project_id: caller.project_id,
        external_user_id: external_user_id.as_str().to_owned(),
        created_at: now,
        updated_at: now,
    };
    state.user_writer.create(record.clone()).await?;
    Ok(reply(user_view(record)))
}

pub(crate) async fn get(
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<UsersGet>,
) -> ApiResult<User> {
    let external_user_id = ExternalUserId::parse(&req.external_user_id)?;
    let mut conn = state.store.conn().await?;
    let user = users::get_by_external_id(&mut conn, &caller.project_id, external_user_id.as_str())
        .await?
        .ok_or_else(|| ApiError::new(ErrorSlug::UserNotFound, "User not found"))?;
    Ok(reply(user_view(user)))
}

pub(crate) async fn find(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Page<User>> {
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
    Ok(reply(Page::new(
        items.into_iter().map(user_view).collect(),
        total,
        &page,
    )))
}
