//! Observability: Prometheus metrics on their own listener (request counters by route
//! and status, the latency histogram, order and queue gauges read from the database,
//! webhook attempts by outcome, the connection pool), request ids on every answer,
//! `GET /ready` against a working and a closed database, and the log formats of the
//! real binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::receiver::{Behaviour, Receiver};
use common::{Backend, TestServer};
use issuing_envelope::Key;
use issuing_server::ServerConfig;
use reqwest::Method;
use serde_json::{json, Value};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

const WAIT: Duration = Duration::from_secs(30);
const GET: Method = Method::GET;
const POST: Method = Method::POST;

fn with_metrics() -> ServerConfig {
    ServerConfig {
        metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    }
}

async fn scrape(t: &TestServer) -> String {
    let addr = t.metrics_addr().expect("metrics listener");
    let resp = t
        .http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(ct.starts_with("text/plain; version=0.0.4"), "{ct}");
    resp.text().await.unwrap()
}

/// The value of one series (`name{labels}` exactly as exposed), if present.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)
            .and_then(|rest| rest.strip_prefix(' '))
            .map(|v| v.parse().unwrap())
    })
}

/// Scrapes until every `(series, value)` holds.
async fn wait_metrics(t: &TestServer, want: &[(&str, f64)]) -> String {
    let start = Instant::now();
    loop {
        let text = scrape(t).await;
        if want.iter().all(|(s, v)| value(&text, s) == Some(*v)) {
            return text;
        }
        if start.elapsed() > WAIT {
            let got: Vec<_> = want.iter().map(|(s, _)| (*s, value(&text, s))).collect();
            panic!("metrics never reached {want:?}; got {got:?}\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A sealed call that also returns the response headers.
async fn sealed_call(
    t: &TestServer,
    method: reqwest::Method,
    path: &str,
    mut body: Value,
    request_id: Option<&str>,
) -> (u16, reqwest::header::HeaderMap, Value) {
    body["request_timestamp"] = json!(common::fresh_timestamp());
    let key = Key::from_secret(&t.creds.api_secret);
    let sealed = issuing_envelope::seal(&key, body.to_string().as_bytes());
    let mut req = t
        .http
        .request(method, format!("{}/api/v2/{path}", t.base))
        .header("API-KEY", &t.creds.api_key)
        .body(json!({ "encrypted": sealed }).to_string());
    if let Some(id) = request_id {
        req = req.header("X-Request-Id", id);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let outer: Value = resp.json().await.unwrap();
    let plain = issuing_envelope::open(&key, outer["encrypted"].as_str().unwrap()).unwrap();
    (status, headers, serde_json::from_slice(&plain).unwrap())
}

fn request_id(h: &reqwest::header::HeaderMap) -> String {
    h.get("x-request-id")
        .expect("X-Request-Id on the answer")
        .to_str()
        .unwrap()
        .to_owned()
}

both_backends_with!(
    requests_are_counted_by_route_and_status,
    with_metrics(),
    |t: TestServer| async move {
        t.ok("users/create", json!({"external_user_id": "ada"}))
            .await;
        t.expect_error(
            "users/create",
            json!({"external_user_id": "ada"}),
            409,
            "user_already_exists",
        )
        .await;
        t.expect_error("no/such/endpoint", json!({}), 404, "not_found")
            .await;
        let health = t
            .http
            .get(format!("{}/health", t.base))
            .send()
            .await
            .unwrap();
        assert_eq!(health.status(), 200);
        let (s, _, v) = sealed_call(&t, GET, "users/create", json!({}), None).await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (405, Some("method_not_allowed"))
        );
        for (raw, status) in [
            ("/random/raw/path", 404),
            ("/api/v2/unknown-raw-path-123", 401),
        ] {
            let r = t.http.get(format!("{}{raw}", t.base)).send().await.unwrap();
            assert_eq!(r.status(), status, "{raw}");
        }

        let text = scrape(&t).await;
        let users = "endpoint=\"/api/v2/users/create\"";
        for (series, want) in [
            (
                format!("issuing_http_requests_total{{{users},status=\"200\"}}"),
                1.0,
            ),
            (
                format!("issuing_http_requests_total{{{users},status=\"409\"}}"),
                1.0,
            ),
            (
                format!("issuing_http_requests_total{{{users},status=\"405\"}}"),
                1.0,
            ),
            (
                "issuing_http_requests_total{endpoint=\"/health\",status=\"200\"}".into(),
                1.0,
            ),
            (
                "issuing_http_requests_total{endpoint=\"other\",status=\"404\"}".into(),
                2.0,
            ),
            (
                "issuing_http_requests_total{endpoint=\"other\",status=\"401\"}".into(),
                1.0,
            ),
            (
                format!("issuing_http_request_duration_seconds_count{{{users}}}"),
                3.0,
            ),
            (
                format!("issuing_http_request_duration_seconds_bucket{{{users},le=\"+Inf\"}}"),
                3.0,
            ),
            ("issuing_http_requests_in_flight".into(), 0.0),
            ("issuing_db_up".into(), 1.0),
        ] {
            assert_eq!(value(&text, &series), Some(want), "{series}\n{text}");
        }
        let sum = value(
            &text,
            &format!("issuing_http_request_duration_seconds_sum{{{users}}}"),
        )
        .unwrap();
        assert!(sum > 0.0 && sum < 60.0, "{sum}");
        // Buckets are cumulative and end at the count.
        let buckets: Vec<f64> = text
            .lines()
            .filter(|l| l.starts_with("issuing_http_request_duration_seconds_bucket{endpoint=\"/api/v2/users/create\""))
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        assert_eq!(buckets.len(), 12, "{text}");
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
        // Raw paths never become labels.
        for raw in ["random", "unknown-raw-path", "no/such"] {
            assert!(!text.contains(raw), "{raw} leaked into\n{text}");
        }
        for family in [
            "# TYPE issuing_http_requests_total counter",
            "# TYPE issuing_http_request_duration_seconds histogram",
            "# TYPE issuing_orders gauge",
            "# TYPE issuing_webhook_attempts_total counter",
            "# TYPE issuing_db_pool_connections gauge",
        ] {
            assert!(text.lines().any(|l| l == family), "{family}\n{text}");
        }
        let max = value(&text, "issuing_db_pool_max_connections").unwrap();
        assert_eq!(
            max,
            if t.db.backend == Backend::Sqlite {
                8.0
            } else {
                16.0
            }
        );
        assert!(value(&text, "issuing_db_pool_connections{state=\"idle\"}").is_some());

        // The API listener does not serve metrics; the metrics listener serves nothing else.
        let r = t
            .http
            .get(format!("{}/metrics", t.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
        let addr = t.metrics_addr().unwrap();
        let r = t
            .http
            .get(format!("http://{addr}/health"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 404);
    }
);

both_backends_with!(
    orders_queues_and_webhook_attempts,
    with_metrics(),
    |mut t: TestServer| async move {
        t.deposit(&t.creds.project_id, 100_000_000).await;
        let card = t.active_card("ada", "virtual_usd").await;
        let ok = Receiver::start(&t.creds.api_secret).await;
        let retry = Receiver::start(&t.creds.api_secret).await;
        retry.set(Behaviour::Status(500));
        let gone = Receiver::start(&t.creds.api_secret).await;
        gone.set(Behaviour::Status(410));
        for r in [&ok, &retry, &gone] {
            t.ok("wh/subscribe", json!({"url": r.url, "title": "metrics"}))
                .await;
        }
        t.ok(
            "cards/freeze",
            json!({"card_id": card, "external_user_id": "ada"}),
        )
        .await;
        for r in [&ok, &retry, &gone] {
            r.wait_until("one attempt", WAIT, |got| got.len() == 1)
                .await;
        }
        // One delivery succeeded, one waits for its retry (60 s away), one gave up.
        wait_metrics(
            &t,
            &[
                ("issuing_webhook_attempts_total{outcome=\"succeeded\"}", 1.0),
                ("issuing_webhook_attempts_total{outcome=\"retry\"}", 1.0),
                ("issuing_webhook_attempts_total{outcome=\"failed\"}", 1.0),
                ("issuing_webhook_deliveries_pending", 1.0),
                ("issuing_webhook_deliveries_due", 0.0),
                ("issuing_webhook_deliveries_failed", 1.0),
                // Each attempt's outcome went through the outcome writer.
                (
                    "issuing_group_commit_operations_total{writer=\"webhook_outcomes\"}",
                    3.0,
                ),
                (
                    "issuing_orders{type=\"card_issue\",status=\"completed\"}",
                    1.0,
                ),
                ("issuing_orders_due", 0.0),
                ("issuing_db_up", 1.0),
            ],
        )
        .await;

        // Due work shows as a backlog (read here with the server stopped, so no worker
        // takes it away first).
        t.stop_server().await;
        let mut conn = t.store.conn().await.unwrap();
        sqlx::query("UPDATE webhook_deliveries SET next_attempt_at = 1 WHERE state = 'pending'")
            .execute(&mut *conn)
            .await
            .unwrap();
        sqlx::query("UPDATE orders SET next_attempt_at = 1 WHERE order_type = 'card_issue'")
            .execute(&mut *conn)
            .await
            .unwrap();
        let now = common::now_micros();
        let q = issuing_store::stats::delivery_queue(&mut conn, now)
            .await
            .unwrap();
        assert_eq!((q.pending, q.due, q.failed), (1, 1, 1));
        assert_eq!(
            issuing_store::stats::orders_due(&mut conn, now)
                .await
                .unwrap(),
            1
        );
        let orders = issuing_store::stats::orders_by_type_and_status(&mut conn, 100)
            .await
            .unwrap();
        assert!(
            orders
                .iter()
                .any(|o| o.order_type == "card_issue" && o.status == "completed" && o.count == 1),
            "{orders:?}"
        );
    }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_carries_a_request_id() {
    let t = TestServer::start(Backend::Sqlite).await.unwrap();
    // A sealed answer, with a generated id; another request gets another id.
    let (s, h, v) = sealed_call(
        &t,
        POST,
        "users/create",
        json!({"external_user_id": "ada"}),
        None,
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let first = request_id(&h);
    assert!(first.starts_with("req_") && first.len() <= 64, "{first}");
    let (_, h, _) = sealed_call(
        &t,
        POST,
        "users/get",
        json!({"external_user_id": "ada"}),
        None,
    )
    .await;
    assert_ne!(request_id(&h), first);
    // A sane incoming id is echoed, on sealed answers and sealed errors alike.
    let (s, h, v) = sealed_call(
        &t,
        POST,
        "users/create",
        json!({"external_user_id": "ada"}),
        Some("client-trace-42"),
    )
    .await;
    assert_eq!(
        (s, v["error_slug"].as_str()),
        (409, Some("user_already_exists"))
    );
    assert_eq!(request_id(&h), "client-trace-42");
    let (s, h, _) = sealed_call(&t, POST, "no/such", json!({}), Some("x")).await;
    assert_eq!((s, request_id(&h).as_str()), (404, "x"));
    // An id that is too long or not visible ASCII is replaced.
    for bad in ["a".repeat(65), "has space".to_owned()] {
        let (_, h, _) = sealed_call(&t, POST, "system/time", json!({}), Some(&bad)).await;
        let id = request_id(&h);
        assert!(id.starts_with("req_"), "{bad:?} -> {id}");
    }

    // Plain errors (no key), 404s and 405s outside the envelope, the probes.
    let plain = t
        .http
        .post(format!("{}/api/v2/users/create", t.base))
        .header("X-Request-Id", "plain-1")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.status(), 401);
    assert_eq!(request_id(plain.headers()), "plain-1");
    let body: Value = plain.json().await.unwrap();
    assert_eq!(body["error_slug"], "api_key_not_found");
    let (s, h, _) = sealed_call(&t, GET, "users/create", json!({}), Some("wrong-method")).await;
    assert_eq!((s, request_id(&h).as_str()), (405, "wrong-method"));
    for (path, status) in [
        ("/nope", 404),
        ("/api/v2/users/create", 401),
        ("/health", 200),
        ("/ready", 200),
    ] {
        let r = t
            .http
            .get(format!("{}{path}", t.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), status, "{path}");
        assert!(request_id(r.headers()).starts_with("req_"), "{path}");
        let r = t
            .http
            .get(format!("{}{path}", t.base))
            .header("X-Request-Id", "echo-me")
            .send()
            .await
            .unwrap();
        assert_eq!(request_id(r.headers()), "echo-me", "{path}");
    }
}

both_backends!(ready_follows_the_database, |t: TestServer| async move {
    let r = t
        .http
        .get(format!("{}/ready", t.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body, json!({"success": true, "status": "ready"}));

    // The test's store shares its pool with the server: closing it takes the server's
    // database away.
    t.store.close().await;
    let r = t
        .http
        .get(format!("{}/ready", t.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["success"], json!(false));
    assert_eq!(body["error_slug"], "not_ready");
    assert!(
        body["error"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
    // Liveness does not depend on the database.
    let r = t
        .http
        .get(format!("{}/health", t.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
});

/// `issuing serve` with its stdout read up to the listening line and every stderr line
/// collected.
struct Served {
    child: tokio::process::Child,
    base: String,
    stderr: Arc<Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

async fn serve_binary(global: &[&str], env: &[(&str, &str)]) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = common::process::issuing();
    cmd.env_remove("ISSUING_LOG_FORMAT")
        .env_remove("ISSUING_METRICS_LISTEN")
        .env_remove("NO_COLOR");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .args(global)
        .arg("--data-dir")
        .arg(dir.path())
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let mut err_lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let sink = stderr.clone();
    tokio::spawn(async move {
        while let Ok(Some(l)) = err_lines.next_line().await {
            sink.lock().unwrap().push(l);
        }
    });
    let mut out_lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let base = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = out_lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("issuing listening on ") {
                return rest.trim_end_matches("/api/v2").to_owned();
            }
        }
        panic!("issuing serve exited before listening");
    })
    .await
    .expect("server did not start in time");
    tokio::spawn(async move { while let Ok(Some(_)) = out_lines.next_line().await {} });
    Served {
        child,
        base,
        stderr,
        _dir: dir,
    }
}

impl Served {
    /// Waits for a stderr line satisfying `pred`.
    async fn wait_line<F: Fn(&str) -> bool>(&self, what: &str, pred: F) -> String {
        let start = Instant::now();
        loop {
            if let Some(l) = self.stderr.lock().unwrap().iter().find(|l| pred(l)) {
                return l.clone();
            }
            assert!(
                start.elapsed() < WAIT,
                "no log line {what}: {:#?}",
                self.stderr.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_request_ids() {
    let mut s = serve_binary(
        &["--log-format", "json"],
        &[("ISSUING_LOG", "info,issuing::access=debug")],
    )
    .await;
    let listening = s
        .wait_line("about the metrics listener", |l| l.contains("metrics_addr"))
        .await;
    let listening: Value = serde_json::from_str(&listening).unwrap();
    let metrics_addr = listening["fields"]["metrics_addr"]
        .as_str()
        .unwrap()
        .to_owned();

    let http = reqwest::Client::new();
    let r = http
        .get(format!("{}/health", s.base))
        .header("X-Request-Id", "json-log-trace-1")
        .send()
        .await
        .unwrap();
    assert_eq!(request_id(r.headers()), "json-log-trace-1");
    let line = s
        .wait_line("of the request", |l| l.contains("json-log-trace-1"))
        .await;
    let line: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(line["span"]["request_id"], "json-log-trace-1", "{line}");
    assert_eq!(line["span"]["path"], "/health", "{line}");
    assert_eq!(line["fields"]["status"], 200, "{line}");

    // The flag reaches the real binary's metrics listener too.
    let text = http
        .get(format!("http://{metrics_addr}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(
        value(
            &text,
            "issuing_http_requests_total{endpoint=\"/health\",status=\"200\"}"
        ),
        Some(1.0),
        "{text}"
    );

    let _ = s.child.kill().await;
    let lines = s.stderr.lock().unwrap().clone();
    assert!(lines.len() >= 3, "{lines:#?}");
    for l in &lines {
        let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert!(v["timestamp"].is_string() && v["level"].is_string(), "{l}");
        assert!(v["fields"].is_object() && v["target"].is_string(), "{l}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_logs_have_no_colour_off_a_terminal() {
    // ISSUING_LOG_FORMAT=text, as the default would be; stderr is a pipe here.
    let mut s = serve_binary(
        &[],
        &[("ISSUING_LOG", "info"), ("ISSUING_LOG_FORMAT", "text")],
    )
    .await;
    s.wait_line("about listening", |l| l.contains("listening"))
        .await;
    let _ = s.child.kill().await;
    let lines = s.stderr.lock().unwrap().clone();
    assert!(!lines.is_empty());
    for l in &lines {
        assert!(!l.contains('\u{1b}'), "escape code in {l:?}");
        assert!(serde_json::from_str::<Value>(l).is_err(), "{l}");
        assert!(l.contains("INFO") || l.contains("WARN"), "{l}");
    }
}

#[tokio::test]
async fn an_unknown_log_format_is_a_usage_error() {
    let out = common::process::issuing()
        .args(["--log-format", "xml", "admin", "project", "list"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--log-format"), "{err}");
}
