use crate::provider::sandbox::SandboxProvider;
use crate::provider::unconfigured::UnconfiguredProvider;
use crate::provider::Provider;
use crate::state::AppState;
use crate::{routes, workers, MasterKey, Mode, ServerConfig};
use issuing_store::group_commit::GroupCommit;
use issuing_store::Store;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::{watch, Notify};

/// Upper bound on order workers per process: each holds a database connection.
const MAX_ORDER_WORKERS: usize = 8;
use tokio::task::JoinSet;

/// A server listening and its workers running. Dropping it does not stop it; call
/// `shutdown` (tests) or `wait` (the binary).
pub struct RunningServer {
    pub addr: SocketAddr,
    /// Where `GET /metrics` is served, when `metrics_listen` is set.
    pub metrics_addr: Option<SocketAddr>,
    shutdown: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

/// Binds the listener (port 0 picks a free port) and starts the HTTP server and workers.
/// The store must already be migrated and the master key bound to it.
pub async fn start(
    store: Store,
    master: MasterKey,
    config: ServerConfig,
) -> anyhow::Result<RunningServer> {
    let listener = tokio::net::TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let metrics_listener = match config.metrics_listen {
        Some(at) => Some(tokio::net::TcpListener::bind(at).await?),
        None => None,
    };
    let metrics_addr = metrics_listener
        .as_ref()
        .map(tokio::net::TcpListener::local_addr)
        .transpose()?;
    let (shutdown, rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let provider: Arc<dyn Provider> = match config.mode {
        Mode::Sandbox => Arc::new(SandboxProvider::new(store.clone(), config.sandbox.clone())),
        Mode::Production => {
            tracing::warn!(
                "production mode has no card provider adapter: card operations will fail"
            );
            Arc::new(UnconfiguredProvider)
        }
    };
    let workers = config.order_workers.clamp(1, MAX_ORDER_WORKERS);
    let deposit_key =
        crate::deposits::keys::prepare(&store, &master, config.mode, config.tron.xpub.as_deref())
            .await?;
    if let Some(key) = &deposit_key {
        crate::deposits::keys::backfill(&store, &key.xpub).await?;
    }
    let state = AppState::new(crate::state::Shared {
        store: store.clone(),
        master,
        config: Arc::new(config),
        provider,
        orders_wakeup: Arc::new(Notify::new()),
        deliveries_wakeup: Arc::new(Notify::new()),
        rate_limiter: Arc::default(),
        metrics: Arc::default(),
        deposit_key: deposit_key.map(Arc::new),
        keys: Arc::default(),
        replay: crate::replay::ReplayGuard::start(&store, rx.clone()).await?,
        master_moves: GroupCommit::start(store.clone(), "master_moves"),
        authorizations: GroupCommit::start(store.clone(), "authorizations"),
        webhook_outcomes: GroupCommit::start(store.clone(), "webhook_outcomes"),
    });
    for _ in 0..workers {
        tasks.spawn(workers::orders::run(state.clone(), rx.clone()));
    }
    tasks.spawn(workers::deliveries::run(state.clone(), rx.clone()));
    tasks.spawn(workers::holds::run(state.clone(), rx.clone()));
    if state.config.tron.api_url.is_some() {
        tasks.spawn(workers::chain::run(state.clone(), rx.clone()));
    } else {
        tracing::info!("ISSUING_TRON_API_URL is not set: no chain watcher (deposits come from admin deposit, and simulate/project/deposit in the sandbox)");
    }
    if store.backend() == issuing_store::Backend::Postgres {
        tasks.spawn(workers::wakeup::listen(state.clone(), rx.clone()));
    }
    let app = routes::router(state.clone());
    let http_rx = rx.clone();
    let max_connections = state.config.max_connections;
    tasks.spawn(crate::connections::serve(
        listener,
        app,
        max_connections,
        http_rx,
    ));
    if let Some(listener) = metrics_listener {
        tasks.spawn(crate::metrics::serve(listener, state.clone(), rx.clone()));
    }
    tasks.spawn(workers::cleanup::run(store, state.replay.clone(), rx));
    tracing::info!(%addr, "listening");
    if let Some(metrics_addr) = metrics_addr {
        tracing::info!(%metrics_addr, "metrics listening (GET /metrics)");
    }
    Ok(RunningServer {
        addr,
        metrics_addr,
        shutdown,
        tasks,
    })
}

impl RunningServer {
    pub async fn shutdown(mut self) {
        let _ = self.shutdown.send(true);
        while self.tasks.join_next().await.is_some() {}
    }

    /// Runs until ctrl-c / SIGTERM, then shuts down gracefully.
    pub async fn wait(self) {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::error!(error = %e, "cannot listen for SIGTERM");
                        let _ = ctrl_c.await;
                        return self.shutdown().await;
                    }
                };
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("shutting down");
        self.shutdown().await;
    }
}
