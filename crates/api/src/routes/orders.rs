//! orders/check: one order in the unified order schema (`issuing_app::flows::orders`).

use crate::pipeline::{reply, ApiResult, Caller, Payload};
use axum::extract::State;
use issuing_app::flows::orders::answer;
use issuing_app::App;
use issuing_store::orders;
use issuing_wire::api::{Order, OrdersCheck};
use issuing_wire::{ApiError, ErrorSlug};

pub(crate) async fn check(
    State(state): State<App>,
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
    Ok(reply(answer(order)))
}
