use super::filters;
use crate::pipeline::idempotency;
use crate::pipeline::{reply, ApiResult, Caller, HttpError, Payload, RawRequest};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use issuing_app::flows::master_writer::Answer;
use issuing_app::flows::status::{self, Change};
use issuing_app::flows::topup::MoveRequest;
use issuing_app::flows::{card_for_user, details, issue, kyc, required_user, topup};
use issuing_app::idempotency::IdempotencyToken;
use issuing_app::App;
use issuing_domain::catalog::Product;
use issuing_domain::time::to_rfc3339;
use issuing_store::cards::{self, CardFilter, CardRecord, SORT_KEYS};
use issuing_store::{cardholders, ledger, Conn, StoreError};
use issuing_wire::api::{
    Card, CardBalance, CardBalanceResponse, CardRef, CardStatusResponse, CardsFreeze, Limits, Page,
    Pricing, ProductList,
};
use issuing_wire::{ApiError, PageRequest};
use serde::Deserialize;
use serde_json::json;

async fn balance_of(conn: &mut Conn, card: &CardRecord) -> Result<CardBalance, StoreError> {
    // Held funds sit in the card's hold account, so the card account is what is left
    // to spend: available = balance − open holds.
    let (available, pending) = ledger::card_funds(conn, &card.project_id, &card.id).await?;
    Ok(CardBalance {
        currency: card.card_currency.to_ascii_lowercase(),
        available: available.into(),
        pending: pending.into(),
    })
}

async fn view(conn: &mut Conn, c: CardRecord) -> Result<Card, StoreError> {
    let balance = balance_of(conn, &c).await?;
    Ok(Card {
        balance,
        card_id: c.id,
        user_id: c.user_id,
        project_id: c.project_id,
        external_user_id: c.external_user_id,
        product_code: c.product_code,
        status: c.status,
        label: c.label,
        created_at: to_rfc3339(c.created_at),
        updated_at: to_rfc3339(c.updated_at),
        issued_at: c.issued_at.map(to_rfc3339),
        activated_at: c.activated_at.map(to_rfc3339),
        frozen_at: c.frozen_at.map(to_rfc3339),
        closed_at: c.closed_at.map(to_rfc3339),
    })
}

async fn load(
    state: &App,
    caller: &Caller,
    r: &CardRef,
) -> Result<(CardRecord, impl std::ops::DerefMut<Target = Conn>), ApiError> {
    // An empty field counts as a missing one (the shared type reads both as "").
    let user = required_user(Some(&r.external_user_id))?;
    let mut conn = state.store.conn().await?;
    let card = card_for_user(&mut conn, &caller.project_id, Some(&r.card_id), Some(user)).await?;
    Ok((card, conn))
}

pub(crate) async fn get(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<CardRef>,
) -> ApiResult<Card> {
    let (card, mut conn) = load(&state, &caller, &r).await?;
    Ok(reply(view(&mut conn, card).await?))
}

pub(crate) async fn balance(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<CardRef>,
) -> ApiResult<CardBalanceResponse> {
    let (card, mut conn) = load(&state, &caller, &r).await?;
    let b = balance_of(&mut conn, &card).await?;
    Ok(reply(CardBalanceResponse {
        card_id: card.id,
        currency: b.currency,
        available: b.available,
        pending: b.pending,
    }))
}

/// The sandbox provider's billing address for every card.
const SANDBOX_BILLING_ADDRESS: fn() -> serde_json::Value = || {
    json!({
        "line1": "1 Sandbox Street",
        "line2": null,
        "city": "San Francisco",
        "state": "CA",
        "postal_code": "94105",
        "country_iso": "US",
    })
};

pub(crate) async fn details(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<CardRef>,
) -> ApiResult<serde_json::Value> {
    let (card, mut conn) = load(&state, &caller, &r).await?;
    let kyc = cardholders::get(&mut conn, &caller.project_id, &card.cardholder_id)
        .await?
        .and_then(|h| kyc::read(&state, &h));
    // No connection is held across a provider call.
    drop(conn);
    let secrets = details::open(&state, &card).await?;
    let billing_address = match state.providers.lithic(&card.subprovider_code) {
        Some(_) => kyc
            .as_ref()
            .and_then(|k| k.address.clone())
            .map(|a| {
                json!({
                    "line1": a.line1, "line2": a.line2, "city": a.city, "state": a.state,
                    "postal_code": a.postal_code, "country_iso": a.country_iso,
                })
            })
            .unwrap_or(serde_json::Value::Null),
        None => SANDBOX_BILLING_ADDRESS(),
    };
    let holder = kyc
        .map(|k| json!({ "first_name": k.first_name, "last_name": k.last_name, "name": format!("{} {}", k.first_name, k.last_name) }))
        .unwrap_or(serde_json::Value::Null);
    Ok(reply(json!({
        "card_id": card.id,
        "status": card.status,
        "details": {
            "card_number": secrets.card_number,
            "cvv": secrets.cvv,
            "expiry_month": card.expiry_month,
            "expiry_year": card.expiry_year,
            "billing_address": billing_address,
        },
        "holder": holder,
    })))
}

pub(crate) async fn find(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Page<Card>> {
    let page = PageRequest::parse(&req, SORT_KEYS)?;
    let filter = CardFilter {
        card_ids: filters::strings(&req, "card_id", "card_ids")?,
        external_user_ids: filters::strings(&req, "external_user_id", "external_user_ids")?,
        user_ids: filters::strings(&req, "user_id", "user_ids")?,
        statuses: filters::strings(&req, "status", "statuses")?,
        product_codes: filters::strings_with_legacy(
            &req,
            ("product_code", "product_codes"),
            ("product_id", "product_ids"),
        )?,
    };
    let mut conn = state.store.conn().await?;
    let (records, total) = cards::find(
        &mut conn,
        state.store.backend(),
        &caller.project_id,
        &filter,
        &page,
    )
    .await?;
    let mut items = Vec::with_capacity(records.len());
    for c in records {
        items.push(view(&mut conn, c).await?);
    }
    Ok(reply(Page::new(items, total, &page)))
}

async fn change(
    state: App,
    caller: Caller,
    r: CardsFreeze,
    c: Change,
) -> ApiResult<CardStatusResponse> {
    let (card_id, status) = status::change(
        &state,
        &caller.project_id,
        Some(&r.card_id),
        r.external_user_id.as_deref(),
        c,
    )
    .await?;
    Ok(reply(CardStatusResponse {
        card_id,
        status: status.into(),
    }))
}

pub(crate) async fn freeze(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<CardsFreeze>,
) -> ApiResult<CardStatusResponse> {
    change(state, caller, r, Change::Freeze).await
}

pub(crate) async fn unfreeze(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<CardsFreeze>,
) -> ApiResult<CardStatusResponse> {
    change(state, caller, r, Change::Unfreeze).await
}

pub(crate) async fn create(
    State(state): State<App>,
    caller: Caller,
    headers: HeaderMap,
    RawRequest(raw): RawRequest,
    Payload(req): Payload<issue::IssueRequest>,
) -> Result<Response, HttpError> {
    let key = idempotency::key_from(&headers, &raw)?;
    let token = IdempotencyToken::new(&caller.project_id, issue::ENDPOINT, key, &raw);
    answer(issue::create(&state, &caller.project_id, req, token).await?)
}

/// The response of a move of the master balance's writer: a new order's, or its key's
/// stored one.
fn answer(answer: Answer) -> Result<Response, HttpError> {
    match answer {
        Answer::Created(body) => Ok(axum::response::IntoResponse::into_response(axum::Json(
            body,
        ))),
        Answer::Stored { status, body } => idempotency::stored_response(status, &body),
    }
}

pub(crate) async fn topup(
    State(state): State<App>,
    caller: Caller,
    headers: HeaderMap,
    RawRequest(raw): RawRequest,
    Payload(req): Payload<MoveRequest>,
) -> Result<Response, HttpError> {
    let key = idempotency::key_from(&headers, &raw)?;
    let token = IdempotencyToken::new(&caller.project_id, topup::ENDPOINT, key, &raw);
    match topup::topup(&state, &caller.project_id, req, token).await? {
        Answer::Created(body) => Ok(axum::response::IntoResponse::into_response(axum::Json(
            body,
        ))),
        Answer::Stored { status, body } => idempotency::stored_response(status, &body),
    }
}

pub(crate) async fn withdraw(
    State(state): State<App>,
    caller: Caller,
    headers: HeaderMap,
    RawRequest(raw): RawRequest,
    Payload(req): Payload<MoveRequest>,
) -> Result<Response, HttpError> {
    let key = idempotency::key_from(&headers, &raw)?;
    idempotency::run(
        &state.store,
        &caller.project_id,
        "cards/withdraw",
        key,
        &raw,
        |token| topup::withdraw(&state, &caller.project_id, req, token),
    )
    .await
}

pub(crate) async fn close(
    State(state): State<App>,
    caller: Caller,
    headers: HeaderMap,
    RawRequest(raw): RawRequest,
    Payload(req): Payload<issuing_app::flows::close::CloseRequest>,
) -> Result<Response, HttpError> {
    let key = idempotency::key_from(&headers, &raw)?;
    idempotency::run(
        &state.store,
        &caller.project_id,
        "cards/close",
        key,
        &raw,
        |token| issuing_app::flows::close::close(&state, &caller.project_id, req, token),
    )
    .await
}

fn product_view(p: &Product) -> issuing_wire::api::Product {
    let bps = p.pricing.topup_fee_bps;
    issuing_wire::api::Product {
        product_code: p.code.clone(),
        product_id: p.code.clone(),
        name: p.name.clone(),
        subprovider_code: p.subprovider_code.clone(),
        active: p.active,
        card_currency: p.card_currency.clone(),
        pricing: Pricing {
            currency: "usdt".into(),
            issue_fee: p.pricing.issue_fee.into(),
            topup_fee_percent: format!("{}.{:02}", bps / 100, bps % 100).into(),
            topup_fee_fixed: p.pricing.topup_fee_fixed.into(),
            valid: p.pricing_problem.is_none(),
        },
        limits: Limits {
            currency: "usdt".into(),
            topup_min: p.limits.topup_min.into(),
            topup_max: p.limits.topup_max.into(),
            valid: p.limits_problem.is_none(),
        },
    }
}

pub(crate) async fn products(State(state): State<App>, _caller: Caller) -> ApiResult<ProductList> {
    let items: Vec<_> = state
        .catalog()
        .products()
        .iter()
        .map(product_view)
        .collect();
    Ok(reply(ProductList {
        total: items.len() as u64,
        items,
    }))
}

/// cards/txs: the card's transactions in the `card_transaction` webhook shape, newest
/// change first; `slug` filters on `card_tx_data.type`.
pub(crate) async fn txs(
    State(state): State<App>,
    caller: Caller,
    RawRequest(raw): RawRequest,
) -> ApiResult<Page<serde_json::Value>> {
    let r = CardRef::deserialize(raw.as_ref())
        .map_err(|e| ApiError::validation(format!("invalid request: {e}")))?;
    let page = PageRequest::parse(&raw, &["created_at"])?;
    let slug = match raw.get("slug") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) if s.trim().is_empty() => None,
        Some(serde_json::Value::String(s)) => Some(
            issuing_domain::card_tx::TxKind::parse(s.trim())
                .ok_or_else(|| ApiError::validation("slug must be one of: auth, reversal, refund"))?
                .as_str()
                .to_owned(),
        ),
        Some(_) => return Err(ApiError::validation("slug must be a string").into()),
    };
    let (card, mut conn) = load(&state, &caller, &r).await?;
    let (items, total) = issuing_store::card_txs::for_card(
        &mut conn,
        state.store.backend(),
        &caller.project_id,
        &card.id,
        &slug.into_iter().collect::<Vec<_>>(),
        &page,
    )
    .await?;
    let items = items
        .iter()
        .map(|t| issuing_app::network::view::item(t, &card))
        .collect();
    Ok(reply(Page::new(items, total, &page)))
}
