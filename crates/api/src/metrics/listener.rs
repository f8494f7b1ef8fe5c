//! The metrics listener: `GET /metrics` on its own address, apart from the API, so it
//! can stay on a private network. It stops with the server.

use super::HttpMetrics;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use issuing_app::metrics::text::{Text, CONTENT_TYPE};
use issuing_app::App;
use issuing_store::stats;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

#[derive(Clone)]
struct Scrape {
    app: App,
    http: Arc<HttpMetrics>,
}

pub async fn serve(
    listener: TcpListener,
    app: App,
    http: Arc<HttpMetrics>,
    mut shutdown: watch::Receiver<bool>,
) {
    let router = Router::new()
        .route("/metrics", get(scrape))
        .with_state(Scrape { app, http });
    let result = axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let _ = shutdown.changed().await;
        })
        .await;
    if let Err(e) = result {
        tracing::error!(error = %e, "metrics listener stopped with an error");
    }
}

async fn scrape(State(s): State<Scrape>) -> impl IntoResponse {
    let app = &s.app;
    let db = app.metrics.db_stats(&app.store).await;
    let mut t = Text::default();
    app.metrics.render_build_info(&mut t);
    s.http.render(&mut t);
    app.metrics.render(
        &mut t,
        db.as_ref(),
        stats::pool(&app.store),
        &app.writer_stats(),
    );
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], t.finish())
}
