//! `issuing reveal-demo`: a project's page that shows a cardholder their card without
//! the project's server ever holding the number (CONTRACT §16), to open in a browser.
//!
//! It listens on `--listen` (default 127.0.0.1:8070) as the project's own web server
//! would. Each GET of `/` asks the API for a reveal session (`cards/reveal/create`,
//! `target_origin` = this page's origin, `http://127.0.0.1:PORT`) and answers a page
//! that frames the session's `url`: the browser loads the card's details from the API,
//! once. Reload for a new session. The same page opened as `http://localhost:PORT/` is
//! another origin: the API refuses to serve the frame to it (403) and the browser would
//! refuse to show it (`frame-ancestors`), which the page says.
//!
//! Without `--card-id` it issues a sandbox card first (a new user, sandbox KYC data), as
//! `issuing trigger` does. stdout: one line `reveal demo on http://127.0.0.1:PORT/ (card
//! …)` once it listens; stderr: a line per session made (its id, never its URL).

use crate::remote::{RemoteArgs, Signals};
use anyhow::Context;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use issuing_client::{CardholdersCreate, CardsCreate, CardsRevealCreate, Client};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub struct RevealDemoArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// Where the demo page listens (its origin is the session's `target_origin`).
    #[arg(long, default_value = "127.0.0.1:8070")]
    listen: std::net::SocketAddr,
    /// The card to show; default: a new sandbox card of a new user.
    #[arg(long)]
    card_id: Option<String>,
    /// The card's user (checked by the API when given).
    #[arg(long)]
    external_user_id: Option<String>,
}

struct Demo {
    client: Client,
    card_id: String,
    external_user_id: Option<String>,
    origin: String,
}

pub async fn run(args: RevealDemoArgs) -> anyhow::Result<ExitCode> {
    let client = args.remote.client()?;
    let (card_id, external_user_id) = match args.card_id {
        Some(id) => (id, args.external_user_id),
        None => {
            let (id, user) = demo_card(&client).await?;
            (id, Some(user))
        }
    };
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("--listen {}", args.listen))?;
    let addr = listener.local_addr()?;
    let origin = format!("http://{addr}");
    let demo = Arc::new(Demo {
        client,
        card_id,
        external_user_id,
        origin: origin.clone(),
    });
    let app = Router::new().route("/", get(page)).with_state(demo.clone());
    println!("reveal demo on {origin}/ (card {})", demo.card_id);
    eprintln!(
        "open {origin}/ in a browser: each load frames a new single-use reveal page; \
         http://localhost:{}/ shows the refusal of another origin. Ctrl-C stops.",
        addr.port()
    );
    let mut signals = Signals::new()?;
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            signals.next().await;
        })
        .await?;
    Ok(ExitCode::SUCCESS)
}

/// A new user with sandbox KYC data and an issued `virtual_usd` card.
async fn demo_card(client: &Client) -> anyhow::Result<(String, String)> {
    let user = format!("reveal-demo-{:08x}", rand::random::<u32>());
    client
        .cardholders_create(&CardholdersCreate {
            external_user_id: user.clone(),
            subprovider_code: "sandbox".into(),
            product_code: None,
            kyc_data: Some(crate::trigger::kyc()),
        })
        .await
        .context("cardholders/create")?;
    let created = client
        .cards_create(
            &CardsCreate {
                external_user_id: user.clone(),
                product_code: "virtual_usd".into(),
                ..CardsCreate::default()
            },
            &format!("{user}-issue"),
        )
        .await
        .context("cards/create")?;
    let order = client
        .wait_order_with_progress(&created.order.order_id, Duration::from_secs(60), |_| {})
        .await
        .context("waiting for the card's issue order")?;
    if order.is_failed() {
        anyhow::bail!(
            "the card's issue order failed: {}",
            order.last_error_slug.unwrap_or_default()
        );
    }
    eprintln!("issued card {} to user {user}", created.card_id);
    Ok((created.card_id, user))
}

/// The project's page: a fresh session, framed. What the project's server does is all
/// here: ask for the session and hand its URL to the browser.
async fn page(State(demo): State<Arc<Demo>>) -> Response {
    let session = demo
        .client
        .cards_reveal_create(&CardsRevealCreate {
            card_id: demo.card_id.clone(),
            external_user_id: demo.external_user_id.clone(),
            target_origin: demo.origin.clone(),
            ttl_seconds: None,
        })
        .await;
    let body = match session {
        Ok(s) => {
            eprintln!("reveal session {} (expires {})", s.reveal_id, s.expires_at);
            format!(
                "<h1>Your card</h1>\
                 <p>The frame below is served by the issuing API, not by this page's \
                 server: this server only asked for a single-use link to it. Reload for \
                 a new link; the old one answers 410.</p>\
                 <iframe id=\"reveal\" src=\"{}\" title=\"Card details\" width=\"400\" \
                 height=\"170\"></iframe>\
                 <p class=\"small\">Session <code id=\"reveal-id\">{}</code>, for pages of \
                 <code>{}</code> until {}. Opened from another origin (such as \
                 <code>localhost</code> instead of <code>127.0.0.1</code>), the frame is \
                 refused.</p>",
                escape(&s.url),
                escape(&s.reveal_id),
                escape(&demo.origin),
                escape(&s.expires_at)
            )
        }
        Err(e) => format!(
            "<h1>No reveal session</h1><p id=\"error\">{}</p>",
            escape(&e.to_string())
        ),
    };
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>Reveal demo</title><style>body{{font:16px/1.5 system-ui,sans-serif;\
         margin:2rem;max-width:40rem}}iframe{{border:0}}.small{{font-size:14px;\
         color:#555}}</style></head><body>{body}</body></html>\n"
    );
    let mut res = (StatusCode::OK, html).into_response();
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // The page holds a fresh single-use link: never cached.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
