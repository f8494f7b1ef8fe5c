//! The application core of the issuing service: what the service does, whoever asks.
//!
//! It holds the operations (`flows/`: card issues, top-ups, closes, KYC, 3-D Secure), the
//! card network's entry point (`network/`: authorizations, clearings, refunds and their
//! decision), the card providers (`provider/`: the sandbox and Lithic, their outbound
//! calls and what their inbound messages mean), the batch writers (`batch_writer.rs` and
//! the writers beside their flows), the background workers (`workers/`), webhook delivery
//! (`webhooks/`), deposits, projects and the ledger's verification.
//!
//! It may use the domain, the store and the wire types (request and answer shapes, the
//! error type), and `reqwest` for outbound calls; never `axum` nor an HTTP request or
//! answer type of the API. The HTTP API (`issuing-api`) and the console
//! (`issuing-console`) call into it through [`App`]; `issuing-server` assembles them.

pub mod batch_writer;
pub mod config;
pub mod deposits;
pub mod disputes;
pub mod flows;
pub mod idempotency;
pub mod ledger_check;
pub mod master_key;
pub mod metrics;
pub mod network;
pub mod projects;
pub mod provider;
pub mod reconcile;
pub mod reports;
mod start;
pub mod statements;
pub mod webhooks;
pub mod workers;

pub use config::{Mode, ServerConfig};
pub use master_key::MasterKey;
pub use start::spawn_workers;

use issuing_domain::catalog::Catalog;
use issuing_store::group_commit::GroupCommit;
use issuing_store::Store;
use provider::Providers;
use std::sync::Arc;
use tokio::sync::Notify;

/// The application's services: what every operation, worker and caller above needs.
/// Cloned by every request and worker, so it is one reference count, not one per field.
#[derive(Clone)]
pub struct App(Arc<Services>);

impl App {
    pub fn new(services: Services) -> App {
        App(Arc::new(services))
    }
}

impl std::ops::Deref for App {
    type Target = Services;
    fn deref(&self) -> &Services {
        &self.0
    }
}

pub struct Services {
    pub store: Store,
    pub master: MasterKey,
    pub config: Arc<ServerConfig>,
    /// The card provider of each subprovider.
    pub providers: Providers,
    /// Wakes this process's order workers when an order is created.
    pub orders_wakeup: Arc<Notify>,
    /// Orders born leased to this process's order workers (`flows/born.rs`).
    pub born: Arc<flows::born::Born>,
    /// Wakes this process's webhook delivery worker when deliveries are queued.
    pub deliveries_wakeup: Arc<Notify>,
    /// Wakes this process's report builder when a report is asked for.
    pub reports_wakeup: Arc<Notify>,
    /// The core's counters (webhook attempts, chain watcher, upkeep, provider).
    pub metrics: Arc<metrics::Metrics>,
    /// Where deposit addresses derive from; None: production without an xpub.
    pub deposit_key: Option<Arc<deposits::keys::DepositKey>>,
    /// The master balance's writer for top-ups and card issues
    /// (`flows/master_writer.rs`).
    pub master_writer: flows::master_writer::MasterWriter,
    /// The authorizations' writer (`network/auth_writer.rs`).
    pub auth_writer: network::auth_writer::AuthWriter,
    /// The writer of users/create (`flows/user_writer.rs`).
    pub user_writer: flows::user_writer::UserWriter,
    /// The writer of issue orders' steps once the provider made the card
    /// (`workers/issued.rs`).
    pub issue_writer: workers::issued::IssueWriter,
    /// Group commit for decision webhook answers: each changes one authorization.
    pub decisions: GroupCommit,
    /// The writer of webhook attempt outcomes (`workers/outcomes.rs`).
    pub webhook_outcomes: workers::outcomes::OutcomeWriter,
    /// The HTTP client of decision webhooks (no redirects; the SSRF guard in production);
    /// each call sets its own time.
    pub decision_http: reqwest::Client,
}

impl Services {
    pub fn catalog(&self) -> &Catalog {
        &self.config.catalog
    }

    /// Every batch writer's counters, by the name `/metrics` labels them with.
    pub fn writer_stats(&self) -> [(&'static str, &issuing_store::group_commit::Stats); 6] {
        [
            ("master_moves", self.master_writer.stats()),
            ("authorizations", self.auth_writer.stats()),
            ("users", self.user_writer.stats()),
            ("card_issues", self.issue_writer.stats()),
            ("decisions", self.decisions.stats()),
            ("webhook_outcomes", self.webhook_outcomes.stats()),
        ]
    }
}
