//! Restarts (CONTRACT §13) with the real binary: a fresh database has no replay fence; a
//! server stopped with SIGTERM finishes the requests it accepted, exits 0 and leaves its
//! replay memory, so its successor refuses exactly the copies it would have refused;
//! only after a crash are requests signed before the restart refused. Under a load of
//! top-ups and authorizations, every operation a stopping server accepted is final
//! after the restart and the ledger verifies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::cards::kyc;
use common::process::{issuing, ServeProcess};
use common::{fresh_timestamp, Backend, Creds, TestDb, TestServer};
use issuing_client::{CardholdersCreate, CardsCreate, CardsFreeze, Client};
use issuing_envelope::Key;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A graceful stop must end well within this.
const STOP_WITHIN: Duration = Duration::from_secs(30);

fn creds_of(server: &ServeProcess) -> Creds {
    Creds {
        project_id: server.banner_value("project_id").unwrap(),
        api_key: server.banner_value("api_key").unwrap(),
        api_secret: server.banner_value("api_secret").unwrap(),
        deposit_address: String::new(),
    }
}

fn sealed(secret: &str, body: &Value) -> String {
    json!({ "encrypted": issuing_envelope::seal(&Key::from_secret(secret), body.to_string().as_bytes()) }).to_string()
}

/// A config file in `dir` with these lines; returns its path.
fn config(dir: &std::path::Path, lines: &str) -> String {
    let path = dir.join("issuing.toml");
    std::fs::write(&path, lines).unwrap();
    path.to_str().unwrap().to_owned()
}

both_backends!(
    a_fresh_database_accepts_any_timestamp_inside_the_window,
    |t: TestServer| async move {
        // Signed 25 s ago, sent to a server that started a moment ago on a new database.
        let v = t
            .ok(
                "users/create",
                json!({"request_timestamp": fresh_timestamp() - 25_000_000, "external_user_id": "early"}),
            )
            .await;
        assert_eq!(v["external_user_id"], "early");
    }
);

both_backends!(
    a_graceful_restart_refuses_exactly_the_copies,
    |t: TestServer| async move {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::create(t.db.backend).await.unwrap();
        let server = ServeProcess::start(dir.path(), &db.url).await;
        let creds = creds_of(&server);
        // Both signed before the restart; only the first is sent before it.
        let used = sealed(
            &creds.api_secret,
            &json!({"request_timestamp": fresh_timestamp(), "external_user_id": "used"}),
        );
        let unused = sealed(
            &creds.api_secret,
            &json!({"request_timestamp": fresh_timestamp(), "external_user_id": "unused"}),
        );
        let send = |base: String, body: String| {
            let (t, key, secret) = (&t, creds.api_key.clone(), creds.api_secret.clone());
            async move {
                t.post_raw(&base, "users/create", Some(&key), body, &secret)
                    .await
            }
        };
        let (s, v) = send(server.base.clone(), used.clone()).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(server.terminate(STOP_WITHIN).await, Some(0));

        let server = ServeProcess::start(dir.path(), &db.url).await;
        let (s, v) = send(server.base.clone(), used).await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (400, Some("duplicate_request")),
            "a copy of a request the old server accepted: {v}"
        );
        let (s, v) = send(server.base.clone(), unused.clone()).await;
        assert_eq!(s, 200, "signed before the restart, never used: {v}");
        // Handed over once: after this server crashes, its own fence applies.
        let signed_before_crash = sealed(
            &creds.api_secret,
            &json!({"request_timestamp": fresh_timestamp(), "external_user_id": "late"}),
        );
        server.kill().await;
        let server = ServeProcess::start(dir.path(), &db.url).await;
        let (s, v) = send(server.base.clone(), unused).await;
        assert_eq!(s, 400, "{v}");
        let (s, v) = send(server.base.clone(), signed_before_crash).await;
        match t.db.backend {
            // SQLite's guard lived in the crashed process: everything signed before the
            // restart is refused, used or not.
            Backend::Sqlite => assert_eq!(
                (s, v["error_slug"].as_str()),
                (400, Some("request_timestamp_out_of_window")),
                "{v}"
            ),
            // PostgreSQL's guard is in the database: nothing is lost in a crash.
            Backend::Postgres => assert_eq!(s, 200, "{v}"),
        }
        assert_eq!(server.terminate(STOP_WITHIN).await, Some(0));
    }
);

both_backends!(
    sigterm_finishes_accepted_requests_within_the_drain_timeout,
    |t: TestServer| async move {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::create(t.db.backend).await.unwrap();
        // Every provider call (here: a freeze, made during the request) takes 1.5 s.
        let cfg = config(
            dir.path(),
            "drain_timeout = 10\n[sandbox]\nlatency_ms = 1500\n",
        );
        let server = ServeProcess::start_with(dir.path(), &db.url, &["--config", &cfg]).await;
        let creds = creds_of(&server);
        let sdk = t.sdk_on(&server.base, &creds);
        let card = issue_card(&sdk, "drain", None).await;
        let second = issue_card(&sdk, "drain2", None).await;
        let freeze = {
            let sdk = sdk.clone();
            let card = card.clone();
            tokio::spawn(async move {
                sdk.cards_freeze(&CardsFreeze {
                    external_user_id: Some("drain".into()),
                    ..CardsFreeze::new(&card)
                })
                .await
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        let base = server.base.clone();
        assert_eq!(server.terminate(STOP_WITHIN).await, Some(0));
        let answer = freeze
            .await
            .unwrap()
            .expect("the accepted freeze is answered");
        assert_eq!(answer.status, "frozen");
        assert!(
            reqwest::get(format!("{base}/health")).await.is_err(),
            "a stopped server accepts no connection"
        );

        // A request longer than the drain timeout is cut off, an order inside its
        // provider call is handed back, and the stop stays bounded.
        let cfg = config(
            dir.path(),
            "drain_timeout = 1\n[sandbox]\nlatency_ms = 5000\n",
        );
        let server = ServeProcess::start_with(dir.path(), &db.url, &["--config", &cfg]).await;
        let sdk = t.sdk_on(&server.base, &creds);
        let topup = sdk
            .cards_topup(
                &issuing_client::CardsTopup {
                    card_id: second.clone(),
                    amount: "10".into(),
                    ..Default::default()
                },
                "handed-back",
            )
            .await
            .unwrap();
        let store = issuing_store::Store::connect(&db.url).await.unwrap();
        let locked_by = |store: issuing_store::Store, id: String| async move {
            let (by,): (Option<String>,) =
                sqlx::query_as("SELECT locked_by FROM orders WHERE id = $1")
                    .bind(id)
                    .fetch_one(store.pool())
                    .await
                    .unwrap();
            by
        };
        let claimed = Instant::now();
        while locked_by(store.clone(), topup.order_id.clone())
            .await
            .is_none()
        {
            assert!(claimed.elapsed() < Duration::from_secs(10), "never claimed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let unfreeze = tokio::spawn(async move {
            sdk.cards_unfreeze(&CardsFreeze {
                external_user_id: Some("drain".into()),
                ..CardsFreeze::new(&card)
            })
            .await
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        let stopping = Instant::now();
        assert_eq!(server.terminate(STOP_WITHIN).await, Some(0));
        assert!(
            stopping.elapsed() < Duration::from_secs(4),
            "stopped after {:?}",
            stopping.elapsed()
        );
        assert!(
            unfreeze.await.unwrap().is_err(),
            "cut off at the drain timeout"
        );
        let (status, attempts): (String, i64) =
            sqlx::query_as("SELECT status, attempts FROM orders WHERE id = $1")
                .bind(&topup.order_id)
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert_ne!(status, "completed", "stopped too late to prove anything");
        assert_eq!(attempts, 0, "a claim handed back is not an attempt");
        assert_eq!(
            locked_by(store.clone(), topup.order_id.clone()).await,
            None,
            "handed back, not left to its lease"
        );
        // The next server finishes it, once.
        let cfg = config(dir.path(), "");
        let server = ServeProcess::start_with(dir.path(), &db.url, &["--config", &cfg]).await;
        let sdk = t.sdk_on(&server.base, &creds);
        let order = sdk
            .wait_order(&topup.order_id, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(order.status, "completed", "{order:?}");
        let balance = sdk
            .cards_balance(&issuing_client::CardRef::new(&second, "drain2"))
            .await
            .unwrap();
        assert_eq!(balance.available.as_str(), "10.00");
        assert_eq!(server.terminate(STOP_WITHIN).await, Some(0));
        store.close().await;
        let (code, out) = verify_ledger(dir.path(), &db.url).await;
        assert_eq!(code, 0, "{out}");
    }
);

/// An approved cardholder `user` and an active virtual_usd card.
async fn issue_card(sdk: &Client, user: &str, initial_topup: Option<&str>) -> String {
    sdk.cardholders_create(&CardholdersCreate {
        external_user_id: user.into(),
        subprovider_code: "sandbox".into(),
        kyc_data: Some(serde_json::from_value(kyc()).unwrap()),
        ..CardholdersCreate::default()
    })
    .await
    .unwrap();
    let created = sdk
        .cards_create(
            &CardsCreate {
                external_user_id: user.into(),
                product_code: "virtual_usd".into(),
                initial_topup: initial_topup.map(Into::into),
                ..CardsCreate::default()
            },
            &format!("issue-{user}"),
        )
        .await
        .unwrap();
    let order = sdk
        .wait_order(&created.order.order_id, Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(order.status, "completed", "{order:?}");
    created.card_id
}

async fn verify_ledger(dir: &std::path::Path, url: &str) -> (i32, String) {
    let out = issuing()
        .arg("--data-dir")
        .arg(dir)
        .arg("--database-url")
        .arg(url)
        .args(["admin", "verify-ledger"])
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// One sealed call with a short timeout; None when no answer came (the server is gone).
async fn post(
    http: &reqwest::Client,
    base: &str,
    creds: &Creds,
    path: &str,
    mut body: Value,
) -> Option<(u16, Value)> {
    body["request_timestamp"] = json!(fresh_timestamp());
    let key = Key::from_secret(&creds.api_secret);
    let resp = http
        .post(format!("{base}/api/v2/{path}"))
        .header("API-KEY", &creds.api_key)
        .json(&json!({"encrypted": issuing_envelope::seal(&key, body.to_string().as_bytes())}))
        .send()
        .await
        .ok()?;
    let status = resp.status().as_u16();
    let outer: Value = serde_json::from_str(&resp.text().await.ok()?).ok()?;
    let plain = issuing_envelope::open(&key, outer["encrypted"].as_str()?).ok()?;
    Some((status, serde_json::from_slice(&plain).ok()?))
}

both_backends!(
    sigterm_during_topups_and_authorizations_loses_nothing,
    |t: TestServer| async move {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::create(t.db.backend).await.unwrap();
        // Slow provider calls: top-up orders are in the workers' hands at the stop.
        let cfg = config(
            dir.path(),
            "drain_timeout = 10\n[sandbox]\nlatency_ms = 200\n",
        );
        let server = ServeProcess::start_with(dir.path(), &db.url, &["--config", &cfg]).await;
        let creds = creds_of(&server);
        let sdk = t.sdk_on(&server.base, &creds);
        let card = issue_card(&sdk, "load", Some("100")).await;
        let out = issuing()
            .arg("--data-dir")
            .arg(dir.path())
            .arg("--database-url")
            .arg(&db.url)
            .args([
                "admin",
                "deposit",
                "--project",
                &creds.project_id,
                "--amount",
                "100000",
            ])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let topups = Arc::new(Mutex::new(Vec::<String>::new()));
        // (transaction id, its status in the answer)
        let auths = Arc::new(Mutex::new(Vec::<(String, String)>::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let mut load = Vec::new();
        for c in 0..8usize {
            let (base, creds, card) = (server.base.clone(), creds.clone(), card.clone());
            let (topups, auths, stop) = (topups.clone(), auths.clone(), stop.clone());
            load.push(tokio::spawn(async move {
                let http = reqwest::Client::builder()
                    .timeout(Duration::from_secs(20))
                    .build()
                    .unwrap();
                for i in 0..10_000usize {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let answer = if c % 2 == 0 {
                        let key = format!("topup-{c}-{i}");
                        let body = json!({"card_id": card, "amount": "10", "idempotency_key": key});
                        let answer = post(&http, &base, &creds, "cards/topup", body).await;
                        if let Some((200, v)) = &answer {
                            let order = v["order_id"].as_str().unwrap().to_owned();
                            topups.lock().unwrap().push(order);
                        }
                        answer
                    } else {
                        let body = json!({"card_id": card, "transactionAmount": "0.01"});
                        let answer = post(&http, &base, &creds, "simulate/cards/auth", body).await;
                        if let Some((200, v)) = &answer {
                            let id = v["transactionId"].as_str().unwrap().to_owned();
                            let status = v["transaction"]["card_tx_data"]["status"]
                                .as_str()
                                .unwrap()
                                .to_owned();
                            auths.lock().unwrap().push((id, status));
                        }
                        answer
                    };
                    if answer.is_none() {
                        // The server stopped accepting.
                        break;
                    }
                }
            }));
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (topups_before, auths_before) =
            (topups.lock().unwrap().len(), auths.lock().unwrap().len());
        assert!(
            topups_before > 0 && auths_before > 0,
            "the load ran before the stop"
        );
        assert_eq!(server.terminate(STOP_WITHIN).await, Some(0));
        stop.store(true, Ordering::Relaxed);
        for l in load {
            l.await.unwrap();
        }
        let topups = topups.lock().unwrap().clone();
        let auths = auths.lock().unwrap().clone();

        let server = ServeProcess::start_with(dir.path(), &db.url, &["--config", &cfg]).await;
        let sdk = t.sdk_on(&server.base, &creds);
        for order in &topups {
            let o = sdk
                .wait_order(order, Duration::from_secs(60))
                .await
                .unwrap();
            assert_eq!(o.status, "completed", "accepted top-up {order}: {o:?}");
        }
        let store = issuing_store::Store::connect(&db.url).await.unwrap();
        assert!(
            auths.iter().any(|(_, status)| status == "pending"),
            "approved authorizations: {auths:?}"
        );
        for (id, answered) in &auths {
            let (status,): (String,) =
                sqlx::query_as("SELECT status FROM card_transactions WHERE id = $1")
                    .bind(id)
                    .fetch_one(store.pool())
                    .await
                    .unwrap_or_else(|e| panic!("accepted authorization {id}: {e}"));
            assert_eq!(
                &status, answered,
                "authorization {id} is as it was answered"
            );
        }
        let (left,): (i64,) = sqlx::query_as(
            "SELECT COUNT(*) FROM orders WHERE status NOT IN ('completed', 'failed')",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        assert_eq!(left, 0, "every order is final");
        store.close().await;
        assert_eq!(server.terminate(STOP_WITHIN).await, Some(0));
        let (code, out) = verify_ledger(dir.path(), &db.url).await;
        assert_eq!((code, out.trim()), (0, "ledger ok"));
    }
);
