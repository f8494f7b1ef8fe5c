//! `issuing listen`: subscribes a local HTTP receiver to the project's webhooks and
//! prints every delivery, like the Stripe CLI's `listen`.
//!
//! Protocol (what scripts and tests rely on):
//! - stderr, once the receiver is subscribed: `ready: subscription <id> receiving on <url>`
//! - stdout: one line of compact JSON per delivery (the opened plaintext event), flushed
//!   at once; with `--pretty`, the same JSON pretty-printed over several lines
//! - stderr, per delivery forwarded with `--forward-to`: `forward: <event> <delivery_id> -> …`
//! - stderr, for a refused delivery (wrong API-KEY, undecryptable): `rejected a delivery: …`
//! - stderr, on SIGINT/SIGTERM after `wh/unsubscribe`: `unsubscribed <id>`, exit code 0
//!
//! With `--decide approve|decline` the receiver is also the project's real-time decision
//! endpoint (`wh/decision/set`, CONTRACT §11): each `authorization_request` is printed
//! like an event (one JSON line on stdout) and answered, sealed, with that decision
//! (reason `issuing listen`); stderr says `decision endpoint set` once it is set and
//! `decision endpoint deleted` on exit (`wh/decision/delete`).

use crate::remote::{RemoteArgs, Signals};
use anyhow::{bail, Context};
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use issuing_client::{Client, ClientError};
use serde_json::{json, Value};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore};

/// Largest delivery body the receiver reads. Events are small JSON documents.
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Deliveries handled at once; more are answered 503 and retried by the server.
const MAX_CONCURRENT_DELIVERIES: usize = 64;
/// Time the forward target has to answer one event.
/// Below the server's 10 s attempt timeout, so a slow forward target is answered
/// (502, retried) before the server gives the attempt up.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(8);
/// Time in-flight deliveries get to finish after unsubscribing.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// The subscription's title, shown by `wh/subscriptions`.
const TITLE: &str = "issuing listen";

#[derive(clap::Args)]
pub struct ListenArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// Local address of the webhook receiver; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// URL to subscribe instead of the receiver's own http://ADDR/ (e.g. a tunnel that
    /// forwards to --listen).
    #[arg(long)]
    public_url: Option<String>,
    /// Only these event types, comma-separated (e.g. card.freeze,card_transaction).
    #[arg(long, value_delimiter = ',')]
    event_types: Vec<String>,
    /// Pretty-print events over several lines instead of one compact line each.
    #[arg(long)]
    pretty: bool,
    /// Also POST each opened event (plain JSON) to this URL; a delivery counts as
    /// received only when that URL answers 2xx.
    #[arg(long)]
    forward_to: Option<String>,
    /// Also be the project's real-time decision endpoint and answer every
    /// authorization request with this decision; the endpoint is removed on exit.
    #[arg(long, value_enum)]
    decide: Option<Decide>,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Decide {
    Approve,
    Decline,
}

/// The reason a declining answer gives (`card_tx_data.decision_reason`).
const DECISION_REASON: &str = "issuing listen";

/// What the receiver needs for each delivery.
struct Receiver {
    client: Client,
    pretty: bool,
    decide: Option<Decide>,
    forward: Option<Forward>,
    slots: Semaphore,
    /// Wakes the main task when the receiver cannot go on (stdout closed).
    stop: Notify,
}

struct Forward {
    http: reqwest::Client,
    url: reqwest::Url,
}

pub async fn run(args: ListenArgs) -> anyhow::Result<ExitCode> {
    let client = args.remote.client()?;
    let event_types: Vec<String> = args
        .event_types
        .iter()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .collect();
    let public_url = args
        .public_url
        .as_deref()
        .map(|u| http_url(u, "--public-url"))
        .transpose()?;
    let forward = match args.forward_to.as_deref() {
        None => None,
        Some(u) => Some(Forward {
            url: http_url(u, "--forward-to")?,
            http: reqwest::Client::builder()
                .timeout(FORWARD_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .context("building the forwarding HTTP client")?,
        }),
    };

    // Signal handlers first: from the `ready:` line on, SIGINT must unsubscribe rather
    // than kill the process.
    let mut signals = Signals::new()?;

    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("--listen: cannot bind {}", args.listen))?;
    let addr = listener.local_addr()?;
    let url = match public_url {
        Some(u) => u.to_string(),
        None => format!("http://{}/", reachable(addr)),
    };

    let receiver = Arc::new(Receiver {
        client: client.clone(),
        pretty: args.pretty,
        decide: args.decide,
        forward,
        slots: Semaphore::new(MAX_CONCURRENT_DELIVERIES),
        stop: Notify::new(),
    });
    let app = Router::new()
        .fallback(receive)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(receiver.clone());
    let shutdown = Arc::new(Notify::new());
    let mut server = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.notified().await })
                .await
        })
    };

    let mut request = json!({"url": url, "title": TITLE});
    if !event_types.is_empty() {
        request["event_types"] = json!(event_types);
    }
    let subscription = match client.call("wh/subscribe", request).await {
        Ok(v) => v,
        Err(e) => {
            server.abort();
            if let (ClientError::Api { slug, message, .. }, None) = (&e, &args.public_url) {
                if slug == "validation_error" && message.contains("url") {
                    eprintln!(
                        "hint: a production server refuses local addresses; expose the \
                         receiver through a tunnel and pass its URL with --public-url"
                    );
                }
            }
            return Err(anyhow::Error::new(e).context(format!("cannot subscribe {url}")));
        }
    };
    let Some(id) = subscription
        .get("id")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        server.abort();
        bail!("wh/subscribe answered without a subscription id: {subscription}");
    };
    if args.decide.is_some() {
        if let Err(e) = client.call("wh/decision/set", json!({"url": url})).await {
            server.abort();
            let _ = client.call("wh/unsubscribe", json!({"id": id})).await;
            return Err(
                anyhow::Error::new(e).context(format!("cannot set {url} as the decision endpoint"))
            );
        }
        eprintln!("decision endpoint set: {url}");
    }
    eprintln!("ready: subscription {id} receiving on {url}");

    let mut server_ended = false;
    let reason = tokio::select! {
        name = signals.next() => name.to_owned(),
        () = receiver.stop.notified() => "stdout closed".to_owned(),
        result = &mut server => {
            server_ended = true;
            match result {
                Ok(Ok(())) => "the receiver stopped".to_owned(),
                Ok(Err(e)) => format!("the receiver failed: {e}"),
                Err(e) => format!("the receiver failed: {e}"),
            }
        }
    };
    eprintln!("{reason}: unsubscribing {id}");
    if args.decide.is_some() {
        match client.call("wh/decision/delete", json!({})).await {
            Ok(_) => eprintln!("decision endpoint deleted"),
            Err(e) => eprintln!("cannot delete the decision endpoint: {e}"),
        }
    }

    let unsubscribed = tokio::select! {
        r = client.call("wh/unsubscribe", json!({"id": id})) => r,
        name = signals.next() => {
            eprintln!("{name} again: leaving subscription {id} active");
            server.abort();
            return Ok(ExitCode::from(1));
        }
    };
    if !server_ended {
        shutdown.notify_one();
        if tokio::time::timeout(DRAIN_TIMEOUT, &mut server)
            .await
            .is_err()
        {
            eprintln!("in-flight deliveries did not finish within {DRAIN_TIMEOUT:?}; stopping");
            server.abort();
        }
    }
    match unsubscribed {
        Ok(_) => {
            eprintln!("unsubscribed {id}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            Err(anyhow::Error::new(e).context(format!("cannot unsubscribe subscription {id}")))
        }
    }
}

/// One delivery: open it, print it, forward it, acknowledge it.
async fn receive(
    State(rx): State<Arc<Receiver>>,
    method: Method,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if method != Method::POST {
        return refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "Deliveries are POST",
        );
    }
    let body = match body {
        Ok(b) => b,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            eprintln!("rejected a delivery: body larger than {MAX_BODY_BYTES} bytes");
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                "Request body too large",
            );
        }
        Err(e) => {
            return refuse(e.status(), "bad_request", "Could not read the body");
        }
    };
    let Ok(_slot) = rx.slots.try_acquire() else {
        return refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            "Too many deliveries at once",
        );
    };
    let api_key = headers.get("API-KEY").and_then(|v| v.to_str().ok());
    let event = match rx.client.open_webhook(api_key, &body) {
        Ok(event) => event,
        Err(e) => {
            eprintln!("rejected a delivery: {e}");
            let slug = match e {
                ClientError::WebhookApiKey => "api_key_invalid",
                _ => "invalid_envelope",
            };
            return refuse(StatusCode::BAD_REQUEST, slug, &e.to_string());
        }
    };

    let decision = rx
        .decide
        .filter(|_| event.get("type").and_then(Value::as_str) == Some("authorization_request"));
    if let Err(e) = print_event(&event, rx.pretty).await {
        eprintln!("cannot write the event to stdout: {e}");
        rx.stop.notify_one();
        return refuse(
            StatusCode::INTERNAL_SERVER_ERROR,
            "output_failed",
            "The event could not be written",
        );
    }

    if let Some(decide) = decision {
        let approved = decide == Decide::Approve;
        let body = rx
            .client
            .seal_decision(approved, (!approved).then_some(DECISION_REASON));
        return (
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response();
    }
    if let Some(forward) = &rx.forward {
        if let Err(reason) = forward.send(&event).await {
            return refuse(StatusCode::BAD_GATEWAY, "forward_failed", &reason);
        }
    }
    (StatusCode::OK, Json(json!({"success": true}))).into_response()
}

impl Forward {
    /// POSTs the event; Ok only on a 2xx answer. Prints one status line either way.
    async fn send(&self, event: &Value) -> Result<(), String> {
        let name = event
            .get("event_type")
            .or_else(|| event.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("event");
        let delivery = event
            .get("delivery_id")
            .and_then(Value::as_str)
            .unwrap_or("-");
        let started = Instant::now();
        let result = self
            .http
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(event.to_string())
            .send()
            .await;
        let ms = started.elapsed().as_millis();
        match result {
            Ok(resp) if resp.status().is_success() => {
                eprintln!("forward: {name} {delivery} -> {} ({ms} ms)", resp.status());
                Ok(())
            }
            Ok(resp) => {
                let status = resp.status();
                eprintln!(
                    "forward: {name} {delivery} -> {status} ({ms} ms); answering 502, the server will retry"
                );
                Err(format!("{} answered {status}", self.url))
            }
            Err(e) => {
                let e = if e.is_timeout() {
                    format!("no answer within {FORWARD_TIMEOUT:?}")
                } else {
                    issuing_client::error_chain(&e)
                };
                eprintln!(
                    "forward: {name} {delivery} -> error: {e}; answering 502, the server will retry"
                );
                Err(format!("{} failed: {e}", self.url))
            }
        }
    }
}

/// Writes one event to stdout and flushes, off the async threads (a slow reader of the
/// pipe must not stall the runtime). Lines of concurrent deliveries never interleave.
async fn print_event(event: &Value, pretty: bool) -> std::io::Result<()> {
    let mut text = if pretty {
        serde_json::to_string_pretty(event)?
    } else {
        serde_json::to_string(event)?
    };
    text.push('\n');
    tokio::task::spawn_blocking(move || {
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.flush()
    })
    .await
    .map_err(std::io::Error::other)?
}

fn refuse(status: StatusCode, slug: &str, message: &str) -> Response {
    crate::remote::error_response(status, slug, message)
}

/// An absolute http(s) URL given on the command line.
fn http_url(raw: &str, flag: &str) -> anyhow::Result<reqwest::Url> {
    let url = reqwest::Url::parse(raw.trim())
        .with_context(|| format!("{flag}: `{raw}` is not an absolute URL"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        bail!("{flag}: `{raw}` must be an http:// or https:// URL with a host");
    }
    Ok(url)
}

/// The address to put in the subscribed URL: a receiver bound to 0.0.0.0 or :: is
/// reached through loopback by a server on the same machine.
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, addr.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, addr.port()).into(),
        _ => addr,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn unspecified_addresses_become_loopback() {
        let a: SocketAddr = "0.0.0.0:4000".parse().unwrap();
        assert_eq!(reachable(a).to_string(), "127.0.0.1:4000");
        let a: SocketAddr = "[::]:4000".parse().unwrap();
        assert_eq!(reachable(a).to_string(), "[::1]:4000");
        let a: SocketAddr = "192.168.1.5:80".parse().unwrap();
        assert_eq!(reachable(a), a);
    }

    #[test]
    fn urls_must_be_http() {
        assert!(http_url("http://127.0.0.1:9000/hook", "--forward-to").is_ok());
        assert!(http_url("https://x.example", "--public-url").is_ok());
        assert!(http_url("ftp://x", "--forward-to").is_err());
        assert!(http_url("localhost:9000", "--forward-to").is_err());
        assert!(http_url("/hook", "--forward-to").is_err());
    }

    fn receiver(forward: Option<Forward>) -> Arc<Receiver> {
        Arc::new(Receiver {
            client: Client::new("http://127.0.0.1:9", "pk_l", "sk_l").unwrap(),
            pretty: false,
            decide: None,
            forward,
            slots: Semaphore::new(2),
            stop: Notify::new(),
        })
    }

    fn sealed(secret: &str, v: &Value) -> Bytes {
        let key = issuing_envelope::Key::from_secret(secret);
        Bytes::from(
            json!({"encrypted": issuing_envelope::seal(&key, v.to_string().as_bytes())})
                .to_string(),
        )
    }

    fn headers(key: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(k) = key {
            h.insert("API-KEY", k.parse().unwrap());
        }
        h
    }

    async fn body_json(resp: Response) -> (StatusCode, Value) {
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn acknowledges_an_opened_delivery() {
        let event = json!({"event_type": "card.freeze", "delivery_id": "d1", "project_id": "p",
                           "data": {"card_id": "c"}});
        let resp = receive(
            State(receiver(None)),
            Method::POST,
            headers(Some("pk_l")),
            Ok(sealed("sk_l", &event)),
        )
        .await;
        assert_eq!(
            body_json(resp).await,
            (StatusCode::OK, json!({"success": true}))
        );
    }

    #[tokio::test]
    async fn refuses_what_it_cannot_open() {
        let event = json!({"type": "card_otp", "delivery_id": "d2"});
        let cases = [
            (headers(None), sealed("sk_l", &event), "api_key_invalid"),
            (
                headers(Some("pk_x")),
                sealed("sk_l", &event),
                "api_key_invalid",
            ),
            (
                headers(Some("pk_l")),
                sealed("sk_other", &event),
                "invalid_envelope",
            ),
            (
                headers(Some("pk_l")),
                Bytes::from_static(b"{}"),
                "invalid_envelope",
            ),
        ];
        for (h, body, slug) in cases {
            let resp = receive(State(receiver(None)), Method::POST, h, Ok(body)).await;
            let (status, v) = body_json(resp).await;
            assert_eq!(status, StatusCode::BAD_REQUEST);
            assert_eq!(v["success"], false);
            assert_eq!(v["error_slug"], slug);
        }
        let resp = receive(
            State(receiver(None)),
            Method::GET,
            headers(Some("pk_l")),
            Ok(Bytes::new()),
        )
        .await;
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
    }

    #[tokio::test]
    async fn a_failed_forward_is_a_502() {
        // A port nothing listens on.
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let forward = Forward {
            http: reqwest::Client::new(),
            url: http_url(&format!("http://{addr}/"), "--forward-to").unwrap(),
        };
        let event = json!({"event_type": "card.freeze", "delivery_id": "d3", "project_id": "p",
                           "data": {}});
        let resp = receive(
            State(receiver(Some(forward))),
            Method::POST,
            headers(Some("pk_l")),
            Ok(sealed("sk_l", &event)),
        )
        .await;
        let (status, v) = body_json(resp).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY);
        assert_eq!(v["error_slug"], "forward_failed");
    }
}
