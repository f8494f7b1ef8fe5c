//! Idempotent execution of money-moving requests (CONTRACT §5).

use super::reply::HttpError;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use issuing_domain::time::now_micros;
use issuing_store::idempotency::{self, Claim, Key};
use issuing_store::{Conn, Store, StoreError};
use issuing_wire::{ApiError, ErrorSlug};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::time::Duration;

/// Spec: a key stays valid for 7 days.
const KEY_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The same, in the store's microseconds.
pub(crate) const KEY_TTL_MICROS: i64 = 7 * 24 * 3600 * 1_000_000;
/// How long a claim protects a request still executing. Longer than any request may
/// take; after it a crashed request's key can be taken over.
const CLAIM_TTL: Duration = Duration::from_secs(60);
const MAX_KEY_LEN: usize = 255;

/// A claimed idempotency key, handed to the flow so it can store its response in the
/// transaction that makes its change.
#[derive(Clone)]
pub(crate) struct IdempotencyToken {
    project_id: String,
    endpoint: &'static str,
    key: String,
    hash: String,
}

impl IdempotencyToken {
    /// The key of `request` for `endpoint` (its hash leaves out the timestamp and key).
    pub(crate) fn new(
        project_id: &str,
        endpoint: &'static str,
        key: String,
        request: &Value,
    ) -> Self {
        IdempotencyToken {
            project_id: project_id.to_owned(),
            endpoint,
            key,
            hash: request_hash(request),
        }
    }

    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// The project and endpoint the key belongs to.
    pub(crate) fn scope(&self) -> (&str, &'static str) {
        (&self.project_id, self.endpoint)
    }

    pub(crate) fn hash(&self) -> &str {
        &self.hash
    }

    pub(crate) fn as_key(&self) -> Key<'_> {
        Key {
            project_id: &self.project_id,
            endpoint: self.endpoint,
            key: &self.key,
            request_hash: &self.hash,
        }
    }

    pub async fn complete(&self, conn: &mut Conn, body: &Value) -> Result<(), StoreError> {
        idempotency::complete(conn, &self.as_key(), 200, &body.to_string()).await
    }
}

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

/// The parameters that must match on a retry: the request without its timestamp and key.
fn request_hash(req: &Value) -> String {
    let mut params = req.clone();
    if let Some(obj) = params.as_object_mut() {
        obj.remove("request_timestamp");
        obj.remove("idempotency_key");
    }
    // serde_json's map keeps keys sorted, so equal objects serialise equally.
    let digest = Sha256::digest(params.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `work` at most once per (project, endpoint, key). A finished key answers its
/// stored response; a key still executing or used with other parameters answers 400
/// `idempotency_conflict`; a failed request releases the key for a corrected retry.
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
    let token = IdempotencyToken::new(project_id, endpoint, key, req);
    let now = now_micros();
    let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
    let claim = {
        let mut tx = store.begin().await?;
        let claim = idempotency::claim(
            &mut tx,
            &token.as_key(),
            now,
            now + micros(CLAIM_TTL),
            now + micros(KEY_TTL),
        )
        .await?;
        tx.commit().await.map_err(StoreError::from)?;
        claim
    };
    match claim {
        Claim::Acquired => {}
        Claim::Done { status, body } => return stored_response(status, &body),
        refused => return Err(conflict(&refused).into()),
    }
    let kept = token.clone();
    match work(token).await {
        Ok(body) => Ok(axum::Json(body).into_response()),
        Err(e) => {
            let mut conn = store.conn().await?;
            if let Err(release_err) = idempotency::release(&mut conn, &kept.as_key()).await {
                tracing::warn!(error = %release_err, "could not release idempotency key; it expires on its own");
            }
            Err(e.into())
        }
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

/// Why a key that is not free refuses a request: still executing, or other parameters.
pub(crate) fn conflict(claim: &Claim) -> ApiError {
    let message = match claim {
        Claim::ParametersDiffer => "This idempotency key was used with different parameters",
        Claim::Acquired | Claim::InProgress | Claim::Done { .. } => {
            "A request with this idempotency key is still in progress"
        }
    };
    ApiError::new(ErrorSlug::IdempotencyConflict, message)
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
