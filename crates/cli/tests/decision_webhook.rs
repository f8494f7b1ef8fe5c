//! The real-time decision webhook (CONTRACT §11) through the HTTP API, with a real
//! endpoint on port 0: settings, approve, decline with a reason, timeouts with both
//! `on_timeout`, HTTP errors, unsealed answers, redirects, stand-in, late answers,
//! replays, parallel authorizations against a count limit with a slow endpoint,
//! `cards/close` while a decision is out, a SIGKILL while one is out (the real binary),
//! and isolation between projects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::process::ServeProcess;
use common::spend::{outcome, Answer, Decider};
use common::{Creds, TestDb, TestServer};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

impl TestServer {
    async fn decide_with(&self, url: &str, extra: Value) -> Value {
        let mut body = json!({"url": url});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        self.ok("wh/decision/set", body).await
    }

    /// Every `card_transaction` event of one transaction, oldest first.
    async fn tx_events(&self, transaction_id: &str) -> Vec<Value> {
        self.events(&self.creds.project_id)
            .await
            .into_iter()
            .filter(|e| {
                e.event_type == "card_transaction" && e.payload["transaction_id"] == transaction_id
            })
            .map(|e| e.payload)
            .collect()
    }

    async fn available(&self, card: &str) -> (String, String) {
        let b = self
            .ok(
                "cards/balance",
                json!({"card_id": card, "external_user_id": "ada"}),
            )
            .await;
        (
            b["available"].as_str().unwrap().to_owned(),
            b["pending"].as_str().unwrap().to_owned(),
        )
    }
}

fn tx_id(item: &Value) -> String {
    item["transaction_id"].as_str().unwrap().to_owned()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_owned(), b.to_owned())
}

both_backends!(endpoint_settings, |t: TestServer| async move {
    let v = t.ok("wh/decision/get", json!({})).await;
    assert_eq!(v, json!({"success": true, "configured": false}));
    t.expect_error(
        "wh/decision/delete",
        json!({}),
        404,
        "decision_webhook_not_found",
    )
    .await;
    for body in [
        json!({}),
        json!({"url": "ftp://example.com/x"}),
        json!({"url": "not a url"}),
        json!({"url": "http://127.0.0.1:9/x", "timeout_ms": 299}),
        json!({"url": "http://127.0.0.1:9/x", "timeout_ms": 4001}),
        json!({"url": "http://127.0.0.1:9/x", "timeout_ms": "1000"}),
        json!({"url": "http://127.0.0.1:9/x", "on_timeout": "maybe"}),
        json!({"url": "http://127.0.0.1:9/x", "mode": "offline"}),
    ] {
        t.expect_error("wh/decision/set", body, 400, "validation_error")
            .await;
    }
    let v = t.decide_with("http://127.0.0.1:9/x", json!({})).await;
    assert_eq!(
        (
            v["configured"].as_bool(),
            v["timeout_ms"].as_u64(),
            v["on_timeout"].as_str(),
            v["mode"].as_str()
        ),
        (Some(true), Some(2000), Some("decline"), Some("live"))
    );
    let v = t
        .decide_with(
            "http://127.0.0.1:9/y",
            json!({"timeout_ms": 300, "on_timeout": "approve", "mode": "stand_in"}),
        )
        .await;
    assert_eq!(v["url"], "http://127.0.0.1:9/y");
    let got = t.sdk().wh_decision_get().await.unwrap();
    assert_eq!(
        (
            got.timeout_ms,
            got.on_timeout.as_deref(),
            got.mode.as_deref()
        ),
        (Some(300), Some("approve"), Some("stand_in"))
    );
    // Another project neither sees nor removes it.
    let other = t.new_project("other").await;
    let (_, v) = t.call_as(&other, "wh/decision/get", json!({})).await;
    assert_eq!(v["configured"], false);
    let (s, v) = t.call_as(&other, "wh/decision/delete", json!({})).await;
    assert_eq!(
        (s, v["error_slug"].as_str()),
        (404, Some("decision_webhook_not_found"))
    );
    let v = t.ok("wh/decision/delete", json!({})).await;
    assert_eq!(v["configured"], false);
    assert_eq!(
        t.ok("wh/decision/get", json!({})).await["configured"],
        false
    );
});

both_backends!(approve_and_decline, |t: TestServer| async move {
    let card = t.card_holding("ada", 100).await;
    let decider = Decider::start(&t.creds.api_secret, Answer::Approve).await;
    t.decide_with(&decider.url, json!({})).await;
    t.set_limits(&card, json!([{"interval": "daily", "count": 10}]), None)
        .await;
    let a = t.authorize(&card, "12.50", "5411").await;
    assert_eq!(outcome(&a), ("pending".into(), None));
    assert_eq!(t.available(&card).await, pair("87.50", "12.50"));
    let requests = decider.requests();
    assert_eq!(requests.len(), 1);
    let (key, body) = &requests[0];
    assert_eq!(key.as_deref(), Some(t.creds.api_key.as_str()));
    assert_eq!(body["type"], "authorization_request");
    assert_eq!(body["transaction_id"], a["transaction_id"]);
    assert_eq!(body["card_id"], card);
    assert_eq!(body["external_user_id"], "ada");
    assert_eq!(body["amount"], "12.50");
    assert_eq!(body["currency"], "USD");
    assert_eq!(body["merchant"]["mcc"], "5411");
    assert_eq!(body["available"], "87.50", "with this authorization held");
    assert!(body["request_id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(body["deadline_at"].as_str().unwrap().ends_with('Z'));
    // One event, the first and only one of the transaction.
    let events = t.tx_events(&tx_id(&a)).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["tx_type"], "transaction_created_auth_pending");

    decider.set(Answer::Decline(Some("velocity check".into())));
    let d = t.authorize(&card, "10", "5411").await;
    assert_eq!(
        outcome(&d),
        ("declined".into(), Some("webhook_declined".into()))
    );
    assert_eq!(d["card_tx_data"]["decision_reason"], "velocity check");
    assert_eq!(
        t.available(&card).await,
        pair("87.50", "12.50"),
        "the hold was released"
    );
    let events = t.tx_events(&tx_id(&d)).await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["tx_type"], "transaction_created_auth_declined");
    assert_eq!(
        events[0]["card_tx_data"]["decision_reason"],
        "velocity check"
    );
    // A declined authorization never counts.
    let l = t.limits(&card).await;
    assert_eq!(l["limits"][0]["used_count"], 1);
    // The endpoint is asked only about authorizations that passed every other stage.
    let funds = t.authorize(&card, "1000", "5411").await;
    assert_eq!(outcome(&funds).1.as_deref(), Some("insufficient_funds"));
    assert_eq!(decider.requests().len(), 2);
    // A decline without a reason has none.
    decider.set(Answer::Decline(None));
    let d = t.authorize(&card, "1", "5411").await;
    assert!(d["card_tx_data"].get("decision_reason").is_none());
    // The approved one clears as usual.
    t.ok("simulate/cards/clear", json!({"transactionId": tx_id(&a)}))
        .await;
    t.verify_ledger().await;
});

both_backends!(timeouts_errors_and_stand_in, |t: TestServer| async move {
    let card = t.card_holding("ada", 100).await;
    let decider = Decider::start(&t.creds.api_secret, Answer::Slow(Duration::from_secs(3))).await;
    t.decide_with(&decider.url, json!({"timeout_ms": 300}))
        .await;
    let started = Instant::now();
    let d = t.authorize(&card, "5", "5411").await;
    let took = started.elapsed();
    assert_eq!(
        outcome(&d),
        ("declined".into(), Some("webhook_timeout".into()))
    );
    assert!(
        took < Duration::from_millis(1300),
        "answered within timeout_ms + 1 s: {took:?}"
    );
    assert_eq!(t.available(&card).await, pair("100.00", "0.00"));
    // The late answer changes nothing.
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let events = t.tx_events(&tx_id(&d)).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(outcome(&events[0]).1.as_deref(), Some("webhook_timeout"));
    assert_eq!(t.available(&card).await, pair("100.00", "0.00"));

    // on_timeout approve keeps the hold.
    t.decide_with(
        &decider.url,
        json!({"timeout_ms": 300, "on_timeout": "approve"}),
    )
    .await;
    let a = t.authorize(&card, "5", "5411").await;
    assert_eq!(outcome(&a), ("pending".into(), None));
    assert_eq!(t.available(&card).await, pair("95.00", "5.00"));

    // Any other answer is webhook_error, then on_timeout.
    for (answer, on_timeout, expect) in [
        (
            Answer::Status(500),
            "decline",
            ("declined", Some("webhook_error")),
        ),
        (Answer::Status(404), "approve", ("pending", None)),
        (
            Answer::Unsealed,
            "decline",
            ("declined", Some("webhook_error")),
        ),
        (
            Answer::Redirect,
            "decline",
            ("declined", Some("webhook_error")),
        ),
    ] {
        decider.set(answer.clone());
        t.decide_with(&decider.url, json!({"on_timeout": on_timeout}))
            .await;
        let calls = decider.requests().len();
        let item = t.authorize(&card, "1", "5411").await;
        let (status, reason) = outcome(&item);
        assert_eq!((status.as_str(), reason.as_deref()), expect, "{answer:?}");
        assert_eq!(
            decider.requests().len(),
            calls + 1,
            "one attempt, no retry, no redirect followed"
        );
    }

    // stand_in: no call, on_timeout at once (a decline reads webhook_timeout).
    let calls = decider.requests().len();
    t.decide_with(&decider.url, json!({"mode": "stand_in"}))
        .await;
    let d = t.authorize(&card, "1", "5411").await;
    assert_eq!(
        outcome(&d),
        ("declined".into(), Some("webhook_timeout".into()))
    );
    t.decide_with(
        &decider.url,
        json!({"mode": "stand_in", "on_timeout": "approve"}),
    )
    .await;
    assert_eq!(outcome(&t.authorize(&card, "1", "5411").await).0, "pending");
    assert_eq!(decider.requests().len(), calls);
    // Removed: approved without a call.
    t.ok("wh/decision/delete", json!({})).await;
    assert_eq!(outcome(&t.authorize(&card, "1", "5411").await).0, "pending");
    assert_eq!(decider.requests().len(), calls);
    t.verify_ledger().await;
});

both_backends!(replays_make_no_second_call, |t: TestServer| async move {
    let card = t.card_holding("ada", 100).await;
    t.set_limits(&card, json!([{"interval": "daily", "count": 10}]), None)
        .await;
    let decider = Decider::start(
        &t.creds.api_secret,
        Answer::Slow(Duration::from_millis(800)),
    )
    .await;
    t.decide_with(&decider.url, json!({})).await;
    let body = json!({"card_id": card, "transactionAmount": "3", "network_message_id": "net-1"});
    // The copy arrives while the original still awaits its decision: it waits for it.
    let first = {
        let (t2, body) = (&t, body.clone());
        async move { t2.ok("simulate/cards/auth", body).await }
    };
    let copy = {
        let (t2, body) = (&t, body.clone());
        async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            t2.ok("simulate/cards/auth", body).await
        }
    };
    let (first, copy) = tokio::join!(first, copy);
    assert_eq!(first["transactionId"], copy["transactionId"]);
    assert_eq!(
        outcome(&copy["transaction"]),
        ("pending".into(), None),
        "the copy answers the decision"
    );
    // Afterwards, too.
    let again = t.ok("simulate/cards/auth", body).await;
    assert_eq!(again["transactionId"], first["transactionId"]);
    assert_eq!(decider.requests().len(), 1);
    assert_eq!(t.limits(&card).await["limits"][0]["used_count"], 1);
    assert_eq!(t.available(&card).await, pair("97.00", "3.00"));
    t.verify_ledger().await;
});

both_backends!(
    nothing_settles_an_awaited_authorization,
    |t: TestServer| async move {
        let card = t.card_holding("ada", 100).await;
        let decider = Decider::start(
            &t.creds.api_secret,
            Answer::Slow(Duration::from_millis(2500)),
        )
        .await;
        t.decide_with(&decider.url, json!({"timeout_ms": 4000}))
            .await;
        let auth = {
            let t = &t;
            let card = card.clone();
            async move { t.authorize(&card, "10", "5411").await }
        };
        let meanwhile = async {
            // Wait until it is held tentatively.
            let start = Instant::now();
            let id = loop {
                let row: Option<(String,)> = sqlx::query_as(
                "SELECT id FROM card_transactions WHERE card_id = $1 AND decision_state = 'awaiting'",
            )
            .bind(&card)
            .fetch_optional(t.store.pool())
            .await
            .unwrap();
                if let Some((id,)) = row {
                    break id;
                }
                assert!(start.elapsed() < Duration::from_secs(10));
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            // Held and counted, but neither clearable nor reversible yet, and no event.
            assert_eq!(t.available(&card).await, pair("90.00", "10.00"));
            t.expect_error(
                "simulate/cards/clear",
                json!({"transactionId": id}),
                422,
                "invalid_transaction_state",
            )
            .await;
            t.expect_error(
                "simulate/cards/reversal",
                json!({"transactionId": id}),
                422,
                "invalid_transaction_state",
            )
            .await;
            assert!(t.tx_events(&id).await.is_empty());
            // Closing the card declines it (card_not_active); the answer then changes nothing.
            t.ok(
                "cards/close",
                json!({"card_id": card, "idempotency_key": "close"}),
            )
            .await;
            id
        };
        let (item, id) = tokio::join!(auth, meanwhile);
        assert_eq!(tx_id(&item), id);
        assert_eq!(
            outcome(&item),
            ("declined".into(), Some("card_not_active".into()))
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        let events = t.tx_events(&id).await;
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["tx_type"], "transaction_created_auth_declined");
        t.verify_ledger().await;
    }
);

both_backends!(
    parallel_authorizations_with_a_slow_endpoint,
    |t: TestServer| async move {
        let card = t.card_holding("ada", 1000).await;
        t.set_limits(&card, json!([{"interval": "daily", "count": 37}]), None)
            .await;
        let decider = Decider::start(
            &t.creds.api_secret,
            Answer::Slow(Duration::from_millis(300)),
        )
        .await;
        t.decide_with(&decider.url, json!({"timeout_ms": 4000}))
            .await;
        let t = std::sync::Arc::new(t);
        let mut calls = Vec::new();
        for _ in 0..100 {
            let (t, card) = (t.clone(), card.clone());
            calls.push(tokio::spawn(async move {
                t.authorize(&card, "1", "5411").await
            }));
        }
        let mut approved = 0;
        for c in calls {
            match outcome(&c.await.unwrap()) {
                (s, None) if s == "pending" => approved += 1,
                (_, Some(r)) => assert_eq!(r, "spending_limit_exceeded"),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(approved, 37);
        assert_eq!(
            decider.requests().len(),
            37,
            "only authorizations within the limit are asked"
        );
        assert_eq!(t.available(&card).await, pair("963.00", "37.00"));
        t.verify_ledger().await;
    }
);

both_backends!(
    sigkill_while_a_decision_is_out,
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
        let sdk = t.sdk_on(&server.base, &creds);
        sdk.cardholders_create(&issuing_client::CardholdersCreate {
            external_user_id: "ada".into(),
            subprovider_code: "sandbox".into(),
            kyc_data: Some(serde_json::from_value(common::cards::kyc()).unwrap()),
            ..Default::default()
        })
        .await
        .unwrap();
        let created = sdk
            .cards_create(
                &issuing_client::CardsCreate {
                    external_user_id: "ada".into(),
                    product_code: "virtual_usd".into(),
                    initial_topup: Some("50".into()),
                    ..Default::default()
                },
                "card-1",
            )
            .await
            .unwrap();
        let order = sdk
            .wait_order(&created.order.order_id, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(order.status, "completed", "{order:?}");
        let card = created.card_id;
        // An endpoint that never answers in time: the decision is out when the kill comes.
        let decider =
            Decider::start(&creds.api_secret, Answer::Slow(Duration::from_secs(60))).await;
        let (s, v) = t
            .call_on(
                &server.base,
                &creds,
                "wh/decision/set",
                json!({"url": decider.url, "timeout_ms": 4000}),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        let (base, c2, card2) = (server.base.clone(), creds.clone(), card.clone());
        let t_ref = &t;
        let pending = async move {
            t_ref
                .call_on(
                    &base,
                    &c2,
                    "simulate/cards/auth",
                    json!({"card_id": card2, "transactionAmount": "20"}),
                )
                .await
        };
        let store = issuing_store::Store::connect(&db.url).await.unwrap();
        let watch = async {
            let start = Instant::now();
            loop {
                let row: Option<(String,)> = sqlx::query_as(
                    "SELECT id FROM card_transactions WHERE decision_state = 'awaiting'",
                )
                .fetch_optional(store.pool())
                .await
                .unwrap();
                if let Some((id,)) = row {
                    return id;
                }
                assert!(start.elapsed() < Duration::from_secs(20), "never awaited");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let id = tokio::select! {
            id = watch => id,
            _ = pending => panic!("the authorization was answered before its decision"),
        };
        server.kill().await;
        let mut conn = store.conn().await.unwrap();
        let held: (i64, String) =
            sqlx::query_as("SELECT held, decision_state FROM card_transactions WHERE id = $1")
                .bind(&id)
                .fetch_one(&mut *conn)
                .await
                .unwrap();
        assert_eq!(
            held,
            (20_000_000, "awaiting".to_owned()),
            "killed while the hold is tentative"
        );
        assert!(issuing_store::ledger::verify(&mut conn)
            .await
            .unwrap()
            .is_empty());
        drop(conn);

        // After a restart the recovery pass decides it by on_timeout (decline) once its
        // deadline and margin have passed.
        let server = ServeProcess::start(dir.path(), &db.url).await;
        let start = Instant::now();
        loop {
            let (status, reason): (String, Option<String>) = sqlx::query_as(
                "SELECT status, failure_reason FROM card_transactions WHERE id = $1",
            )
            .bind(&id)
            .fetch_one(store.pool())
            .await
            .unwrap();
            if status != "pending" {
                assert_eq!(
                    (status.as_str(), reason.as_deref()),
                    ("declined", Some("webhook_timeout"))
                );
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(30), "never resolved");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let b = sdk_balance(&t, &server, &creds, &card).await;
        assert_eq!(b, pair("50.00", "0.00"));
        server.kill().await;
        let mut conn = store.conn().await.unwrap();
        assert!(issuing_store::ledger::verify(&mut conn)
            .await
            .unwrap()
            .is_empty());
        drop(conn);
        store.close().await;
    }
);

async fn sdk_balance(
    t: &TestServer,
    server: &ServeProcess,
    creds: &Creds,
    card: &str,
) -> (String, String) {
    let b = t
        .sdk_on(&server.base, creds)
        .cards_balance(&issuing_client::CardRef::new(card, "ada"))
        .await
        .unwrap();
    (
        b.available.as_str().to_owned(),
        b.pending.as_str().to_owned(),
    )
}
