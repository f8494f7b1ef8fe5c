//! `issuing proxy`: a local plaintext proxy in front of the sealed API, for curl, Postman
//! and other tools that cannot seal requests.
//!
//! - `POST /api/v2/<path>` with a plain JSON object (an empty body is `{}`): the proxy
//!   adds `request_timestamp` unless given, seals the body with the project's secret,
//!   forwards it (with any `Idempotency-Key` header), opens the answer and returns it
//!   plain, with the upstream HTTP status and `Content-Type: application/json`.
//! - `GET /health`, `GET /ready` and `GET /openapi.json` are forwarded as they are.
//! - Local refusals use the API's error object: `405 method_not_allowed`, `400
//!   validation_error` (not a JSON object), `413 payload_too_large`, `404 not_found`,
//!   `502 proxy_upstream_error` (the server is unreachable or answered something that is
//!   not the protocol), `503 proxy_busy`.
//!
//! stderr: `proxy: listening on http://ADDR -> BASE` once ready, one line per request,
//! and a last line on SIGINT/SIGTERM, after which it exits 0.

use crate::remote::{endpoint_path, error_response, RemoteArgs, Signals};
use anyhow::Context;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use issuing_client::{Client, ClientError};
use serde_json::{Map, Value};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore};

/// Largest request body the proxy reads.
// Evidence files (disputes/evidence/add) travel in bodies of up to 8 MiB.
const MAX_BODY_BYTES: usize = 9 * 1024 * 1024;
/// Largest answer of a plain (unsealed) forward such as `/openapi.json`.
const MAX_PLAIN_ANSWER_BYTES: usize = 16 * 1024 * 1024;
/// Requests forwarded at once; more wait for a slot.
const MAX_CONCURRENT_REQUESTS: usize = 64;
/// How long a request may wait for a slot before it is answered 503.
const SLOT_WAIT: Duration = Duration::from_secs(30);
/// Timeout of a plain forward (the sealed ones use the client's own timeout).
const PLAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// Time in-flight requests get to finish after a signal.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
/// Paths outside `/api/v2` forwarded without sealing.
const PLAIN_PATHS: [&str; 3] = ["/health", "/ready", "/openapi.json"];

#[derive(clap::Args)]
pub struct ProxyArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// Local address to serve plain requests on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:8081")]
    listen: SocketAddr,
}

struct Proxy {
    client: Client,
    /// For the plain forwards.
    http: reqwest::Client,
    slots: Semaphore,
}

pub async fn run(args: ProxyArgs) -> anyhow::Result<ExitCode> {
    let client = args.remote.client()?;
    let http = reqwest::Client::builder()
        .timeout(PLAIN_TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .context("building the HTTP client")?;
    let mut signals = Signals::new()?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("--listen: cannot bind {}", args.listen))?;
    let addr = listener.local_addr()?;
    let base = client.base_url().to_owned();
    let proxy = Arc::new(Proxy {
        client,
        http,
        slots: Semaphore::new(MAX_CONCURRENT_REQUESTS),
    });
    let app = Router::new()
        .fallback(handle)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(proxy);
    let shutdown = Arc::new(Notify::new());
    let mut server = {
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move { shutdown.notified().await })
                .await
        })
    };
    eprintln!("proxy: listening on http://{addr} -> {base}");

    tokio::select! {
        name = signals.next() => {
            eprintln!("proxy: {name}: stopping");
            shutdown.notify_one();
            if tokio::time::timeout(DRAIN_TIMEOUT, &mut server).await.is_err() {
                eprintln!("proxy: in-flight requests did not finish within {DRAIN_TIMEOUT:?}");
                server.abort();
            }
            Ok(ExitCode::SUCCESS)
        }
        result = &mut server => {
            match result {
                Ok(Ok(())) => anyhow::bail!("the proxy stopped"),
                Ok(Err(e)) => Err(anyhow::Error::new(e).context("the proxy failed")),
                Err(e) => Err(anyhow::Error::new(e).context("the proxy failed")),
            }
        }
    }
}

/// Every request: route, forward, log one line.
async fn handle(
    State(proxy): State<Arc<Proxy>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let started = Instant::now();
    let response = route(&proxy, &method, &uri, &headers, body).await;
    eprintln!(
        "proxy: {method} {} -> {} ({} ms)",
        uri.path(),
        response.status().as_u16(),
        started.elapsed().as_millis()
    );
    response
}

async fn route(
    proxy: &Proxy,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let path = uri.path();
    if PLAIN_PATHS.contains(&path) {
        if *method != Method::GET && *method != Method::HEAD {
            return error_response(
                StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                &format!("{path} answers GET"),
            );
        }
        let Ok(_slot) = slot(proxy).await else {
            return busy();
        };
        return forward_plain(proxy, method, uri).await;
    }
    let Some(endpoint) = path.strip_prefix("/api/v2/") else {
        return error_response(
            StatusCode::NOT_FOUND,
            "not_found",
            "The proxy serves POST /api/v2/<endpoint>, GET /health, GET /ready and GET /openapi.json",
        );
    };
    if *method != Method::POST {
        return error_response(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "Every API endpoint is POST",
        );
    }
    let body = match body {
        Ok(b) => b,
        Err(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                &format!("The proxy reads bodies of at most {MAX_BODY_BYTES} bytes"),
            );
        }
        Err(e) => return error_response(e.status(), "validation_error", "Could not read the body"),
    };
    let fields = match parse_body(&body) {
        Ok(v) => v,
        Err(message) => {
            return error_response(StatusCode::BAD_REQUEST, "validation_error", &message)
        }
    };
    let idempotency_key = match headers.get("Idempotency-Key").map(|v| v.to_str()) {
        None => None,
        Some(Ok(k)) => Some(k),
        Some(Err(_)) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                "validation_error",
                "The Idempotency-Key header is not visible ASCII",
            )
        }
    };
    let Ok(_slot) = slot(proxy).await else {
        return busy();
    };
    let endpoint = endpoint_path(endpoint);
    match proxy
        .client
        .request_with_idempotency_key(endpoint, fields, idempotency_key)
        .await
    {
        Ok(answer) => match StatusCode::from_u16(answer.status) {
            Ok(status) => (status, Json(answer.body)).into_response(),
            Err(_) => upstream_error(&format!("upstream answered HTTP {}", answer.status)),
        },
        Err(ClientError::Config(message)) => {
            error_response(StatusCode::NOT_FOUND, "not_found", &message)
        }
        Err(e) => upstream_error(&e.to_string()),
    }
}

/// A plain JSON object; an empty body is `{}`.
fn parse_body(body: &[u8]) -> Result<Value, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err("The body must be a JSON object".into()),
        Err(e) => Err(format!("The body is not valid JSON: {e}")),
    }
}

async fn slot(proxy: &Proxy) -> Result<tokio::sync::SemaphorePermit<'_>, ()> {
    match tokio::time::timeout(SLOT_WAIT, proxy.slots.acquire()).await {
        Ok(Ok(permit)) => Ok(permit),
        _ => Err(()),
    }
}

fn busy() -> Response {
    error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        "proxy_busy",
        "Too many requests in flight",
    )
}

fn upstream_error(message: &str) -> Response {
    error_response(StatusCode::BAD_GATEWAY, "proxy_upstream_error", message)
}

/// `GET /health`, `/ready`, `/openapi.json`: the upstream answer as it is.
async fn forward_plain(proxy: &Proxy, method: &Method, uri: &Uri) -> Response {
    let mut url = format!("{}{}", proxy.client.base_url(), uri.path());
    if let Some(query) = uri.query() {
        url.push('?');
        url.push_str(query);
    }
    let request = if *method == Method::HEAD {
        proxy.http.head(&url)
    } else {
        proxy.http.get(&url)
    };
    let mut upstream = match request.send().await {
        Ok(r) => r,
        Err(e) => return upstream_error(&issuing_client::error_chain(&e)),
    };
    let Ok(status) = StatusCode::from_u16(upstream.status().as_u16()) else {
        return upstream_error("upstream answered an invalid status");
    };
    let content_type = upstream.headers().get(header::CONTENT_TYPE).cloned();
    let mut bytes = Vec::new();
    loop {
        match upstream.chunk().await {
            Ok(Some(chunk)) => {
                if bytes.len() + chunk.len() > MAX_PLAIN_ANSWER_BYTES {
                    return upstream_error("upstream answer too large");
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => return upstream_error(&issuing_client::error_chain(&e)),
        }
    }
    let mut response = (status, bytes).into_response();
    if let Some(ct) = content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies_are_json_objects() {
        assert_eq!(parse_body(b"").unwrap(), json!({}));
        assert_eq!(parse_body(b" \n").unwrap(), json!({}));
        assert_eq!(parse_body(br#"{"a": 1}"#).unwrap(), json!({"a": 1}));
        assert!(parse_body(b"[]").is_err());
        assert!(parse_body(b"{nope").is_err());
    }

    fn proxy_to(base: &str) -> Proxy {
        Proxy {
            client: Client::new(base, "pk_p", "sk_p").unwrap(),
            http: reqwest::Client::new(),
            slots: Semaphore::new(2),
        }
    }

    async fn body_json(resp: Response) -> (StatusCode, Value) {
        let status = resp.status();
        let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn unreachable_upstream_is_a_502() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let proxy = proxy_to(&format!("http://{addr}"));
        let uri: Uri = "/api/v2/system/health".parse().unwrap();
        let resp = route(
            &proxy,
            &Method::POST,
            &uri,
            &HeaderMap::new(),
            Ok(Bytes::new()),
        )
        .await;
        let (status, v) = body_json(resp).await;
        assert_eq!(status, StatusCode::BAD_GATEWAY);
        assert_eq!(v["error_slug"], "proxy_upstream_error");
        let uri: Uri = "/health".parse().unwrap();
        let resp = route(
            &proxy,
            &Method::GET,
            &uri,
            &HeaderMap::new(),
            Ok(Bytes::new()),
        )
        .await;
        assert_eq!(body_json(resp).await.0, StatusCode::BAD_GATEWAY);
    }

    #[tokio::test]
    async fn local_refusals() {
        let proxy = proxy_to("http://127.0.0.1:9");
        let cases = [
            (
                Method::GET,
                "/api/v2/system/health",
                "",
                405,
                "method_not_allowed",
            ),
            (Method::POST, "/health", "", 405, "method_not_allowed"),
            (
                Method::POST,
                "/api/v2/system/health",
                "{",
                400,
                "validation_error",
            ),
            (
                Method::POST,
                "/api/v2/system/health",
                "[1]",
                400,
                "validation_error",
            ),
            (Method::POST, "/elsewhere", "", 404, "not_found"),
        ];
        for (method, path, body, status, slug) in cases {
            let uri: Uri = path.parse().unwrap();
            let resp = route(
                &proxy,
                &method,
                &uri,
                &HeaderMap::new(),
                Ok(Bytes::from(body)),
            )
            .await;
            let (s, v) = body_json(resp).await;
            assert_eq!((s.as_u16(), v["error_slug"].as_str()), (status, Some(slug)));
            assert_eq!(v["success"], false);
        }
    }
}
