//! A server killed with SIGKILL while an issue order is in flight completes that order
//! exactly once after restart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::cards::kyc;
use common::process::ServeProcess;
use common::{Creds, TestDb, TestServer};
use issuing_client::{
    CardRef, CardholdersCreate, CardsCreate, CardsFreeze, Client, CreateCardResponse, WhSubscribe,
};
use serde_json::{json, Value};
use std::time::Duration;

/// An approved sandbox cardholder `ada` and her virtual_usd card order.
async fn issue_for_ada(sdk: &Client, key: &str, initial_topup: Option<&str>) -> CreateCardResponse {
    sdk.cardholders_create(&CardholdersCreate {
        external_user_id: "ada".into(),
        subprovider_code: "sandbox".into(),
        kyc_data: Some(serde_json::from_value(kyc()).unwrap()),
        ..CardholdersCreate::default()
    })
    .await
    .unwrap();
    sdk.cards_create(
        &CardsCreate {
            external_user_id: "ada".into(),
            product_code: "virtual_usd".into(),
            initial_topup: initial_topup.map(Into::into),
            ..CardsCreate::default()
        },
        key,
    )
    .await
    .unwrap()
}

both_backends!(
    sigkill_mid_issue_completes_exactly_once,
    |t: TestServer| async move {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::create(t.db.backend).await.unwrap();
        // Slow provider calls leave a wide window to kill the server mid-call.
        let cfg = dir.path().join("issuing.toml");
        std::fs::write(&cfg, "[sandbox]\nlatency_ms = 1500\n").unwrap();
        let cfg = cfg.to_str().unwrap().to_owned();
        let server = ServeProcess::start_with(dir.path(), &db.url, &["--config", &cfg]).await;
        let creds = Creds {
            project_id: server.banner_value("project_id").unwrap(),
            api_key: server.banner_value("api_key").unwrap(),
            api_secret: server.banner_value("api_secret").unwrap(),
            deposit_address: String::new(),
        };
        let v = issue_for_ada(&t.sdk_on(&server.base, &creds), "crash-1", None).await;
        let order_id = v.order.order_id;
        let card_id = v.card_id;

        // Kill as soon as a worker holds the order (it is inside the provider call).
        let store = issuing_store::Store::connect(&db.url).await.unwrap();
        let mut claimed = false;
        for _ in 0..200 {
            let row: (Option<String>,) =
                sqlx::query_as("SELECT locked_by FROM orders WHERE id = $1")
                    .bind(&order_id)
                    .fetch_one(store.pool())
                    .await
                    .unwrap();
            if row.0.is_some() {
                claimed = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(claimed, "the worker never claimed the order");
        server.kill().await;
        let (status,): (String,) = sqlx::query_as("SELECT status FROM orders WHERE id = $1")
            .bind(&order_id)
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_ne!(status, "completed", "killed too late to prove anything");

        let server = ServeProcess::start_with(dir.path(), &db.url, &["--config", &cfg]).await;
        let sdk = t.sdk_on(&server.base, &creds);
        let order = sdk
            .wait_order(&order_id, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(order.status, "completed", "{order:?}");
        let card = sdk.cards_get(&CardRef::new(&card_id, "ada")).await.unwrap();
        assert_eq!(card.status, "active");
        let bal = sdk.project_balance().await.unwrap();
        assert_eq!(
            bal.available.as_str(),
            "998.00",
            "the fee was charged exactly once"
        );
        server.kill().await;

        let mut conn = store.conn().await.unwrap();
        let created = issuing_store::sandbox::count_ops(&mut conn, &order_id, "create_card")
            .await
            .unwrap();
        assert_eq!(created, 1, "the provider issued exactly one card");
        let (cards,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM cards")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(cards, 1);
        assert!(issuing_store::ledger::verify(&mut conn)
            .await
            .unwrap()
            .is_empty());
        drop(conn);
        store.close().await;
    }
);

both_backends!(
    sigkill_with_pending_deliveries_delivers_every_one_after_restart,
    |t: TestServer| async move {
        use common::receiver::{Behaviour, Receiver};
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::create(t.db.backend).await.unwrap();
        let cfg = dir.path().join("issuing.toml");
        std::fs::write(&cfg, "webhook_retry_interval = 1\nwebhook_timeout = 1\n").unwrap();
        let cfg = cfg.to_str().unwrap().to_owned();
        let server = ServeProcess::start_with(dir.path(), &db.url, &["--config", &cfg]).await;
        let creds = Creds {
            project_id: server.banner_value("project_id").unwrap(),
            api_key: server.banner_value("api_key").unwrap(),
            api_secret: server.banner_value("api_secret").unwrap(),
            deposit_address: String::new(),
        };
        let rx = Receiver::start(&creds.api_secret).await;
        // Failing and slow: when the server dies, deliveries wait for retries and some
        // attempts are in flight.
        rx.set(Behaviour::Status(500));
        rx.hold(Duration::from_millis(300));
        let sdk = t.sdk_on(&server.base, &creds);
        sdk.wh_subscribe(&WhSubscribe {
            url: rx.url.clone(),
            ..WhSubscribe::default()
        })
        .await
        .unwrap();
        let v = issue_for_ada(&sdk, "wh-crash", None).await;
        let card_id = v.card_id;
        // Waits (up to 10 s) for the issue, as before: the freezes need an active card.
        let _ = sdk
            .wait_order(&v.order.order_id, Duration::from_secs(10))
            .await;
        let request = CardsFreeze {
            external_user_id: Some("ada".into()),
            ..CardsFreeze::new(&card_id)
        };
        for i in 0..10 {
            if i % 2 == 0 {
                sdk.cards_freeze(&request).await.unwrap();
            } else {
                sdk.cards_unfreeze(&request).await.unwrap();
            }
        }
        let store = issuing_store::Store::connect(&db.url).await.unwrap();
        let count = |sql: &'static str| {
            let store = store.clone();
            async move {
                let (n,): (i64,) = sqlx::query_as(sql).fetch_one(store.pool()).await.unwrap();
                n
            }
        };
        for _ in 0..400 {
            if count("SELECT COUNT(*) FROM webhook_deliveries WHERE attempts >= 1").await == 11 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(count("SELECT COUNT(*) FROM webhook_deliveries").await, 11);
        server.kill().await;
        assert_eq!(
            count("SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'pending'").await,
            11,
            "killed too late to prove anything"
        );

        rx.set(Behaviour::Succeed);
        rx.hold(Duration::ZERO);
        let server = ServeProcess::start_with(dir.path(), &db.url, &["--config", &cfg]).await;
        for _ in 0..600 {
            if count("SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'succeeded'").await
                == 11
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            count("SELECT COUNT(*) FROM webhook_deliveries WHERE state = 'succeeded'").await,
            11
        );
        let ids: Vec<(String,)> = sqlx::query_as("SELECT id FROM webhook_deliveries")
            .fetch_all(store.pool())
            .await
            .unwrap();
        let delivered: std::collections::HashSet<String> = rx
            .delivered()
            .iter()
            .map(|e| e["delivery_id"].as_str().unwrap().to_owned())
            .collect();
        for (id,) in &ids {
            assert!(delivered.contains(id), "delivery {id} never acknowledged");
        }
        server.kill().await;
        store.close().await;
    }
);

both_backends!(
    sigkill_during_an_auth_load_leaves_the_books_and_holds_right,
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
        let base = server.base.clone();
        let sdk = t.sdk_on(&base, &creds);
        let v = issue_for_ada(&sdk, "c1", Some("500")).await;
        let card_id = v.card_id;
        // Waits (up to 10 s) for the issue, as before.
        let _ = sdk
            .wait_order(&v.order.order_id, Duration::from_secs(10))
            .await;
        // Auths, clears and reversals from 8 clients while the server is killed. Raw:
        // each client needs a short timeout and stops at the first call without an
        // answer (the server is gone).
        let mut load = Vec::new();
        for c in 0..8 {
            let (base, creds, card_id) = (base.clone(), creds.clone(), card_id.clone());
            load.push(tokio::spawn(async move {
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_secs(2))
                    .build()
                    .unwrap();
                let key = issuing_envelope::Key::from_secret(&creds.api_secret);
                // One sealed call; None once the server is gone.
                let post = |path: &'static str, mut body: Value| {
                    let (client, base, key, api_key) = (
                        client.clone(),
                        base.clone(),
                        key.clone(),
                        creds.api_key.clone(),
                    );
                    async move {
                        body["request_timestamp"] = json!(common::fresh_timestamp());
                        let sealed = issuing_envelope::seal(&key, body.to_string().as_bytes());
                        let resp = client
                            .post(format!("{base}/api/v2/{path}"))
                            .header("API-KEY", api_key)
                            .json(&json!({"encrypted": sealed}))
                            .send()
                            .await
                            .ok()?;
                        let outer: Value = serde_json::from_str(&resp.text().await.ok()?).ok()?;
                        let plain =
                            issuing_envelope::open(&key, outer["encrypted"].as_str()?).ok()?;
                        serde_json::from_slice::<Value>(&plain).ok()
                    }
                };
                let mut done = 0u32;
                for i in 0..1000 {
                    let Some(v) = post(
                        "simulate/cards/auth",
                        json!({"card_id": card_id, "transactionAmount": "0.5"}),
                    )
                    .await
                    else {
                        break;
                    };
                    done += 1;
                    let Some(tx) = v["transactionId"].as_str() else {
                        continue;
                    };
                    let path = if (i + c) % 3 == 0 {
                        "simulate/cards/reversal"
                    } else {
                        "simulate/cards/clear"
                    };
                    if post(path, json!({"transactionId": tx})).await.is_none() {
                        break;
                    }
                }
                done
            }));
        }
        tokio::time::sleep(Duration::from_millis(1500)).await;
        server.kill().await;
        let mut total = 0;
        for l in load {
            total += l.await.unwrap();
        }
        assert!(total > 10, "the load ran before the kill ({total} auths)");
        let store = issuing_store::Store::connect(&db.url).await.unwrap();
        let mut conn = store.conn().await.unwrap();
        let problems = issuing_store::ledger::verify(&mut conn).await.unwrap();
        assert!(problems.is_empty(), "after SIGKILL: {problems:?}");
        drop(conn);
        // The restarted server answers with the same books.
        let server = ServeProcess::start(dir.path(), &db.url).await;
        let b = t
            .sdk_on(&server.base, &creds)
            .cards_balance(&CardRef::new(&card_id, "ada"))
            .await
            .unwrap();
        let (held,): (i64,) =
            sqlx::query_as("SELECT CAST(COALESCE(SUM(held), 0) AS BIGINT) FROM card_transactions")
                .fetch_one(store.pool())
                .await
                .unwrap();
        assert_eq!(
            b.pending.as_str(),
            issuing_wire::Amount::from_micros(held).to_string()
        );
        server.kill().await;
        store.close().await;
    }
);
