use axum::middleware;
use issuing_api::ApiState;
use issuing_app::{App, MasterKey, ServerConfig};
use issuing_store::Store;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// A server listening and its workers running. Dropping it aborts everything at once,
/// like a crash; `shutdown` (tests) and `wait` (the binary) stop it gracefully.
pub struct RunningServer {
    pub addr: SocketAddr,
    /// Where `GET /metrics` is served, when `metrics_listen` is set.
    pub metrics_addr: Option<SocketAddr>,
    /// Where the operator console is served, when it runs.
    pub console_addr: Option<SocketAddr>,
    /// Stops accepting connections; open ones finish the requests they carry.
    stop_http: watch::Sender<bool>,
    /// The API listener and its connections.
    http: JoinSet<()>,
    /// Workers take no new work and finish what they hold.
    shutdown: watch::Sender<bool>,
    /// Workers cut short what they hold and hand their claims back.
    hand_back: watch::Sender<bool>,
    tasks: JoinSet<()>,
    api: ApiState,
    drain_timeout: Duration,
}

/// After `hand_back`, how long workers get to release their claims before they are
/// aborted (their leases then run out by themselves).
const HAND_BACK_WAIT: Duration = Duration::from_secs(5);

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
    let console_listener = bind_console(config.console).await?;
    let console_addr = console_listener
        .as_ref()
        .map(tokio::net::TcpListener::local_addr)
        .transpose()?;
    let mut config = config;
    if config.public_url.is_none() {
        config.public_url = Some(listener_url(addr));
        if config.mode == issuing_app::Mode::Production {
            tracing::warn!("ISSUING_PUBLIC_URL is not set: reveal pages (cards/reveal/create) point at the listener's own address");
        }
    }
    let (shutdown, rx) = watch::channel(false);
    let (hand_back, hand_back_rx) = watch::channel(false);
    let (stop_http, http_rx) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let app = App::start(store, master, config).await?;
    let api = ApiState::start(app.clone(), rx.clone()).await?;
    issuing_app::spawn_workers(&app, &mut tasks, &rx, &hand_back_rx);
    let mut http = JoinSet::new();
    http.spawn(issuing_api::connections::serve(
        listener,
        issuing_api::router(api.clone()),
        app.config.max_connections,
        http_rx,
    ));
    if let Some(listener) = metrics_listener {
        tasks.spawn(issuing_api::metrics::serve(
            listener,
            app.clone(),
            api.metrics.clone(),
            rx.clone(),
        ));
    }
    if let Some(listener) = console_listener {
        tasks.spawn(serve_console(listener, app.clone(), rx));
    }
    tracing::info!(%addr, "listening");
    if let Some(metrics_addr) = metrics_addr {
        tracing::info!(%metrics_addr, "metrics listening (GET /metrics)");
    }
    if let Some(console_addr) = console_addr {
        tracing::info!(%console_addr, "console listening (/console/)");
    }
    Ok(RunningServer {
        addr,
        metrics_addr,
        console_addr,
        stop_http,
        http,
        shutdown,
        hand_back,
        tasks,
        api: api.clone(),
        drain_timeout: app.config.drain_timeout,
    })
}

/// `http://` and the listener's address, as a browser on this machine reaches it (an
/// unspecified address, listening on every interface, is reached at loopback).
fn listener_url(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        std::net::IpAddr::V4(ip) if ip.is_unspecified() => {
            std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)
        }
        std::net::IpAddr::V6(ip) if ip.is_unspecified() => {
            std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST)
        }
        ip => ip,
    };
    format!("http://{}", SocketAddr::new(ip, addr.port()))
}

/// Serves the console on `listener` until `shutdown`, every answer with a request id.
async fn serve_console(
    listener: tokio::net::TcpListener,
    app: App,
    shutdown: watch::Receiver<bool>,
) {
    let (router, purge) = issuing_console::start(app, shutdown.clone());
    let router = router.layer(middleware::from_fn(issuing_api::request_id_layer));
    issuing_api::connections::serve(listener, router, issuing_console::MAX_CONNECTIONS, shutdown)
        .await;
    purge.abort();
}

/// The console's listener; an optional (default) address that is taken means no
/// console, with a warning, rather than no server.
async fn bind_console(
    console: Option<issuing_app::config::ConsoleListen>,
) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    let Some(c) = console else {
        return Ok(None);
    };
    match tokio::net::TcpListener::bind(c.addr).await {
        Ok(l) => Ok(Some(l)),
        Err(e) if c.optional && e.kind() == std::io::ErrorKind::AddrInUse => {
            tracing::warn!(addr = %c.addr, "the console's default address is taken: no console (set --console-listen)");
            Ok(None)
        }
        Err(e) => Err(anyhow::anyhow!("console listener {}: {e}", c.addr)),
    }
}

impl RunningServer {
    /// Stops gracefully (CONTRACT §13), within `drain_timeout` plus a few seconds:
    /// 1. stops accepting connections and lets the requests already received finish;
    ///    past the deadline the rest are cut off (their transactions roll back);
    /// 2. stops the workers: they take no new work and finish what they hold until the
    ///    same deadline, then cut it short and hand their claims (orders, webhook
    ///    attempts) back for the next server;
    /// 3. on SQLite, leaves the replay guard's memory for the next server, so that it
    ///    refuses exactly the copies this one would have refused.
    pub async fn shutdown(mut self) {
        let deadline = tokio::time::Instant::now() + self.drain_timeout;
        let _ = self.stop_http.send(true);
        let drained = tokio::time::timeout_at(deadline, async {
            while self.http.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                drain_timeout = ?self.drain_timeout,
                "stopping: requests still running at the drain timeout were cut off"
            );
            self.http.abort_all();
            while self.http.join_next().await.is_some() {}
        }
        // No request runs any more: nothing else is admitted or written by one.
        let _ = self.shutdown.send(true);
        let finished = tokio::time::timeout_at(deadline, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await;
        if finished.is_err() {
            let _ = self.hand_back.send(true);
            let handed = tokio::time::timeout(HAND_BACK_WAIT, async {
                while self.tasks.join_next().await.is_some() {}
            })
            .await;
            if handed.is_err() {
                self.tasks.abort_all();
                while self.tasks.join_next().await.is_some() {}
            }
        }
        match self.api.hand_over().await {
            Ok(n) => tracing::info!(handed_over = n, "stopped"),
            Err(e) => tracing::error!(
                error = %e,
                "stopping: could not hand the replay memory over; the next server fences requests signed before it starts"
            ),
        }
    }

    /// Runs until `stop` fires (SIGTERM or SIGINT), then shuts down gracefully.
    pub async fn wait(self, mut stop: StopSignal) {
        stop.recv().await;
        tracing::info!("shutting down");
        self.shutdown().await;
    }
}

/// SIGTERM and SIGINT, caught from the moment `install` returns. Install it before the
/// server announces that it listens: a supervisor (or a test) may stop the server as soon
/// as it reads that line, and a signal that came before the handler would kill the
/// process without its graceful stop.
pub struct StopSignal {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl StopSignal {
    pub fn install() -> std::io::Result<StopSignal> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(StopSignal {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(StopSignal {})
    }

    async fn recv(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}
