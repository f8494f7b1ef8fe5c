use super::filters;
use crate::pipeline::{reply, ApiResult, Caller, Payload, RawRequest};
use axum::extract::State;
use issuing_app::flows::kyc;
use issuing_app::App;
use issuing_domain::ids::new_id;
use issuing_domain::kyc::{parse_kyc, KycState};
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_domain::user::ExternalUserId;
use issuing_store::cardholders::{self, CardholderFilter, CardholderRecord, SORT_KEYS};
use issuing_store::users::{self, UserRecord};
use issuing_store::StoreError;
use issuing_wire::api::{Cardholder, Page};
use issuing_wire::{ApiError, ErrorSlug, PageRequest};
use serde::Deserialize;
use serde_json::Value;

fn cardholder_view(c: CardholderRecord) -> Cardholder {
    Cardholder {
        cardholder_id: c.id,
        user_id: c.user_id,
        external_user_id: c.external_user_id,
        project_id: c.project_id,
        subprovider_id: c.subprovider_code.clone(),
        subprovider_code: c.subprovider_code,
        product_code: c.product_code,
        registration_status: c.registration_status,
        kyc_status: c.kyc_status,
        kyc_level: c.kyc_level,
        created_at: to_rfc3339(c.created_at),
        updated_at: to_rfc3339(c.updated_at),
        registered_at: c.registered_at.map(to_rfc3339),
        activated_at: c.activated_at.map(to_rfc3339),
    }
}

#[derive(Deserialize)]
pub(crate) struct CreateRequest {
    #[serde(default)]
    external_user_id: Option<String>,
    #[serde(default)]
    subprovider_code: Option<String>,
    #[serde(default)]
    subprovider_id: Option<String>,
    #[serde(default)]
    product_code: Option<String>,
    #[serde(default)]
    product_id: Option<String>,
    #[serde(default)]
    kyc_data: Option<Value>,
}

fn subprovider_of(code: Option<String>, legacy: Option<String>) -> Option<String> {
    code.or(legacy).filter(|s| !s.trim().is_empty())
}

pub(crate) async fn create(
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<CreateRequest>,
) -> ApiResult<Cardholder> {
    let external_user_id = ExternalUserId::parse(req.external_user_id.as_deref().unwrap_or(""))?;
    let code = subprovider_of(req.subprovider_code, req.subprovider_id)
        .ok_or_else(|| ApiError::validation("subprovider_code is required"))?;
    let subprovider = state
        .catalog()
        .subprovider(&code)
        .ok_or_else(|| ApiError::new(ErrorSlug::SubproviderNotFound, "Subprovider not found"))?
        .clone();
    let kyc_data = match &req.kyc_data {
        None | Some(Value::Null) => None,
        Some(v) => Some(parse_kyc(v)?),
    };
    let product_code = req
        .product_code
        .or(req.product_id)
        .filter(|s| !s.trim().is_empty());
    match &product_code {
        None if subprovider.requires_product_code => {
            return Err(ApiError::validation(format!(
                "product_code is required for subprovider {code}"
            ))
            .into())
        }
        Some(p) => {
            let product = state.catalog().product(p).ok_or_else(|| {
                ApiError::new(ErrorSlug::ProductNotFound, "Card product not found")
            })?;
            if product.subprovider_code != code {
                return Err(ApiError::validation(format!(
                    "product {p} is not offered by subprovider {code}"
                ))
                .into());
            }
        }
        None => {}
    }

    if let Some(k) = &kyc_data {
        kyc::check_for_subprovider(&state, &code, k)?;
    }

    let now = now_micros();
    let mut tx = state.store.begin().await?;
    let user =
        match users::get_by_external_id(&mut tx, &caller.project_id, external_user_id.as_str())
            .await?
        {
            Some(u) => u,
            None => {
                let u = UserRecord {
                    id: new_id(),
                    project_id: caller.project_id.clone(),
                    external_user_id: external_user_id.as_str().to_owned(),
                    created_at: now,
                    updated_at: now,
                };
                users::insert(&mut tx, &u).await?;
                u
            }
        };
    let initial = KycState::not_submitted();
    let mut holder = CardholderRecord {
        id: new_id(),
        project_id: caller.project_id.clone(),
        user_id: user.id,
        external_user_id: user.external_user_id,
        subprovider_code: code,
        product_code,
        registration_status: initial.registration_status.as_str().into(),
        kyc_status: initial.kyc_status.as_str().into(),
        kyc_level: initial.kyc_level.as_str().into(),
        kyc_enc: None,
        created_at: now,
        updated_at: now,
        registered_at: None,
        activated_at: None,
    };
    if let Some(k) = &kyc_data {
        kyc::apply(&state, &mut holder, k, now)?;
    }
    cardholders::insert(&mut tx, &holder)
        .await
        .map_err(|e| match e {
            StoreError::Conflict => ApiError::new(
                ErrorSlug::CardholderAlreadyExists,
                "A cardholder already exists for this user and subprovider",
            ),
            other => other.into(),
        })?;
    tx.commit().await.map_err(StoreError::from)?;
    if let Some(k) = &kyc_data {
        kyc::submit_to_provider(&state, &mut holder, k).await?;
    }
    Ok(reply(cardholder_view(holder)))
}

#[derive(Deserialize)]
pub(crate) struct GetRequest {
    #[serde(default)]
    cardholder_id: Option<String>,
    #[serde(default)]
    external_user_id: Option<String>,
    #[serde(default)]
    subprovider_code: Option<String>,
    #[serde(default)]
    subprovider_id: Option<String>,
}

pub(crate) async fn get(
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<GetRequest>,
) -> ApiResult<Cardholder> {
    let not_found = || ApiError::new(ErrorSlug::CardholderNotFound, "Cardholder not found");
    let mut conn = state.store.conn().await?;
    let holder = match (
        req.cardholder_id.filter(|s| !s.is_empty()),
        req.external_user_id.filter(|s| !s.is_empty()),
    ) {
        (Some(id), _) => cardholders::get(&mut conn, &caller.project_id, &id).await?,
        (None, Some(ext)) => {
            let code =
                subprovider_of(req.subprovider_code, req.subprovider_id).ok_or_else(|| {
                    ApiError::validation("subprovider_code is required with external_user_id")
                })?;
            cardholders::get_for_user(&mut conn, &caller.project_id, &ext, &code).await?
        }
        (None, None) => {
            return Err(ApiError::validation(
                "cardholder_id, or external_user_id with subprovider_code, is required",
            )
            .into())
        }
    };
    Ok(reply(cardholder_view(holder.ok_or_else(not_found)?)))
}

pub(crate) async fn find(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Page<Cardholder>> {
    let page = PageRequest::parse(&req, SORT_KEYS)?;
    let filter = CardholderFilter {
        cardholder_ids: filters::strings(&req, "cardholder_id", "cardholder_ids")?,
        external_user_ids: filters::strings(&req, "external_user_id", "external_user_ids")?,
        user_ids: filters::strings(&req, "user_id", "user_ids")?,
        subprovider_codes: filters::strings_with_legacy(
            &req,
            ("subprovider_code", "subprovider_codes"),
            ("subprovider_id", "subprovider_ids"),
        )?,
        product_codes: filters::strings_with_legacy(
            &req,
            ("product_code", "product_codes"),
            ("product_id", "product_ids"),
        )?,
        registration_statuses: filters::strings(
            &req,
            "registration_status",
            "registration_statuses",
        )?,
        kyc_statuses: filters::strings(&req, "kyc_status", "kyc_statuses")?,
    };
    let mut conn = state.store.conn().await?;
    let (items, total) = cardholders::find(
        &mut conn,
        state.store.backend(),
        &caller.project_id,
        &filter,
        &page,
    )
    .await?;
    Ok(reply(Page::new(
        items.into_iter().map(cardholder_view).collect(),
        total,
        &page,
    )))
}
