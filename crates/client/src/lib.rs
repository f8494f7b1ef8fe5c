//! A Rust client for the issuing API (`/api/v2`).
//!
//! Every endpoint is `POST {base}/api/v2/<path>` with the header `API-KEY` and the body
//! `{"encrypted": "<base64>"}`, where the sealed plaintext is a JSON object holding
//! `request_timestamp` (microseconds since the epoch) and the endpoint's fields at the
//! root. The envelope key is `SHA-256(api_secret)` ([`issuing_envelope::Key::from_secret`]).
//!
//! Each endpoint has a typed method (`cards/create` is [`Client::cards_create`]) taking a
//! request struct and answering a response struct from [`types`]; amounts are
//! [`Decimal`] strings. [`Client::call`] reaches any path with JSON values.
//!
//! ```no_run
//! use issuing_client::{CardsCreate, CardsTopup, Client};
//! use std::time::Duration;
//!
//! # async fn demo() -> Result<(), issuing_client::ClientError> {
//! let client = Client::new("http://127.0.0.1:8080", "pk_...", "sk_...")?;
//! client.sync_clock().await?; // optional: also done on request_timestamp_out_of_window
//! println!("{}", client.project_balance().await?.available);
//!
//! let card = client
//!     .cards_create(
//!         &CardsCreate {
//!             external_user_id: "alice-001".into(),
//!             product_code: "virtual_usd".into(),
//!             ..CardsCreate::default()
//!         },
//!         "issue-alice-1", // Idempotency-Key, the same on every retry
//!     )
//!     .await?;
//! let order = client.wait_order(&card.order.order_id, Duration::from_secs(60)).await?;
//! assert!(order.is_completed(), "{:?}", order.last_error_slug);
//! let topup = CardsTopup { card_id: card.card_id, amount: "50.00".into(), ..Default::default() };
//! let order = client.cards_topup(&topup, "topup-alice-1").await?;
//! client.wait_order(&order.order_id, Duration::from_secs(60)).await?;
//!
//! match client.project_balance().await {
//!     Err(e) if e.slug() == Some("project_not_found") => {}
//!     other => println!("{:?}", other?),
//! }
//! let raw = client.call("project/balance", serde_json::json!({})).await?;
//! println!("{}", raw["available"]);
//! # Ok(())
//! # }
//! ```
//!
//! Success bodies (`"success": true`) come back as the whole opened JSON object (raw
//! calls) or the typed answer. Everything else is a [`ClientError`]: the API's own errors
//! as [`ClientError::Api`] with the HTTP status and `error_slug`, the rest as transport or
//! decode errors.
//!
//! Timestamps carry the clock offset learned by [`Client::sync_clock`]; a
//! `request_timestamp_out_of_window` refusal syncs the clock and sends the request once
//! more. The typed reads and the keyed writes (`cards/create`, `cards/topup`,
//! `cards/withdraw`, `cards/close`) are retried on transport errors, 5xx and 429 with the
//! same idempotency key and a fresh timestamp ([`RetryPolicy`]); other writes are sent
//! once.
//!
//! The same client opens webhook deliveries ([`Client::open_webhook`]): they carry the
//! project's `API-KEY` header and a body sealed with the same key.
//!
//! It uses only the envelope and the wire types, so an integrator's program depends on
//! nothing of the server.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

use issuing_envelope::Key;
use reqwest::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

mod endpoints;
#[cfg(feature = "openapi")]
pub mod openapi;
pub mod types;

pub use endpoints::{Endpoint, ENDPOINTS};
pub use types::*;

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
    /// [`Client::wait_order`] gave up: the order was still `status` (not `completed` or
    /// `failed`) after `waited`.
    #[error("order {order_id} is still {status} after {} ms", .waited.as_millis())]
    OrderTimeout {
        order_id: String,
        status: String,
        waited: Duration,
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

    /// The HTTP status of an API error or an unreadable answer, if there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Api { status, .. } | ClientError::Decode { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// How the typed methods retry a request that may be sent again safely: reads, and the
/// endpoints that carry an idempotency key (`cards/create`, `cards/topup`,
/// `cards/withdraw`, `cards/close`; every attempt sends the same key, so the server runs
/// the operation at most once). Retries happen only after a transport error (no answer)
/// or an answer with status 5xx or 429, never after another 4xx. Each attempt is sealed
/// again with a fresh `request_timestamp`. Other writes are sent once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (1 means no retry).
    pub max_attempts: u32,
    /// Wait before the first retry; doubles for each further retry.
    pub initial_backoff: Duration,
    /// Upper bound of the doubling wait.
    pub max_backoff: Duration,
    /// Upper bound of a wait asked for by a `Retry-After` header (seconds).
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(2),
            max_retry_after: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// A policy that sends every request once.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `retry` (1-based), given the answer's `Retry-After`.
    fn delay(&self, retry: u32, retry_after: Option<Duration>) -> Duration {
        let doubling = self
            .initial_backoff
            .saturating_mul(1u32 << retry.saturating_sub(1).min(16))
            .min(self.max_backoff);
        match retry_after {
            Some(asked) => asked.min(self.max_retry_after).max(doubling),
            None => doubling,
        }
    }
}

/// Whether a request may be sent again after a failure without an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Sent once (writes without an idempotency key, raw calls).
    Never,
    /// Reads and keyed writes: retried under the client's [`RetryPolicy`].
    Safe,
}

/// Shortest and longest wait between two `orders/check` polls of [`Client::wait_order`].
pub const ORDER_POLL_INITIAL: Duration = Duration::from_millis(100);
pub const ORDER_POLL_MAX: Duration = Duration::from_secs(1);

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
    /// Microseconds the server clock is ahead of ours; shared by clones.
    clock_offset: Arc<AtomicI64>,
    retry: RetryPolicy,
    sync_clock_on_skew: bool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .field("api_secret", &"***")
            .field("clock_offset_micros", &self.clock_offset_micros())
            .field("retry", &self.retry)
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
            clock_offset: Arc::new(AtomicI64::new(0)),
            retry: RetryPolicy::default(),
            sync_clock_on_skew: true,
        })
    }

    /// This client with another retry policy for the typed methods (see [`RetryPolicy`]).
    pub fn with_retry_policy(mut self, policy: RetryPolicy) -> Client {
        self.retry = policy;
        self
    }

    /// Whether a `request_timestamp_out_of_window` answer makes the client learn the
    /// server clock ([`sync_clock`](Client::sync_clock)) and send the request once more
    /// with a corrected timestamp (default `true`). The server refuses such a request
    /// before doing anything, so sending it again is safe. Only requests whose timestamp
    /// the client chose are sent again.
    pub fn with_clock_sync_on_skew(mut self, enabled: bool) -> Client {
        self.sync_clock_on_skew = enabled;
        self
    }

    /// The retry policy of the typed methods.
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.retry
    }

    /// Microseconds the server clock is ahead of this machine's (negative: behind), as
    /// added to every `request_timestamp`. 0 until [`sync_clock`](Client::sync_clock).
    pub fn clock_offset_micros(&self) -> i64 {
        self.clock_offset.load(Ordering::SeqCst)
    }

    /// Sets the clock offset by hand (clones of this client share it).
    pub fn set_clock_offset_micros(&self, offset: i64) {
        self.clock_offset.store(offset, Ordering::SeqCst);
    }

    /// Learns the server clock from `system/time` and keeps the offset for every later
    /// `request_timestamp` (of this client and its clones). The server time is taken to
    /// be the middle of the round trip. Returns the offset in microseconds.
    pub async fn sync_clock(&self) -> Result<i64, ClientError> {
        let sent = now_micros();
        let (path, status, bytes, _) = self.send_once("system/time", Map::new(), None).await?;
        let received = now_micros();
        let body = self.interpret_response(path, status, &bytes)?;
        let time: types::ServerTime = decode_body(path, status, body)?;
        let offset = time.timestamp - (sent + (received - sent) / 2);
        self.set_clock_offset_micros(offset);
        Ok(offset)
    }

    /// Polls `orders/check` until the order is `completed` or `failed` and returns it in
    /// that state (a failed order is `Ok`: see [`Order::is_failed`] and `last_error_slug`).
    /// The interval starts at [`ORDER_POLL_INITIAL`] and doubles up to
    /// [`ORDER_POLL_MAX`]. After `timeout` the answer is [`ClientError::OrderTimeout`].
    pub async fn wait_order(
        &self,
        order_id: &str,
        timeout: Duration,
    ) -> Result<Order, ClientError> {
        self.wait_order_with_progress(order_id, timeout, |_| {})
            .await
    }

    /// [`wait_order`](Client::wait_order), calling `progress` with every order read
    /// (the final one included).
    pub async fn wait_order_with_progress<F>(
        &self,
        order_id: &str,
        timeout: Duration,
        mut progress: F,
    ) -> Result<Order, ClientError>
    where
        F: FnMut(&Order),
    {
        let started = Instant::now();
        let mut interval = ORDER_POLL_INITIAL;
        loop {
            let order = self.orders_check(order_id).await?;
            progress(&order);
            if order.is_final() {
                return Ok(order);
            }
            let waited = started.elapsed();
            if waited >= timeout {
                return Err(ClientError::OrderTimeout {
                    order_id: order_id.to_owned(),
                    status: order.status,
                    waited,
                });
            }
            tokio::time::sleep(interval.min(timeout - waited)).await;
            interval = (interval * 2).min(ORDER_POLL_MAX);
        }
    }

    /// [`call`](Client::call) with an `Idempotency-Key` header, retried under the
    /// client's [`RetryPolicy`] with the same key on transport errors, 5xx and 429.
    pub async fn call_with_idempotency_key(
        &self,
        path: &str,
        body: Value,
        idempotency_key: &str,
    ) -> Result<Value, ClientError> {
        let (path, status, bytes) = self
            .execute(path, body, Some(idempotency_key), Retry::Safe)
            .await?;
        self.interpret_response(path, status, &bytes)
    }

    /// A typed call: `request` serialized as the body, the success body decoded as `T`.
    pub(crate) async fn typed<Req, T>(
        &self,
        path: &'static str,
        request: &Req,
        idempotency_key: Option<&str>,
        retry: Retry,
    ) -> Result<T, ClientError>
    where
        Req: Serialize + ?Sized,
        T: DeserializeOwned,
    {
        let body = serde_json::to_value(request).map_err(|e| {
            ClientError::Config(format!("{path}: cannot serialize the request: {e}"))
        })?;
        let (path, status, bytes) = self.execute(path, body, idempotency_key, retry).await?;
        let body = self.interpret_response(path, status, &bytes)?;
        decode_body(path, status, body)
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
    ///
    /// Sent once, except that a `request_timestamp_out_of_window` refusal of a timestamp
    /// the client chose syncs the clock and sends it once more.
    pub async fn call(&self, path: &str, body: Value) -> Result<Value, ClientError> {
        let (path, status, bytes) = self.execute(path, body, None, Retry::Never).await?;
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
        let (path, status, bytes) = self
            .execute(path, body, idempotency_key, Retry::Never)
            .await?;
        self.open_answer(path, status, &bytes)
    }

    /// Sends a request, sealed again for every attempt: once more after syncing the
    /// clock on `request_timestamp_out_of_window` (when the client chose the timestamp),
    /// and, for [`Retry::Safe`], again after transport errors, 5xx and 429 under the
    /// retry policy. Returns the normalized path, the last status and its raw answer.
    async fn execute<'p>(
        &self,
        path: &'p str,
        body: Value,
        idempotency_key: Option<&str>,
        retry: Retry,
    ) -> Result<(&'p str, u16, Vec<u8>), ClientError> {
        let fields = match body {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(ClientError::Config(format!(
                    "the request body must be a JSON object, not {}",
                    kind(&other)
                )))
            }
        };
        let idempotency_key = idempotency_key
            .map(|key| {
                HeaderValue::from_str(key).map_err(|_| {
                    ClientError::Config(
                        "the idempotency key holds characters a header cannot carry".into(),
                    )
                })
            })
            .transpose()?;
        let our_timestamp = !fields.contains_key("request_timestamp");
        let max_attempts = match retry {
            Retry::Never => 1,
            Retry::Safe => self.retry.max_attempts.max(1),
        };
        let mut attempt = 1;
        let mut clock_synced = false;
        loop {
            let outcome = self
                .send_once(path, fields.clone(), idempotency_key.clone())
                .await;
            let retry_after = match &outcome {
                Ok((_, status, bytes, retry_after)) => {
                    if *status == 400
                        && our_timestamp
                        && self.sync_clock_on_skew
                        && !clock_synced
                        && plain_slug(bytes).as_deref() == Some("request_timestamp_out_of_window")
                    {
                        clock_synced = true;
                        // The server refused the request before doing anything. If the
                        // clock cannot be read, the refusal is the answer.
                        if self.sync_clock().await.is_ok() {
                            continue;
                        }
                    }
                    if *status >= 500 || *status == 429 {
                        Some(*retry_after)
                    } else {
                        None
                    }
                }
                Err(ClientError::Transport { .. }) => Some(None),
                Err(_) => None,
            };
            match retry_after {
                Some(retry_after) if attempt < max_attempts => {
                    tokio::time::sleep(self.retry.delay(attempt, retry_after)).await;
                    attempt += 1;
                }
                _ => return outcome.map(|(path, status, bytes, _)| (path, status, bytes)),
            }
        }
    }

    /// Seals `fields` (with a fresh `request_timestamp` unless they hold one) and posts
    /// them once; returns the normalized path, the status, the raw (bounded) answer and
    /// the answer's `Retry-After` in seconds.
    async fn send_once<'p>(
        &self,
        path: &'p str,
        fields: Map<String, Value>,
        idempotency_key: Option<HeaderValue>,
    ) -> Result<(&'p str, u16, Vec<u8>, Option<Duration>), ClientError> {
        let url = self.endpoint_url(path)?;
        let path = normalize_path(path)?;
        let envelope = self.seal_request(Value::Object(fields))?;
        let mut request = self
            .http
            .post(url)
            .header("API-KEY", self.api_key_header.clone())
            .header(CONTENT_TYPE, "application/json");
        if let Some(value) = idempotency_key {
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
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = read_bounded(path, response).await?;
        Ok((path, status, bytes, retry_after))
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

    /// The HTTP body of a decision endpoint's answer to an `authorization_request` (opened
    /// with [`Client::open_webhook`]): `{"encrypted": ...}` over `{"approved", "reason"?}`,
    /// sealed with this project's key. Answer it with HTTP 200.
    pub fn seal_decision(&self, approved: bool, reason: Option<&str>) -> String {
        let mut answer = serde_json::json!({ "approved": approved });
        if let Some(r) = reason {
            answer["reason"] = Value::from(r);
        }
        let sealed = issuing_envelope::seal(&self.key, answer.to_string().as_bytes());
        serde_json::json!({ "encrypted": sealed }).to_string()
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
                Value::from(next_request_timestamp_with_offset(
                    self.clock_offset_micros(),
                )),
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
    next_request_timestamp_with_offset(0)
}

/// [`next_request_timestamp`] plus `offset_micros` (the server clock's lead, see
/// [`Client::sync_clock`]). The local part is strictly increasing within the process,
/// so the results are too for any one offset.
pub fn next_request_timestamp_with_offset(offset_micros: i64) -> i64 {
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = now_micros();
    let mut prev = LAST.load(Ordering::SeqCst);
    loop {
        let next = now.max(prev.saturating_add(1));
        match LAST.compare_exchange_weak(prev, next, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return next.saturating_add(offset_micros),
            Err(p) => prev = p,
        }
    }
}

/// The `error_slug` of a plain (unsealed) JSON answer.
fn plain_slug(bytes: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    v.get("error_slug")?.as_str().map(str::to_owned)
}

/// A success body as `T`; a body of another shape is a decode error.
fn decode_body<T: DeserializeOwned>(
    path: &str,
    status: u16,
    body: Value,
) -> Result<T, ClientError> {
    serde_json::from_value(body).map_err(|e| ClientError::Decode {
        path: path.to_owned(),
        status,
        reason: format!("the success body does not have the expected fields: {e}"),
    })
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
mod sdk_tests;

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
