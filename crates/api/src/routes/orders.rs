//! orders/check and the unified order schema every order-returning endpoint uses.

use crate::pipeline::{reply, ApiResult, Caller, Payload};
use crate::state::AppState;
use axum::extract::State;
use issuing_domain::time::to_rfc3339;
use issuing_store::orders::{self, OrderRecord};
use issuing_wire::api::{Order, OrdersCheck};
use issuing_wire::{Amount, ApiError, ErrorSlug};
use serde::Serialize;

/// The unified order schema (`issuing_wire::api::Order`) built from a record; a
/// newtype so the conversion can live here, beside the flows that answer orders.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub(crate) struct OrderView(pub(crate) Order);

impl From<OrderRecord> for OrderView {
    fn from(o: OrderRecord) -> Self {
        OrderView(Order {
            order_id: o.id,
            order_type: o.order_type,
            status: o.status,
            card_id: o.card_id,
            balance_before: o.balance_before.map(|m| Amount::from_micros(m).into()),
            balance_after: o.balance_after.map(|m| Amount::from_micros(m).into()),
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
        })
    }
}

pub(crate) async fn check(
    State(state): State<AppState>,
    caller: Caller,
    Payload(req): Payload<OrdersCheck>,
) -> ApiResult<Order> {
    if req.order_id.trim().is_empty() {
        return Err(ApiError::validation("order_id is required").into());
    }
    let mut conn = state.store.conn().await?;
    let order = orders::get(&mut conn, &caller.project_id, &req.order_id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorSlug::OrderNotFound, "Order not found"))?;
    Ok(reply(OrderView::from(order).0))
}
