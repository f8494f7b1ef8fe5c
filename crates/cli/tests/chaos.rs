//! Chaos: mixed load (issues, topups, withdraws, freezes, duplicate retries, card auths
//! and clears) against the real binary while it is SIGKILLed every few seconds. After
//! the storm: the ledger verifies (holds included), every accepted order ends, no
//! idempotency key made two orders, and every retry of a key got the same order.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::cards::kyc;
use common::process::ServeProcess;
use common::{Creds, TestDb, TestServer};
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const STORM: Duration = Duration::from_secs(25);
const CLIENTS: u64 = 6;

/// One sealed call with a short timeout; None when the server is down or dies. Raw on
/// purpose: the storm's clients need a short timeout, treat a missing answer as the
/// server being killed, and replay keyed bodies byte for byte (key in the body).
async fn call(
    http: &reqwest::Client,
    base: &str,
    creds: &Creds,
    path: &str,
    mut body: Value,
) -> Option<(u16, Value)> {
    body["request_timestamp"] = json!(common::fresh_timestamp());
    let key = issuing_envelope::Key::from_secret(&creds.api_secret);
    let sealed = issuing_envelope::seal(&key, body.to_string().as_bytes());
    let resp = http
        .post(format!("{base}/api/v2/{path}"))
        .header("API-KEY", &creds.api_key)
        .json(&json!({"encrypted": sealed}))
        .send()
        .await
        .ok()?;
    let status = resp.status().as_u16();
    let outer: Value = serde_json::from_str(&resp.text().await.ok()?).ok()?;
    let value = match outer["encrypted"].as_str() {
        Some(s) => serde_json::from_slice(&issuing_envelope::open(&key, s).ok()?).ok()?,
        None => outer,
    };
    Some((status, value))
}

#[derive(Default)]
struct Seen {
    /// Order id answered for each idempotency key (every answer must agree).
    keys: HashMap<String, String>,
    orders: HashSet<String>,
    cards: Vec<String>,
}

both_backends!(
    mixed_load_under_repeated_sigkill_keeps_every_promise,
    |t: TestServer| async move {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::create(t.db.backend).await.unwrap();
        let server = ServeProcess::start(dir.path(), &db.url).await;
        let creds = Creds {
            project_id: server.banner_value("project_id").unwrap(),
            api_key: server.banner_value("api_key").unwrap(),
            api_secret: server.banner_value("api_secret").unwrap(),
            deposit_address: String::new(),
        };
        let store = issuing_store::Store::connect(&db.url).await.unwrap();
        let base = Arc::new(Mutex::new(server.base.clone()));
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(3))
            .build()
            .unwrap();
        let sdk = t.sdk_on(&server.base, &creds);
        for u in 0..CLIENTS {
            sdk.cardholders_create(&issuing_client::CardholdersCreate {
                external_user_id: format!("u{u}"),
                subprovider_code: "sandbox".into(),
                kyc_data: Some(serde_json::from_value(kyc()).unwrap()),
                ..Default::default()
            })
            .await
            .unwrap();
        }
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Instant::now() + STORM;
        let mut clients = Vec::new();
        for c in 0..CLIENTS {
            let (http, creds, base, seen) =
                (http.clone(), creds.clone(), base.clone(), seen.clone());
            clients.push(tokio::spawn(async move {
                let mut rng = rand::rngs::StdRng::seed_from_u64(c);
                let user = format!("u{c}");
                let mut n = 0u32;
                let mut last_key: Option<(String, &'static str, Value)> = None;
                while Instant::now() < stop {
                    n += 1;
                    let b = base.lock().unwrap().clone();
                    let card = {
                        let s = seen.lock().unwrap();
                        (!s.cards.is_empty()).then(|| s.cards[rng.gen_range(0..s.cards.len())].clone())
                    };
                    // Sometimes retry the previous keyed request exactly (a duplicate).
                    let (path, body): (&'static str, Value) = match (rng.gen_range(0..10), &card, &last_key) {
                        (0, _, Some((_, p, body))) => (*p, body.clone()),
                        (1, _, _) | (_, None, _) => ("cards/create", json!({"external_user_id": user, "product_code": "virtual_usd",
                            "idempotency_key": format!("c{c}-{n}"), "initial_topup": "20"})),
                        (2 | 3, Some(card), _) => ("cards/topup", json!({"card_id": card, "amount": "15", "idempotency_key": format!("t{c}-{n}")})),
                        (4, Some(card), _) => ("cards/withdraw", json!({"card_id": card, "amount": "1.5", "idempotency_key": format!("w{c}-{n}")})),
                        (5, Some(card), _) => (if rng.gen_bool(0.5) { "cards/freeze" } else { "cards/unfreeze" }, json!({"card_id": card})),
                        (_, Some(card), _) => ("simulate/cards/auth", json!({"card_id": card, "transactionAmount": "2"})),
                    };
                    let Some((status, v)) = call(&http, &b, &creds, path, body.clone()).await else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    if let Some(key) = body["idempotency_key"].as_str() {
                        last_key = Some((key.to_owned(), path, body.clone()));
                        let order = v["order_id"].as_str().or(v["order"]["order_id"].as_str());
                        if let (200, Some(order)) = (status, order) {
                            let mut s = seen.lock().unwrap();
                            let first = s.keys.entry(key.to_owned()).or_insert_with(|| order.to_owned()).clone();
                            assert_eq!(first, order, "key {key} answered two orders");
                            s.orders.insert(order.to_owned());
                            if let Some(card) = v["card_id"].as_str() {
                                if !s.cards.contains(&card.to_owned()) {
                                    s.cards.push(card.to_owned());
                                }
                            }
                        }
                    }
                    if let (200, Some(tx)) = (status, v["transactionId"].as_str()) {
                        if rng.gen_bool(0.7) {
                            let _ = call(&http, &b, &creds, "simulate/cards/clear", json!({"transactionId": tx})).await;
                        }
                    }
                }
            }));
        }
        // The storm: a SIGKILL every 3 to 5 s, restarted at once.
        let mut server = server;
        let mut kills = 0;
        let mut rng = rand::rngs::StdRng::seed_from_u64(99);
        while Instant::now() + Duration::from_secs(5) < stop {
            tokio::time::sleep(Duration::from_millis(rng.gen_range(3000..5000))).await;
            server.kill().await;
            kills += 1;
            server = ServeProcess::start(dir.path(), &db.url).await;
            *base.lock().unwrap() = server.base.clone();
        }
        for c in clients {
            c.await.unwrap();
        }
        assert!(kills >= 3, "{kills} kills");

        // Every accepted order ends (the restarted server finishes what was in flight).
        let (orders, keys) = {
            let s = seen.lock().unwrap();
            (s.orders.iter().cloned().collect::<Vec<_>>(), s.keys.len())
        };
        assert!(
            orders.len() > 20,
            "the load did work: {} orders",
            orders.len()
        );
        let deadline = Instant::now() + Duration::from_secs(45);
        for id in &orders {
            loop {
                let (status,): (String,) =
                    sqlx::query_as("SELECT status FROM orders WHERE id = $1")
                        .bind(id)
                        .fetch_one(store.pool())
                        .await
                        .unwrap();
                if status == "completed" || status == "failed" {
                    break;
                }
                assert!(Instant::now() < deadline, "order {id} stuck in {status}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        server.kill().await;
        // No key made two orders: every keyed order belongs to exactly one finished key.
        let (keyed_orders,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM orders WHERE order_type IN ('card_issue', 'card_topup', 'card_withdraw')")
            .fetch_one(store.pool()).await.unwrap();
        let (done_keys,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM idempotency_keys WHERE state = 'done'")
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert_eq!(keyed_orders, done_keys, "one order per idempotency key");
        assert!(done_keys >= keys as i64);
        let mut conn = store.conn().await.unwrap();
        let problems = issuing_store::ledger::verify(&mut conn).await.unwrap();
        assert!(problems.is_empty(), "after {kills} kills: {problems:?}");
        drop(conn);
        store.close().await;
    }
);
