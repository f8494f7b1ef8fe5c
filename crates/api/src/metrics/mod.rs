//! The layer that counts HTTP requests: by the route that matched (so the label takes
//! only the router's own paths), status code and latency.

use super::{Metrics, OTHER_ENDPOINT};
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;
use std::time::Instant;

pub(crate) async fn track_requests(
    State(metrics): State<Arc<Metrics>>,
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
struct InFlight<'a>(&'a Metrics);

impl<'a> InFlight<'a> {
    fn start(m: &'a Metrics) -> Self {
        m.request_started();
        InFlight(m)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.request_ended();
    }
}
