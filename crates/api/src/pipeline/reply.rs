use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use issuing_wire::ApiError;
use serde::Serialize;

/// A success body: `{"success": true, ...fields}`.
#[derive(Serialize)]
pub(crate) struct Success<T> {
    success: bool,
    #[serde(flatten)]
    body: T,
}

pub(crate) fn reply<T: Serialize>(body: T) -> Json<Success<T>> {
    Json(Success {
        success: true,
        body,
    })
}

pub(crate) type ApiResult<T> = Result<Json<Success<T>>, HttpError>;

/// `ApiError` as an HTTP response: the one place a slug becomes a status and body.
#[derive(Debug)]
pub(crate) struct HttpError(pub ApiError);

impl From<ApiError> for HttpError {
    fn from(e: ApiError) -> Self {
        HttpError(e)
    }
}

impl From<issuing_store::StoreError> for HttpError {
    fn from(e: issuing_store::StoreError) -> Self {
        HttpError(e.into())
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        error_response(&self.0)
    }
}

pub(crate) fn error_response(e: &ApiError) -> Response {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, Json(e.body())).into_response();
    if let Some(secs) = e.slug.retry_after_secs() {
        response
            .headers_mut()
            .insert(axum::http::header::RETRY_AFTER, secs.into());
    }
    response
}
