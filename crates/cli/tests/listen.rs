//! `issuing listen` as a child process against a real server: it subscribes, prints
//! each delivered event as a JSON line, forwards events with `--forward-to`, and
//! unsubscribes on SIGINT.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use axum::Router;
use common::{Backend, TestServer};
use issuing_server::ServerConfig;
use serde_json::{json, Value};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::sync::mpsc;

const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `issuing listen`.
struct Listen {
    child: Child,
    subscription_id: String,
    url: String,
    /// Lines the child printed on stdout, as they come.
    stdout: mpsc::UnboundedReceiver<String>,
    /// Every line the child printed on stderr so far.
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Listen {
    /// Starts `issuing listen` for the test project and waits for its `ready:` line.
    async fn start(t: &TestServer, extra: &[&str]) -> Listen {
        let mut child = common::process::issuing()
            .args([
                "listen",
                "--base-url",
                &t.base,
                "--api-key",
                &t.creds.api_key,
            ])
            // The secret through the environment, as the help text recommends.
            .env("ISSUING_API_SECRET", &t.creds.api_secret)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn issuing listen");

        let stderr = Arc::new(Mutex::new(Vec::new()));
        let (ready_tx, mut ready_rx) = mpsc::unbounded_channel();
        let mut err_lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let seen = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = err_lines.next_line().await {
                if line.starts_with("ready: ") {
                    let _ = ready_tx.send(line.clone());
                }
                seen.lock().unwrap().push(line);
            }
        });

        let (out_tx, stdout) = mpsc::unbounded_channel();
        let mut out_lines = BufReader::new(child.stdout.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(line)) = out_lines.next_line().await {
                if out_tx.send(line).is_err() {
                    break;
                }
            }
        });

        let ready = tokio::time::timeout(EVENT_TIMEOUT, ready_rx.recv())
            .await
            .ok()
            .flatten()
            .unwrap_or_else(|| {
                panic!(
                    "issuing listen printed no ready line; stderr: {:?}",
                    stderr.lock().unwrap()
                )
            });
        // ready: subscription <id> receiving on <url>
        let rest = ready.strip_prefix("ready: subscription ").expect(&ready);
        let (id, url) = rest.split_once(" receiving on ").expect(&ready);
        Listen {
            child,
            subscription_id: id.to_owned(),
            url: url.to_owned(),
            stdout,
            stderr,
        }
    }

    /// Reads stdout until a JSON line matching `wanted` arrives; every line must be JSON.
    async fn event(&mut self, wanted: impl Fn(&Value) -> bool) -> Value {
        let stdout = &mut self.stdout;
        let found = tokio::time::timeout(EVENT_TIMEOUT, async {
            while let Some(line) = stdout.recv().await {
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|_| panic!("stdout line is not JSON: {line}"));
                if wanted(&v) {
                    return Some(v);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(v)) => v,
            _ => panic!(
                "no matching event within {EVENT_TIMEOUT:?}; stderr: {:?}",
                self.stderr_lines()
            ),
        }
    }

    fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lock().unwrap().clone()
    }

    /// Sends SIGINT and waits for the process to exit.
    async fn interrupt(&mut self) -> ExitStatus {
        let pid = self.child.id().expect("listen is running");
        let kill = std::process::Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status()
            .expect("run kill");
        assert!(kill.success());
        let status = tokio::time::timeout(EVENT_TIMEOUT, self.child.wait())
            .await
            .expect("listen did not exit after SIGINT")
            .unwrap();
        // Let the stderr reader take the last lines.
        for _ in 0..50 {
            let done = self
                .stderr_lines()
                .iter()
                .any(|l| l.starts_with("unsubscribed "));
            if done {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        status
    }
}

fn freeze_event(card_id: &str) -> impl Fn(&Value) -> bool + '_ {
    move |v| v["event_type"] == "card.freeze" && v["data"]["card_id"] == card_id
}

/// The subscription as `wh/subscriptions` lists it.
async fn subscription(t: &TestServer, id: &str) -> Value {
    let list = t.ok("wh/subscriptions", json!({})).await;
    list.as_object()
        .unwrap()
        .values()
        .filter_map(Value::as_array)
        .flatten()
        .find(|s| s["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("subscription {id} not listed: {list}"))
}

/// A funded project's user with an active card; returns the card id.
async fn card(t: &TestServer, user: &str) -> String {
    t.deposit(&t.creds.project_id, 10_000_000).await;
    t.active_card(user, "virtual_usd").await
}

async fn freeze(t: &TestServer, card_id: &str, user: &str) {
    let v = t
        .ok(
            "cards/freeze",
            json!({"card_id": card_id, "external_user_id": user}),
        )
        .await;
    assert_eq!(v["status"], "frozen", "{v}");
}

/// Asserts a clean stop: exit 0, `unsubscribed <id>` printed, the subscription inactive.
async fn stop(t: &TestServer, mut listen: Listen) {
    let status = listen.interrupt().await;
    let stderr = listen.stderr_lines();
    assert!(status.success(), "exit {status:?}; stderr: {stderr:?}");
    let line = format!("unsubscribed {}", listen.subscription_id);
    assert!(stderr.contains(&line), "{stderr:?}");
    let sub = subscription(t, &listen.subscription_id).await;
    assert_eq!(sub["active"], false, "{sub}");
}

both_backends!(prints_events_and_unsubscribes, |t| async move {
    let card = card(&t, "listen-user").await;
    let mut listen = Listen::start(&t, &[]).await;
    assert!(
        listen.url.starts_with("http://127.0.0.1:"),
        "{}",
        listen.url
    );

    let sub = subscription(&t, &listen.subscription_id).await;
    assert_eq!(sub["active"], true, "{sub}");
    assert_eq!(sub["title"], "issuing listen", "{sub}");
    assert_eq!(sub["url"], listen.url.as_str(), "{sub}");

    freeze(&t, &card, "listen-user").await;
    let event = listen.event(freeze_event(&card)).await;
    assert!(
        event["delivery_id"].as_str().is_some_and(|d| !d.is_empty()),
        "{event}"
    );
    assert_eq!(event["project_id"], t.creds.project_id.as_str(), "{event}");
    assert_eq!(event["data"]["status"], "frozen", "{event}");

    stop(&t, listen).await;
});

both_backends!(filters_by_event_type, |t| async move {
    let card = card(&t, "listen-filter").await;
    let mut listen = Listen::start(&t, &["--event-types", "card.unfreeze"]).await;
    let sub = subscription(&t, &listen.subscription_id).await;
    assert_eq!(sub["event_types"], json!(["card.unfreeze"]), "{sub}");

    // The freeze is filtered out; the unfreeze after it is the first line printed.
    freeze(&t, &card, "listen-filter").await;
    t.ok(
        "cards/unfreeze",
        json!({"card_id": card, "external_user_id": "listen-filter"}),
    )
    .await;
    let first = listen.event(|_| true).await;
    assert_eq!(first["event_type"], "card.unfreeze", "{first}");
    assert_eq!(first["data"]["card_id"], card.as_str(), "{first}");

    stop(&t, listen).await;
});

/// Polls `probe` until it yields a value (at most `EVENT_TIMEOUT`).
async fn wait_for<T>(probe: impl Fn() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + EVENT_TIMEOUT;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within {EVENT_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A forward target that answers 503 to its first request and 200 after that, and
/// records every body.
async fn forward_target() -> (String, Arc<Mutex<Vec<Value>>>) {
    async fn record(State(seen): State<Arc<Mutex<Vec<Value>>>>, body: Bytes) -> StatusCode {
        let mut seen = seen.lock().unwrap();
        seen.push(serde_json::from_slice(&body).expect("forwarded body is JSON"));
        if seen.len() == 1 {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let app = Router::new()
        .route("/hook", post(record))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/hook"), seen)
}

/// With `--forward-to`, the plaintext reaches the target; a failing target makes the
/// delivery fail (502), and the server's retry carries the same `delivery_id`.
async fn forwards_events(backend: Backend) {
    let config = ServerConfig {
        webhook_retry_interval: Duration::from_secs(1),
        ..ServerConfig::default()
    };
    let Some(t) = TestServer::start_with(backend, config).await else {
        return;
    };
    let card = card(&t, "listen-forward").await;
    let (target, seen) = forward_target().await;
    let mut listen = Listen::start(&t, &["--forward-to", &target]).await;

    freeze(&t, &card, "listen-forward").await;
    // Printed once per attempt: the first (forward answered 503), then the retry.
    let first = listen.event(freeze_event(&card)).await;
    let retry = listen.event(freeze_event(&card)).await;
    assert_eq!(first, retry);
    let delivery = first["delivery_id"].as_str().unwrap().to_owned();

    // Each attempt is printed before it is forwarded: wait for the second forward.
    let forwarded = wait_for(|| {
        let seen = seen.lock().unwrap().clone();
        (seen.len() >= 2).then_some(seen)
    })
    .await;
    for body in &forwarded[..2] {
        assert_eq!(body, &first, "the target gets the plaintext event");
    }
    // The retry succeeded: no third attempt follows.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(seen.lock().unwrap().len(), 2);

    let prefix = format!("forward: card.freeze {delivery} -> ");
    let forward_lines = wait_for(|| {
        let lines: Vec<String> = listen
            .stderr_lines()
            .into_iter()
            .filter(|l| l.starts_with(&prefix))
            .collect();
        (lines.len() >= 2).then_some(lines)
    })
    .await;
    let stderr = listen.stderr_lines();
    assert_eq!(forward_lines.len(), 2, "{stderr:?}");
    assert!(forward_lines[0].contains("503"), "{stderr:?}");
    assert!(forward_lines[1].contains("200 OK"), "{stderr:?}");

    stop(&t, listen).await;
}

mod forwards_events {
    use super::*;
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        forwards_events(Backend::Sqlite).await;
    }
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        forwards_events(Backend::Postgres).await;
    }
}

// Deliveries that do not open are refused with a plain 400 and never printed.
both_backends!(refuses_foreign_deliveries, |t| async move {
    let mut listen = Listen::start(&t, &[]).await;
    let http = reqwest::Client::new();
    let other = issuing_envelope::Key::from_secret("sk_not_this_project");
    let event = json!({"event_type": "card.freeze", "delivery_id": "forged", "data": {}});
    let forged = json!({"encrypted": issuing_envelope::seal(&other, event.to_string().as_bytes())});
    for (key, body) in [
        (Some(t.creds.api_key.as_str()), forged.to_string()),
        (Some("pk_wrong"), forged.to_string()),
        (None, "{}".to_owned()),
    ] {
        let mut req = http.post(&listen.url).body(body);
        if let Some(k) = key {
            req = req.header("API-KEY", k);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 400);
        let v: Value = resp.json().await.unwrap();
        assert_eq!(v["success"], false, "{v}");
    }
    // A correctly sealed delivery is accepted and printed; nothing forged came before it.
    let key = issuing_envelope::Key::from_secret(&t.creds.api_secret);
    let genuine = json!({"type": "card_otp", "delivery_id": "hand-made", "card_id": "c"});
    let resp = http
        .post(&listen.url)
        .header("API-KEY", &t.creds.api_key)
        .body(
            json!({"encrypted": issuing_envelope::seal(&key, genuine.to_string().as_bytes())})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.json::<Value>().await.unwrap(),
        json!({"success": true})
    );
    let first = listen.event(|_| true).await;
    assert_eq!(first, genuine);

    stop(&t, listen).await;
});

both_backends!(decides_authorizations_with_decide, |t| async move {
    let card = t.card_holding("listen-decide", 20).await;
    let mut listen = Listen::start(&t, &["--decide", "decline"]).await;
    assert!(
        listen
            .stderr_lines()
            .iter()
            .any(|l| l.starts_with("decision endpoint set")),
        "{:?}",
        listen.stderr_lines()
    );
    let endpoint = t.ok("wh/decision/get", json!({})).await;
    assert_eq!(endpoint["url"], listen.url.as_str(), "{endpoint}");
    let v = t
        .ok(
            "simulate/cards/auth",
            json!({"card_id": card, "transactionAmount": "2"}),
        )
        .await;
    let d = &v["transaction"]["card_tx_data"];
    assert_eq!(d["failure_reason"], "webhook_declined", "{v}");
    assert_eq!(d["decision_reason"], "issuing listen", "{v}");
    let tx = v["transactionId"].as_str().unwrap().to_owned();
    let request = listen
        .event(|e| e["type"] == "authorization_request" && e["transaction_id"] == tx.as_str())
        .await;
    assert_eq!(request["amount"], "2.00", "{request}");
    stop(&t, listen).await;
    let endpoint = t.ok("wh/decision/get", json!({})).await;
    assert_eq!(endpoint["configured"], false, "removed on exit: {endpoint}");

    let listen = Listen::start(&t, &["--decide", "approve"]).await;
    let v = t
        .ok(
            "simulate/cards/auth",
            json!({"card_id": card, "transactionAmount": "2"}),
        )
        .await;
    assert_eq!(v["transaction"]["card_tx_data"]["status"], "pending", "{v}");
    stop(&t, listen).await;
});
