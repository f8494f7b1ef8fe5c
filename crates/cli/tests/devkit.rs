//! The shell tools as child processes: `issuing api`, `issuing proxy`, `issuing trigger`
//! against a real server, and `issuing admin demo` on a data directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::process::{issuing, ServeProcess};
use common::receiver::Receiver;
use common::{Creds, TestServer};
use serde_json::{json, Value};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Child;

const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

/// An `issuing` command with the test project's credentials in the environment.
fn with_creds(t: &TestServer) -> tokio::process::Command {
    let mut cmd = issuing();
    cmd.env("ISSUING_BASE_URL", &t.base)
        .env("ISSUING_API_KEY", &t.creds.api_key)
        .env("ISSUING_API_SECRET", &t.creds.api_secret);
    cmd
}

/// Runs `issuing <args>` to the end; `stdin` is written to its standard input.
async fn run(t: &TestServer, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    let mut cmd = with_creds(t);
    cmd.args(args);
    run_cmd(cmd, stdin).await
}

async fn run_cmd(mut cmd: tokio::process::Command, stdin: Option<&str>) -> (i32, String, String) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn issuing");
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).await.unwrap();
    }
    drop(input);
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("issuing did not finish")
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn one_json_line(stdout: &str) -> Value {
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "expected one line on stdout: {stdout:?}");
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {stdout:?}"))
}

both_backends!(api_prints_the_opened_answer, |t: TestServer| async move {
    // Success: exit 0, the answer alone on stdout, whatever form the path takes.
    for path in ["system/health", "/api/v2/system/health", "/system/health"] {
        let (code, out, err) = run(&t, &["api", path], None).await;
        assert_eq!(code, 0, "{path}: {err}");
        let v = one_json_line(&out);
        assert_eq!(v["success"], true, "{v}");
        assert_eq!(v["status"], "ok", "{v}");
    }

    // An API error: its JSON on stdout, exit 1.
    let (code, out, err) = run(
        &t,
        &["api", "users/get", r#"{"external_user_id": "nobody"}"#],
        None,
    )
    .await;
    assert_eq!(code, 1, "{out} {err}");
    let v = one_json_line(&out);
    assert_eq!(v["success"], false);
    assert_eq!(v["error_slug"], "user_not_found");

    // The body from stdin, pretty-printed answer.
    let (code, out, err) = run(
        &t,
        &["api", "users/create", "-", "--pretty"],
        Some(r#"{"external_user_id": "from-stdin"}"#),
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(out.lines().count() > 1, "{out}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["external_user_id"], "from-stdin", "{v}");
    t.ok("users/get", json!({"external_user_id": "from-stdin"}))
        .await;

    // A plain (unsealed) authentication error is printed too.
    let mut cmd = with_creds(&t);
    cmd.env("ISSUING_API_KEY", "pk_unknown")
        .args(["api", "system/health"]);
    let (code, out, _) = run_cmd(cmd, None).await;
    assert_eq!(code, 1);
    assert_eq!(one_json_line(&out)["error_slug"], "api_key_not_found");

    // Usage and transport errors: exit 2, nothing on stdout.
    let (code, out, err) = run(&t, &["api", "users/create", "{not json"], None).await;
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("not valid JSON"), "{err}");
    let (code, out, err) = run(&t, &["api", "users/create", "[1]"], None).await;
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    let port = common::receiver::free_port();
    let (code, out, err) = run(
        &t,
        &[
            "api",
            "system/health",
            "--base-url",
            &format!("http://127.0.0.1:{port}"),
        ],
        None,
    )
    .await;
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("request failed"), "{err}");
});

/// A running `issuing proxy`.
struct Proxy {
    child: Child,
    url: String,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    async fn start(t: &TestServer) -> Proxy {
        let mut child = with_creds(t)
            .args(["proxy", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn issuing proxy");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = tokio::time::timeout(EVENT_TIMEOUT, lines.next_line())
            .await
            .expect("proxy did not start")
            .unwrap()
            .expect("proxy exited");
        let rest = first
            .strip_prefix("proxy: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {first}"));
        let (url, base) = rest.split_once(" -> ").unwrap();
        assert_eq!(base, t.base);
        let stderr = Arc::new(Mutex::new(vec![first.clone()]));
        let seen = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                seen.lock().unwrap().push(line);
            }
        });
        Proxy {
            child,
            url: url.to_owned(),
            stderr,
        }
    }

    /// SIGTERM, then the exit status.
    async fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().unwrap().to_string();
        let kill = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("run kill");
        assert!(kill.success());
        tokio::time::timeout(Duration::from_secs(15), self.child.wait())
            .await
            .expect("proxy did not exit after SIGTERM")
            .unwrap()
    }
}

async fn plain(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = resp.text().await.unwrap();
    assert_eq!(ct.as_deref(), Some("application/json"), "{status} {text}");
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    assert!(v.get("encrypted").is_none(), "sealed answer: {v}");
    (status, v)
}

both_backends!(proxy_speaks_plain_json, |t: TestServer| async move {
    let proxy = Proxy::start(&t).await;
    let http = reqwest::Client::new();
    let post = |path: &str, body: &str| {
        http.post(format!("{}/api/v2/{path}", proxy.url))
            .header("Content-Type", "application/json")
            .body(body.to_owned())
            .send()
    };

    let (s, v) = plain(
        post("users/create", r#"{"external_user_id": "via-proxy"}"#)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (v["success"].clone(), v["external_user_id"].clone()),
        (json!(true), json!("via-proxy"))
    );
    t.ok("users/get", json!({"external_user_id": "via-proxy"}))
        .await;

    // The same plain body again: fresh timestamps, so no duplicate_request; the API's
    // own 409 passes through.
    let (s, v) = plain(
        post("users/create", r#"{"external_user_id": "via-proxy"}"#)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, v["error_slug"].as_str()),
        (409, Some("user_already_exists")),
        "{v}"
    );
    let (s, v) = plain(
        post("users/get", r#"{"external_user_id": "via-proxy"}"#)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = plain(
        post("users/get", r#"{"external_user_id": "via-proxy"}"#)
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(s, 200, "{v}");

    // An empty body is {}.
    let (s, v) = plain(post("system/health", "").await.unwrap()).await;
    assert_eq!((s, v["status"].as_str()), (200, Some("ok")), "{v}");

    // Local refusals, in the API's error object.
    let (s, v) = plain(
        http.get(format!("{}/api/v2/system/health", proxy.url))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        v,
        json!({"success": false, "error": v["error"], "error_slug": "method_not_allowed"})
    );
    assert_eq!(s, 405);
    assert!(v["error"].as_str().is_some_and(|m| !m.is_empty()));
    let (s, v) = plain(
        post("users/create", "{\"external_user_id\": ")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (s, v["error_slug"].as_str()),
        (400, Some("validation_error")),
        "{v}"
    );
    assert_eq!(v["success"], false);

    // Idempotency-Key passes through: the same key and body answer the same order.
    t.deposit(&t.creds.project_id, 100_000_000).await;
    t.cardholder("proxy-card", "sandbox").await;
    let create = || {
        http.post(format!("{}/api/v2/cards/create", proxy.url))
            .header("Idempotency-Key", "proxy-issue-1")
            .body(r#"{"external_user_id": "proxy-card", "product_code": "virtual_usd"}"#)
            .send()
    };
    let (s, first) = plain(create().await.unwrap()).await;
    assert_eq!(s, 200, "{first}");
    let (s, again) = plain(create().await.unwrap()).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(first["order"]["order_id"], again["order"]["order_id"]);

    // The plain probe is forwarded as it is.
    let resp = http
        .get(format!("{}/health", proxy.url))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["status"], "ok");

    let lines = proxy.stderr.lock().unwrap().clone();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("POST /api/v2/users/create -> 409")),
        "{lines:?}"
    );
    let status = proxy.stop().await;
    assert!(status.success(), "{status:?}");
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_reports_an_unreachable_upstream() {
    let port = common::receiver::free_port();
    let mut child = issuing()
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--base-url",
            &format!("http://127.0.0.1:{port}"),
            "--api-key",
            "pk_x",
        ])
        .env("ISSUING_API_SECRET", "sk_x")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next_line().await.unwrap().unwrap();
    let url = first
        .strip_prefix("proxy: listening on ")
        .unwrap()
        .split(" -> ")
        .next()
        .unwrap()
        .to_owned();
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let resp = reqwest::Client::new()
        .post(format!("{url}/api/v2/system/health"))
        .send()
        .await
        .unwrap();
    let (s, v) = plain(resp).await;
    assert_eq!(
        (s, v["error_slug"].as_str()),
        (502, Some("proxy_upstream_error")),
        "{v}"
    );
    let _ = child.kill().await;
}

/// Subscribes a receiver, funds the project, runs `issuing trigger <event>` and returns
/// its summary once the event with that card arrived.
async fn trigger_and_receive(t: &TestServer, event: &str) -> (Value, Value) {
    let rx = Receiver::start(&t.creds.api_secret).await;
    t.ok("wh/subscribe", json!({"url": rx.url})).await;
    t.deposit(&t.creds.project_id, 100_000_000).await;
    let (code, out, err) = run(t, &["trigger", event], None).await;
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("waiting for order"), "{err}");
    let summary = one_json_line(&out);
    assert_eq!(summary["event"], event);
    let card_id = summary["card_id"].as_str().unwrap().to_owned();
    let matches = |e: &Value| {
        let kind = e["event_type"].as_str().or(e["type"].as_str());
        let card = e["data"]["card_id"].as_str().or(e["card_id"].as_str());
        kind == Some(event) && card == Some(card_id.as_str())
    };
    rx.wait_until(event, EVENT_TIMEOUT, |got| {
        got.iter().any(|r| matches(&r.event))
    })
    .await;
    let got = rx
        .received()
        .into_iter()
        .find(|r| matches(&r.event))
        .unwrap();
    (summary, got.event)
}

both_backends!(
    trigger_card_freeze_sends_the_event,
    |t: TestServer| async move {
        let (summary, event) = trigger_and_receive(&t, "card.freeze").await;
        assert_eq!(summary["status"], "frozen", "{summary}");
        assert_eq!(event["data"]["status"], "frozen", "{event}");
    }
);

both_backends!(
    trigger_card_transaction_sends_the_event,
    |t: TestServer| async move {
        let (summary, event) = trigger_and_receive(&t, "card_transaction").await;
        let tx = summary["transaction_id"].as_str().unwrap();
        assert_eq!(event["transaction_id"], tx, "{event}");
    }
);

both_backends!(
    trigger_card_details_viewed_sends_the_event,
    |t: TestServer| async move {
        let (summary, event) = trigger_and_receive(&t, "card.details_viewed").await;
        let reveal_id = summary["reveal_id"].as_str().unwrap();
        assert_eq!(event["data"]["reveal_id"], reveal_id, "{event}");
        assert!(event["data"]["viewed_at"].is_string(), "{event}");
    }
);

both_backends!(
    trigger_dispute_updated_sends_the_event,
    |t: TestServer| async move {
        let (summary, event) = trigger_and_receive(&t, "dispute.updated").await;
        assert_eq!(summary["status"], "won", "{summary}");
        let dispute = summary["dispute_id"].as_str().unwrap();
        assert_eq!(event["data"]["dispute_id"], dispute, "{event}");
        assert_eq!(
            event["data"]["status"], "submitted",
            "the first: its creation"
        );
        assert_eq!(event["data"]["provisional_credit"], true);
        t.verify_ledger().await;
    }
);

both_backends!(
    trigger_report_ready_sends_the_event,
    |t: TestServer| async move {
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.ok("wh/subscribe", json!({"url": rx.url})).await;
        t.deposit(&t.creds.project_id, 100_000_000).await;
        let (code, out, err) = run(&t, &["trigger", "report.ready"], None).await;
        assert_eq!(code, 0, "{err}");
        let summary = one_json_line(&out);
        assert_eq!(summary["event"], "report.ready");
        assert_eq!(summary["status"], "ready", "{summary}");
        assert!(summary["row_count"].as_u64().unwrap() >= 1, "{summary}");
        let report = summary["report_id"].as_str().unwrap().to_owned();
        let matches = |e: &Value| {
            e["event_type"] == "report.ready" && e["data"]["report_id"] == report.as_str()
        };
        rx.wait_until("report.ready", EVENT_TIMEOUT, |got| {
            got.iter().any(|r| matches(&r.event))
        })
        .await;
        let event = rx
            .received()
            .into_iter()
            .find(|r| matches(&r.event))
            .unwrap()
            .event;
        assert_eq!(event["data"]["type"], "cards", "{event}");
        assert_eq!(event["data"]["status"], "ready", "{event}");
    }
);

both_backends!(trigger_a_decline_by_limit, |t: TestServer| async move {
    let rx = Receiver::start(&t.creds.api_secret).await;
    t.ok("wh/subscribe", json!({"url": rx.url})).await;
    t.deposit(&t.creds.project_id, 100_000_000).await;
    let (code, out, err) = run(&t, &["trigger", "card_transaction.declined_by_limit"], None).await;
    assert_eq!(code, 0, "{err}");
    let summary = one_json_line(&out);
    assert_eq!(summary["failure_reason"], "spending_limit_exceeded");
    let tx = summary["transaction_id"].as_str().unwrap().to_owned();
    rx.wait_until("the declined transaction", EVENT_TIMEOUT, |got| {
        got.iter().any(|r| r.event["transaction_id"] == tx.as_str())
    })
    .await;
    let event = rx
        .received()
        .into_iter()
        .find(|r| r.event["transaction_id"] == tx.as_str())
        .unwrap()
        .event;
    assert_eq!(event["type"], "card_transaction");
    assert_eq!(
        event["card_tx_data"]["failure_reason"],
        "spending_limit_exceeded"
    );
    assert_eq!(event["card_tx_data"]["decline"]["interval"], "daily");
    assert_eq!(event["card_tx_data"]["decline"]["spent"], 1.0);
});

both_backends!(trigger_refuses_unknown_events, |t: TestServer| async move {
    let (code, out, err) = run(&t, &["trigger", "card.explode"], None).await;
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(
        err.contains("card.freeze") && err.contains("card_otp"),
        "{err}"
    );
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_demo_rotates_the_demo_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("issuing.db");
    let url = format!("sqlite://{}", db.display());
    let demo = || async {
        let out = issuing()
            .arg("--data-dir")
            .arg(dir.path())
            .args(["admin", "demo"])
            .env_remove("ISSUING_MODE")
            .output()
            .await
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        Creds {
            project_id: v["project_id"].as_str().unwrap().to_owned(),
            api_key: v["api_key"].as_str().unwrap().to_owned(),
            api_secret: v["api_secret"].as_str().unwrap().to_owned(),
            deposit_address: v["deposit_address"].as_str().unwrap().to_owned(),
        }
    };
    let first = demo().await;
    let second = demo().await;
    assert_eq!(first.project_id, second.project_id);
    assert_eq!(first.deposit_address, second.deposit_address);
    assert!(!first.deposit_address.is_empty());
    assert_ne!(first.api_key, second.api_key);
    assert_ne!(first.api_secret, second.api_secret);

    // A server on that data directory: the first key is gone, the second works, and the
    // project is the demo project (no second one is created, its credit is there).
    let server = ServeProcess::start(dir.path(), &url).await;
    assert_eq!(server.banner_value("api_key"), None, "{:?}", server.banner);
    let call = |creds: &Creds, path: &'static str| {
        let base = server.base.clone();
        let creds = creds.clone();
        async move {
            let out = issuing()
                .args(["api", path, "--base-url", &base])
                .env("ISSUING_API_KEY", &creds.api_key)
                .env("ISSUING_API_SECRET", &creds.api_secret)
                .output()
                .await
                .unwrap();
            let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            (out.status.code().unwrap_or(-1), v)
        }
    };
    let (code, v) = call(&first, "system/health").await;
    assert_eq!(
        (code, v["error_slug"].as_str()),
        (1, Some("api_key_not_found")),
        "{v}"
    );
    let (code, v) = call(&second, "project/balance").await;
    assert_eq!((code, v["available"].as_str()), (0, Some("1000.00")), "{v}");
    server.kill().await;

    // Production mode is refused before anything is touched.
    let other = tempfile::tempdir().unwrap();
    let out = issuing()
        .arg("--data-dir")
        .arg(other.path())
        .args(["admin", "demo", "--mode", "production"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(!other.path().join("issuing.db").exists());
    let out = issuing()
        .arg("--data-dir")
        .arg(other.path())
        .args(["admin", "demo"])
        .env("ISSUING_MODE", "production")
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
