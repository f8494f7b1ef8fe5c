//! The console's protections around every request: the `Host` it must name (a page
//! of another site whose name resolves to the console's address, DNS rebinding, is
//! refused), the client's address, its response headers, and the refusal of requests
//! that change something from another origin (the CSRF token in `session.rs` is the
//! second check).

use super::view::ConsoleError;
use super::Console;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use issuing_domain::webhooks::AllowedNetworks;
use std::net::{IpAddr, SocketAddr};

/// The address a request came from: the connection's peer, or behind a trusted proxy
/// the last `X-Forwarded-For` entry that is not a trusted proxy.
#[derive(Debug, Clone)]
pub(crate) struct ClientAddress(pub String);

/// Host names a console on `listen` answers to, with `extra` (lower case, no port).
pub(crate) fn allowed_hosts(listen: Option<SocketAddr>, extra: &[String]) -> Vec<String> {
    let mut hosts: Vec<String> = match listen.map(|a| a.ip()) {
        Some(ip) if ip.is_unspecified() => {
            vec!["localhost".into(), "127.0.0.1".into(), "[::1]".into()]
        }
        Some(IpAddr::V4(ip)) if ip.is_loopback() => vec!["localhost".into(), ip.to_string()],
        Some(IpAddr::V6(ip)) if ip.is_loopback() => vec!["localhost".into(), format!("[{ip}]")],
        Some(IpAddr::V4(ip)) => vec![ip.to_string()],
        Some(IpAddr::V6(ip)) => vec![format!("[{ip}]")],
        None => vec!["localhost".into(), "127.0.0.1".into()],
    };
    hosts.extend(
        extra
            .iter()
            .map(|h| h.trim().trim_end_matches('.').to_ascii_lowercase()),
    );
    hosts.retain(|h| !h.is_empty());
    hosts.dedup();
    hosts
}

/// The host name of a `Host` header, lower case, without its port.
fn host_name(value: &str) -> String {
    let value = value.trim();
    let name = if value.starts_with('[') {
        value.split_inclusive(']').next().unwrap_or(value)
    } else {
        value.split(':').next().unwrap_or(value)
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Refuses (421) a request whose `Host` is not one the console answers to.
pub(crate) async fn known_host(
    State(console): State<Console>,
    req: Request,
    next: Next,
) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(host_name);
    match host {
        Some(h) if console.hosts.contains(&h) => next.run(req).await,
        other => {
            tracing::warn!(
                host = other.as_deref().unwrap_or("(none)"),
                "console: request for a host name it does not answer to refused"
            );
            let mut res = (
                StatusCode::MISDIRECTED_REQUEST,
                "This console does not answer to this host name.\n",
            )
                .into_response();
            res.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            res
        }
    }
}

/// Puts the request's `ClientAddress` in its extensions.
pub(crate) async fn client_address(
    State(console): State<Console>,
    mut req: Request,
    next: Next,
) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let address = client_of(
        peer,
        req.headers(),
        &console.app.config.console_security.trusted_proxies,
    );
    req.extensions_mut().insert(ClientAddress(address));
    next.run(req).await
}

fn client_of(peer: Option<IpAddr>, h: &HeaderMap, trusted: &AllowedNetworks) -> String {
    let Some(peer) = peer else {
        return "unknown".into();
    };
    if trusted.is_empty() || !trusted.contains(peer) {
        return peer.to_string();
    }
    let forwarded: Vec<&str> = h
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    let mut client = peer;
    for entry in forwarded.iter().rev() {
        match entry.parse::<IpAddr>() {
            Ok(ip) => {
                client = ip;
                if !trusted.contains(ip) {
                    break;
                }
            }
            // Not an address: what is left of the chain cannot be trusted.
            Err(_) => break,
        }
    }
    client.to_string()
}

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
    fn host_names_and_client_addresses() {
        let loopback = allowed_hosts(Some("127.0.0.1:8090".parse().unwrap()), &[]);
        assert_eq!(loopback, ["localhost", "127.0.0.1"]);
        let extra = allowed_hosts(
            Some("10.0.0.5:8090".parse().unwrap()),
            &["Console.Example.com.".into()],
        );
        assert_eq!(extra, ["10.0.0.5", "console.example.com"]);
        let v6 = allowed_hosts(Some("[::1]:8090".parse().unwrap()), &[]);
        assert_eq!(v6, ["localhost", "[::1]"]);
        assert_eq!(host_name("LocalHost:8090"), "localhost");
        assert_eq!(host_name("[::1]:8090"), "[::1]");
        assert_eq!(host_name("evil.example"), "evil.example");
        assert_eq!(host_name("127.0.0.1."), "127.0.0.1");

        let none = AllowedNetworks::default();
        let proxies = AllowedNetworks::parse("127.0.0.0/8").unwrap();
        let peer = Some("127.0.0.1".parse().unwrap());
        let xff = headers(&[("x-forwarded-for", "203.0.113.9, 198.51.100.7, 127.0.0.2")]);
        assert_eq!(client_of(peer, &xff, &none), "127.0.0.1");
        assert_eq!(client_of(peer, &xff, &proxies), "198.51.100.7");
        assert_eq!(client_of(peer, &headers(&[]), &proxies), "127.0.0.1");
        let bad = headers(&[("x-forwarded-for", "198.51.100.7, junk")]);
        assert_eq!(client_of(peer, &bad, &proxies), "127.0.0.1");
        let other = Some("192.0.2.1".parse().unwrap());
        assert_eq!(client_of(other, &xff, &proxies), "192.0.2.1");
        assert_eq!(client_of(None, &xff, &proxies), "unknown");
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
