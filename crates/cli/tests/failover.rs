//! PostgreSQL failover (CONTRACT §18), against the real test server: URLs with several
//! hosts as libpq writes them, a host that does not accept writes passed over, and an
//! outage (a TCP proxy in front of PostgreSQL, cut and restored) during which requests
//! answer 503 `service_unavailable` with `Retry-After` and `/ready` is not ready, after
//! which the same idempotency key gives one result and the workers go on, with no
//! restart. PostgreSQL only: SQLite is one file in the server's own process, with no
//! host to lose or to choose.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::console::Console;
use common::pgproxy::PgProxy;
use common::process::issuing;
use common::receiver::{free_port, Receiver};
use common::{fresh_timestamp, Backend, TestDb, TestServer};
use issuing_app::config::ConsoleListen;
use issuing_server::ServerConfig;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The test server's PostgreSQL, from `ISSUING_TEST_POSTGRES_URL`'s host and port.
fn upstream(db_url: &str) -> SocketAddr {
    let authority = db_url
        .split_once("://")
        .unwrap()
        .1
        .split('/')
        .next()
        .unwrap();
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let hostport = if hostport.contains(':') {
        hostport.to_owned()
    } else {
        format!("{hostport}:5432")
    };
    use std::net::ToSocketAddrs;
    hostport.to_socket_addrs().unwrap().next().unwrap()
}

/// `db_url` with its host list replaced by `hosts` and `query` appended.
fn with_hosts(db_url: &str, hosts: &[String], query: &str) -> String {
    let (scheme, rest) = db_url.split_once("://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let path = path.split('?').next().unwrap();
    let user = authority
        .rsplit_once('@')
        .map(|(u, _)| format!("{u}@"))
        .unwrap_or_default();
    format!("{scheme}://{user}{}/{path}{query}", hosts.join(","))
}

async fn postgres_db() -> Option<TestDb> {
    TestDb::create(Backend::Postgres).await
}

/// A user created through the API (the users' batch writer, on its own connection),
/// and money for its cards on the project's master balance.
async fn create_user(t: &TestServer, id: &str) {
    t.deposit(&t.creds.project_id, 100_000_000).await;
    let v = t.ok("users/create", json!({"external_user_id": id})).await;
    assert_eq!(v["external_user_id"], id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_first_host_is_passed_over() {
    let Some(db) = postgres_db().await else {
        return;
    };
    let real = upstream(&db.url);
    let dead = free_port();
    let url = with_hosts(
        &db.url,
        &[format!("127.0.0.1:{dead}"), real.to_string()],
        "?target_session_attrs=read-write",
    );
    let db_url = db.url.clone();
    let t = TestServer::start_at(db, &url, None, ServerConfig::default()).await;
    create_user(&t, "over-a-dead-host").await;
    let card = t.active_card("over-a-dead-host", "virtual_usd").await;
    let (status, order) = t.topup(&card, json!("15"), "dead-host-topup").await;
    assert_eq!(status, 200, "{order}");
    let done = t.wait_order(order["order_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(t.card_balance("over-a-dead-host", &card).await, "15.00");

    // `issuing admin` takes the same URL.
    let dir = tempfile::tempdir().unwrap();
    let out = issuing()
        .args(["admin", "project", "list"])
        .env("ISSUING_DATABASE_URL", &url)
        .env("ISSUING_DATA_DIR", dir.path())
        .env("ISSUING_MASTER_KEY", t.master.to_base64())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "admin with {url}: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(&t.creds.project_id), "{stdout}");

    // The URL the service refused before: one port too many is still refused, by name.
    let bad = with_hosts(&db_url, &["127.0.0.1:99999".into()], "");
    let out = issuing()
        .args(["admin", "project", "list"])
        .env("ISSUING_DATABASE_URL", &bad)
        .env("ISSUING_DATA_DIR", dir.path())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("invalid port number"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_does_not_accept_writes_is_passed_over() {
    let Some(db) = postgres_db().await else {
        return;
    };
    let real = upstream(&db.url);
    let standby = PgProxy::start(real, true).await;
    // The proxy's sessions really are read-only.
    {
        use sqlx::Connection;
        let direct = with_hosts(&db.url, &[format!("127.0.0.1:{}", standby.port)], "");
        let mut conn = sqlx::PgConnection::connect(&direct).await.unwrap();
        let ro: String = sqlx::query_scalar("SHOW transaction_read_only")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(ro, "on");
        let refused = sqlx::query("CREATE TABLE nope (id INT)")
            .execute(&mut conn)
            .await
            .unwrap_err();
        assert_eq!(
            refused
                .as_database_error()
                .and_then(|e| e.code())
                .as_deref(),
            Some("25006")
        );
    }
    let url = with_hosts(
        &db.url,
        &[format!("127.0.0.1:{}", standby.port), real.to_string()],
        "?target_session_attrs=read-write",
    );
    let t = TestServer::start_at(db, &url, None, ServerConfig::default()).await;
    assert!(standby.accepted() >= 1, "the first host was asked");
    create_user(&t, "past-the-standby").await;
    let card = t.active_card("past-the-standby", "virtual_usd").await;
    let (status, order) = t.topup(&card, json!("12"), "standby-topup").await;
    assert_eq!(status, 200, "{order}");
    t.verify_ledger().await;
}

/// A sealed call that also answers the response's `Retry-After` and how long it took.
async fn call_timed(
    t: &TestServer,
    path: &str,
    mut body: Value,
) -> (u16, Value, Option<String>, Duration) {
    body["request_timestamp"] = json!(fresh_timestamp());
    let key = issuing_envelope::Key::from_secret(&t.creds.api_secret);
    let sealed = issuing_envelope::seal(&key, body.to_string().as_bytes());
    let started = Instant::now();
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v2/{path}", t.base))
        .header("Content-Type", "application/json")
        .header("API-KEY", &t.creds.api_key)
        .body(json!({ "encrypted": sealed }).to_string())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let outer: Value = resp.json().await.unwrap();
    let value = match outer.get("encrypted").and_then(Value::as_str) {
        Some(s) => serde_json::from_slice(&issuing_envelope::open(&key, s).unwrap()).unwrap(),
        None => outer,
    };
    (status, value, retry_after, started.elapsed())
}

async fn get(url: &str) -> (u16, String) {
    let resp = reqwest::get(url).await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// Polls `url` until it answers `status`.
async fn wait_for_status(url: &str, status: u16, within: Duration) {
    let start = Instant::now();
    loop {
        let (s, body) = get(url).await;
        if s == status {
            return;
        }
        assert!(
            start.elapsed() < within,
            "{url} still {s} ({body}), waited for {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
}

/// The metrics once `name` reads `value`, or after 10 s (the caller asserts).
async fn metrics_once(url: &str, name: &str, value: u64) -> String {
    let start = Instant::now();
    loop {
        let (_, text) = get(url).await;
        if metric(&text, name) == Some(value) || start.elapsed() > Duration::from_secs(10) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_answers_503_and_the_service_comes_back_by_itself() {
    let Some(db) = postgres_db().await else {
        return;
    };
    let proxy = PgProxy::start(upstream(&db.url), false).await;
    let url = with_hosts(
        &db.url,
        &[
            format!("127.0.0.1:{}", free_port()),
            format!("127.0.0.1:{}", proxy.port),
        ],
        "?target_session_attrs=read-write",
    );
    let config = ServerConfig {
        metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        webhook_retry_interval: Duration::from_secs(1),
        webhook_timeout: Duration::from_secs(1),
        ..ServerConfig::default()
    };
    let t = TestServer::start_at(db, &url, None, config).await;
    let base = t.base.clone();
    let metrics = format!("http://{}/metrics", t.metrics_addr().unwrap());
    let rx = Receiver::start(&t.creds.api_secret).await;
    t.ok("wh/subscribe", json!({"url": rx.url})).await;
    create_user(&t, "through-an-outage").await;
    let card = t.active_card("through-an-outage", "virtual_usd").await;
    let before = t.balance().await;
    wait_for_status(&format!("{base}/ready"), 200, Duration::from_secs(5)).await;

    proxy.cut();
    // The watcher notices within its heartbeat.
    wait_for_status(&format!("{base}/ready"), 503, Duration::from_secs(10)).await;
    // `/ready`'s own query can fail before the watcher's heartbeat marks the outage.
    let text = metrics_once(&metrics, "issuing_database_unavailable", 1).await;
    assert_eq!(
        metric(&text, "issuing_database_unavailable"),
        Some(1),
        "{text}"
    );
    assert!(
        metric(&text, "issuing_database_unavailable_total").unwrap_or(0) >= 1,
        "{text}"
    );

    // A write needs the database: 503 with Retry-After, quickly, never a 500.
    let topup = json!({"card_id": card, "amount": "20", "idempotency_key": "outage-topup"});
    let (status, body, retry_after, took) = call_timed(&t, "cards/topup", topup.clone()).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error_slug"], "service_unavailable", "{body}");
    assert_eq!(body["success"], json!(false));
    assert_eq!(retry_after.as_deref(), Some("2"));
    assert!(took < Duration::from_secs(10), "answered after {took:?}");
    let (status, body, retry_after, _) =
        call_timed(&t, "users/create", json!({"external_user_id": "during"})).await;
    assert_eq!((status, retry_after.as_deref()), (503, Some("2")), "{body}");

    proxy.restore();
    wait_for_status(&format!("{base}/ready"), 200, Duration::from_secs(15)).await;
    let text = metrics_once(&metrics, "issuing_database_unavailable", 0).await;
    assert_eq!(
        metric(&text, "issuing_database_unavailable"),
        Some(0),
        "{text}"
    );

    // The same key, twice: one order, charged once.
    let (s1, first, _, _) = call_timed(&t, "cards/topup", topup.clone()).await;
    assert_eq!(s1, 200, "{first}");
    let (s2, again, _, _) = call_timed(&t, "cards/topup", topup).await;
    assert_eq!(s2, 200, "{again}");
    assert_eq!(first["order_id"], again["order_id"]);
    let spent = |a: &str, b: &str| {
        let p = |s: &str| s.parse::<f64>().unwrap();
        ((p(a) - p(b)) * 100.0).round() / 100.0
    };
    let after = t.balance().await;
    let charged = spent(&before, &after);
    assert!(
        (20.0..40.0).contains(&charged),
        "one top-up of 20 plus its fee, not two: {before} -> {after}"
    );
    create_user(&t, "after").await;
    // The workers go on: the top-up completes, and its webhook is delivered.
    let order_id = first["order_id"].as_str().unwrap().to_owned();
    let order = t.wait_order(&order_id).await;
    assert_eq!(order["status"], "completed", "{order}");
    rx.wait_until(
        "a webhook about the top-up",
        Duration::from_secs(20),
        |got| got.iter().any(|r| r.event.to_string().contains(&order_id)),
    )
    .await;
    t.verify_ledger().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_reads_through_the_read_url() {
    let Some(db) = postgres_db().await else {
        return;
    };
    let real = upstream(&db.url);
    // The "standby": read-only sessions on the same database, behind a proxy that
    // counts what goes through it.
    let standby = PgProxy::start(real, true).await;
    let read_url = with_hosts(
        &db.url,
        &[
            format!("127.0.0.1:{}", free_port()),
            format!("127.0.0.1:{}", standby.port),
        ],
        "",
    );
    let config = ServerConfig {
        console: Some(ConsoleListen {
            addr: "127.0.0.1:0".parse().unwrap(),
            optional: false,
        }),
        ..ServerConfig::default()
    };
    let url = db.url.clone();
    let t = TestServer::start_at(db, &url, Some(&read_url), config).await;
    create_user(&t, "seen-on-the-standby").await;
    let card = t.active_card("seen-on-the-standby", "virtual_usd").await;
    let password = issuing_console::operators::create(
        &t.store,
        "reader@example.com",
        issuing_console::operators::Role::Admin,
        &[],
    )
    .await
    .unwrap()
    .password;
    let console = Console::login(t.console_addr().unwrap(), "reader@example.com", &password).await;
    for path in [
        "/console/".to_owned(),
        "/console/projects".to_owned(),
        format!("/console/projects/{}", t.creds.project_id),
        "/console/cards".to_owned(),
        format!("/console/cards/{card}"),
        "/console/ledger".to_owned(),
        "/console/audit".to_owned(),
        "/console/webhooks".to_owned(),
    ] {
        let page = console.get(&path).await;
        assert_eq!(page.status, 200, "{path}: {}", page.body);
    }
    let page = console.get(&format!("/console/cards/{card}")).await;
    assert!(page.body.contains(&card), "the card's page shows it");
    assert!(standby.accepted() >= 1, "no connection went to the standby");
    // The pages read there: with the standby gone they answer 503 (sessions live on
    // the primary, so the operator stays signed in), while money, on the primary,
    // goes on.
    standby.cut();
    let start = Instant::now();
    loop {
        let page = console.get("/console/cards").await;
        if page.status == 503 {
            assert_eq!(page.header("retry-after"), "2");
            break;
        }
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the pages never noticed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, order) = t.topup(&card, json!("10"), "reader-topup").await;
    assert_eq!(status, 200, "{order}");
    standby.restore();
    let start = Instant::now();
    while console.get("/console/cards").await.status != 200 {
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "the pages did not come back"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asa_request_during_an_outage_is_declined_within_its_budget() {
    use common::lithic::harness::Lithic;
    use common::lithic::{Merchant, Sign};
    let Some(admin) = common::db::postgres_admin_url() else {
        return;
    };
    let proxy = PgProxy::start(upstream(&admin), false).await;
    let port = proxy.port;
    let Some(l) = Lithic::start_via(Backend::Postgres, "", |url| {
        with_hosts(url, &[format!("127.0.0.1:{port}")], "")
    })
    .await
    else {
        return;
    };
    let (_card_id, token) = l.card("ada", "50").await;
    let coffee = Merchant::coffee();
    let asa = l.fake.authorize(&token, 100, &coffee).await;
    assert_eq!(
        (asa.status, asa.result()),
        (200, "APPROVED"),
        "{:?}",
        asa.answer
    );

    proxy.cut();
    wait_for_status(&format!("{}/ready", l.t.base), 503, Duration::from_secs(10)).await;
    // Past the enrolment secrets' cache (5 s): they still verify the request.
    tokio::time::sleep(Duration::from_secs(6)).await;
    // The ASA request alone: Lithic's event about the declined transaction would only
    // be delivered again later.
    let started = Instant::now();
    let asa = l
        .fake
        .asa(&token, "AUTHORIZATION", 200, &coffee, Sign::Good, None)
        .await;
    let took = started.elapsed();
    assert_eq!(
        (asa.status, asa.result()),
        (200, "UNAUTHORIZED_MERCHANT"),
        "a decline, not a 5xx: {:?}",
        asa.answer
    );
    assert!(
        took < Duration::from_secs(2),
        "the budget is 2 s; answered after {took:?}"
    );

    proxy.restore();
    wait_for_status(&format!("{}/ready", l.t.base), 200, Duration::from_secs(15)).await;
    let asa = l.fake.authorize(&token, 300, &coffee).await;
    assert_eq!(
        (asa.status, asa.result()),
        (200, "APPROVED"),
        "{:?}",
        asa.answer
    );
    l.finish().await;
}
