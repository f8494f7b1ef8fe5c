//! Request ids: every request gets one, every answer carries it in `X-Request-Id`, and
//! every log line written while the request is handled carries it through a span.
//!
//! An incoming `X-Request-Id` of 1 to 64 visible ASCII characters is kept (so a caller
//! or a proxy can follow its own id through our logs); anything else is replaced by a
//! fresh `req_…` id. The layer sits outside the envelope layer, so plain errors, 404s and
//! 405s carry the id too.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use std::time::Instant;
use tracing::Instrument;

pub(crate) static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

const MAX_LEN: usize = 64;

/// The incoming id if it is sane: 1 to 64 characters, each visible ASCII (`!` to `~`).
fn accepted(v: &HeaderValue) -> bool {
    let b = v.as_bytes();
    !b.is_empty() && b.len() <= MAX_LEN && b.iter().all(|c| (0x21..=0x7e).contains(c))
}

fn generate() -> HeaderValue {
    let id = format!("req_{}", issuing_domain::ids::new_id());
    HeaderValue::from_str(&id).unwrap_or_else(|_| HeaderValue::from_static("req_unknown"))
}

/// The path as logs may show it: a reveal page's token is a credential (CONTRACT §16),
/// so that path is logged as its route.
fn loggable_path(path: &str) -> &str {
    if path.starts_with("/reveal/") {
        "/reveal/{token}"
    } else {
        path
    }
}

pub async fn request_id_layer(mut req: Request, next: Next) -> Response {
    let id = req
        .headers()
        .get(&X_REQUEST_ID)
        .filter(|v| accepted(v))
        .cloned()
        .unwrap_or_else(generate);
    // Handlers see the id that was settled on in the request's own header.
    req.headers_mut().insert(X_REQUEST_ID.clone(), id.clone());
    // Visible ASCII only, so the header value is always text.
    let id_text = id.to_str().unwrap_or_default();
    let span = tracing::info_span!(
        "request",
        request_id = %id_text,
        method = %req.method(),
        path = %loggable_path(req.uri().path()),
    );
    let start = Instant::now();
    let mut response = next.run(req).instrument(span.clone()).await;
    span.in_scope(|| {
        tracing::debug!(
            target: "issuing::access",
            status = response.status().as_u16(),
            elapsed_ms = (start.elapsed().as_secs_f64() * 1e6).round() / 1e3,
            "request answered"
        );
    });
    response.headers_mut().insert(X_REQUEST_ID.clone(), id);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_only_short_visible_ascii() {
        let ok = |s: &str| accepted(&HeaderValue::from_str(s).unwrap_or_else(|_| generate()));
        assert!(ok("abc-123_XYZ.~!"));
        assert!(ok(&"a".repeat(64)));
        assert!(!ok(&"a".repeat(65)));
        assert!(!ok("has space"));
        assert!(!ok("tab\there"));
        assert!(!accepted(&HeaderValue::from_static("")));
        assert!(!accepted(
            &HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap_or_else(|_| generate())
        ));
        assert_eq!(loggable_path("/reveal/abc"), "/reveal/{token}");
        assert_eq!(loggable_path("/api/v2/cards/get"), "/api/v2/cards/get");
        let g = generate();
        assert!(accepted(&g), "{g:?}");
        assert!(g.to_str().is_ok_and(|s| s.starts_with("req_")));
    }
}
