//! The metrics listener: `GET /metrics` on its own address, apart from the API, so it
//! can stay on a private network. It stops with the server.

use super::text::CONTENT_TYPE;
use super::{DbStats, Metrics};
use crate::state::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use issuing_domain::time::now_micros;
use issuing_store::{stats, Store, StoreError};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// The database counts of a scrape must arrive within this, or the scrape reports
/// `issuing_db_up 0` without them.
const DB_TIMEOUT: Duration = Duration::from_secs(2);
/// Scrapes closer together than this share one set of database counts.
const DB_MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Bound on (type, status) pairs reported by `issuing_orders`.
const MAX_ORDER_GROUPS: i64 = 100;

pub(crate) async fn serve(
    listener: TcpListener,
    state: AppState,
    mut shutdown: watch::Receiver<bool>,
) {
    let app = Router::new()
        .route("/metrics", get(scrape))
        .with_state(state);
    let result = axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = shutdown.changed().await;
        })
        .await;
    if let Err(e) = result {
        tracing::error!(error = %e, "metrics listener stopped with an error");
    }
}

async fn scrape(State(state): State<AppState>) -> impl IntoResponse {
    let db = state.metrics.db_stats(&state.store).await;
    let writers = [
        ("master_moves", state.master_writer.stats()),
        ("authorizations", state.auth_writer.stats()),
        ("users", state.user_writer.stats()),
        ("card_issues", state.issue_writer.stats()),
        ("decisions", state.decisions.stats()),
        ("webhook_outcomes", state.webhook_outcomes.stats()),
    ];
    let body = state
        .metrics
        .render(db.as_ref(), stats::pool(&state.store), &writers);
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], body)
}

impl Metrics {
    /// The database counts, taken at most once per `DB_MIN_INTERVAL` and by one scrape at
    /// a time, so frequent or parallel scrapes do not multiply the load on the database.
    async fn db_stats(&self, store: &Store) -> Option<DbStats> {
        let mut cached = self.db.lock().await;
        if let Some((at, stats)) = cached.as_ref() {
            if at.elapsed() < DB_MIN_INTERVAL {
                return stats.clone();
            }
        }
        let stats = match tokio::time::timeout(DB_TIMEOUT, read_db(store)).await {
            Ok(Ok(s)) => Some(s),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "metrics: database counts failed");
                None
            }
            Err(_) => {
                tracing::warn!(
                    "metrics: database counts took longer than {DB_TIMEOUT:?}; left out"
                );
                None
            }
        };
        *cached = Some((Instant::now(), stats.clone()));
        stats
    }
}

async fn read_db(store: &Store) -> Result<DbStats, StoreError> {
    let mut conn = store.conn().await?;
    let now = now_micros();
    Ok(DbStats {
        orders: stats::orders_by_type_and_status(&mut conn, MAX_ORDER_GROUPS).await?,
        orders_due: stats::orders_due(&mut conn, now).await?,
        deliveries: stats::delivery_queue(&mut conn, now).await?,
    })
}
