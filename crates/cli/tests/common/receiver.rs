//! A real webhook receiver on port 0: opens each delivery with the project's secret,
//! records it, and answers as the test tells it to (success, an error status, a wrong
//! body, a hang past the sender's timeout, 410 Gone). It also notices when one
//! delivery arrives again while an earlier attempt of it is still being answered.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use issuing_envelope::Key;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    Succeed,
    Status(u16),
    /// 200 with a body that is not `{"success": true}`.
    WrongBody,
    /// Answers only after this long (longer than the sender's timeout).
    Hang(Duration),
}

#[derive(Debug, Clone)]
pub struct Received {
    pub api_key: Option<String>,
    /// The decrypted event (Null when the body could not be opened).
    pub event: Value,
    pub answered: Behaviour,
    pub at: Instant,
}

struct Shared {
    key: Key,
    behaviour: Mutex<Behaviour>,
    /// Per delivery id: the behaviour to use for its next attempts, overriding the default.
    script: Mutex<Vec<Behaviour>>,
    got: Mutex<Vec<Received>>,
    in_flight: Mutex<HashMap<String, usize>>,
    overlaps: Mutex<Vec<String>>,
    hold: Mutex<Duration>,
}

pub struct Receiver {
    pub url: String,
    pub port: u16,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A port nothing listens on (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Receiver {
    pub async fn start(secret: &str) -> Receiver {
        Self::start_on(secret, 0).await
    }

    pub async fn start_on(secret: &str, port: u16) -> Receiver {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            key: Key::from_secret(secret),
            behaviour: Mutex::new(Behaviour::Succeed),
            script: Mutex::new(Vec::new()),
            got: Mutex::new(Vec::new()),
            in_flight: Mutex::new(HashMap::new()),
            overlaps: Mutex::new(Vec::new()),
            hold: Mutex::new(Duration::ZERO),
        });
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver {
            url: format!("http://127.0.0.1:{port}/hook"),
            port,
            shared,
            task,
        }
    }

    pub fn set(&self, b: Behaviour) {
        *self.shared.behaviour.lock().unwrap() = b;
    }

    /// The next attempts are answered like this, in order; then the default applies.
    pub fn script(&self, answers: &[Behaviour]) {
        *self.shared.script.lock().unwrap() = answers.to_vec();
    }

    /// Every answer (success included) is held this long, so overlapping attempts of
    /// one delivery would be seen.
    pub fn hold(&self, d: Duration) {
        *self.shared.hold.lock().unwrap() = d;
    }

    pub fn received(&self) -> Vec<Received> {
        self.shared.got.lock().unwrap().clone()
    }

    /// Deliveries that arrived while an earlier attempt of theirs was being answered.
    pub fn overlaps(&self) -> Vec<String> {
        self.shared.overlaps.lock().unwrap().clone()
    }

    /// Events that were acknowledged with success.
    pub fn delivered(&self) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|r| r.answered == Behaviour::Succeed)
            .map(|r| r.event)
            .collect()
    }

    /// Waits until `pred` holds for what was received.
    pub async fn wait_until<F: Fn(&[Received]) -> bool>(
        &self,
        what: &str,
        timeout: Duration,
        pred: F,
    ) {
        let start = Instant::now();
        loop {
            if pred(&self.received()) {
                return;
            }
            if start.elapsed() > timeout {
                panic!(
                    "receiver: timed out waiting for {what}; got {:#?}",
                    self.received()
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

async fn receive(State(s): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let api_key = headers
        .get("API-KEY")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let event = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|outer| outer["encrypted"].as_str().map(str::to_owned))
        .and_then(|sealed| issuing_envelope::open(&s.key, &sealed).ok())
        .and_then(|plain| serde_json::from_slice::<Value>(&plain).ok())
        .unwrap_or(Value::Null);
    let delivery_id = event["delivery_id"].as_str().unwrap_or("").to_owned();
    {
        let mut f = s.in_flight.lock().unwrap();
        let n = f.entry(delivery_id.clone()).or_default();
        if *n > 0 {
            s.overlaps.lock().unwrap().push(delivery_id.clone());
        }
        *n += 1;
    }
    let answer = {
        let mut script = s.script.lock().unwrap();
        if script.is_empty() {
            *s.behaviour.lock().unwrap()
        } else {
            script.remove(0)
        }
    };
    s.got.lock().unwrap().push(Received {
        api_key,
        event,
        answered: answer,
        at: Instant::now(),
    });
    let hold = *s.hold.lock().unwrap();
    if !hold.is_zero() {
        tokio::time::sleep(hold).await;
    }
    let response = match answer {
        Behaviour::Succeed => {
            (StatusCode::OK, axum::Json(json!({"success": true}))).into_response()
        }
        Behaviour::Status(code) => (
            StatusCode::from_u16(code).unwrap(),
            axum::Json(json!({"success": false})),
        )
            .into_response(),
        Behaviour::WrongBody => (StatusCode::OK, axum::Json(json!({"ok": true}))).into_response(),
        Behaviour::Hang(d) => {
            tokio::time::sleep(d).await;
            (StatusCode::OK, axum::Json(json!({"success": true}))).into_response()
        }
    };
    *s.in_flight.lock().unwrap().entry(delivery_id).or_default() -= 1;
    response
}
