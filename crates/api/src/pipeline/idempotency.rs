//! Idempotency keys as the API takes them (CONTRACT §5): from the `Idempotency-Key`
//! header or the `idempotency_key` field, and a stored answer sent again. The claim
//! and the stored answer are the core's (`issuing_app::idempotency`).

use super::reply::HttpError;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use issuing_app::idempotency::{self, Answer, IdempotencyToken};
use issuing_store::{Store, StoreError};
use issuing_wire::{ApiError, ErrorSlug};
use serde_json::Value;

const MAX_KEY_LEN: usize = 255;

/// Reads the key from the `Idempotency-Key` header or the `idempotency_key` field; both
/// may be sent but must then agree.
pub(crate) fn key_from(headers: &HeaderMap, req: &Value) -> Result<String, ApiError> {
    let header = headers
        .get("Idempotency-Key")
        .map(|v| v.to_str().map(str::trim).map(str::to_owned))
        .transpose()
        .map_err(|_| ApiError::validation("Idempotency-Key header must be text"))?;
    let body = match req.get("idempotency_key") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_owned()),
        Some(_) => return Err(ApiError::validation("idempotency_key must be a string")),
    };
    let key = match (header, body) {
        (Some(h), Some(b)) if h != b => {
            return Err(ApiError::validation(
                "Idempotency-Key header and idempotency_key field differ",
            ))
        }
        (Some(k), _) | (None, Some(k)) => k,
        (None, None) => String::new(),
    };
    if key.is_empty() {
        return Err(ApiError::new(
            ErrorSlug::IdempotencyKeyRequired,
            "Idempotency key is required",
        ));
    }
    // The body field is checked with the rest of the request (pipeline/text.rs); a
    // header value may still hold a tab, and obs-text never reaches here (not text).
    if super::text::has_control(&key) {
        return Err(ApiError::validation(
            "idempotency key must not contain control characters",
        ));
    }
    if key.len() > MAX_KEY_LEN {
        return Err(ApiError::validation(format!(
            "idempotency key must be at most {MAX_KEY_LEN} bytes"
        )));
    }
    Ok(key)
}

/// `issuing_app::idempotency::run`, answered over HTTP.
pub(crate) async fn run<F, Fut>(
    store: &Store,
    project_id: &str,
    endpoint: &'static str,
    key: String,
    req: &Value,
    work: F,
) -> Result<Response, HttpError>
where
    F: FnOnce(IdempotencyToken) -> Fut,
    Fut: std::future::Future<Output = Result<Value, ApiError>>,
{
    match idempotency::run(store, project_id, endpoint, key, req, work).await? {
        Answer::Fresh(body) => Ok(axum::Json(body).into_response()),
        Answer::Stored { status, body } => stored_response(status, &body),
    }
}

/// The response stored under a finished key, answered again.
pub(crate) fn stored_response(status: i64, body: &str) -> Result<Response, HttpError> {
    let status = u16::try_from(status)
        .ok()
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    let body: Value = serde_json::from_str(body).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok((status, axum::Json(body)).into_response())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use serde_json::json;

    #[test]
    fn key_from_refuses_control_characters() {
        let mut headers = HeaderMap::new();
        headers.insert("Idempotency-Key", HeaderValue::from_static("a\tb"));
        let e = key_from(&headers, &json!({})).unwrap_err();
        assert_eq!(e.slug, ErrorSlug::ValidationError);
        let e = key_from(&HeaderMap::new(), &json!({"idempotency_key": "a\u{0}b"})).unwrap_err();
        assert_eq!(e.slug, ErrorSlug::ValidationError);
        assert_eq!(
            key_from(&HeaderMap::new(), &json!({"idempotency_key": " k-1 "})).unwrap(),
            "k-1"
        );
    }
}
