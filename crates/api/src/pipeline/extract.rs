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
        typed(plain.0.as_ref()).map(Payload).map_err(HttpError)
    }
}

/// The request as `T`, read from its text rather than from the Value: serde_json hands
/// a number to a typed field as an f64 when it can, which respells `0.000001` as `1e-6`.
/// Read from text, a number keeps the digits the client wrote (`arbitrary_precision`),
/// so amounts are judged by them (issuing_wire::Amount::parse_positive).
fn typed<T: DeserializeOwned>(request: &Value) -> Result<T, ApiError> {
    serde_json::from_str::<T>(&request.to_string())
        .map_err(|e| ApiError::validation(format!("invalid request: {}", without_position(&e))))
}

/// The error without serde_json's " at line 1 column N" (the client never saw this text).
fn without_position(e: &serde_json::Error) -> String {
    let text = e.to_string();
    match text.rfind(" at line ") {
        Some(i) if e.line() > 0 => text[..i].to_owned(),
        _ => text,
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize)]
    struct Req {
        #[serde(default)]
        amount: Option<Value>,
        #[serde(default)]
        name: Option<String>,
    }

    #[test]
    fn numbers_reach_typed_fields_as_written() {
        for text in ["0.000001", "0.000015", "10.50", "10.5", "1e-6", "1000.0"] {
            let v: Value = serde_json::from_str(&format!(r#"{{"amount": {text}}}"#)).unwrap();
            let r: Req = typed(&v).unwrap();
            assert_eq!(r.amount.unwrap().to_string(), text);
        }
    }

    #[test]
    fn errors_name_the_problem_without_a_position() {
        let v = serde_json::json!({"name": 5});
        let e = typed::<Req>(&v).err().unwrap();
        assert!(typed::<Req>(&serde_json::json!({"name": "x"}))
            .unwrap()
            .name
            .is_some());
        assert_eq!(e.slug, issuing_wire::ErrorSlug::ValidationError);
        assert!(e.message.contains("expected a string"), "{}", e.message);
        assert!(!e.message.contains("line"), "{}", e.message);
    }
}
