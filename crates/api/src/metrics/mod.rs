//! The API's metrics: HTTP requests by the route that matched (so the label takes only
//! the router's own paths), status code and latency, and `GET /metrics` on its own
//! listener, where they are served with the core's (`issuing_app::metrics`).

mod listener;

pub use listener::serve;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use issuing_app::metrics::text::Text;
use issuing_app::metrics::{render_histogram, BUCKETS};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The endpoint label of requests that matched no route.
pub const OTHER_ENDPOINT: &str = "other";

/// More distinct endpoints than the router has routes would be a bug; past this bound
/// they are counted as `other` rather than growing the series without end.
const MAX_ENDPOINTS: usize = 128;

/// The HTTP requests of one running server.
#[derive(Default)]
pub struct HttpMetrics {
    http: Mutex<BTreeMap<String, Endpoint>>,
    in_flight: AtomicI64,
}

#[derive(Default)]
struct Endpoint {
    by_status: BTreeMap<u16, u64>,
    /// Per bucket (not cumulative); the last one is `+Inf`.
    buckets: [u64; BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

impl HttpMetrics {
    /// One answered HTTP request. `endpoint` is a route path or `other`.
    pub fn record_request(&self, endpoint: &str, status: u16, elapsed: Duration) {
        let mut http = self.http.lock().unwrap_or_else(PoisonError::into_inner);
        let endpoint = if http.contains_key(endpoint) || http.len() < MAX_ENDPOINTS {
            endpoint
        } else {
            OTHER_ENDPOINT
        };
        if !http.contains_key(endpoint) {
            http.insert(endpoint.to_owned(), Endpoint::default());
        }
        let Some(e) = http.get_mut(endpoint) else {
            return;
        };
        *e.by_status.entry(status).or_default() += 1;
        let secs = elapsed.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|le| secs <= *le)
            .unwrap_or(BUCKETS.len());
        e.buckets[bucket] += 1;
        e.sum += secs;
        e.count += 1;
    }

    pub fn request_started(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    pub fn request_ended(&self) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn render(&self, t: &mut Text) {
        let http = self.http.lock().unwrap_or_else(PoisonError::into_inner);
        t.family(
            "issuing_http_requests_total",
            "counter",
            "HTTP requests answered, by endpoint (route path, or other) and status code.",
        );
        for (endpoint, e) in http.iter() {
            for (status, n) in &e.by_status {
                let status = status.to_string();
                t.sample(
                    "issuing_http_requests_total",
                    &[("endpoint", endpoint), ("status", &status)],
                    *n,
                );
            }
        }
        t.family(
            "issuing_http_request_duration_seconds",
            "histogram",
            "Time from receiving an HTTP request to answering it, by endpoint.",
        );
        for (endpoint, e) in http.iter() {
            render_histogram(
                t,
                "issuing_http_request_duration_seconds",
                ("endpoint", endpoint),
                (&e.buckets, e.sum, e.count),
            );
        }
        drop(http);
        t.family(
            "issuing_http_requests_in_flight",
            "gauge",
            "HTTP requests being answered right now.",
        );
        t.sample(
            "issuing_http_requests_in_flight",
            &[],
            self.in_flight.load(Ordering::Relaxed),
        );
    }
}

/// The layer that counts every request.
pub async fn track_requests(
    State(metrics): State<Arc<HttpMetrics>>,
    req: Request,
    next: Next,
) -> Response {
    let endpoint = req.extensions().get::<MatchedPath>().cloned();
    let endpoint = endpoint
        .as_ref()
        .map(MatchedPath::as_str)
        // A catch-all (a nested router's fallback) stands for any path.
        .filter(|p| !p.contains("{*"))
        .unwrap_or(OTHER_ENDPOINT);
    let start = Instant::now();
    let _in_flight = InFlight::start(&metrics);
    let response = next.run(req).await;
    metrics.record_request(endpoint, response.status().as_u16(), start.elapsed());
    response
}

/// Counts a request in flight until it is answered or abandoned.
struct InFlight<'a>(&'a HttpMetrics);

impl<'a> InFlight<'a> {
    fn start(m: &'a HttpMetrics) -> Self {
        m.request_started();
        InFlight(m)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_into_a_histogram() {
        let m = HttpMetrics::default();
        m.record_request("/api/v2/users/create", 200, Duration::from_millis(3));
        m.record_request("/api/v2/users/create", 200, Duration::from_millis(70));
        m.record_request("/api/v2/users/create", 409, Duration::from_secs(20));
        let mut t = Text::default();
        m.render(&mut t);
        let text = t.finish();
        for line in [
            "issuing_http_requests_total{endpoint=\"/api/v2/users/create\",status=\"200\"} 2",
            "issuing_http_requests_total{endpoint=\"/api/v2/users/create\",status=\"409\"} 1",
            "issuing_http_request_duration_seconds_bucket{endpoint=\"/api/v2/users/create\",le=\"0.005\"} 1",
            "issuing_http_request_duration_seconds_bucket{endpoint=\"/api/v2/users/create\",le=\"0.05\"} 1",
            "issuing_http_request_duration_seconds_bucket{endpoint=\"/api/v2/users/create\",le=\"0.1\"} 2",
            "issuing_http_request_duration_seconds_bucket{endpoint=\"/api/v2/users/create\",le=\"10\"} 2",
            "issuing_http_request_duration_seconds_bucket{endpoint=\"/api/v2/users/create\",le=\"+Inf\"} 3",
            "issuing_http_request_duration_seconds_count{endpoint=\"/api/v2/users/create\"} 3",
            "issuing_http_requests_in_flight 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
    }

    #[test]
    fn endpoints_are_bounded() {
        let m = HttpMetrics::default();
        for i in 0..MAX_ENDPOINTS + 10 {
            m.record_request(&format!("/e{i}"), 200, Duration::ZERO);
        }
        let http = m.http.lock().unwrap_or_else(PoisonError::into_inner);
        assert_eq!(http.len(), MAX_ENDPOINTS + 1);
        assert_eq!(http[OTHER_ENDPOINT].count, 10);
    }
}
