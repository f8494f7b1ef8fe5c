//! Bounds the time one request may take once its head has arrived, body included: a
//! client that drips its body, or a request stuck behind a lock, is answered 408
//! `request_timeout` (plain) instead of holding its connection and worker forever.

use super::reply::error_response;
use crate::ApiState;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use issuing_wire::{ApiError, ErrorSlug};

pub(crate) async fn timeout_layer(
    State(state): State<ApiState>,
    req: Request,
    next: Next,
) -> Response {
    match tokio::time::timeout(state.app.config.request_timeout, next.run(req)).await {
        Ok(response) => response,
        Err(_) => error_response(&ApiError::new(
            ErrorSlug::RequestTimeout,
            "The request took too long",
        )),
    }
}
