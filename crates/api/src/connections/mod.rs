//! Accepting connections with limits, so idle, slow or abusive clients cannot starve
//! real ones (or the process of file descriptors):
//! - at most `max_connections` at once (below the descriptor limit, leaving room for
//!   database connections and files); past it new connections wait in the kernel's
//!   backlog, and the first time the limit is reached it is logged;
//! - a connection whose next request head is not complete within `HEADER_TIMEOUT` of
//!   starting to wait for it is closed: silent clients, idle keep-alive, clients
//!   dripping one byte at a time. Connections accepted while fewer than a tenth of the
//!   slots are free get `PRESSED_HEADER_TIMEOUT`, so a flood of idle sockets drains
//!   fast and real requests behind it are reached;
//! - every answer hyper writes by itself for a malformed request carries the standard
//!   error object (`io.rs`).
//!
//! The time a request may take once its head has arrived (body included) is bounded by
//! the request timeout layer in `routes`.

mod io;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

/// A request head must be complete within this long of the server starting to wait.
pub(crate) const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The same, for connections accepted while the server is short of slots.
pub(crate) const PRESSED_HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// Descriptors kept free for the database pool, the listener, log and key files.
const RESERVED_DESCRIPTORS: u64 = 64;
/// Largest request head (request line and headers) read; longer ones are answered 431.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// `wanted` connections, or fewer when the process may not open that many descriptors.
pub(crate) fn connection_limit(wanted: usize) -> usize {
    let wanted = wanted.max(1);
    match rlimit::Resource::NOFILE.get() {
        Ok((soft, _)) => {
            let room = soft.saturating_sub(RESERVED_DESCRIPTORS).max(8);
            wanted.min(usize::try_from(room).unwrap_or(usize::MAX))
        }
        Err(_) => wanted,
    }
}

/// Serves `app` on `listener` until `shutdown` turns true; then stops accepting and
/// lets open connections finish their requests.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    max_connections: usize,
    mut shutdown: watch::Receiver<bool>,
) {
    let limit = connection_limit(max_connections);
    tracing::info!(max_connections = limit, "accepting connections");
    let slots = Arc::new(Semaphore::new(limit));

    let warned = Arc::new(AtomicBool::new(false));
    let mut open = tokio::task::JoinSet::new();
    loop {
        if slots.available_permits() == 0 && !warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                max_connections = limit,
                "connection limit reached; new connections wait"
            );
        }
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = shutdown.changed() => break,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = shutdown.changed() => break,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors or a transient network error: back off briefly
                // instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        while open.try_join_next().is_some() {}
        let (app, mut stop, warned) = (app.clone(), shutdown.clone(), warned.clone());
        let free = slots.clone();
        // Few free slots: under a tenth of the limit.
        let header_timeout = if slots.available_permits() < limit.div_ceil(10) {
            PRESSED_HEADER_TIMEOUT
        } else {
            HEADER_TIMEOUT
        };
        open.spawn(async move {
            let io = TokioIo::new(io::Guarded::new(stream));
            // Handlers may ask who is connected (the console's client address).
            let app = tower::Layer::layer(&axum::Extension(axum::extract::ConnectInfo(peer)), app);
            let service = TowerToHyperService::new(app);
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .max_buf_size(MAX_HEAD_BYTES)
                // One flat buffer per write, so error answers can be recognised.
                .writev(false);
            let conn = builder.serve_connection(io, service);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => if let Err(e) = r {
                    tracing::debug!(error = %e, "connection ended with an error");
                },
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
            drop(permit);
            // Warn again only after the pressure has clearly eased.
            if free.available_permits() > limit / 2 {
                warned.store(false, Ordering::Relaxed);
            }
        });
    }
    while open.join_next().await.is_some() {}
}
