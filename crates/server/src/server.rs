use crate::state::AppState;
use crate::{routes, workers, MasterKey, ServerConfig};
use issuing_store::Store;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// A server listening and its workers running. Dropping it does not stop it; call
/// `shutdown` (tests) or `wait` (the binary).
pub struct RunningServer {
    pub addr: SocketAddr,
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
    let (shutdown, rx) = watch::channel(false);
    let state = AppState {
        store: store.clone(),
        master,
        config: Arc::new(config),
    };
    let app = routes::router(state);
    let mut tasks = JoinSet::new();
    let mut http_rx = rx.clone();
    tasks.spawn(async move {
        let result = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = http_rx.changed().await;
            })
            .await;
        if let Err(e) = result {
            tracing::error!(error = %e, "HTTP server stopped with an error");
        }
    });
    tasks.spawn(workers::replay_gc::run(store, rx));
    tracing::info!(%addr, "listening");
    Ok(RunningServer {
        addr,
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
