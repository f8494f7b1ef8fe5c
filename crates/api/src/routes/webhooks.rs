//! wh/subscribe, wh/unsubscribe, wh/subscriptions (CONTRACT §6), and the delivery log
//! beyond the spec: wh/deliveries and wh/redeliver.

use super::filters;
use crate::pipeline::{reply, ApiResult, Caller, Payload, RawRequest};
use axum::extract::State;
use issuing_app::webhooks::{guard, redeliver};
use issuing_app::App;
use issuing_app::Mode;
use issuing_domain::ids::new_id;
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_domain::webhooks::{
    parse_event_types, WebhookUrl, MAX_ACTIVE_SUBSCRIPTIONS, MAX_TITLE_LEN,
};
use issuing_store::deliveries::{self, DeliveryFilter, DeliveryRecord};
use issuing_store::subscriptions::{self, SubscriptionRecord};
use issuing_store::writer::AsBatch;
use issuing_wire::api::{
    Delivery, Page, RedeliverResponse, Subscription, WhSubscribe, WhUnsubscribe,
};
use issuing_wire::{ApiError, ErrorSlug, PageRequest};

/// Failed deliveries queued again by one wh/redeliver call with `since`; a larger
/// backlog is queued by calling again.
const REDELIVER_BATCH: i64 = 1000;

fn subscription_view(s: SubscriptionRecord) -> Subscription {
    Subscription {
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
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<WhSubscribe>,
) -> ApiResult<Subscription> {
    let url = WebhookUrl::parse(&req.url)?;
    let title = title(req.title)?;
    let event_types = parse_event_types(&req.event_types)?;
    if state.config.mode == Mode::Production {
        guard::check_subscription(&url, &state.config.webhook_allowed_networks).await?;
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
    Ok(reply(subscription_view(record)))
}

fn not_found() -> ApiError {
    ApiError::new(ErrorSlug::SubscriptionNotFound, "Subscription not found")
}

pub(crate) async fn unsubscribe(
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<WhUnsubscribe>,
) -> ApiResult<Subscription> {
    let id = req.id;
    if id.trim().is_empty() {
        return Err(ApiError::validation("id is required").into());
    }
    let mut tx = state.store.begin().await?;
    if subscriptions::get(&mut tx, &caller.project_id, &id)
        .await?
        .is_none()
    {
        return Err(not_found().into());
    }
    subscriptions::deactivate(
        &mut tx.as_batch(),
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
    Ok(reply(subscription_view(record)))
}

pub(crate) async fn list(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Page<Subscription>> {
    let page = PageRequest::parse(&req, subscriptions::SORT_KEYS)?;
    let mut conn = state.store.conn().await?;
    let (items, total) =
        subscriptions::find(&mut conn, state.store.backend(), &caller.project_id, &page).await?;
    Ok(reply(Page::new(
        items.into_iter().map(subscription_view).collect(),
        total,
        &page,
    )))
}

fn delivery_view(d: DeliveryRecord) -> Delivery {
    Delivery {
        delivery_id: d.id,
        subscription_id: d.subscription_id,
        event_id: d.event_id,
        event_type: d.event_type,
        state: d.state,
        // Attempts are bounded by the retry schedule and statuses are HTTP statuses, so
        // both fit; a value that did not would be a bug, shown as 0 / left out.
        attempts: u32::try_from(d.attempts).unwrap_or(0),
        last_status: d.last_status.and_then(|s| u16::try_from(s).ok()),
        last_error: d.last_error,
        last_attempt_at: d.last_attempt_at.map(to_rfc3339),
        next_attempt_at: d.next_attempt_at.map(to_rfc3339),
        created_at: to_rfc3339(d.created_at),
        updated_at: to_rfc3339(d.updated_at),
        completed_at: d.completed_at.map(to_rfc3339),
    }
}

pub(crate) async fn deliveries(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Page<Delivery>> {
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
    Ok(reply(Page::new(
        items.into_iter().map(delivery_view).collect(),
        total,
        &page,
    )))
}

pub(crate) async fn redeliver(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<RedeliverResponse> {
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
    let result = match (delivery_id, since) {
        (Some(id), None) => {
            let d = redeliver::one(&state, &caller.project_id, &id).await?;
            RedeliverResponse {
                queued: 1,
                delivery: Some(delivery_view(d)),
                batch_limit: None,
            }
        }
        (None, Some(since)) => {
            let queued = redeliver::failed_since(
                &state,
                &caller.project_id,
                since,
                subscription_id.first().map(String::as_str),
                REDELIVER_BATCH,
            )
            .await?;
            RedeliverResponse {
                queued,
                delivery: None,
                batch_limit: Some(REDELIVER_BATCH.unsigned_abs()),
            }
        }
        _ => {
            return Err(ApiError::validation("give either delivery_id or since").into());
        }
    };
    Ok(reply(result))
}
