//! Bounds the time one request may take once its head has arrived, body included: a
//! client that drips its body, or a request stuck behind a lock, is answered 408
//! `request_timeout` (plain) instead of holding its connection and worker forever.

use super::reply::error_response;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use issuing_wire::{ApiError, ErrorSlug};
use std::time::Duration;

/// Above the slowest legitimate request (a provider call is bounded at 10 s, database
/// waits at 15 s).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

pub(crate) async fn timeout_layer(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(state.config.request_timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => error_response(&ApiError::new(
            ErrorSlug::RequestTimeout,
            "The request took too long",
        )),
    }
}
