//! One file per resource. Each handler takes the caller and a typed request and returns
//! a typed reply or an `ApiError`.

mod cardholders;
mod cards;
mod filters;
pub(crate) mod orders;
mod project;
mod ready;
mod simulate;
mod system;
mod threeds;
mod users;
mod webhooks;

use crate::pipeline::{envelope_layer, HttpError};
use crate::state::AppState;
use crate::Mode;
use axum::routing::{get, post};
use axum::{middleware, Json, Router};
use issuing_wire::{ApiError, ErrorSlug};

pub(crate) fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/system/health", post(system::health))
        .route("/system/time", post(system::time))
        .route("/project/balance", post(project::balance))
        .route("/project/txs", post(project::txs))
        .route("/project/wallet/trc20", post(project::wallet_trc20))
        .route("/users/create", post(users::create))
        .route("/users/get", post(users::get))
        .route("/users/find", post(users::find))
        .route("/cardholders/create", post(cardholders::create))
        .route("/cardholders/get", post(cardholders::get))
        .route("/cardholders/find", post(cardholders::find))
        .route("/cards/products", post(cards::products))
        .route("/cards/create", post(cards::create))
        .route("/cards/get", post(cards::get))
        .route("/cards/find", post(cards::find))
        .route("/cards/balance", post(cards::balance))
        .route("/cards/details", post(cards::details))
        .route("/cards/freeze", post(cards::freeze))
        .route("/cards/unfreeze", post(cards::unfreeze))
        .route("/cards/topup", post(cards::topup))
        .route("/cards/withdraw", post(cards::withdraw))
        .route("/cards/txs", post(cards::txs))
        .route("/cards/close", post(cards::close))
        .route("/cards/3ds/confirm", post(threeds::confirm))
        .route("/orders/check", post(orders::check))
        .route("/wh/subscribe", post(webhooks::subscribe))
        .route("/wh/unsubscribe", post(webhooks::unsubscribe))
        .route("/wh/subscriptions", post(webhooks::list))
        .route("/wh/deliveries", post(webhooks::deliveries))
        .route("/wh/redeliver", post(webhooks::redeliver));
    // CONTRACT §7: the simulation endpoints exist only in the sandbox; in production
    // they are unknown paths (404).
    let api = if state.config.mode == Mode::Sandbox {
        api.merge(simulate_routes())
    } else {
        api
    };
    let api = api
        .fallback(unknown_endpoint)
        .method_not_allowed_fallback(wrong_method)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            envelope_layer,
        ))
        // Outside the envelope: a flood is refused before any lookup or decryption.
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::pipeline::rate_limit::rate_limit_layer,
        ))
        .with_state(state.clone());
    Router::new()
        .nest("/api/v2", api)
        // Plain liveness probe for load balancers and operators; no credentials needed.
        .route(
            "/health",
            get(|| async { Json(serde_json::json!({"success": true, "status": "ok"})) }),
        )
        // Readiness probe: 503 while the database does not answer.
        .route("/ready", get(ready::ready).with_state(state.clone()))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            crate::pipeline::timeout::timeout_layer,
        ))
        // Outermost: every answer is counted and carries a request id.
        .layer(middleware::from_fn_with_state(
            state.metrics.clone(),
            crate::metrics::track_requests,
        ))
        .layer(middleware::from_fn(crate::pipeline::request_id_layer))
}

/// The card network simulator: thin callers of the same entry points a provider adapter
/// would call.
fn simulate_routes() -> Router<AppState> {
    Router::new()
        .route("/simulate/cards/auth", post(simulate::auth))
        .route("/simulate/cards/clear", post(simulate::clear))
        .route("/simulate/cards/reversal", post(simulate::reversal))
        .route("/simulate/cards/refund", post(simulate::refund))
        .route("/simulate/cards/3ds", post(threeds::simulate))
}

/// Every endpoint is POST (spec: Endpoints).
async fn wrong_method() -> HttpError {
    HttpError(ApiError::new(
        ErrorSlug::MethodNotAllowed,
        "Endpoints accept POST only",
    ))
}

async fn unknown_endpoint() -> HttpError {
    HttpError(ApiError::new(ErrorSlug::NotFound, "Unknown endpoint"))
}
