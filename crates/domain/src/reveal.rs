//! Reveal sessions' rules (CONTRACT §16): which page may frame a reveal page, how long
//! a session lives, what a token looks like and how a request's origin is judged.

use issuing_wire::ApiError;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// The webhook event (and audit action) of a view.
pub const VIEWED_EVENT: &str = "card.details_viewed";
/// CONTRACT §16: `ttl_seconds` 10–300, default 60.
pub const MIN_TTL_SECS: i64 = 10;
pub const MAX_TTL_SECS: i64 = 300;
pub const DEFAULT_TTL_SECS: i64 = 60;
/// An origin is short; a longer value is not one.
const MAX_ORIGIN_LEN: usize = 255;
/// The token's length on the wire: 32 random bytes, base64url without padding.
pub const TOKEN_LEN: usize = 43;

/// The session's lifetime in seconds, from an optional `ttl_seconds`.
pub fn ttl_seconds(requested: Option<i64>) -> Result<i64, ApiError> {
    match requested {
        None => Ok(DEFAULT_TTL_SECS),
        Some(t) if (MIN_TTL_SECS..=MAX_TTL_SECS).contains(&t) => Ok(t),
        Some(_) => Err(ApiError::validation(format!(
            "ttl_seconds must be between {MIN_TTL_SECS} and {MAX_TTL_SECS}"
        ))),
    }
}

/// `target_origin` as the origin it names, in its canonical form (`scheme://host[:port]`,
/// lower case, no default port): `https://host[:port]`, and in the sandbox also
/// `http://localhost[:port]` and `http://127.0.0.1[:port]`. A path other than `/`, a
/// query, a fragment or credentials make it something else than an origin.
pub fn target_origin(raw: &str, sandbox: bool) -> Result<String, ApiError> {
    let hint = if sandbox {
        "target_origin must be an origin such as https://example.com (or http://localhost:PORT, http://127.0.0.1:PORT)"
    } else {
        "target_origin must be an https origin such as https://example.com"
    };
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(ApiError::validation("target_origin is required"));
    }
    if raw.len() > MAX_ORIGIN_LEN {
        return Err(ApiError::validation(hint));
    }
    let url = url::Url::parse(raw).map_err(|_| ApiError::validation(hint))?;
    let plain = url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none()
        // `Url` adds the `/` itself; a written `/?` or `/#` is not an origin either.
        && !raw.ends_with(['?', '#']);
    // A host name of letters, digits, `-` and `.` only: the origin goes into a CSP
    // header, where `*` would let any subdomain frame the page.
    let plain_host = match url.host() {
        Some(url::Host::Domain(d)) => d
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.'),
        Some(_) => true,
        None => false,
    };
    let allowed = plain_host
        && match (url.scheme(), url.host()) {
            ("https", Some(_)) => true,
            ("http", Some(url::Host::Domain("localhost"))) => sandbox,
            ("http", Some(url::Host::Ipv4(ip))) => sandbox && ip.octets() == [127, 0, 0, 1],
            _ => false,
        };
    if !plain || !allowed {
        return Err(ApiError::validation(hint));
    }
    Ok(url.origin().ascii_serialization())
}

/// The origin a request's `Origin` or `Referer` value names, canonical; None when the
/// value names no tuple origin (`null`, garbage), which counts as another origin.
pub fn origin_of(header: &str) -> Option<String> {
    let url = url::Url::parse(header.trim()).ok()?;
    let origin = url.origin();
    origin.is_tuple().then(|| origin.ascii_serialization())
}

/// Whether a GET may use a session made for `target`: each of the request's `Origin`
/// and `Referer` that is present must name `target` (CONTRACT §16: a browser fetches a
/// frame even when `frame-ancestors` will refuse to show it, and says who asks).
pub fn request_allowed(target: &str, origin: Option<&str>, referer: Option<&str>) -> bool {
    [origin, referer]
        .into_iter()
        .flatten()
        .all(|h| origin_of(h).as_deref() == Some(target))
}

/// A fresh token (32 random bytes, base64url) and its hash, the only form stored.
pub fn new_token() -> (String, String) {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let hash = token_hash(&token);
    (token, hash)
}

/// Hex SHA-256 of a token.
pub fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether a path segment can be a token at all: anything else is 404 without a lookup.
pub fn plausible_token(token: &str) -> bool {
    token.len() == TOKEN_LEN
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The card number grouped by four, as printed on a card.
pub fn grouped_pan(pan: &str) -> String {
    let digits: Vec<char> = pan.chars().filter(|c| !c.is_whitespace()).collect();
    digits
        .chunks(4)
        .map(|c| c.iter().collect::<String>())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `MM/YY`.
pub fn expiry(month: i64, year: i64) -> String {
    format!("{:02}/{:02}", month, year.rem_euclid(100))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn target_origins() {
        let ok = |raw: &str, sandbox: bool| target_origin(raw, sandbox).unwrap();
        assert_eq!(ok("https://Example.COM", false), "https://example.com");
        assert_eq!(ok("https://example.com/", false), "https://example.com");
        assert_eq!(ok("https://example.com:443", false), "https://example.com");
        assert_eq!(
            ok("https://app.example.com:8443", false),
            "https://app.example.com:8443"
        );
        assert_eq!(ok("http://localhost:3000", true), "http://localhost:3000");
        assert_eq!(ok("http://127.0.0.1:3000", true), "http://127.0.0.1:3000");
        assert_eq!(ok("http://localhost", true), "http://localhost");
        for bad in [
            "",
            "example.com",
            "https://example.com/path",
            "https://example.com/?q=1",
            "https://example.com/#x",
            "https://example.com?",
            "https://u:p@example.com",
            "ftp://example.com",
            "javascript:alert(1)",
            "http://example.com",
            "http://10.0.0.1",
            "http://127.0.0.2",
            "https://*.example.com",
            "https://example.com; script-src *",
        ] {
            assert!(target_origin(bad, true).is_err(), "{bad}");
        }
        for sandbox_only in ["http://localhost:3000", "http://127.0.0.1"] {
            assert!(
                target_origin(sandbox_only, false).is_err(),
                "{sandbox_only}"
            );
        }
        assert!(target_origin(&format!("https://{}.com", "a".repeat(300)), false).is_err());
    }

    #[test]
    fn requests_judged_by_origin_and_referer() {
        let t = "http://127.0.0.1:3000";
        assert!(request_allowed(t, None, None));
        assert!(request_allowed(t, None, Some("http://127.0.0.1:3000/")));
        assert!(request_allowed(
            t,
            None,
            Some("http://127.0.0.1:3000/app/page?x=1")
        ));
        assert!(request_allowed(t, Some("http://127.0.0.1:3000"), None));
        assert!(!request_allowed(t, None, Some("http://127.0.0.1:3001/")));
        assert!(!request_allowed(t, Some("null"), None));
        assert!(!request_allowed(
            t,
            Some("http://127.0.0.1:3000"),
            Some("https://evil.example/")
        ));
        assert!(!request_allowed(t, None, Some("not a url")));
        assert!(request_allowed(
            "https://example.com",
            None,
            Some("https://EXAMPLE.com:443/x")
        ));
    }

    #[test]
    fn tokens_and_formats() {
        let (token, hash) = new_token();
        assert_eq!(token.len(), TOKEN_LEN);
        assert!(plausible_token(&token));
        assert_eq!(hash, token_hash(&token));
        assert_eq!(hash.len(), 64);
        assert_ne!(new_token().0, token);
        assert!(!plausible_token("short"));
        assert!(!plausible_token(&format!("{}=", &token[1..])));
        assert_eq!(grouped_pan("4111111111111111"), "4111 1111 1111 1111");
        assert_eq!(grouped_pan("378282246310005"), "3782 8224 6310 005");
        assert_eq!(expiry(6, 2031), "06/31");
        assert_eq!(ttl_seconds(None).unwrap(), 60);
        assert_eq!(ttl_seconds(Some(10)).unwrap(), 10);
        assert!(ttl_seconds(Some(9)).is_err() && ttl_seconds(Some(301)).is_err());
    }
}
