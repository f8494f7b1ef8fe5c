//! The operator console (CONTRACT §12): server-rendered pages on a listener of their
//! own, for the people who run the service.
//!
//! - Pages are askama templates (`templates/console/`), checked at compile
//!   time and HTML-escaped; htmx (vendored, `assets/`) refreshes live regions every 10 s
//!   while the page is visible. No inline script or style: the CSP forbids both.
//! - Every action is a POST form that goes through the code the API and the CLI use
//!   (`flows::status`, `network::apply`, `projects.rs`, `webhooks::redeliver`,
//!   `ledger_check`, `disputes::moves`), and appends an audit row.
//! - `session.rs` is login, sessions, CSRF and roles; `security.rs` the headers and the
//!   cross-origin refusal; one file per page group beside them.
//!
//! It may use the core (`issuing-app`), the store, the domain and the wire types, never
//! the HTTP API's crate; `issuing-server` serves its router on the console's listener.

mod assets;
mod audit;
mod card_counts;
mod cards;
mod chart;
mod controls;
mod deposits;
mod disputes;
mod ledger;
pub mod operators;
mod operators_page;
mod orders;
mod overview;
mod projects;
mod reconciliation;
mod reports;
mod security;
mod session;
mod view;
mod webhooks;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::{middleware, Router};
use issuing_app::{App, Mode};
use std::sync::Arc;
use tokio::sync::{watch, Mutex, Semaphore};

pub(crate) use session::Op;
pub(crate) use view::ConsoleError;

/// Rows on one page of a list.
const PAGE_SIZE: i64 = 50;
/// Argon2id hashes computed at once (each takes ~19 MiB and tens of milliseconds): a
/// flood of logins queues here instead of exhausting memory or both cores.
const MAX_HASHING: usize = 2;
/// Connections the console serves at once: a handful of people use it.
pub const MAX_CONNECTIONS: usize = 64;
/// How often expired sessions and stale login failures are deleted.
const PURGE_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// What the console's handlers share: the server's state and the console's own.
#[derive(Clone)]
pub(crate) struct Console(Arc<Inner>);

pub(crate) struct Inner {
    pub app: App,
    pub chart: chart::Cache,
    pub card_counts: card_counts::Cache,
    pub hashing: Semaphore,
    /// One ledger verification at a time: it reads the whole ledger.
    pub verifying: Mutex<()>,
    /// The `Host` names the console answers to (`security::known_host`).
    pub hosts: Vec<String>,
}

impl std::ops::Deref for Console {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl Console {
    pub fn new(app: App) -> Console {
        let hosts = security::allowed_hosts(
            app.config.console.map(|c| c.addr),
            &app.config.console_security.hosts,
        );
        Console(Arc::new(Inner {
            hosts,
            app,
            chart: chart::Cache::default(),
            card_counts: card_counts::Cache::default(),
            hashing: Semaphore::new(MAX_HASHING),
            verifying: Mutex::new(()),
        }))
    }

    pub fn sandbox(&self) -> bool {
        self.app.config.mode == Mode::Sandbox
    }
}

/// The console's router for `app`, and the task that deletes expired sessions until
/// `shutdown` (the caller aborts it once the listener has stopped).
pub fn start(app: App, shutdown: watch::Receiver<bool>) -> (Router, tokio::task::JoinHandle<()>) {
    let console = Console::new(app);
    let purge = tokio::spawn(session::purge_loop(console.clone(), shutdown));
    (router(console), purge)
}

fn router(console: Console) -> Router {
    let mut signed_in = Router::new()
        .route("/console/", get(overview::page))
        .route("/console/projects", get(projects::list))
        .route("/console/projects/{project_id}", get(projects::show))
        .route(
            "/console/projects/{project_id}/suspend",
            post(projects::suspend),
        )
        .route(
            "/console/projects/{project_id}/resume",
            post(projects::resume),
        )
        .route(
            "/console/projects/{project_id}/keys/rotate",
            post(projects::rotate_key),
        )
        .route(
            "/console/projects/{project_id}/keys/revoke",
            post(projects::revoke_key),
        )
        .route(
            "/console/projects/{project_id}/export",
            post(reports::export),
        )
        .route("/console/reports/{report_id}", get(reports::show))
        .route("/console/reports/{report_id}/file", get(reports::file))
        .route("/console/cards", get(cards::list))
        .route("/console/cards/{card_id}", get(cards::show))
        .route("/console/cards/{card_id}/freeze", post(cards::freeze))
        .route("/console/cards/{card_id}/unfreeze", post(cards::unfreeze))
        .route("/console/cards/{card_id}/reveal", post(cards::reveal))
        .route("/console/orders/{order_id}", get(orders::order))
        .route(
            "/console/transactions/{transaction_id}",
            get(orders::transaction),
        )
        .route("/console/disputes", get(disputes::list))
        .route("/console/disputes/{dispute_id}", get(disputes::show))
        .route("/console/webhooks", get(webhooks::list))
        .route(
            "/console/webhooks/{delivery_id}/redeliver",
            post(webhooks::redeliver),
        )
        .route("/console/ledger", get(ledger::page))
        .route("/console/reconciliation", get(reconciliation::page))
        .route("/console/ledger/verify", post(ledger::verify))
        .route("/console/deposits", get(deposits::list))
        .route("/console/audit", get(audit::list))
        .route("/console/operators", get(operators_page::page))
        .route("/console/logout", post(session::logout));
    // CONTRACT §7 and §12: simulation exists only in the sandbox.
    if console.sandbox() {
        signed_in = signed_in
            .route("/console/cards/{card_id}/simulate", post(cards::simulate))
            .route(
                "/console/disputes/{dispute_id}/advance",
                post(disputes::advance),
            );
    }
    let signed_in = signed_in
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            console.clone(),
            session::require,
        ));
    Router::new()
        .route(
            "/console/login",
            get(session::login_form).post(session::login),
        )
        .route("/console/assets/{file}", get(assets::serve))
        .route("/robots.txt", get(assets::robots))
        .route("/", get(|| async { Redirect::to("/console/") }))
        .route("/console", get(|| async { Redirect::to("/console/") }))
        .merge(signed_in)
        .layer(middleware::from_fn(security::refuse_cross_origin))
        .layer(middleware::from_fn_with_state(
            console.clone(),
            security::client_address,
        ))
        .layer(middleware::from_fn_with_state(
            console.clone(),
            security::known_host,
        ))
        .layer(middleware::from_fn(security::headers))
        .with_state(console)
}

async fn not_found() -> Response {
    ConsoleError::NotFound.into_response()
}

/// 303 to a console page (after a POST, so a reload does not repeat it).
pub(crate) fn see_other(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(axum::http::header::LOCATION, to)]).into_response()
}
