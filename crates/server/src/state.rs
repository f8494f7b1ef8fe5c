use crate::provider::Providers;
use crate::{MasterKey, ServerConfig};
use issuing_domain::catalog::Catalog;
use issuing_store::group_commit::GroupCommit;
use issuing_store::Store;
use std::sync::Arc;
use tokio::sync::Notify;

/// Everything a request or worker needs. Cloned by every layer and extractor, so it is
/// one reference count, not one per field.
#[derive(Clone)]
pub(crate) struct AppState(Arc<Shared>);

impl AppState {
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

pub(crate) struct Shared {
    pub store: Store,
    pub master: MasterKey,
    pub config: Arc<ServerConfig>,
    /// The card provider of each subprovider.
    pub providers: Providers,
    /// Wakes this process's order workers when an order is created.
    pub orders_wakeup: Arc<Notify>,
    /// Orders born leased to this process's order workers (`workers/born.rs`).
    pub born: Arc<crate::workers::born::Born>,
    /// Token buckets of the per-key rate limit.
    pub rate_limiter: Arc<crate::pipeline::rate_limit::RateLimiter>,
    /// Wakes this process's webhook delivery worker when deliveries are queued.
    pub deliveries_wakeup: Arc<Notify>,
    /// Counters and histograms for `GET /metrics`.
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Where deposit addresses derive from; None: production without an xpub.
    pub deposit_key: Option<Arc<crate::deposits::keys::DepositKey>>,
    /// Unsealed API keys, cached for a few seconds.
    pub keys: Arc<crate::pipeline::key_cache::KeyCache>,
    /// Accepts each signed request once.
    pub replay: crate::replay::ReplayGuard,
    /// The master balance's writer for top-ups and card issues
    /// (`flows/master_writer.rs`).
    pub master_writer: crate::flows::master_writer::MasterWriter,
    /// The authorizations' writer (`network/auth_writer.rs`).
    pub auth_writer: crate::network::auth_writer::AuthWriter,
    /// The writer of users/create (`flows/user_writer.rs`).
    pub user_writer: crate::flows::user_writer::UserWriter,
    /// The writer of issue orders' steps once the provider made the card
    /// (`workers/issued.rs`).
    pub issue_writer: crate::workers::issued::IssueWriter,
    /// Group commit for decision webhook answers: each changes one authorization.
    pub decisions: GroupCommit,
    /// The writer of webhook attempt outcomes (`workers/outcomes.rs`).
    pub webhook_outcomes: crate::workers::outcomes::OutcomeWriter,
    /// The HTTP client of decision webhooks (no redirects; the SSRF guard in production);
    /// each call sets its own time.
    pub decision_http: reqwest::Client,
}

impl Shared {
    pub fn catalog(&self) -> &Catalog {
        &self.config.catalog
    }
}
