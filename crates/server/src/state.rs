use crate::provider::Provider;
use crate::{MasterKey, ServerConfig};
use issuing_domain::catalog::Catalog;
use issuing_store::Store;
use std::sync::Arc;
use tokio::sync::Notify;

#[derive(Clone)]
pub(crate) struct AppState {
    pub store: Store,
    pub master: MasterKey,
    pub config: Arc<ServerConfig>,
    pub provider: Arc<dyn Provider>,
    /// Wakes this process's order workers when an order is created.
    pub orders_wakeup: Arc<Notify>,
    /// Token buckets of the per-key rate limit.
    pub rate_limiter: Arc<crate::pipeline::rate_limit::RateLimiter>,
    /// Wakes this process's webhook delivery worker when deliveries are queued.
    pub deliveries_wakeup: Arc<Notify>,
    /// Counters and histograms for `GET /metrics`.
    pub metrics: Arc<crate::metrics::Metrics>,
}

impl AppState {
    pub fn catalog(&self) -> &Catalog {
        &self.config.catalog
    }
}
