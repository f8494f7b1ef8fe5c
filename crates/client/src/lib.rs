//! A Rust client for the issuing API (`/api/v2`).
//!
//! Every endpoint is `POST {base}/api/v2/<path>` with the header `API-KEY` and the body
//! `{"encrypted": "<base64>"}`, where the sealed plaintext is a JSON object holding
//! `request_timestamp` (microseconds since the epoch) and the endpoint's fields at the
//! root. The envelope key is `SHA-256(api_secret)` ([`issuing_envelope::Key::from_secret`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), issuing_client::ClientError> {
//! let client = issuing_client::Client::new("http://127.0.0.1:8080", "pk_...", "sk_...")?;
//! let balance = client.call("project/balance", serde_json::json!({})).await?;
//! println!("{}", balance["available"]);
//! # Ok(())
//! # }
//! ```
//!
//! Success bodies (`"success": true`) come back as the whole opened JSON object.
//! Everything else is a [`ClientError`]: the API's own errors as [`ClientError::Api`]
//! with the HTTP status and `error_slug`, the rest as transport or decode errors.
//!
//! The same client opens webhook deliveries ([`Client::open_webhook`]): they carry the
//! project's `API-KEY` header and a body sealed with the same key.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

use issuing_envelope::Key;
use reqwest::header::{HeaderValue, CONTENT_TYPE};
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Timeout of one API call, from connecting to the end of the response body.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest response body the client reads. The API's answers are small JSON documents;
/// the bound keeps a misbehaving peer from making the client buffer without limit.
pub const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// Why a call (or opening a webhook) failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The base URL, API key, secret, path or request body is unusable.
    #[error("invalid client input: {0}")]
    Config(String),
    /// The request did not complete: connection refused, timeout, TLS, broken body.
    /// The message includes the causes (`error` is kept for `is_timeout()` and the like).
    #[error("{path}: request failed: {}", error_chain(.error))]
    Transport { path: String, error: reqwest::Error },
    /// The server answered something that is not the protocol: not JSON, an envelope
    /// that does not open with this key (wrong secret?), a plain success body, too large.
    #[error("{path}: unreadable response (HTTP {status}): {reason}")]
    Decode {
        path: String,
        status: u16,
        reason: String,
    },
    /// The API answered an error: `{"success": false, "error", "error_slug"}` with a
    /// 4xx/5xx status. Plain (unsealed) authentication and envelope errors land here too;
    /// if such a body has no `error_slug`, `slug` is `unknown_error`.
    #[error("{message} ({slug}, HTTP {status})")]
    Api {
        status: u16,
        slug: String,
        message: String,
    },
    /// A webhook's `API-KEY` header is missing or is not this client's key.
    #[error("webhook API-KEY header is missing or does not match this client's API key")]
    WebhookApiKey,
    /// A webhook body is not `{"encrypted": ...}`, does not open with this client's
    /// key, or its plaintext is not a JSON object.
    #[error("webhook body rejected: {0}")]
    WebhookBody(String),
}

impl ClientError {
    /// The `error_slug` of an API error, if this is one.
    pub fn slug(&self) -> Option<&str> {
        match self {
            ClientError::Api { slug, .. } => Some(slug),
            _ => None,
        }
    }
}

/// Any answer the API gave, success or error, as returned by [`Client::request`].
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The HTTP status.
    pub status: u16,
    /// The opened JSON object (a sealed answer) or the plain JSON object as sent.
    pub body: Value,
    /// Whether the body came sealed with the project's key. The server seals every
    /// answer that passed authentication; only the envelope and authentication errors
    /// (and `500 internal_error` raised during those checks) are plain.
    pub sealed: bool,
}

impl Answer {
    /// A 2xx status with `"success": true`.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status) && self.body.get("success") == Some(&Value::Bool(true))
    }
}

/// A client for one project's credentials on one server. Cheap to clone (the HTTP
/// connection pool is shared).
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    /// Base URL without a trailing slash, e.g. `http://127.0.0.1:8080`.
    base_url: String,
    api_key: String,
    api_key_header: HeaderValue,
    key: Key,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .field("api_secret", &"***")
            .finish()
    }
}

impl Client {
    /// A client for `base_url` (e.g. `http://127.0.0.1:8080`, without `/api/v2`) and a
    /// project's API key and secret. Fails on a URL that is not http(s), on an empty key
    /// or secret, or on a key that cannot be sent as a header.
    pub fn new(base_url: &str, api_key: &str, api_secret: &str) -> Result<Client, ClientError> {
        let base_url = normalize_base_url(base_url)?;
        let api_key = api_key.trim();
        if api_key.is_empty() {
            return Err(ClientError::Config("the API key is empty".into()));
        }
        if api_secret.is_empty() {
            return Err(ClientError::Config("the API secret is empty".into()));
        }
        let mut api_key_header = HeaderValue::from_str(api_key).map_err(|_| {
            ClientError::Config("the API key holds characters a header cannot carry".into())
        })?;
        api_key_header.set_sensitive(true);
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            // A redirected POST would lose its body or be replayed elsewhere; the API
            // never redirects, so a redirect is answered as an unreadable response.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ClientError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Client {
            http,
            base_url,
            api_key: api_key.to_owned(),
            api_key_header,
            key: Key::from_secret(api_secret),
        })
    }

    /// The base URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The project's API key (the value of the `API-KEY` header).
    pub fn api_key(&self) -> &str {
        &self.api_key
    }

    /// The full URL of an endpoint, e.g. `http://host/api/v2/cards/get`.
    pub fn endpoint_url(&self, path: &str) -> Result<String, ClientError> {
        let path = normalize_path(path)?;
        Ok(format!("{}/api/v2/{path}", self.base_url))
    }

    /// Calls `path` (e.g. `"cards/freeze"`) with `body`, a JSON object of the endpoint's
    /// fields (`null` counts as `{}`). `request_timestamp` is added unless the body
    /// already has one. Returns the opened success body (`"success": true` and the
    /// fields at the root).
    pub async fn call(&self, path: &str, body: Value) -> Result<Value, ClientError> {
        let (path, status, bytes) = self.send(path, body, None).await?;
        self.interpret_response(path, status, &bytes)
    }

    /// Like [`call`](Client::call), but returns every answer that is a JSON object,
    /// errors included, with its HTTP status: a sealed answer opened, a plain one as
    /// sent. Only unusable input, transport failures and unreadable answers (not JSON,
    /// not an object, an envelope that does not open) are errors.
    pub async fn request(&self, path: &str, body: Value) -> Result<Answer, ClientError> {
        self.request_with_idempotency_key(path, body, None).await
    }

    /// [`request`](Client::request) with an `Idempotency-Key` HTTP header when
    /// `idempotency_key` is given.
    pub async fn request_with_idempotency_key(
        &self,
        path: &str,
        body: Value,
        idempotency_key: Option<&str>,
    ) -> Result<Answer, ClientError> {
        let (path, status, bytes) = self.send(path, body, idempotency_key).await?;
        self.open_answer(path, status, &bytes)
    }

    /// Seals and posts a request; returns the normalized path, the status and the raw
    /// (bounded) answer.
    async fn send<'p>(
        &self,
        path: &'p str,
        body: Value,
        idempotency_key: Option<&str>,
    ) -> Result<(&'p str, u16, Vec<u8>), ClientError> {
        let url = self.endpoint_url(path)?;
        let path = normalize_path(path)?;
        let envelope = self.seal_request(body)?;
        let mut request = self
            .http
            .post(url)
            .header("API-KEY", self.api_key_header.clone())
            .header(CONTENT_TYPE, "application/json");
        if let Some(key) = idempotency_key {
            let value = HeaderValue::from_str(key).map_err(|_| {
                ClientError::Config(
                    "the idempotency key holds characters a header cannot carry".into(),
                )
            })?;
            request = request.header("Idempotency-Key", value);
        }
        let response =
            request
                .body(envelope)
                .send()
                .await
                .map_err(|error| ClientError::Transport {
                    path: path.to_owned(),
                    error,
                })?;
        let status = response.status().as_u16();
        let bytes = read_bounded(path, response).await?;
        Ok((path, status, bytes))
    }

    /// Opens a webhook delivery: `api_key_header` is the request's `API-KEY` header and
    /// `body` its raw body, `{"encrypted": ...}` sealed with this project's key. Returns
    /// the plaintext event, a JSON object (`{"event_type", "project_id", "delivery_id",
    /// "data"}` or a typed event with `type` and `delivery_id`).
    pub fn open_webhook(
        &self,
        api_key_header: Option<&str>,
        body: &[u8],
    ) -> Result<Value, ClientError> {
        match api_key_header.map(str::trim) {
            Some(k) if k == self.api_key => {}
            _ => return Err(ClientError::WebhookApiKey),
        }
        let outer: Value = serde_json::from_slice(body)
            .map_err(|_| ClientError::WebhookBody("the body is not JSON".into()))?;
        let sealed = outer
            .get("encrypted")
            .and_then(Value::as_str)
            .ok_or_else(|| ClientError::WebhookBody("the body has no `encrypted` string".into()))?;
        let plain = issuing_envelope::open(&self.key, sealed)
            .map_err(|e| ClientError::WebhookBody(format!("{e} (wrong API secret?)")))?;
        match serde_json::from_slice::<Value>(&plain) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err(ClientError::WebhookBody(
                "the plaintext is not a JSON object".into(),
            )),
        }
    }

    /// The HTTP body of a request: `{"encrypted": ...}` over the body with its timestamp.
    fn seal_request(&self, body: Value) -> Result<String, ClientError> {
        let mut fields = match body {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(ClientError::Config(format!(
                    "the request body must be a JSON object, not {}",
                    kind(&other)
                )))
            }
        };
        if !fields.contains_key("request_timestamp") {
            fields.insert(
                "request_timestamp".into(),
                Value::from(next_request_timestamp()),
            );
        }
        let plaintext = Value::Object(fields).to_string();
        let sealed = issuing_envelope::seal(&self.key, plaintext.as_bytes());
        Ok(serde_json::json!({ "encrypted": sealed }).to_string())
    }

    /// Turns a status and raw body into the success body or an error.
    fn interpret_response(
        &self,
        path: &str,
        status: u16,
        bytes: &[u8],
    ) -> Result<Value, ClientError> {
        let decode = |reason: String| ClientError::Decode {
            path: path.to_owned(),
            status,
            reason,
        };
        let Answer { body, sealed, .. } = self.open_answer(path, status, bytes)?;
        let is_2xx = (200..300).contains(&status);
        match (body.get("success"), is_2xx) {
            (Some(Value::Bool(true)), true) if sealed => return Ok(body),
            // The server seals every answer that passed authentication; a plain success
            // could come from anything between us and it.
            (Some(Value::Bool(true)), true) => {
                return Err(decode("a success response that is not sealed".into()))
            }
            (Some(Value::Bool(true)), false) => {
                return Err(decode(format!(
                    "a success body with an error status: {}",
                    preview(&body.to_string())
                )))
            }
            (Some(Value::Bool(false)), _) | (_, false) => {}
            _ => {
                return Err(decode(format!(
                    "a 2xx answer without a success flag: {}",
                    preview(&body.to_string())
                )))
            }
        }
        let text = |name: &str| body.get(name).and_then(Value::as_str).map(str::to_owned);
        Err(ClientError::Api {
            status,
            slug: text("error_slug").unwrap_or_else(|| "unknown_error".into()),
            message: text("error")
                .or_else(|| text("message"))
                .unwrap_or_else(|| preview(&body.to_string())),
        })
    }

    /// Reads a raw answer: JSON, opened when sealed, and a JSON object.
    fn open_answer(&self, path: &str, status: u16, bytes: &[u8]) -> Result<Answer, ClientError> {
        let decode = |reason: String| ClientError::Decode {
            path: path.to_owned(),
            status,
            reason,
        };
        let outer: Value = serde_json::from_slice(bytes).map_err(|_| {
            decode(format!(
                "not JSON: {}",
                preview(&String::from_utf8_lossy(bytes))
            ))
        })?;
        let (body, sealed) = match outer.get("encrypted").and_then(Value::as_str) {
            Some(encrypted) => {
                let plain = issuing_envelope::open(&self.key, encrypted).map_err(|e| {
                    decode(format!("{e}: the API secret does not match this API key?"))
                })?;
                let body: Value = serde_json::from_slice(&plain)
                    .map_err(|_| decode("the opened response is not JSON".into()))?;
                (body, true)
            }
            None => (outer, false),
        };
        if !body.is_object() {
            return Err(decode(format!(
                "the response is {}, not an object",
                kind(&body)
            )));
        }
        Ok(Answer {
            status,
            body,
            sealed,
        })
    }
}

/// A `request_timestamp`: microseconds since the epoch, strictly increasing within this
/// process. The server refuses a second request with the same (key, path, timestamp)
/// within 30 s, so two calls in the same microsecond must still differ.
pub fn next_request_timestamp() -> i64 {
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = now_micros();
    let mut prev = LAST.load(Ordering::SeqCst);
    loop {
        let next = now.max(prev.saturating_add(1));
        match LAST.compare_exchange_weak(prev, next, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return next,
            Err(p) => prev = p,
        }
    }
}

fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

fn normalize_base_url(base_url: &str) -> Result<String, ClientError> {
    let trimmed = base_url.trim().trim_end_matches('/');
    let url = reqwest::Url::parse(trimmed)
        .map_err(|e| ClientError::Config(format!("base URL `{base_url}`: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(ClientError::Config(format!(
            "base URL `{base_url}` must be http://host[:port] or https://…"
        )));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(ClientError::Config(format!(
            "base URL `{base_url}` must not have a query or fragment"
        )));
    }
    let base = trimmed.strip_suffix("/api/v2").unwrap_or(trimmed);
    Ok(base.to_owned())
}

/// `"/cards/get"` and `"cards/get"` are the same endpoint; anything that could escape
/// `/api/v2/` or smuggle a query is refused.
fn normalize_path(path: &str) -> Result<&str, ClientError> {
    let path = path.trim().trim_start_matches('/');
    let ok = !path.is_empty()
        && path
            .split('/')
            .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
        && path
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'-' | b'.'));
    if ok {
        Ok(path)
    } else {
        Err(ClientError::Config(format!(
            "endpoint path `{path}` must look like `cards/get`"
        )))
    }
}

async fn read_bounded(path: &str, mut response: reqwest::Response) -> Result<Vec<u8>, ClientError> {
    let status = response.status().as_u16();
    if response
        .content_length()
        .is_some_and(|n| n > MAX_RESPONSE_BYTES as u64)
    {
        return Err(ClientError::Decode {
            path: path.to_owned(),
            status,
            reason: format!("the response is larger than {MAX_RESPONSE_BYTES} bytes"),
        });
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|error| ClientError::Transport {
            path: path.to_owned(),
            error,
        })?
    {
        if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(ClientError::Decode {
                path: path.to_owned(),
                status,
                reason: format!("the response is larger than {MAX_RESPONSE_BYTES} bytes"),
            });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}

/// An error and its causes on one line.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        // hyper and reqwest sometimes repeat their cause in their own message.
        if !text.ends_with(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The start of a body for an error message.
fn preview(text: &str) -> String {
    const MAX: usize = 200;
    match text.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod answer_tests {
    use super::*;
    use serde_json::json;

    fn client() -> Client {
        Client::new("http://127.0.0.1:9", "pk_a", "sk_a").unwrap()
    }

    fn sealed(v: &Value) -> Vec<u8> {
        let key = Key::from_secret("sk_a");
        json!({"encrypted": issuing_envelope::seal(&key, v.to_string().as_bytes())})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn answers_keep_their_status_and_body() {
        let c = client();
        let error =
            json!({"success": false, "error": "User not found", "error_slug": "user_not_found"});
        let a = c.open_answer("users/get", 404, &sealed(&error)).unwrap();
        assert_eq!((a.status, &a.body, a.sealed), (404, &error, true));
        assert!(!a.is_success());

        let ok = json!({"success": true, "status": "ok"});
        let a = c.open_answer("system/health", 200, &sealed(&ok)).unwrap();
        assert!(a.is_success() && a.sealed);

        let plain = json!({"success": false, "error": "API key not found", "error_slug": "api_key_not_found"});
        let a = c
            .open_answer("system/health", 401, plain.to_string().as_bytes())
            .unwrap();
        assert_eq!((a.status, &a.body, a.sealed), (401, &plain, false));

        for bad in [&b"upstream down"[..], b"[1]", br#"{"encrypted": "AAAA"}"#] {
            assert!(matches!(
                c.open_answer("x", 502, bad),
                Err(ClientError::Decode { status: 502, .. })
            ));
        }
    }
}
