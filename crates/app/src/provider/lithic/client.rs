//! Lithic's REST API: `Authorization: <api key>`, JSON both ways, bounded retries.
//!
//! A 429 is retried after its `retry-after` (the request was not processed); 5xx,
//! 408, 409 and transport errors with exponential backoff and jitter, unless the call
//! says a repeat could do the work twice (`Retry::NotProcessedOnly`, account holder
//! creation, which has no idempotency key: its caller looks the outcome up instead).
//! Every call ends within `CALL_DEADLINE`, below the provider call timeout, so an order
//! worker always saves before its lease can run out.

use crate::metrics::Metrics;
use rand::Rng;
use reqwest::Method;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Attempts of one call, the first included.
const MAX_ATTEMPTS: u32 = 4;
/// One call with all its retries; below `provider::PROVIDER_TIMEOUT` (10 s).
pub const CALL_DEADLINE: Duration = Duration::from_secs(8);
const _: () = assert!(CALL_DEADLINE.as_secs() < super::super::PROVIDER_TIMEOUT.as_secs());
/// One attempt, connection included.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest `retry-after` waited for; Lithic sends 1 s.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(5);
const BACKOFF_BASE: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// The most of an answer read; a card or account holder is a few KiB.
const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Which failures a call may repeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Every transient failure: the call is safe to repeat (reads, PATCH of a state,
    /// POST with an `Idempotency-Key`).
    Transient,
    /// Only failures where Lithic did not process the request (429, no connection).
    NotProcessedOnly,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// A final answer: Lithic refused the request (4xx other than 408, 409, 429).
    #[error("Lithic refused the request (HTTP {status}): {message}")]
    Refused { status: u16, message: String },
    /// No final answer within the retries; the outcome may be unknown.
    #[error("Lithic did not answer: {0}")]
    Unavailable(String),
}

impl CallError {
    pub fn is_not_found(&self) -> bool {
        matches!(self, CallError::Refused { status: 404, .. })
    }
}

impl From<CallError> for super::super::ProviderError {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Refused { .. } => super::super::ProviderError::Rejected(e.to_string()),
            CallError::Unavailable(_) => super::super::ProviderError::Transient(e.to_string()),
        }
    }
}

/// One attempt's outcome.
enum Attempt {
    Done(Value),
    Refused(CallError),
    /// Worth another attempt after `wait` (None: the backoff); `processed` says whether
    /// Lithic may have done the work.
    Again {
        reason: &'static str,
        wait: Option<Duration>,
        processed: bool,
        detail: String,
    },
}

pub struct Client {
    http: reqwest::Client,
    base: String,
    api_key: String,
    subprovider: String,
    metrics: Arc<Metrics>,
}

impl Client {
    pub fn new(
        subprovider: &str,
        base: &str,
        api_key: &str,
        metrics: Arc<Metrics>,
    ) -> reqwest::Result<Client> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(ATTEMPT_TIMEOUT)
            .connect_timeout(ATTEMPT_TIMEOUT)
            .user_agent(concat!("issuing/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Client {
            http,
            base: base.trim_end_matches('/').to_owned(),
            api_key: api_key.to_owned(),
            subprovider: subprovider.to_owned(),
            metrics,
        })
    }

    /// Lithic's page of an embed session (`GET /v1/embed`) for one detail (`PAN`,
    /// `CVV`, `EXP_MONTH`, `EXP_YEAR`): loaded by the cardholder's browser, without our
    /// API key.
    pub fn embed_url(&self, session: &str, kind: &str) -> String {
        let query: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("session", session)
            .append_pair("type", kind)
            .finish();
        format!("{}/v1/embed?{query}", self.base)
    }

    /// An HTTP PUT of `bytes` to `url`, a pre-signed upload target Lithic answered (a
    /// dispute's evidence `upload_url`): without our API key, which is for Lithic's API
    /// alone. Storing the same bytes again is harmless, so every transient failure is
    /// retried, within `CALL_DEADLINE`.
    pub async fn upload(
        &self,
        op: &'static str,
        url: &str,
        content_type: &str,
        bytes: &[u8],
    ) -> Result<(), CallError> {
        let parsed = url::Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "https" | "http") && u.host().is_some())
            .ok_or_else(|| CallError::Refused {
                status: 0,
                message: "Lithic answered an upload_url that is not an HTTP URL".into(),
            })?;
        let deadline = Instant::now() + CALL_DEADLINE;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let left = deadline.saturating_duration_since(Instant::now());
            let sent = self
                .http
                .put(parsed.clone())
                .timeout(left.min(ATTEMPT_TIMEOUT))
                .header("Content-Type", content_type)
                .body(bytes.to_vec())
                .send()
                .await;
            let (reason, detail) = match sent {
                Ok(r) if r.status().is_success() => {
                    self.metrics.provider.call(&self.subprovider, op, "ok");
                    return Ok(());
                }
                Ok(r) => {
                    let status = r.status().as_u16();
                    if !matches!(status, 408 | 429 | 500..=599) {
                        self.metrics.provider.call(&self.subprovider, op, "refused");
                        return Err(CallError::Refused {
                            status,
                            message: "the upload target refused the file".into(),
                        });
                    }
                    ("server_error", format!("HTTP {status}"))
                }
                Err(e) => ("transport", describe(&e)),
            };
            self.metrics.provider.call(&self.subprovider, op, reason);
            let wait = backoff(attempt);
            if attempt >= MAX_ATTEMPTS || Instant::now() + wait >= deadline {
                return Err(CallError::Unavailable(format!(
                    "{detail} (after {attempt} attempts)"
                )));
            }
            self.metrics.provider.retry(&self.subprovider, op, reason);
            tokio::time::sleep(wait).await;
        }
    }

    pub async fn get(&self, op: &'static str, path: &str) -> Result<Value, CallError> {
        self.call(op, Method::GET, path, None, None, Retry::Transient)
            .await
    }

    /// `op` names the call in metrics (`create_card`, …); `path` starts with `/v1/`
    /// and carries its query string.
    pub async fn call(
        &self,
        op: &'static str,
        method: Method,
        path: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
        retry: Retry,
    ) -> Result<Value, CallError> {
        let deadline = Instant::now() + CALL_DEADLINE;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let outcome = self
                .attempt(&method, path, body, idempotency_key, deadline)
                .await;
            let (reason, wait, processed, detail) = match outcome {
                Attempt::Done(v) => {
                    self.metrics.provider.call(&self.subprovider, op, "ok");
                    return Ok(v);
                }
                Attempt::Refused(e) => {
                    self.metrics.provider.call(&self.subprovider, op, "refused");
                    return Err(e);
                }
                Attempt::Again {
                    reason,
                    wait,
                    processed,
                    detail,
                } => (reason, wait, processed, detail),
            };
            self.metrics.provider.call(&self.subprovider, op, reason);
            let wait = wait.unwrap_or_else(|| backoff(attempt));
            let may_repeat = retry == Retry::Transient || !processed;
            let in_time = Instant::now() + wait < deadline;
            if attempt >= MAX_ATTEMPTS || !may_repeat || !in_time {
                return Err(CallError::Unavailable(format!(
                    "{detail} (after {attempt} attempt{})",
                    if attempt == 1 { "" } else { "s" }
                )));
            }
            self.metrics.provider.retry(&self.subprovider, op, reason);
            tracing::debug!(subprovider = %self.subprovider, op, reason, attempt, "retrying a Lithic call");
            tokio::time::sleep(wait).await;
        }
    }

    async fn attempt(
        &self,
        method: &Method,
        path: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
        deadline: Instant,
    ) -> Attempt {
        let left = deadline.saturating_duration_since(Instant::now());
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.base))
            .timeout(left.min(ATTEMPT_TIMEOUT))
            .header("Authorization", &self.api_key)
            .header("Accept", "application/json");
        if let Some(key) = idempotency_key {
            req = req.header("Idempotency-Key", key);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let mut resp = match req.send().await {
            Ok(r) => r,
            Err(e) => {
                return Attempt::Again {
                    reason: "transport",
                    wait: None,
                    // A refused connection never reached Lithic.
                    processed: !e.is_connect(),
                    detail: describe(&e),
                };
            }
        };
        let status = resp.status().as_u16();
        let retry_after = retry_after(resp.headers());
        let mut bytes = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) if bytes.len() + chunk.len() <= MAX_BODY_BYTES => {
                    bytes.extend_from_slice(&chunk)
                }
                Ok(Some(_)) => {
                    return Attempt::Again {
                        reason: "transport",
                        wait: None,
                        processed: true,
                        detail: "answer too large".into(),
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    return Attempt::Again {
                        reason: "transport",
                        wait: None,
                        processed: true,
                        detail: describe(&e),
                    }
                }
            }
        }
        let json: Option<Value> = serde_json::from_slice(&bytes).ok();
        let message = json
            .as_ref()
            .and_then(|v| v.get("message").or_else(|| v.get("error")))
            .and_then(Value::as_str)
            .map(|m| m.chars().take(300).collect::<String>())
            .unwrap_or_default();
        match status {
            // Some operations answer without a body (`content: {}`).
            200..=299 if bytes.is_empty() => Attempt::Done(Value::Null),
            200..=299 => match json {
                Some(v) => Attempt::Done(v),
                None => Attempt::Again {
                    reason: "server_error",
                    wait: None,
                    processed: true,
                    detail: format!("HTTP {status} with a body that is not JSON"),
                },
            },
            429 => Attempt::Again {
                reason: "rate_limited",
                wait: Some(retry_after.unwrap_or(Duration::from_secs(1))),
                processed: false,
                detail: format!("rate limited (HTTP 429): {message}"),
            },
            // 409: an idempotent request with the same key is still in flight.
            408 | 409 | 500..=599 => Attempt::Again {
                reason: "server_error",
                wait: retry_after,
                processed: true,
                detail: format!("HTTP {status}: {message}"),
            },
            _ => Attempt::Refused(CallError::Refused { status, message }),
        }
    }
}

/// `min(250 ms × 2^(n−1), 2 s)`, less up to a quarter at random so that callers that
/// failed together do not retry together.
fn backoff(attempt: u32) -> Duration {
    let exp = attempt.saturating_sub(1).min(8);
    let full = BACKOFF_BASE.saturating_mul(1 << exp).min(BACKOFF_MAX);
    full.mul_f64(rand::thread_rng().gen_range(0.75..=1.0))
}

/// `retry-after-ms` or `retry-after` (seconds), at most `MAX_RETRY_AFTER`.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let read = |name: &str| -> Option<f64> {
        headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let wait = read("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| read("retry-after").map(Duration::from_secs_f64))?;
    Some(wait.min(MAX_RETRY_AFTER))
}

/// A short cause without the URL (which carries no secret, but keep logs plain).
fn describe(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        "could not connect".into()
    } else if e.is_body() || e.is_decode() {
        "answer cut short".into()
    } else {
        "request failed".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_bounded() {
        for attempt in 1..20 {
            let b = backoff(attempt);
            assert!(b <= BACKOFF_MAX, "{b:?}");
            assert!(b >= BACKOFF_BASE.mul_f64(0.75), "{b:?}");
        }
        assert!(backoff(1) <= BACKOFF_BASE);
    }

    #[test]
    fn reads_retry_after() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert(
            "retry-after",
            "1".parse().unwrap_or_else(|_| unreachable!()),
        );
        assert_eq!(retry_after(&h), Some(Duration::from_secs(1)));
        h.insert(
            "retry-after",
            "3600".parse().unwrap_or_else(|_| unreachable!()),
        );
        assert_eq!(retry_after(&h), Some(MAX_RETRY_AFTER));
        h.insert(
            "retry-after-ms",
            "250".parse().unwrap_or_else(|_| unreachable!()),
        );
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
    }
}
