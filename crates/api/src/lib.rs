//! The HTTP API of the issuing service (`/api/v2`, CONTRACT §1–§11), and the plain
//! routes beside it (`/health`, `/ready`, `/openapi.json`, what Lithic sends us).
//!
//! A request passes, in order: the request id, the request metrics, the time limit, the
//! rate limit, the envelope layer (API key lookup, envelope open, timestamp window,
//! replay guard; seals the answer), then the router (`pipeline/`). Handlers (`routes/`,
//! one file per resource) receive the authenticated project and typed plaintext requests
//! and return typed results or an `ApiError`; they never see ciphertext. What a request
//! does is the core's (`issuing-app`): handlers parse, call it and shape the answer.
//!
//! It may use the core, the store, the domain and the wire types; the console does not
//! use it, and `issuing-server` serves it (`connections/`: limits on connections).

pub mod connections;
pub mod metrics;
mod pipeline;
mod replay;
mod routes;

pub use pipeline::request_id_layer;
pub use routes::router;

use axum::extract::FromRef;
use issuing_app::App;
use issuing_store::StoreError;
use replay::ReplayGuard;
use std::sync::Arc;
use tokio::sync::watch;

/// What the API's layers and handlers share: the application and the HTTP layer's own
/// state. Cloned by every layer and extractor, so it is one reference count, not one per
/// field; handlers that need only the application take `State<App>`.
#[derive(Clone)]
pub struct ApiState(Arc<Shared>);

pub struct Shared {
    pub app: App,
    /// Token buckets of the per-key rate limit.
    rate_limiter: pipeline::rate_limit::RateLimiter,
    /// Unsealed API keys, cached for a few seconds.
    keys: pipeline::key_cache::KeyCache,
    /// Accepts each signed request once.
    replay: ReplayGuard,
    /// Counters and histograms of HTTP requests for `GET /metrics`.
    pub metrics: Arc<metrics::HttpMetrics>,
}

impl ApiState {
    /// The API's state for `app`; the replay guard's background tasks stop when
    /// `shutdown` flips.
    pub async fn start(app: App, shutdown: watch::Receiver<bool>) -> Result<ApiState, StoreError> {
        let replay = ReplayGuard::start(&app.store, shutdown, app.config.cleanup_interval).await?;
        Ok(ApiState(Arc::new(Shared {
            app,
            rate_limiter: Default::default(),
            keys: Default::default(),
            replay,
            metrics: Arc::default(),
        })))
    }
}

impl ApiState {
    /// At a graceful stop, once no request is served any more: the SQLite replay guard
    /// leaves what it accepted for the next server. Returns how many requests it handed
    /// over (the PostgreSQL guard is in the database already).
    pub async fn hand_over(&self) -> Result<usize, StoreError> {
        self.replay.hand_over().await
    }
}

impl std::ops::Deref for ApiState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl FromRef<ApiState> for App {
    fn from_ref(state: &ApiState) -> App {
        state.app.clone()
    }
}
