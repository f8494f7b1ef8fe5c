use super::filters;
use crate::flows::status::{self, Change};
use crate::flows::topup::MoveRequest;
use crate::flows::{card_for_user, issue, kyc, required_user, topup};
use crate::pipeline::idempotency;
use crate::pipeline::{reply, ApiResult, Caller, HttpError, Payload, RawRequest};
use crate::state::AppState;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::Json;
use issuing_domain::catalog::Product;
use issuing_domain::time::to_rfc3339;
use issuing_store::cards::{self, CardFilter, CardRecord, SORT_KEYS};
use issuing_store::{cardholders, ledger, Conn, StoreError};
use issuing_wire::{Amount, ApiError, ErrorSlug, Page, PageRequest};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Serialize)]
pub(crate) struct Balance {
    currency: String,
    available: Amount,
    /// Authorised but not yet settled amounts.
    pending: Amount,
}

#[derive(Serialize)]
pub(crate) struct Card {
    card_id: String,
    user_id: String,
    project_id: String,
    external_user_id: String,
    product_code: String,
    status: String,
    balance: Balance,
    label: Option<String>,
    created_at: String,
    updated_at: String,
    issued_at: Option<String>,
    activated_at: Option<String>,
    frozen_at: Option<String>,
    closed_at: Option<String>,
}

async fn balance_of(conn: &mut Conn, card: &CardRecord) -> Result<Balance, StoreError> {
    // Held funds sit in the card's hold account, so the card account is what is left
    // to spend: available = balance − open holds.
    let (available, pending) = ledger::card_funds(conn, &card.project_id, &card.id).await?;
    Ok(Balance {
        currency: card.card_currency.to_ascii_lowercase(),
        available,
        pending,
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

/// The card and the user it must belong to, as cards/get, balance, details name them.
#[derive(Deserialize)]
pub(crate) struct CardRef {
    #[serde(default)]
    card_id: Option<String>,
    #[serde(default)]
    external_user_id: Option<String>,
}

async fn load(
    state: &AppState,
    caller: &Caller,
    r: &CardRef,
) -> Result<(CardRecord, impl std::ops::DerefMut<Target = Conn>), ApiError> {
    let user = required_user(r.external_user_id.as_deref())?;
    let mut conn = state.store.conn().await?;
    let card = card_for_user(
        &mut conn,
        &caller.project_id,
        r.card_id.as_deref(),
        Some(user),
    )
    .await?;
    Ok((card, conn))
}

pub(crate) async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Payload(r): Payload<CardRef>,
) -> ApiResult<Card> {
    let (card, mut conn) = load(&state, &caller, &r).await?;
    Ok(reply(view(&mut conn, card).await?))
}

pub(crate) async fn balance(
    State(state): State<AppState>,
    caller: Caller,
    Payload(r): Payload<CardRef>,
) -> ApiResult<serde_json::Value> {
    let (card, mut conn) = load(&state, &caller, &r).await?;
    let b = balance_of(&mut conn, &card).await?;
    Ok(reply(json!({
        "card_id": card.id,
        "currency": b.currency,
        "available": b.available,
        "pending": b.pending,
    })))
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
    State(state): State<AppState>,
    caller: Caller,
    Payload(r): Payload<CardRef>,
) -> ApiResult<serde_json::Value> {
    let (card, mut conn) = load(&state, &caller, &r).await?;
    let plaintext = state
        .catalog()
        .subprovider(&card.subprovider_code)
        .is_some_and(|s| s.plaintext_details);
    if !plaintext {
        return Err(ApiError::new(
            ErrorSlug::CardDetailsPlaintextUnavailable,
            "The card's provider does not expose plaintext card details",
        )
        .into());
    }
    let sealed = card.secrets_enc.as_deref().ok_or_else(|| {
        ApiError::new(
            ErrorSlug::CardNotActive,
            format!("Card is {}; it has no details yet", card.status),
        )
    })?;
    let secrets: serde_json::Value = state
        .master
        .open(sealed)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| {
            tracing::error!(card_id = %card.id, "card secrets cannot be opened with the master key");
            ApiError::internal()
        })?;
    let holder = cardholders::get(&mut conn, &caller.project_id, &card.cardholder_id)
        .await?
        .and_then(|h| kyc::read(&state, &h))
        .map(|k| json!({ "first_name": k.first_name, "last_name": k.last_name, "name": format!("{} {}", k.first_name, k.last_name) }))
        .unwrap_or(serde_json::Value::Null);
    Ok(reply(json!({
        "card_id": card.id,
        "status": card.status,
        "details": {
            "card_number": secrets["pan"],
            "cvv": secrets["cvv"],
            "expiry_month": card.expiry_month,
            "expiry_year": card.expiry_year,
            "billing_address": SANDBOX_BILLING_ADDRESS(),
        },
        "holder": holder,
    })))
}

pub(crate) async fn find(
    State(state): State<AppState>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> Result<Json<Page<Card>>, HttpError> {
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
    Ok(Json(Page::new(items, total, &page)))
}

#[derive(Serialize)]
pub(crate) struct StatusReply {
    card_id: String,
    status: &'static str,
}

async fn change(state: AppState, caller: Caller, r: CardRef, c: Change) -> ApiResult<StatusReply> {
    let (card_id, status) = status::change(
        &state,
        &caller.project_id,
        r.card_id.as_deref(),
        r.external_user_id.as_deref(),
        c,
    )
    .await?;
    Ok(reply(StatusReply { card_id, status }))
}

pub(crate) async fn freeze(
    State(state): State<AppState>,
    caller: Caller,
    Payload(r): Payload<CardRef>,
) -> ApiResult<StatusReply> {
    change(state, caller, r, Change::Freeze).await
}

pub(crate) async fn unfreeze(
    State(state): State<AppState>,
    caller: Caller,
    Payload(r): Payload<CardRef>,
) -> ApiResult<StatusReply> {
    change(state, caller, r, Change::Unfreeze).await
}

pub(crate) async fn create(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    RawRequest(raw): RawRequest,
    Payload(req): Payload<issue::IssueRequest>,
) -> Result<Response, HttpError> {
    let key = idempotency::key_from(&headers, &raw)?;
    idempotency::run(
        &state.store,
        &caller.project_id,
        "cards/create",
        key,
        &raw,
        |token| issue::create(&state, &caller.project_id, req, token),
    )
    .await
}

pub(crate) async fn topup(
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    RawRequest(raw): RawRequest,
    Payload(req): Payload<MoveRequest>,
) -> Result<Response, HttpError> {
    let key = idempotency::key_from(&headers, &raw)?;
    idempotency::run(
        &state.store,
        &caller.project_id,
        "cards/topup",
        key,
        &raw,
        |token| topup::topup(&state, &caller.project_id, req, token),
    )
    .await
}

pub(crate) async fn withdraw(
    State(state): State<AppState>,
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
    State(state): State<AppState>,
    caller: Caller,
    headers: HeaderMap,
    RawRequest(raw): RawRequest,
    Payload(req): Payload<crate::flows::close::CloseRequest>,
) -> Result<Response, HttpError> {
    let key = idempotency::key_from(&headers, &raw)?;
    idempotency::run(
        &state.store,
        &caller.project_id,
        "cards/close",
        key,
        &raw,
        |token| crate::flows::close::close(&state, &caller.project_id, req, token),
    )
    .await
}

#[derive(Serialize)]
struct ProductView {
    product_code: String,
    /// Legacy name of `product_code`.
    product_id: String,
    name: String,
    subprovider_code: String,
    active: bool,
    card_currency: String,
    pricing: serde_json::Value,
    limits: serde_json::Value,
}

impl From<&Product> for ProductView {
    fn from(p: &Product) -> Self {
        let bps = p.pricing.topup_fee_bps;
        ProductView {
            product_code: p.code.clone(),
            product_id: p.code.clone(),
            name: p.name.clone(),
            subprovider_code: p.subprovider_code.clone(),
            active: p.active,
            card_currency: p.card_currency.clone(),
            pricing: json!({
                "currency": "usdt",
                "issue_fee": p.pricing.issue_fee,
                "topup_fee_percent": format!("{}.{:02}", bps / 100, bps % 100),
                "topup_fee_fixed": p.pricing.topup_fee_fixed,
                "valid": p.pricing_problem.is_none(),
            }),
            limits: json!({
                "currency": "usdt",
                "topup_min": p.limits.topup_min,
                "topup_max": p.limits.topup_max,
                "valid": p.limits_problem.is_none(),
            }),
        }
    }
}

pub(crate) async fn products(
    State(state): State<AppState>,
    _caller: Caller,
) -> Result<Json<serde_json::Value>, HttpError> {
    let items: Vec<ProductView> = state
        .catalog()
        .products()
        .iter()
        .map(ProductView::from)
        .collect();
    Ok(Json(
        json!({ "success": true, "items": items, "total": items.len() }),
    ))
}

/// cards/txs: the card's transactions in the `card_transaction` webhook shape, newest
/// change first; `slug` filters on `card_tx_data.type`.
pub(crate) async fn txs(
    State(state): State<AppState>,
    caller: Caller,
    RawRequest(raw): RawRequest,
) -> Result<Json<Page<serde_json::Value>>, HttpError> {
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
        .map(|t| crate::network::view::item(t, &card))
        .collect();
    Ok(Json(Page::new(items, total, &page)))
}
