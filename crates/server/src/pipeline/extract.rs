use super::reply::HttpError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use issuing_wire::ApiError;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::sync::Arc;

/// The authenticated caller, put in place by the envelope layer.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    pub project_id: String,
}

/// The decrypted request object, put in place by the envelope layer.
#[derive(Debug, Clone)]
pub(crate) struct Plaintext(pub Arc<Value>);

fn missing_layer() -> HttpError {
    tracing::error!("handler reached without the envelope layer");
    HttpError(ApiError::internal())
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(missing_layer)
    }
}

/// A typed plaintext request. Unknown fields are ignored (CONTRACT §2); a field of the
/// wrong type is a `validation_error` naming it.
pub(crate) struct Payload<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Payload<T> {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let plain = parts
            .extensions
            .get::<Plaintext>()
            .ok_or_else(missing_layer)?;
        T::deserialize(plain.0.as_ref())
            .map(Payload)
            .map_err(|e| HttpError(ApiError::validation(format!("invalid request: {e}"))))
    }
}

/// The whole request object, for fields parsed by shared helpers (paging).
pub(crate) struct RawRequest(pub Arc<Value>);

impl<S: Send + Sync> FromRequestParts<S> for RawRequest {
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let plain = parts
            .extensions
            .get::<Plaintext>()
            .ok_or_else(missing_layer)?;
        Ok(RawRequest(plain.0.clone()))
    }
}
