//! A webhook receiver on port 0: opens each delivery with the project's key, answers
//! `200 {"success": true}` and records when each card transaction's event arrived.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::Router;
use issuing_client::Client;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[derive(Clone)]
pub struct Receiver {
    pub url: String,
    arrivals: Arc<Mutex<Arrivals>>,
}

#[derive(Default)]
struct Arrivals {
    /// transaction_id → when its first delivery arrived.
    first: HashMap<String, Instant>,
    deliveries: usize,
    unreadable: usize,
}

impl Receiver {
    pub async fn start(client: Client) -> anyhow::Result<Receiver> {
        let arrivals = Arc::new(Mutex::new(Arrivals::default()));
        let app = Router::new()
            .route("/hooks", post(receive))
            .with_state((client, arrivals.clone()));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Receiver {
            url: format!("http://{addr}/hooks"),
            arrivals,
        })
    }

    /// (deliveries received, deliveries that did not open).
    pub fn counts(&self) -> (usize, usize) {
        let a = self.arrivals.lock().unwrap_or_else(|p| p.into_inner());
        (a.deliveries, a.unreadable)
    }

    pub fn arrival(&self, transaction_id: &str) -> Option<Instant> {
        let a = self.arrivals.lock().unwrap_or_else(|p| p.into_inner());
        a.first.get(transaction_id).copied()
    }
}

async fn receive(
    State((client, arrivals)): State<(Client, Arc<Mutex<Arrivals>>)>,
    headers: HeaderMap,
    body: Bytes,
) -> axum::Json<Value> {
    let now = Instant::now();
    let key = headers.get("API-KEY").and_then(|v| v.to_str().ok());
    let event = client.open_webhook(key, &body);
    let mut a = arrivals.lock().unwrap_or_else(|p| p.into_inner());
    a.deliveries += 1;
    match event.ok().and_then(|e| {
        e.get("transaction_id")
            .and_then(Value::as_str)
            .map(str::to_owned)
    }) {
        Some(id) => {
            a.first.entry(id).or_insert(now);
        }
        None => a.unreadable += 1,
    }
    axum::Json(json!({"success": true}))
}

/// A decision endpoint on port 0 that approves every authorization request at once
/// (sealed with the project's key), as a project's fastest real-time decider would.
pub struct Decider {
    pub url: String,
}

impl Decider {
    pub async fn start(client: Client) -> anyhow::Result<Decider> {
        let app = Router::new()
            .route("/decide", post(decide))
            .with_state(client);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Decider {
            url: format!("http://{addr}/decide"),
        })
    }
}

async fn decide(
    State(client): State<Client>,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let key = headers.get("API-KEY").and_then(|v| v.to_str().ok());
    match client.open_webhook(key, &body) {
        Ok(_) => (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            client.seal_decision(true, None),
        )
            .into_response(),
        Err(_) => axum::http::StatusCode::BAD_REQUEST.into_response(),
    }
}
