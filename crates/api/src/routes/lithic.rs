//! What Lithic sends us (CONTRACT §14), signed by Lithic, outside the envelope and
//! outside our API's document (Lithic's API defines them): `POST
//! /provider/lithic/{subprovider_code}/asa` and `…/events`. What each message means and
//! what we answer is the core's (`issuing_app::provider::lithic`).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use issuing_app::provider::lithic::{asa, events, Reply, Signed};
use issuing_app::App;

pub(super) fn routes() -> Router<App> {
    Router::new()
        .route("/provider/lithic/{subprovider_code}/asa", post(asa))
        .route("/provider/lithic/{subprovider_code}/events", post(events))
}

/// The Standard Webhooks headers of a message.
fn signed(headers: &HeaderMap) -> Signed<'_> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    Signed {
        id: header("webhook-id"),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
    }
}

fn answer(reply: Reply) -> Response {
    let status = StatusCode::from_u16(reply.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(reply.body)).into_response()
}

async fn asa(
    State(app): State<App>,
    Path(code): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(asa::asa(&app, &code, &signed(&headers), &body).await)
}

async fn events(
    State(app): State<App>,
    Path(code): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(events::events(&app, &code, &signed(&headers), &body).await)
}
