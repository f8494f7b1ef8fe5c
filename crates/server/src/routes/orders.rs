//! orders/check and the unified order schema every order-returning endpoint uses.

use crate::pipeline::{reply, ApiResult, Caller, Payload};
use crate::state::AppState;
use axum::extract::State;
use issuing_domain::time::to_rfc3339;
use issuing_store::orders::{self, OrderRecord};
use issuing_wire::{Amount, ApiError, ErrorSlug};
use serde::{Deserialize, Serialize};

/// The unified order schema. Optional fields are absent when they do not apply.
#[derive(Debug, Serialize)]
pub(crate) struct OrderView {
    order_id: String,
    order_type: String,
    status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    card_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    balance_before: Option<Amount>,
    #[serde(skip_serializing_if = "Option::is_none")]
    balance_after: Option<Amount>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error_slug: Option<String>,
    data: serde_json::Value,
    created_at: String,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    issue_status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    is_issued: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    provider_card_status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    topup_status: Option<String>,
}

impl From<OrderRecord> for OrderView {
    fn from(o: OrderRecord) -> Self {
        OrderView {
            order_id: o.id,
            order_type: o.order_type,
            status: o.status,
            card_id: o.card_id,
            balance_before: o.balance_before.map(Amount::from_micros),
            balance_after: o.balance_after.map(Amount::from_micros),
            last_error: o.last_error,
            last_error_slug: o.last_error_slug,
            data: o.data,
            created_at: to_rfc3339(o.created_at),
            updated_at: to_rfc3339(o.updated_at),
            completed_at: o.completed_at.map(to_rfc3339),
            failed_at: o.failed_at.map(to_rfc3339),
            issue_status: o.issue_status,
            is_issued: o.is_issued,
            provider_card_status: o.provider_card_status,
            topup_status: o.topup_status,
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct CheckRequest {
    #[serde(default)]
    order_id: Option<String>,
}

pub(crate) async fn check(
    State(state): State<AppState>,
    caller: Caller,
    Payload(req): Payload<CheckRequest>,
) -> ApiResult<OrderView> {
    let order_id = req
        .order_id
        .filter(|s| !s.trim().is_empty())
        .ok_or_else(|| ApiError::validation("order_id is required"))?;
    let mut conn = state.store.conn().await?;
    let order = orders::get(&mut conn, &caller.project_id, &order_id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorSlug::OrderNotFound, "Order not found"))?;
    Ok(reply(OrderView::from(order)))
}
