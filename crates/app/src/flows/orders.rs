//! The unified order schema (`issuing_wire::api::Order`) every order-returning answer
//! uses, built from a stored order. Flows build it too: a top-up's or card issue's answer
//! is stored under its idempotency key in the transaction that makes its change.

use issuing_domain::time::to_rfc3339;
use issuing_store::orders::OrderRecord;
use issuing_wire::api::Order;
use issuing_wire::Amount;

/// The answer shape of an order.
pub fn answer(o: OrderRecord) -> Order {
    Order {
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
    }
}
