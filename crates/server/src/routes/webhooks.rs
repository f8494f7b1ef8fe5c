//! wh/subscribe, wh/unsubscribe, wh/subscriptions (CONTRACT §6), and the delivery log
//! beyond the spec: wh/deliveries and wh/redeliver.

use super::filters;
use crate::pipeline::{reply, ApiResult, Caller, HttpError, Payload, RawRequest};
use crate::state::AppState;
use crate::webhooks::guard;
use crate::Mode;
use axum::extract::State;
use axum::Json;
use issuing_domain::ids::new_id;
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_domain::webhooks::{
    parse_event_types, WebhookUrl, MAX_ACTIVE_SUBSCRIPTIONS, MAX_TITLE_LEN,
};
use issuing_store::deliveries::{self, DeliveryFilter, DeliveryRecord};
use issuing_store::subscriptions::{self, SubscriptionRecord};
use issuing_store::wakeup::{announce, Queue};
use issuing_wire::{ApiError, ErrorSlug, Page, PageRequest};
use serde::{Deserialize, Serialize};

/// Failed deliveries queued again by one wh/redeliver call with `since`; a larger
/// backlog is queued by calling again.
const REDELIVER_BATCH: i64 = 1000;

#[derive(Debug, Serialize)]
pub(crate) struct SubscriptionView {
    id: String,
    title: String,
    url: String,
    active: bool,
    created_at: String,
    /// Beyond the spec: the event types it receives; empty means all.
    event_types: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deactivated_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deactivated_reason: Option<String>,
}

impl From<SubscriptionRecord> for SubscriptionView {
    fn from(s: SubscriptionRecord) -> Self {
        SubscriptionView {
            id: s.id,
            title: s.title,
            url: s.url,
            active: s.active,
            created_at: to_rfc3339(s.created_at),
            event_types: s.event_types,
            deactivated_at: s.deactivated_at.map(to_rfc3339),
            deactivated_reason: s.deactivated_reason,
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct SubscribeRequest {
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    event_types: Option<Vec<String>>,
}

fn title(raw: Option<String>) -> Result<String, ApiError> {
    let t = raw.unwrap_or_default().trim().to_owned();
    if t.chars().count() > MAX_TITLE_LEN {
        return Err(ApiError::validation(format!(
            "title must be at most {MAX_TITLE_LEN} characters"
        )));
    }
    if t.chars().any(char::is_control) {
        return Err(ApiError::validation(
            "title must not contain control characters",
        ));
    }
    Ok(t)
}

pub(crate) async fn subscribe(
    State(state): State<AppState>,
    caller: Caller,
    Payload(req): Payload<SubscribeRequest>,
) -> ApiResult<SubscriptionView> {
    let url = WebhookUrl::parse(req.url.as_deref().unwrap_or(""))?;
    let title = title(req.title)?;
    let event_types = parse_event_types(&req.event_types.unwrap_or_default())?;
    if state.config.mode == Mode::Production {
        guard::check_subscription(&url).await?;
    }
    let now = now_micros();
    let record = SubscriptionRecord {
        id: new_id(),
        project_id: caller.project_id.clone(),
        url: url.as_str().to_owned(),
        title,
        event_types,
        active: true,
        created_at: now,
        updated_at: now,
        deactivated_at: None,
        deactivated_reason: None,
    };
    let mut tx = state.store.begin().await?;
    subscriptions::lock_project(&mut tx, state.store.backend(), &caller.project_id).await?;
    if subscriptions::count_active(&mut tx, &caller.project_id).await? >= MAX_ACTIVE_SUBSCRIPTIONS {
        return Err(ApiError::new(
            ErrorSlug::SubscriptionLimitReached,
            format!("A project may hold at most {MAX_ACTIVE_SUBSCRIPTIONS} active subscriptions"),
        )
        .into());
    }
    subscriptions::insert(&mut tx, &record).await?;
    tx.commit().await.map_err(issuing_store::StoreError::from)?;
    Ok(reply(SubscriptionView::from(record)))
}

#[derive(Deserialize)]
pub(crate) struct ById {
    #[serde(default)]
    id: Option<String>,
}

fn not_found() -> ApiError {
    ApiError::new(ErrorSlug::SubscriptionNotFound, "Subscription not found")
}

pub(crate) async fn unsubscribe(
    State(state): State<AppState>,
    caller: Caller,
    Payload(req): Payload<ById>,
) -> ApiResult<SubscriptionView> {
    let id = req
        .id
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ApiError::validation("id is required"))?;
    let mut tx = state.store.begin().await?;
    if subscriptions::get(&mut tx, &caller.project_id, &id)
        .await?
        .is_none()
    {
        return Err(not_found().into());
    }
    subscriptions::deactivate(
        &mut tx,
        &caller.project_id,
        &id,
        "unsubscribed",
        now_micros(),
    )
    .await?;
    let record = subscriptions::get(&mut tx, &caller.project_id, &id)
        .await?
        .ok_or_else(not_found)?;
    tx.commit().await.map_err(issuing_store::StoreError::from)?;
    Ok(reply(SubscriptionView::from(record)))
}

pub(crate) async fn list(
    State(state): State<AppState>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> Result<Json<Page<SubscriptionView>>, HttpError> {
    let page = PageRequest::parse(&req, subscriptions::SORT_KEYS)?;
    let mut conn = state.store.conn().await?;
    let (items, total) =
        subscriptions::find(&mut conn, state.store.backend(), &caller.project_id, &page).await?;
    Ok(Json(Page::new(
        items.into_iter().map(SubscriptionView::from).collect(),
        total,
        &page,
    )))
}

#[derive(Debug, Serialize)]
pub(crate) struct DeliveryView {
    delivery_id: String,
    subscription_id: String,
    event_id: String,
    event_type: String,
    state: String,
    attempts: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_status: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_attempt_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_attempt_at: Option<String>,
    created_at: String,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed_at: Option<String>,
}

impl From<DeliveryRecord> for DeliveryView {
    fn from(d: DeliveryRecord) -> Self {
        DeliveryView {
            delivery_id: d.id,
            subscription_id: d.subscription_id,
            event_id: d.event_id,
            event_type: d.event_type,
            state: d.state,
            attempts: d.attempts,
            last_status: d.last_status,
            last_error: d.last_error,
            last_attempt_at: d.last_attempt_at.map(to_rfc3339),
            next_attempt_at: d.next_attempt_at.map(to_rfc3339),
            created_at: to_rfc3339(d.created_at),
            updated_at: to_rfc3339(d.updated_at),
            completed_at: d.completed_at.map(to_rfc3339),
        }
    }
}

pub(crate) async fn deliveries(
    State(state): State<AppState>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> Result<Json<Page<DeliveryView>>, HttpError> {
    let page = PageRequest::parse(&req, deliveries::SORT_KEYS)?;
    let states = filters::strings(&req, "state", "states")?;
    if let Some(bad) = states
        .iter()
        .find(|s| !deliveries::STATES.contains(&s.as_str()))
    {
        return Err(ApiError::validation(format!(
            "state {bad:?} is not one of: {}",
            deliveries::STATES.join(", ")
        ))
        .into());
    }
    let filter = DeliveryFilter {
        subscription_ids: filters::strings(&req, "subscription_id", "subscription_ids")?,
        event_types: filters::strings(&req, "event_type", "event_types")?,
        event_ids: filters::strings(&req, "event_id", "event_ids")?,
        states,
    };
    let mut conn = state.store.conn().await?;
    let (items, total) = deliveries::find(
        &mut conn,
        state.store.backend(),
        &caller.project_id,
        &filter,
        &page,
    )
    .await?;
    Ok(Json(Page::new(
        items.into_iter().map(DeliveryView::from).collect(),
        total,
        &page,
    )))
}

#[derive(Serialize)]
pub(crate) struct Redelivered {
    queued: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    delivery: Option<DeliveryView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    batch_limit: Option<i64>,
}

pub(crate) async fn redeliver(
    State(state): State<AppState>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Redelivered> {
    let delivery_id = match req.get("delivery_id") {
        None | Some(serde_json::Value::Null) => None,
        Some(serde_json::Value::String(s)) if !s.trim().is_empty() => Some(s.clone()),
        Some(_) => return Err(ApiError::validation("delivery_id must be a string").into()),
    };
    let since = filters::instant(&req, "since")?;
    let subscription_id = filters::strings(&req, "subscription_id", "subscription_ids")?;
    if subscription_id.len() > 1 {
        return Err(ApiError::validation("give at most one subscription_id").into());
    }
    let now = now_micros();
    let mut tx = state.store.begin().await?;
    let result = match (delivery_id, since) {
        (Some(id), None) => {
            let found = deliveries::get(&mut tx, &caller.project_id, &id).await?;
            if found.is_none() {
                return Err(
                    ApiError::new(ErrorSlug::DeliveryNotFound, "Delivery not found").into(),
                );
            }
            if !deliveries::redeliver(&mut tx, &caller.project_id, &id, now).await? {
                return Err(ApiError::new(
                    ErrorSlug::SubscriptionInactive,
                    "The delivery's subscription is inactive",
                )
                .into());
            }
            let d = deliveries::get(&mut tx, &caller.project_id, &id)
                .await?
                .ok_or_else(ApiError::internal)?;
            Redelivered {
                queued: 1,
                delivery: Some(d.into()),
                batch_limit: None,
            }
        }
        (None, Some(since)) => {
            let queued = deliveries::redeliver_failed_since(
                &mut tx,
                &caller.project_id,
                since,
                subscription_id.first().map(String::as_str),
                REDELIVER_BATCH,
                now,
            )
            .await?;
            Redelivered {
                queued,
                delivery: None,
                batch_limit: Some(REDELIVER_BATCH),
            }
        }
        _ => {
            return Err(ApiError::validation("give either delivery_id or since").into());
        }
    };
    if result.queued > 0 {
        announce(&mut tx, Queue::Deliveries).await?;
    }
    tx.commit().await.map_err(issuing_store::StoreError::from)?;
    state.deliveries_wakeup.notify_one();
    Ok(reply(result))
}
