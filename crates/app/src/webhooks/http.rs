//! Sending one attempt (and, through `post`, one decision request). Only HTTP 200 with a JSON body holding `"success": true`
//! counts as delivered (CONTRACT §6); any other status or body, a timeout or a refused
//! connection is a failed attempt. Redirects are never followed: a receiver could
//! otherwise point the service at any address.

use super::guard::{check_literal, PublicOnlyResolver};
use crate::Mode;
use issuing_domain::webhooks::AllowedNetworks;
use std::sync::Arc;
use std::time::Duration;

/// The most of a receiver's answer read: enough for `{"success": true}` and a message.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Idle connections kept per receiver host between attempts.
const IDLE_PER_HOST: usize = 4;

pub fn client(
    mode: Mode,
    timeout: Duration,
    allowed: &AllowedNetworks,
) -> reqwest::Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .connect_timeout(timeout)
        .pool_max_idle_per_host(IDLE_PER_HOST)
        .user_agent(concat!("issuing-webhooks/", env!("CARGO_PKG_VERSION")));
    match mode {
        Mode::Production => builder
            .dns_resolver(Arc::new(PublicOnlyResolver {
                allowed: allowed.clone(),
            }))
            .build(),
        Mode::Sandbox => builder.build(),
    }
}

/// What one attempt came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
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

/// A receiver's answer: its status and (at most `MAX_RESPONSE_BYTES` of) its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Why no whole answer came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoReply {
    pub status: Option<u16>,
    pub error: String,
    /// The time ran out (the connection, the request or the body).
    pub timed_out: bool,
}

impl NoReply {
    fn new(status: Option<u16>, error: impl Into<String>) -> NoReply {
        NoReply {
            status,
            error: error.into(),
            timed_out: false,
        }
    }
}

/// POSTs a sealed body with the project's `API-KEY` header: no redirects, the literal
/// address checked in production (private addresses only inside `allowed`), the answer read within the client's (or `timeout`'s)
/// time and bound. Shared by webhook deliveries and the decision webhook.
pub async fn post(
    client: &reqwest::Client,
    mode: Mode,
    allowed: &AllowedNetworks,
    url: &str,
    api_key: &str,
    body: String,
    timeout: Option<Duration>,
) -> Result<Reply, NoReply> {
    let url =
        reqwest::Url::parse(url).map_err(|e| NoReply::new(None, format!("invalid url: {e}")))?;
    if mode == Mode::Production {
        check_literal(&url, allowed).map_err(|e| NoReply::new(None, e))?;
    }
    let mut request = client
        .post(url)
        .header("API-KEY", api_key)
        .header("Content-Type", "application/json")
        .body(body);
    if let Some(t) = timeout {
        request = request.timeout(t);
    }
    let failed = |status, e: reqwest::Error| NoReply {
        status,
        error: describe(&e),
        timed_out: e.is_timeout(),
    };
    let mut response = request.send().await.map_err(|e| failed(None, e))?;
    let status = response.status().as_u16();
    let mut bytes = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(NoReply::new(Some(status), "response body too large"));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => return Err(failed(Some(status), e)),
        }
    }
    Ok(Reply {
        status,
        body: bytes,
    })
}

pub async fn send(
    client: &reqwest::Client,
    mode: Mode,
    allowed: &AllowedNetworks,
    url: &str,
    api_key: &str,
    body: String,
) -> Attempt {
    let reply = match post(client, mode, allowed, url, api_key, body, None).await {
        Ok(r) => r,
        Err(e) => return Attempt::failed(e.status, e.error),
    };
    let status = reply.status;
    if status != 200 {
        return Attempt::failed(Some(status), format!("receiver answered HTTP {status}"));
    }
    let acknowledged = serde_json::from_slice::<serde_json::Value>(&reply.body)
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
