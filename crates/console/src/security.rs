//! The console's protections around every request: its response headers, and the
//! refusal of requests that change something from another origin (the CSRF token in
//! `session.rs` is the second check).

use super::view::ConsoleError;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// No inline script or style, nothing from elsewhere, never framed.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
     base-uri 'none'";

/// CONTRACT §12's headers on every answer: pages hold card and project data, so nothing
/// is cached, framed, sniffed or leaked through the referrer.
pub(crate) async fn headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    res
}

/// Refuses (403) a request that changes something when the browser says it comes from
/// another site (`Sec-Fetch-Site`), or when its `Origin` is not this host. Requests
/// without either header (not from a browser) still need the session and CSRF token.
pub(crate) async fn refuse_cross_origin(req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    if let Err(why) = same_origin(req.headers()) {
        tracing::info!(reason = why, path = %req.uri().path(), "console: cross-origin request refused");
        return ConsoleError::Forbidden("This request came from another site.").into_response();
    }
    next.run(req).await
}

fn same_origin(h: &HeaderMap) -> Result<(), &'static str> {
    if let Some(site) = h.get("sec-fetch-site") {
        // `none`: the user typed or bookmarked it; anything but the same origin is refused.
        match site.to_str().unwrap_or("") {
            "same-origin" | "none" => {}
            _ => return Err("sec-fetch-site"),
        }
    }
    if let Some(origin) = h.get(header::ORIGIN) {
        let origin = origin.to_str().map_err(|_| "origin")?;
        let authority = origin
            .strip_prefix("https://")
            .or_else(|| origin.strip_prefix("http://"))
            .ok_or("origin")?;
        // Behind a TLS proxy the scheme differs from ours; the proxy must pass `Host` on.
        let host = h
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .ok_or("host")?;
        if !authority.eq_ignore_ascii_case(host) {
            return Err("origin");
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn judges_fetch_metadata_and_origin() {
        let host = ("host", "127.0.0.1:8090");
        assert!(same_origin(&headers(&[host])).is_ok());
        assert!(same_origin(&headers(&[host, ("sec-fetch-site", "same-origin")])).is_ok());
        assert!(same_origin(&headers(&[host, ("sec-fetch-site", "none")])).is_ok());
        assert!(same_origin(&headers(&[host, ("sec-fetch-site", "cross-site")])).is_err());
        assert!(same_origin(&headers(&[host, ("sec-fetch-site", "same-site")])).is_err());
        assert!(same_origin(&headers(&[host, ("origin", "http://127.0.0.1:8090")])).is_ok());
        assert!(same_origin(&headers(&[host, ("origin", "https://127.0.0.1:8090")])).is_ok());
        assert!(same_origin(&headers(&[host, ("origin", "http://evil.example")])).is_err());
        assert!(same_origin(&headers(&[host, ("origin", "http://127.0.0.1:8091")])).is_err());
        assert!(same_origin(&headers(&[host, ("origin", "null")])).is_err());
        assert!(same_origin(&headers(&[("origin", "http://127.0.0.1:8090")])).is_err());
    }
}
