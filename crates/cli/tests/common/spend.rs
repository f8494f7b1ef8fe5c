//! Helpers for spend control tests: funded cards, raw authorizations, and a real
//! decision endpoint on port 0 that opens each request with the project's secret and
//! answers as the test tells it (approve, decline with a reason, slowly, too late, an
//! error status, unsealed, a redirect).

use super::TestServer;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use issuing_client::CardsTopup;
use issuing_envelope::Key;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

impl TestServer {
    /// An active virtual_usd card of `user` holding exactly `units`.
    pub async fn card_holding(&self, user: &str, units: u32) -> String {
        self.deposit(&self.creds.project_id, 10_000_000_000).await;
        let card = self.active_card(user, "virtual_usd").await;
        if units > 0 {
            let sdk = self.sdk();
            let topup = CardsTopup {
                card_id: card.clone(),
                amount: units.to_string().into(),
                ..CardsTopup::default()
            };
            let order = sdk
                .cards_topup(&topup, &format!("fund-{user}"))
                .await
                .unwrap();
            let o = sdk
                .wait_order(&order.order_id, Duration::from_secs(30))
                .await
                .unwrap();
            assert_eq!(o.status, "completed", "{o:?}");
        }
        card
    }

    /// simulate/cards/auth with a merchant; answers the `transaction` item.
    pub async fn authorize(&self, card: &str, amount: &str, mcc: &str) -> Value {
        let v = self
            .ok(
                "simulate/cards/auth",
                json!({"card_id": card, "transactionAmount": amount,
                       "merchant": {"name": "Corner Shop", "mcc": mcc, "country": "US"}}),
            )
            .await;
        v["transaction"].clone()
    }

    /// cards/limits/set; answers the body.
    pub async fn set_limits(&self, card: &str, limits: Value, timezone: Option<&str>) -> Value {
        let mut body = json!({"card_id": card, "limits": limits});
        if let Some(tz) = timezone {
            body["timezone"] = json!(tz);
        }
        self.ok("cards/limits/set", body).await
    }

    pub async fn limits(&self, card: &str) -> Value {
        self.ok("cards/limits/get", json!({"card_id": card})).await
    }
}

/// `card_tx_data.status` and `failure_reason` of a transaction item.
pub fn outcome(item: &Value) -> (String, Option<String>) {
    let d = &item["card_tx_data"];
    (
        d["status"].as_str().unwrap_or_default().to_owned(),
        d["failure_reason"].as_str().map(str::to_owned),
    )
}

#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Approve,
    Decline(Option<String>),
    /// Approves after this long.
    Slow(Duration),
    /// An error status.
    Status(u16),
    /// 200 with a plain (unsealed) `{"approved": true}`.
    Unsealed,
    /// 302 to a URL that would approve.
    Redirect,
}

struct Shared {
    key: Key,
    answer: Mutex<Answer>,
    got: Mutex<Vec<(Option<String>, Value)>>,
    redirect_to: Mutex<String>,
}

/// A decision endpoint on port 0.
pub struct Decider {
    pub url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Decider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Decider {
    pub async fn start(secret: &str, answer: Answer) -> Decider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            key: Key::from_secret(secret),
            answer: Mutex::new(answer),
            got: Mutex::new(Vec::new()),
            redirect_to: Mutex::new(format!("http://127.0.0.1:{port}/elsewhere")),
        });
        let app = Router::new()
            .route("/decide", post(decide))
            .route("/elsewhere", post(elsewhere))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Decider {
            url: format!("http://127.0.0.1:{port}/decide"),
            shared,
            task,
        }
    }

    pub fn set(&self, a: Answer) {
        *self.shared.answer.lock().unwrap() = a;
    }

    /// Every request received: its `API-KEY` header and its opened body (Null when it
    /// could not be opened).
    pub fn requests(&self) -> Vec<(Option<String>, Value)> {
        self.shared.got.lock().unwrap().clone()
    }
}

fn sealed(key: &Key, body: &Value) -> Response {
    let sealed = issuing_envelope::seal(key, body.to_string().as_bytes());
    (StatusCode::OK, axum::Json(json!({ "encrypted": sealed }))).into_response()
}

async fn decide(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let api_key = headers
        .get("API-KEY")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let request = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|outer| outer["encrypted"].as_str().map(str::to_owned))
        .and_then(|sealed| issuing_envelope::open(&s.key, &sealed).ok())
        .and_then(|plain| serde_json::from_slice::<Value>(&plain).ok())
        .unwrap_or(Value::Null);
    s.got.lock().unwrap().push((api_key, request));
    let answer = s.answer.lock().unwrap().clone();
    match answer {
        Answer::Approve => sealed(&s.key, &json!({"approved": true})),
        Answer::Decline(reason) => {
            let mut b = json!({"approved": false});
            if let Some(r) = reason {
                b["reason"] = json!(r);
            }
            sealed(&s.key, &b)
        }
        Answer::Slow(d) => {
            tokio::time::sleep(d).await;
            sealed(&s.key, &json!({"approved": true}))
        }
        Answer::Status(code) => StatusCode::from_u16(code).unwrap().into_response(),
        Answer::Unsealed => (StatusCode::OK, axum::Json(json!({"approved": true}))).into_response(),
        Answer::Redirect => {
            let to = s.redirect_to.lock().unwrap().clone();
            (StatusCode::FOUND, [("location", to)]).into_response()
        }
    }
}

async fn elsewhere(State(s): State<Arc<Shared>>) -> Response {
    sealed(&s.key, &json!({"approved": true}))
}
