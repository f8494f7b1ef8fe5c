//! Rate limits per API key (`rate_limit` requests per second, bursts of twice that),
//! checked before anything else so a flood costs neither a database read nor a
//! decryption. Over the limit: 429 `rate_limited`, plain, with `Retry-After`.
//!
//! Buckets live in this process's memory: with several processes behind a balancer
//! each enforces the limit on the requests it receives. The map is bounded: when it
//! is full, buckets idle long enough to be full again are dropped first.

use super::reply::error_response;
use crate::ApiState;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use issuing_wire::{ApiError, ErrorSlug};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

/// Keys tracked at once. Unknown keys count too (they are not looked up first), so the
/// bound keeps random keys from growing the map without end.
const MAX_KEYS: usize = 50_000;
/// Longer keys are not real ones; only this much of them names a bucket.
const MAX_KEY_LEN: usize = 128;

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// Token buckets per API key.
#[derive(Debug, Default)]
pub(crate) struct RateLimiter {
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    /// Takes one token for `key` at `rate` per second (burst `2 × rate`). Err holds the
    /// seconds until a token is available.
    fn take(&self, key: &str, rate: u32, now: Instant) -> Result<(), u64> {
        let rate = f64::from(rate);
        let burst = rate * 2.0;
        let key = key.get(..MAX_KEY_LEN).unwrap_or(key);
        let mut buckets = match self.buckets.lock() {
            Ok(b) => b,
            Err(poisoned) => poisoned.into_inner(),
        };
        if buckets.len() >= MAX_KEYS && !buckets.contains_key(key) {
            // Full buckets are those that would be created full anyway.
            buckets.retain(|_, b| b.tokens + now.duration_since(b.at).as_secs_f64() * rate < burst);
            if buckets.len() >= MAX_KEYS {
                buckets.clear();
                tracing::warn!("rate limiter tracked too many API keys; its buckets were reset");
            }
        }
        let bucket = buckets.entry(key.to_owned()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let refill = now.duration_since(bucket.at).as_secs_f64() * rate;
        bucket.tokens = (bucket.tokens + refill).min(burst);
        bucket.at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            let wait = ((1.0 - bucket.tokens) / rate).ceil().max(1.0);
            Err(wait as u64)
        }
    }
}

pub(crate) async fn rate_limit_layer(
    State(state): State<ApiState>,
    req: Request,
    next: Next,
) -> Response {
    let rate = state.app.config.rate_limit;
    if rate > 0 {
        if let Some(key) = req.headers().get("API-KEY").and_then(|v| v.to_str().ok()) {
            if let Err(wait) = state.rate_limiter.take(key.trim(), rate, Instant::now()) {
                let mut response = error_response(&ApiError::new(
                    ErrorSlug::RateLimited,
                    "Too many requests for this API key",
                ));
                if let Ok(v) = HeaderValue::from_str(&wait.to_string()) {
                    response.headers_mut().insert(header::RETRY_AFTER, v);
                }
                return response;
            }
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn bursts_then_refills() {
        let l = RateLimiter::default();
        let t0 = Instant::now();
        for _ in 0..20 {
            assert!(l.take("k", 10, t0).is_ok());
        }
        assert_eq!(l.take("k", 10, t0), Err(1));
        assert!(l.take("other", 10, t0).is_ok(), "keys are independent");
        assert!(l.take("k", 10, t0 + Duration::from_millis(100)).is_ok());
        assert!(l.take("k", 10, t0 + Duration::from_millis(100)).is_err());
    }
}
