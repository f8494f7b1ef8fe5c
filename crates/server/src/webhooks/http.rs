//! Sending one attempt. Only HTTP 200 with a JSON body holding `"success": true`
//! counts as delivered (CONTRACT §6); any other status or body, a timeout or a refused
//! connection is a failed attempt. Redirects are never followed: a receiver could
//! otherwise point the service at any address.

use super::guard::{check_literal, PublicOnlyResolver};
use crate::Mode;
use std::sync::Arc;
use std::time::Duration;

/// The most of a receiver's answer read: enough for `{"success": true}` and a message.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Idle connections kept per receiver host between attempts.
const IDLE_PER_HOST: usize = 4;

pub(crate) fn client(mode: Mode, timeout: Duration) -> reqwest::Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .connect_timeout(timeout)
        .pool_max_idle_per_host(IDLE_PER_HOST)
        .user_agent(concat!("issuing-webhooks/", env!("CARGO_PKG_VERSION")));
    match mode {
        Mode::Production => builder.dns_resolver(Arc::new(PublicOnlyResolver)).build(),
        Mode::Sandbox => builder.build(),
    }
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Attempt {
    pub status: Option<u16>,
    /// None when delivered.
    pub error: Option<String>,
}

impl Attempt {
    /// The receiver said the endpoint is gone for good (HTTP 410).
    pub fn gone(&self) -> bool {
        self.status == Some(410)
    }

    fn failed(status: Option<u16>, error: impl Into<String>) -> Attempt {
        Attempt {
            status,
            error: Some(error.into()),
        }
    }
}

pub(crate) async fn send(
    client: &reqwest::Client,
    mode: Mode,
    url: &str,
    api_key: &str,
    body: String,
) -> Attempt {
    let url = match reqwest::Url::parse(url) {
        Ok(u) => u,
        Err(e) => return Attempt::failed(None, format!("invalid url: {e}")),
    };
    if mode == Mode::Production {
        if let Err(e) = check_literal(&url) {
            return Attempt::failed(None, e);
        }
    }
    let response = client
        .post(url)
        .header("API-KEY", api_key)
        .header("Content-Type", "application/json")
        .body(body)
        .send()
        .await;
    let mut response = match response {
        Ok(r) => r,
        Err(e) => return Attempt::failed(None, describe(&e)),
    };
    let status = response.status().as_u16();
    let mut bytes = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Attempt::failed(Some(status), "response body too large");
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => return Attempt::failed(Some(status), describe(&e)),
        }
    }
    if status != 200 {
        return Attempt::failed(Some(status), format!("receiver answered HTTP {status}"));
    }
    let acknowledged = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .is_some_and(|v| v.get("success") == Some(&serde_json::Value::Bool(true)));
    if acknowledged {
        Attempt {
            status: Some(status),
            error: None,
        }
    } else {
        Attempt::failed(
            Some(status),
            "receiver answered 200 without {\"success\": true}",
        )
    }
}

/// A short cause without the request's body or headers.
fn describe(e: &reqwest::Error) -> String {
    use std::error::Error;
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_redirect() {
        "redirect refused"
    } else {
        "request failed"
    };
    let mut cause = String::new();
    let mut source = e.source();
    while let Some(s) = source {
        cause = s.to_string();
        source = s.source();
    }
    if cause.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {cause}")
    }
}
