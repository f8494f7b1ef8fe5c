//! The typed methods against a scripted fake API: retries with the same idempotency key
//! and fresh timestamps, clock sync on a timestamp refusal, `wait_order`.

use super::*;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::json;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

const SECRET: &str = "sk_sdk";
const API_KEY: &str = "pk_sdk";

/// One scripted answer.
#[derive(Clone)]
struct Reply {
    status: u16,
    body: Value,
    sealed: bool,
    retry_after: Option<&'static str>,
}

fn ok(body: Value) -> Reply {
    Reply {
        status: 200,
        body,
        sealed: true,
        retry_after: None,
    }
}

fn error(status: u16, slug: &str) -> Reply {
    Reply {
        status,
        body: json!({"success": false, "error": slug, "error_slug": slug}),
        sealed: true,
        retry_after: None,
    }
}

/// A request the fake saw.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    idempotency_key: Option<String>,
    body: Value,
}

#[derive(Default)]
struct Fake {
    /// Microseconds the fake's clock is ahead of the real one.
    clock_lead: i64,
    /// Added to `system/time` answers only (a clock that lies).
    time_lie: i64,
    /// Answers per path, used in order; once empty, `fallback` answers.
    script: HashMap<String, VecDeque<Reply>>,
    fallback: HashMap<String, Reply>,
    seen: Vec<Seen>,
}

type Shared = Arc<Mutex<Fake>>;

async fn handle(
    State(fake): State<Shared>,
    Path(path): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let key = Key::from_secret(SECRET);
    let outer: Value = serde_json::from_slice(&body).unwrap();
    let plain = issuing_envelope::open(&key, outer["encrypted"].as_str().unwrap()).unwrap();
    let request: Value = serde_json::from_slice(&plain).unwrap();
    let mut fake = fake.lock().unwrap();
    fake.seen.push(Seen {
        path: path.clone(),
        idempotency_key: headers
            .get("Idempotency-Key")
            .map(|v| v.to_str().unwrap().to_owned()),
        body: request.clone(),
    });
    let server_now = now_micros() + fake.clock_lead;
    let reply = if path == "system/time" {
        ok(json!({"success": true, "timestamp": server_now + fake.time_lie}))
    } else if (request["request_timestamp"].as_i64().unwrap() - server_now).abs() > 30_000_000 {
        Reply {
            status: 400,
            body: json!({"success": false, "error": "out of window",
                         "error_slug": "request_timestamp_out_of_window"}),
            sealed: false,
            retry_after: None,
        }
    } else if let Some(r) = fake.script.get_mut(&path).and_then(VecDeque::pop_front) {
        r
    } else if let Some(r) = fake.fallback.get(&path) {
        r.clone()
    } else {
        error(404, "not_found")
    };
    let text = if reply.sealed {
        json!({"encrypted": issuing_envelope::seal(&key, reply.body.to_string().as_bytes())})
            .to_string()
    } else {
        reply.body.to_string()
    };
    let mut response = (StatusCode::from_u16(reply.status).unwrap(), text).into_response();
    if let Some(after) = reply.retry_after {
        response
            .headers_mut()
            .insert("Retry-After", HeaderValue::from_static(after));
    }
    response
}

async fn start(fake: Fake) -> (String, Shared) {
    let shared: Shared = Arc::new(Mutex::new(fake));
    let app = Router::new()
        .route("/api/v2/{*path}", post(handle))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), shared)
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
        max_retry_after: Duration::from_millis(50),
    }
}

fn client(base: &str) -> Client {
    Client::new(base, API_KEY, SECRET)
        .unwrap()
        .with_retry_policy(fast_retries())
}

fn order(id: &str, status: &str) -> Value {
    json!({"success": true, "order_id": id, "order_type": "card_topup", "status": status,
           "card_id": "c1", "balance_before": "100.00", "balance_after": "89.50",
           "data": {"amount": "10.00", "fee": "0.50", "total": "10.50", "currency": "usdt"},
           "created_at": "2026-11-21T20:17:18.246211Z", "updated_at": "2026-11-21T20:17:18.246211Z",
           "topup_status": status, "a_future_field": {"x": 1}})
}

fn seen(shared: &Shared, path: &str) -> Vec<Seen> {
    shared
        .lock()
        .unwrap()
        .seen
        .iter()
        .filter(|s| s.path == path)
        .cloned()
        .collect()
}

fn topup() -> CardsTopup {
    CardsTopup {
        card_id: "c1".into(),
        amount: "10.00".into(),
        ..CardsTopup::default()
    }
}

#[tokio::test]
async fn keyed_writes_retry_5xx_and_429_with_the_same_key_and_fresh_timestamps() {
    let mut fake = Fake::default();
    fake.script.insert(
        "cards/topup".into(),
        VecDeque::from([
            error(503, "internal_error"),
            Reply {
                retry_after: Some("1"),
                ..error(429, "rate_limited")
            },
            ok(order("o1", "new")),
        ]),
    );
    let (base, shared) = start(fake).await;
    let started = Instant::now();
    let o = client(&base)
        .cards_topup(&topup(), "topup-1")
        .await
        .unwrap();
    // Retry-After: 1 is bounded by max_retry_after (50 ms).
    assert!(started.elapsed() < Duration::from_millis(900));
    assert_eq!((o.order_id.as_str(), o.status.as_str()), ("o1", "new"));
    assert_eq!(o.balance_after, Some(Decimal::from("89.50")));

    let attempts = seen(&shared, "cards/topup");
    assert_eq!(attempts.len(), 3);
    assert!(attempts
        .iter()
        .all(|s| s.idempotency_key.as_deref() == Some("topup-1")));
    let stamps: Vec<i64> = attempts
        .iter()
        .map(|s| s.body["request_timestamp"].as_i64().unwrap())
        .collect();
    assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
    for s in &attempts {
        assert_eq!(s.body["card_id"], "c1");
        assert_eq!(s.body["amount"], "10.00");
        assert!(s.body.get("currency").is_none(), "None fields are left out");
    }
}

#[tokio::test]
async fn retries_are_bounded_and_never_follow_other_4xx() {
    let mut fake = Fake::default();
    fake.fallback
        .insert("cards/withdraw".into(), error(502, "internal_error"));
    fake.fallback
        .insert("cards/topup".into(), error(400, "invalid_amount"));
    fake.fallback
        .insert("cards/freeze".into(), error(503, "internal_error"));
    fake.fallback
        .insert("cards/get".into(), error(500, "internal_error"));
    let (base, shared) = start(fake).await;
    let c = client(&base);

    let e = c.cards_withdraw(&topup(), "wd-1").await.unwrap_err();
    assert_eq!((e.status(), e.slug()), (Some(502), Some("internal_error")));
    assert_eq!(seen(&shared, "cards/withdraw").len(), 3);

    let e = c.cards_topup(&topup(), "t-1").await.unwrap_err();
    assert_eq!(e.slug(), Some("invalid_amount"));
    assert_eq!(seen(&shared, "cards/topup").len(), 1);

    // A write without a key is sent once; a read is retried.
    let e = c.cards_freeze(&CardsFreeze::new("c1")).await.unwrap_err();
    assert_eq!(e.status(), Some(503));
    assert_eq!(seen(&shared, "cards/freeze").len(), 1);
    let e = c.cards_get(&CardRef::new("c1", "u1")).await.unwrap_err();
    assert_eq!(e.status(), Some(500));
    assert_eq!(seen(&shared, "cards/get").len(), 3);

    // Raw calls keep their single attempt.
    let e = c.call("cards/get", json!({})).await.unwrap_err();
    assert_eq!(e.status(), Some(500));
    assert_eq!(seen(&shared, "cards/get").len(), 4);

    // No retry policy: one attempt.
    let once = client(&base).with_retry_policy(RetryPolicy::none());
    once.cards_withdraw(&topup(), "wd-2").await.unwrap_err();
    assert_eq!(seen(&shared, "cards/withdraw").len(), 4);
}

#[tokio::test]
async fn transport_errors_are_retried_with_the_same_key() {
    let (api, shared) = start(Fake {
        fallback: HashMap::from([(
            "cards/create".to_owned(),
            ok(
                json!({"success": true, "card_id": "c9", "status": "pending",
                      "order": order("o9", "new")}),
            ),
        )]),
        ..Fake::default()
    })
    .await;
    let api_addr = api.trim_start_matches("http://").to_owned();
    // A proxy that drops the first connection after reading the request.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut n = 0;
        loop {
            let (mut inbound, _) = listener.accept().await.unwrap();
            n += 1;
            if n == 1 {
                let mut buf = [0u8; 1024];
                let _ = tokio::io::AsyncReadExt::read(&mut inbound, &mut buf).await;
                drop(inbound);
                continue;
            }
            let api_addr = api_addr.clone();
            tokio::spawn(async move {
                let mut outbound = tokio::net::TcpStream::connect(api_addr).await.unwrap();
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            });
        }
    });
    let request = CardsCreate {
        external_user_id: "u1".into(),
        product_code: "virtual_usd".into(),
        initial_topup: Some("50.00".into()),
        ..CardsCreate::default()
    };
    let created = client(&proxy)
        .cards_create(&request, "issue-1")
        .await
        .unwrap();
    assert_eq!(created.card_id, "c9");
    assert_eq!(created.order.order_id, "o9");
    let attempts = seen(&shared, "cards/create");
    assert!(!attempts.is_empty());
    assert!(attempts
        .iter()
        .all(|s| s.idempotency_key.as_deref() == Some("issue-1")));
    assert_eq!(attempts[0].body["initial_topup"], "50.00");

    // Without retries the dropped connection is the answer.
    let refused = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        drop(l);
        format!("http://{a}")
    };
    let e = client(&refused)
        .cards_create(&request, "k")
        .await
        .unwrap_err();
    assert!(matches!(e, ClientError::Transport { .. }), "{e:?}");
}

#[tokio::test]
async fn a_skewed_clock_is_synced_once_and_the_request_sent_again() {
    let lead = 120_000_000; // the server is 2 minutes ahead
    let mut fake = Fake {
        clock_lead: lead,
        ..Fake::default()
    };
    fake.fallback.insert(
        "project/balance".into(),
        ok(json!({"success": true, "available": "12.50", "currency": "usdt"})),
    );
    let (base, shared) = start(fake).await;
    let c = client(&base);
    let balance = c.project_balance().await.unwrap();
    assert_eq!(balance.available.to_micros(), Some(12_500_000));
    assert_eq!(seen(&shared, "system/time").len(), 1);
    assert_eq!(seen(&shared, "project/balance").len(), 2);
    assert!((c.clock_offset_micros() - lead).abs() < 5_000_000);

    // Clones share the offset: no further sync.
    let clone = c.clone();
    clone.project_balance().await.unwrap();
    clone.call("project/balance", json!({})).await.unwrap();
    assert_eq!(seen(&shared, "system/time").len(), 1);

    // A timestamp the caller chose is not replaced.
    let e = c
        .call("project/balance", json!({"request_timestamp": 1}))
        .await
        .unwrap_err();
    assert_eq!(e.slug(), Some("request_timestamp_out_of_window"));
    assert_eq!(seen(&shared, "system/time").len(), 1);

    // Switched off: the refusal is the answer.
    let off = client(&base).with_clock_sync_on_skew(false);
    let e = off.project_balance().await.unwrap_err();
    assert_eq!(e.slug(), Some("request_timestamp_out_of_window"));

    // sync_clock by hand.
    let fresh = client(&base);
    let offset = fresh.sync_clock().await.unwrap();
    assert!((offset - lead).abs() < 5_000_000, "{offset}");
    fresh.project_balance().await.unwrap();
}

#[tokio::test]
async fn a_clock_that_stays_wrong_is_retried_only_once() {
    let (base, shared) = start(Fake::default()).await;
    let c = client(&base);
    // The fake's clock is right, so a wrong offset set by hand is corrected by the sync.
    c.set_clock_offset_micros(-3_600_000_000);
    c.call("system/health", json!({})).await.unwrap_err(); // 404 not_found in the fake
    assert!(c.clock_offset_micros().abs() < 5_000_000);
    assert_eq!(seen(&shared, "system/health").len(), 2);

    // system/time lies: the corrected timestamp is refused again, and that is final.
    shared.lock().unwrap().time_lie = 3_600_000_000;
    c.set_clock_offset_micros(-3_600_000_000);
    let before = seen(&shared, "system/time").len();
    let e = c.system_health().await.unwrap_err();
    assert_eq!(e.slug(), Some("request_timestamp_out_of_window"));
    assert_eq!(seen(&shared, "system/time").len(), before + 1);
    assert_eq!(seen(&shared, "system/health").len(), 4);
}

#[tokio::test]
async fn wait_order_follows_the_order_to_its_end() {
    let mut fake = Fake::default();
    fake.script.insert(
        "orders/check".into(),
        VecDeque::from([
            ok(order("o1", "new")),
            ok(order("o1", "processing")),
            ok(order("o1", "completed")),
        ]),
    );
    let (base, shared) = start(fake).await;
    let mut statuses = Vec::new();
    let o = client(&base)
        .wait_order_with_progress("o1", Duration::from_secs(10), |o| {
            statuses.push(o.status.clone())
        })
        .await
        .unwrap();
    assert!(o.is_completed());
    assert_eq!(statuses, ["new", "processing", "completed"]);
    assert!(seen(&shared, "orders/check")
        .iter()
        .all(|s| s.body["order_id"] == "o1"));
}

#[tokio::test]
async fn wait_order_gives_up_after_its_timeout() {
    let mut fake = Fake::default();
    fake.fallback
        .insert("orders/check".into(), ok(order("o2", "processing")));
    let (base, shared) = start(fake).await;
    let started = Instant::now();
    let e = client(&base)
        .wait_order("o2", Duration::from_millis(400))
        .await
        .unwrap_err();
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_secs(3),
        "{took:?}"
    );
    match e {
        ClientError::OrderTimeout {
            order_id, status, ..
        } => assert_eq!((order_id.as_str(), status.as_str()), ("o2", "processing")),
        other => panic!("{other:?}"),
    }
    let polls = seen(&shared, "orders/check").len();
    assert!((2..=6).contains(&polls), "{polls}");

    // A failed order is an answer, not an error.
    shared
        .lock()
        .unwrap()
        .fallback
        .insert("orders/check".into(), ok(order("o2", "failed")));
    let o = client(&base)
        .wait_order("o2", Duration::from_secs(5))
        .await
        .unwrap();
    assert!(o.is_failed());
}

#[tokio::test]
async fn unexpected_success_shapes_are_decode_errors() {
    let mut fake = Fake::default();
    fake.fallback.insert(
        "project/balance".into(),
        ok(json!({"success": true, "available": 12.5})),
    );
    let (base, _) = start(fake).await;
    let e = client(&base).project_balance().await.unwrap_err();
    assert!(
        matches!(e, ClientError::Decode { status: 200, .. }),
        "{e:?}"
    );
}
