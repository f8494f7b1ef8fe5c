//! Webhooks over HTTP with a real receiver on port 0: subscriptions (CONTRACT §6), both
//! payload forms, fan-out without backfill, retries of every failure kind with one
//! `delivery_id`, max age, unsubscribe, 410 Gone, redelivery, the delivery log, project
//! isolation and the production SSRF guard.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::receiver::{free_port, Behaviour, Receiver};
use common::{api_error, TestServer};
use issuing_client::{
    CardsFreeze, CardsTopup, Delivery, ListQuery, SimulateAuth, WhDeliveries, WhRedeliver,
    WhSubscribe,
};
use issuing_server::{Mode, ServerConfig};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// Retries every second, attempts time out after one.
fn fast() -> ServerConfig {
    ServerConfig {
        webhook_retry_interval: Duration::from_secs(1),
        webhook_timeout: Duration::from_secs(1),
        ..Default::default()
    }
}

impl TestServer {
    async fn subscribe(&self, url: &str) -> String {
        let subscription = self
            .sdk()
            .wh_subscribe(&WhSubscribe {
                url: url.into(),
                title: Some("test".into()),
                ..WhSubscribe::default()
            })
            .await
            .unwrap();
        subscription.id
    }

    async fn deliveries(&self, filter: WhDeliveries) -> Vec<Delivery> {
        self.sdk().wh_deliveries(&filter).await.unwrap().items
    }

    /// The delivery log's succeeded deliveries (up to 100).
    async fn succeeded(&self) -> Vec<Delivery> {
        self.deliveries(WhDeliveries {
            page: ListQuery {
                limit: Some(100),
                ..ListQuery::default()
            },
            ..states(&["succeeded"])
        })
        .await
    }

    /// The succeeded deliveries once there are at least `n` (or after `WAIT`): the
    /// receiver sees an event before its answer is recorded.
    async fn wait_succeeded(&self, n: usize) -> Vec<Delivery> {
        let start = std::time::Instant::now();
        loop {
            let log = self.succeeded().await;
            if log.len() >= n || start.elapsed() > WAIT {
                return log;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the only delivery matching `filter` satisfies `pred`. Raw: the tests
    /// check that fields which do not apply are left out (not null), which the typed
    /// `Delivery` cannot tell apart; the filters use the singular names.
    async fn wait_delivery<F: Fn(&Value) -> bool>(&self, filter: Value, pred: F) -> Value {
        let start = std::time::Instant::now();
        loop {
            let v = self.ok("wh/deliveries", filter.clone()).await;
            let items = v["items"].as_array().unwrap().clone();
            if let [d] = items.as_slice() {
                if pred(d) {
                    return d.clone();
                }
            }
            assert!(
                start.elapsed() < WAIT,
                "delivery never reached the state: {items:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// An active card whose issue is done; returns its id.
    async fn funded_card(&self, user: &str) -> String {
        self.deposit(&self.creds.project_id, 100_000_000).await;
        self.active_card(user, "virtual_usd").await
    }

    async fn freeze(&self, user: &str, card: &str) {
        self.sdk().cards_freeze(&of_user(user, card)).await.unwrap();
    }

    async fn unfreeze(&self, user: &str, card: &str) {
        self.sdk()
            .cards_unfreeze(&of_user(user, card))
            .await
            .unwrap();
    }
}

/// A freeze or unfreeze of `user`'s card.
fn of_user(user: &str, card: &str) -> CardsFreeze {
    CardsFreeze {
        card_id: card.into(),
        external_user_id: Some(user.into()),
    }
}

fn states(states: &[&str]) -> WhDeliveries {
    WhDeliveries {
        states: states.iter().map(|s| s.to_string()).collect(),
        ..WhDeliveries::default()
    }
}

fn subscribe_to(url: &str) -> WhSubscribe {
    WhSubscribe {
        url: url.into(),
        ..WhSubscribe::default()
    }
}

fn since(since: &str, subscription_id: Option<&str>) -> WhRedeliver {
    WhRedeliver {
        since: Some(since.into()),
        subscription_id: subscription_id.map(Into::into),
        ..WhRedeliver::default()
    }
}

fn redeliver(delivery_id: &str) -> WhRedeliver {
    WhRedeliver {
        delivery_id: Some(delivery_id.into()),
        ..WhRedeliver::default()
    }
}

fn of_type<'a>(events: &'a [Value], t: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["event_type"] == t || e["type"] == t)
        .collect()
}

both_backends!(
    subscriptions_follow_the_contract,
    |t: TestServer| async move {
        let sdk = t.sdk();
        for bad in [
            subscribe_to("example.com/hook"),
            subscribe_to("ftp://example.com/hook"),
            subscribe_to(&format!("https://example.com/{}", "a".repeat(2048))),
            WhSubscribe {
                event_types: vec!["card.nope".into()],
                ..subscribe_to("https://example.com/hook")
            },
        ] {
            api_error(sdk.wh_subscribe(&bad).await, 400, "validation_error");
        }
        // Raw: no url, and event_types that is not a list.
        for bad in [
            json!({}),
            json!({"url": "https://example.com/hook", "event_types": "card.freeze"}),
        ] {
            t.expect_error("wh/subscribe", bad, 400, "validation_error")
                .await;
        }
        // Raw: checks that an empty event_types is written as [] (the typed answer
        // would read a missing one as empty too).
        let v = t
            .ok(
                "wh/subscribe",
                json!({"url": "https://example.com/hook", "title": "Main"}),
            )
            .await;
        assert_eq!(v["title"], "Main");
        assert_eq!(v["url"], "https://example.com/hook");
        assert_eq!(v["active"], true);
        assert!(v["created_at"].as_str().unwrap().ends_with('Z'));
        assert_eq!(v["event_types"], json!([]));
        let first = v["id"].as_str().unwrap().to_owned();
        let mut ids = vec![first.clone()];
        for i in 1..10 {
            ids.push(t.subscribe(&format!("https://example.com/h{i}")).await);
        }
        api_error(
            sdk.wh_subscribe(&subscribe_to("https://example.com/11"))
                .await,
            422,
            "subscription_limit_reached",
        );

        let v = sdk.wh_unsubscribe(&first).await.unwrap();
        assert_eq!((v.id.as_str(), v.active), (first.as_str(), false));
        let again = sdk.wh_unsubscribe(&first).await.unwrap();
        assert!(!again.active);
        api_error(
            sdk.wh_unsubscribe("nope").await,
            404,
            "subscription_not_found",
        );
        // Raw: no id.
        t.expect_error("wh/unsubscribe", json!({}), 400, "validation_error")
            .await;
        // The limit counts active subscriptions only.
        ids.push(t.subscribe("https://example.com/after").await);

        let list = sdk
            .wh_subscriptions(&ListQuery {
                limit: Some(100),
                ..ListQuery::default()
            })
            .await
            .unwrap();
        assert_eq!(list.total, 11);
        let listed: Vec<&str> = list.items.iter().map(|s| s.id.as_str()).collect();
        let mut newest_first = ids.clone();
        newest_first.reverse();
        assert_eq!(listed, newest_first);
        let page = sdk
            .wh_subscriptions(&ListQuery {
                limit: Some(2),
                skip: Some(1),
                ..ListQuery::default()
            })
            .await
            .unwrap();
        assert_eq!((page.skip, page.limit), (1, 2));
        assert_eq!(page.items[0].id, ids[ids.len() - 2]);
        let inactive = &list.items[10];
        assert_eq!(
            (inactive.id.as_str(), inactive.active),
            (first.as_str(), false)
        );

        // Another project sees none of them and cannot touch them.
        let other = t.sdk_as(&t.new_project("other").await);
        let v = other.wh_subscriptions(&ListQuery::default()).await.unwrap();
        assert_eq!(v.total, 0, "{v:?}");
        api_error(
            other.wh_unsubscribe(&ids[1]).await,
            404,
            "subscription_not_found",
        );
        other
            .wh_subscribe(&subscribe_to("https://example.com/o"))
            .await
            .expect("the other project's limit is its own");
    }
);

both_backends!(
    every_card_event_arrives_in_its_form,
    |t: TestServer| async move {
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.subscribe(&rx.url).await;
        let card = t.funded_card("ada").await;
        let sdk = t.sdk();
        let v = sdk
            .cards_topup(
                &CardsTopup {
                    card_id: card.clone(),
                    amount: "25".into(),
                    ..CardsTopup::default()
                },
                "wh-topup",
            )
            .await
            .unwrap();
        sdk.wait_order(&v.order_id, WAIT).await.unwrap();
        t.freeze("ada", &card).await;
        t.unfreeze("ada", &card).await;
        rx.wait_until("four card events", WAIT, |r| r.len() >= 4)
            .await;

        let got = rx.received();
        for r in &got {
            assert_eq!(r.api_key.as_deref(), Some(t.creds.api_key.as_str()));
        }
        let events = rx.delivered();
        let created = of_type(&events, "card.created");
        assert_eq!(created.len(), 1, "{events:?}");
        let e = created[0];
        assert_eq!(e["project_id"], json!(t.creds.project_id));
        assert!(e["delivery_id"].as_str().is_some_and(|d| !d.is_empty()));
        assert_eq!(e["data"]["card_id"], json!(card));
        assert_eq!(e["data"]["product_code"], "virtual_usd");
        assert!(e["data"]["order_id"].is_string() && e["data"]["status"].is_string());
        let topup = of_type(&events, "card.topup")[0];
        assert_eq!(topup["data"]["amount"], "25.00");
        assert_eq!(topup["data"]["card_id"], json!(card));
        let freeze = of_type(&events, "card.freeze")[0];
        assert_eq!(freeze["data"]["status"], "frozen");
        assert!(freeze["data"]["order_id"].is_string());
        let unfreeze = of_type(&events, "card.unfreeze")[0];
        assert_eq!(unfreeze["data"]["status"], "active");
        for e in &events {
            assert!(
                e.get("type").is_none(),
                "envelope events have no top-level type: {e}"
            );
        }

        // The typed form, for each typed event type (written to the outbox as the card
        // network flows do).
        for (event_type, body) in [
            (
                "card_transaction",
                json!({"type": "card_transaction", "tx_type": "transaction_created_auth_pending", "transaction_id": "tx1", "card_id": card, "tx_at": "2026-01-01T00:00:00Z", "card_tx_data": {"status": "pending", "type": "auth"}}),
            ),
            (
                "card_otp",
                json!({"type": "card_otp", "card_id": card, "code": "123456", "sent_at": "2026-01-01T00:00:00Z"}),
            ),
            (
                "card_3ds",
                json!({"type": "card_3ds", "card_id": card, "securement_id": "s1", "method": "OOB", "confirm": "pending", "status": "challenge_sent", "currency": "USD", "amount": "5.00", "occurred_at": "2026-01-01T00:00:00Z", "merchant": {"name": "M", "country": "US"}}),
            ),
        ] {
            let mut tx = t.store.begin().await.unwrap();
            issuing_store::events::insert(
                &mut tx,
                &issuing_store::events::NewEvent {
                    project_id: &t.creds.project_id,
                    event_type,
                    card_id: Some(&card),
                    order_id: None,
                    payload: &body,
                    now: common::now_micros(),
                },
            )
            .await
            .unwrap();
            tx.commit().await.unwrap();
        }
        rx.wait_until("the typed events", WAIT, |r| r.len() >= 7)
            .await;
        let events = rx.delivered();
        for t_name in ["card_transaction", "card_otp", "card_3ds"] {
            let typed = of_type(&events, t_name);
            assert_eq!(typed.len(), 1, "{t_name}: {events:?}");
            let e = typed[0];
            assert_eq!(e["type"], t_name);
            assert!(e["delivery_id"].as_str().is_some_and(|d| !d.is_empty()));
            assert!(
                e.get("event_type").is_none() && e.get("data").is_none(),
                "{e}"
            );
            assert_eq!(e["card_id"], json!(card));
        }
        assert_eq!(of_type(&events, "card_otp")[0]["code"], "123456");
        assert_eq!(of_type(&events, "card_3ds")[0]["securement_id"], "s1");

        // The receiver sees an event before its answer is recorded: wait for the log.
        let log = t.wait_succeeded(7).await;
        assert_eq!(log.len(), 7);
        for d in &log {
            assert_eq!(d.attempts, 1);
            assert_eq!(d.last_status, Some(200));
        }
    }
);

both_backends_with!(
    many_deliveries_at_once_are_each_recorded_once,
    fast(),
    |t: TestServer| async move {
        // Outcomes of attempts that succeed together are recorded in batches (one
        // statement per claim): every one must end `succeeded` after one attempt, and
        // none be sent again.
        const N: usize = 60;
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.subscribe(&rx.url).await;
        let card = t.funded_card("ada").await;
        let mut tasks = Vec::new();
        for _ in 0..N {
            let (sdk, card) = (t.sdk(), card.clone());
            tasks.push(tokio::spawn(async move {
                sdk.simulate_cards_auth(&SimulateAuth {
                    card_id: card,
                    transaction_amount: "0.01".into(),
                    ..SimulateAuth::default()
                })
                .await
                .unwrap()
            }));
        }
        for task in tasks {
            task.await.unwrap();
        }
        let card_txs = |events: &[Value]| of_type(events, "card_transaction").len();
        rx.wait_until("every authorization's event", WAIT, |r| r.len() > N)
            .await;
        let log = t.wait_succeeded(N + 1).await;
        assert!(log.len() > N, "{} succeeded", log.len());
        // Nothing is sent twice, even once the leases (1 s + 5 s) would have run out.
        tokio::time::sleep(Duration::from_secs(7)).await;
        assert_eq!(card_txs(&rx.delivered()), N);
        let log = t.succeeded().await;
        for d in &log {
            assert_eq!((d.attempts, d.last_status), (1, Some(200)), "{d:?}");
            assert!(d.last_error.is_none(), "{d:?}");
        }
        assert!(t.deliveries(states(&["pending"])).await.is_empty());
        assert_eq!(rx.received().len(), log.len());
    }
);

both_backends!(
    no_backfill_and_one_delivery_per_subscription,
    |t: TestServer| async move {
        let card = t.funded_card("ada").await;
        t.freeze("ada", &card).await; // before anyone subscribed
        let a = Receiver::start(&t.creds.api_secret).await;
        let b = Receiver::start(&t.creds.api_secret).await;
        let sub_a = t.subscribe(&a.url).await;
        let sub_b = t.subscribe(&b.url).await;
        t.unfreeze("ada", &card).await;
        a.wait_until("the unfreeze", WAIT, |r| !r.is_empty()).await;
        b.wait_until("the unfreeze", WAIT, |r| !r.is_empty()).await;
        // Give a backfill every chance to show up.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        for rx in [&a, &b] {
            let got = rx.delivered();
            assert_eq!(got.len(), 1, "only the event after subscribing: {got:?}");
            assert_eq!(got[0]["event_type"], "card.unfreeze");
        }
        let (da, db) = (
            a.delivered()[0]["delivery_id"].clone(),
            b.delivered()[0]["delivery_id"].clone(),
        );
        assert_ne!(da, db, "each subscription has its own delivery_id");
        let of_sub = |id: &str| WhDeliveries {
            subscription_ids: vec![id.to_owned()],
            ..WhDeliveries::default()
        };
        let log_a = t.deliveries(of_sub(&sub_a)).await;
        let log_b = t.deliveries(of_sub(&sub_b)).await;
        assert_eq!((log_a.len(), log_b.len()), (1, 1));
        assert_eq!(log_a[0].delivery_id, da.as_str().unwrap());
        assert_eq!(log_b[0].delivery_id, db.as_str().unwrap());
        assert_eq!(
            log_a[0].event_id, log_b[0].event_id,
            "one event, two deliveries"
        );
    }
);

both_backends_with!(
    every_failure_kind_is_retried_with_one_delivery_id,
    fast(),
    |t: TestServer| async move {
        let rx = Receiver::start(&t.creds.api_secret).await;
        rx.script(&[
            Behaviour::Status(500),
            Behaviour::WrongBody,
            Behaviour::Hang(Duration::from_secs(3)),
            Behaviour::Status(503),
        ]);
        let card = t.funded_card("ada").await;
        t.subscribe(&rx.url).await;
        t.freeze("ada", &card).await;
        rx.wait_until("a successful attempt", WAIT, |r| {
            r.iter().any(|x| x.answered == Behaviour::Succeed)
        })
        .await;
        let got = rx.received();
        assert_eq!(got.len(), 5, "four failures, then success: {got:?}");
        let ids: Vec<&Value> = got.iter().map(|r| &r.event["delivery_id"]).collect();
        assert!(ids.iter().all(|d| *d == ids[0]), "one delivery_id: {ids:?}");
        let d = t
            .wait_delivery(json!({"event_type": "card.freeze"}), |d| {
                d["state"] == "succeeded"
            })
            .await;
        assert_eq!(d["attempts"], 5);
        assert_eq!(d["last_status"], 200);
        assert_eq!(d["delivery_id"], *ids[0]);
        assert!(
            d.get("next_attempt_at").is_none() && d.get("last_error").is_none(),
            "{d}"
        );
        // Success stops the retries.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(rx.received().len(), 5);
    }
);

both_backends_with!(
    a_refused_connection_is_retried,
    fast(),
    |t: TestServer| async move {
        let port = free_port();
        let url = format!("http://127.0.0.1:{port}/hook");
        let card = t.funded_card("ada").await;
        t.subscribe(&url).await;
        t.freeze("ada", &card).await;
        let failed = t
            .wait_delivery(json!({}), |d| {
                d["attempts"].as_i64() >= Some(1) && d["last_error"].is_string()
            })
            .await;
        assert_eq!(failed["state"], "pending");
        assert!(
            failed["last_error"]
                .as_str()
                .unwrap()
                .contains("connection"),
            "{failed}"
        );
        assert!(failed.get("last_status").is_none());
        assert!(failed["next_attempt_at"].is_string());
        let rx = Receiver::start_on(&t.creds.api_secret, port).await;
        rx.wait_until("the retried delivery", WAIT, |r| !r.is_empty())
            .await;
        assert_eq!(rx.received()[0].event["delivery_id"], failed["delivery_id"]);
        t.wait_delivery(json!({}), |d| d["state"] == "succeeded")
            .await;
    }
);

both_backends_with!(
    max_age_ends_a_delivery_and_redeliver_queues_it_again,
    ServerConfig {
        webhook_max_age: Duration::from_secs(2),
        ..fast()
    },
    |t: TestServer| async move {
        let rx = Receiver::start(&t.creds.api_secret).await;
        rx.set(Behaviour::Status(500));
        let card = t.funded_card("ada").await;
        let sub = t.subscribe(&rx.url).await;
        t.freeze("ada", &card).await;
        let d = t.wait_delivery(json!({}), |d| d["state"] == "failed").await;
        let attempts = d["attempts"].as_i64().unwrap();
        assert!((2..=4).contains(&attempts), "retried until max age: {d}");
        assert_eq!(d["last_status"], 500);
        assert!(d["completed_at"].is_string() && d.get("next_attempt_at").is_none());
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(
            rx.received().len() as i64,
            attempts,
            "a failed delivery is not retried"
        );

        // Queued again by id: the same delivery_id arrives.
        rx.set(Behaviour::Succeed);
        let sdk = t.sdk();
        let delivery_id = d["delivery_id"].as_str().unwrap().to_owned();
        let v = sdk.wh_redeliver(&redeliver(&delivery_id)).await.unwrap();
        assert_eq!(v.queued, 1);
        assert_eq!(v.delivery.unwrap().state, "pending");
        rx.wait_until("the redelivery", WAIT, |r| {
            r.iter().any(|x| x.answered == Behaviour::Succeed)
        })
        .await;
        assert_eq!(rx.delivered()[0]["delivery_id"], d["delivery_id"]);
        t.wait_delivery(json!({}), |d| d["state"] == "succeeded")
            .await;

        // Every failed delivery since a time.
        rx.set(Behaviour::Status(500));
        t.unfreeze("ada", &card).await;
        t.freeze("ada", &card).await;
        t.wait_delivery(json!({"event_type": "card.unfreeze"}), |d| {
            d["state"] == "failed"
        })
        .await;
        t.wait_delivery(
            json!({"event_type": "card.freeze", "state": "failed"}),
            |_| true,
        )
        .await;
        rx.set(Behaviour::Succeed);
        let v = sdk
            .wh_redeliver(&since("2000-01-01", Some(&sub)))
            .await
            .unwrap();
        assert_eq!(v.queued, 2, "{v:?}");
        let start = std::time::Instant::now();
        while t.deliveries(states(&["succeeded"])).await.len() < 3 {
            assert!(start.elapsed() < WAIT);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let v = sdk.wh_redeliver(&since("2000-01-01", None)).await.unwrap();
        assert_eq!(v.queued, 0, "nothing failed is left");

        api_error(
            sdk.wh_redeliver(&WhRedeliver::default()).await,
            400,
            "validation_error",
        );
        api_error(
            sdk.wh_redeliver(&WhRedeliver {
                delivery_id: Some("x".into()),
                ..since("2000-01-01", None)
            })
            .await,
            400,
            "validation_error",
        );
        api_error(
            sdk.wh_redeliver(&redeliver("nope")).await,
            404,
            "delivery_not_found",
        );
        api_error(
            sdk.wh_deliveries(&states(&["lost"])).await,
            400,
            "validation_error",
        );
        sdk.wh_unsubscribe(&sub).await.unwrap();
        api_error(
            sdk.wh_redeliver(&redeliver(&delivery_id)).await,
            422,
            "subscription_inactive",
        );
    }
);

both_backends_with!(
    unsubscribe_stops_deliveries,
    fast(),
    |t: TestServer| async move {
        let rx = Receiver::start(&t.creds.api_secret).await;
        rx.set(Behaviour::Status(500));
        let card = t.funded_card("ada").await;
        let sub = t.subscribe(&rx.url).await;
        t.freeze("ada", &card).await;
        rx.wait_until("a first attempt", WAIT, |r| !r.is_empty())
            .await;
        t.sdk().wh_unsubscribe(&sub).await.unwrap();
        let d = t.wait_delivery(json!({}), |d| d["state"] == "failed").await;
        assert!(d.get("next_attempt_at").is_none(), "{d}");
        let seen = rx.received().len();
        t.unfreeze("ada", &card).await;
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(rx.received().len(), seen, "no attempt after unsubscribing");
        assert_eq!(
            t.deliveries(WhDeliveries::default()).await.len(),
            1,
            "no delivery for a later event"
        );
    }
);

both_backends!(
    a_receiver_answering_410_is_unsubscribed,
    |t: TestServer| async move {
        let rx = Receiver::start(&t.creds.api_secret).await;
        rx.set(Behaviour::Status(410));
        let card = t.funded_card("ada").await;
        let sub = t.subscribe(&rx.url).await;
        t.freeze("ada", &card).await;
        let d = t.wait_delivery(json!({}), |d| d["state"] == "failed").await;
        assert_eq!(d["last_status"], 410);
        let list = t
            .sdk()
            .wh_subscriptions(&ListQuery::default())
            .await
            .unwrap();
        let s = &list.items[0];
        assert_eq!((s.id.as_str(), s.active), (sub.as_str(), false));
        assert!(s.deactivated_reason.as_ref().unwrap().contains("410"));
        assert_eq!(rx.received().len(), 1);
    }
);

both_backends!(
    projects_see_only_their_own_webhooks,
    |t: TestServer| async move {
        let other = t.new_project("other").await;
        let their_sdk = t.sdk_as(&other);
        let rx_other = Receiver::start(&other.api_secret).await;
        their_sdk
            .wh_subscribe(&subscribe_to(&rx_other.url))
            .await
            .unwrap();
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.subscribe(&rx.url).await;
        let card = t.funded_card("ada").await;
        t.freeze("ada", &card).await;
        rx.wait_until("own events", WAIT, |r| r.len() >= 2).await;
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert!(
            rx_other.received().is_empty(),
            "another project's events never arrive"
        );
        let mine = t.deliveries(WhDeliveries::default()).await;
        assert_eq!(mine.len(), 2);
        let theirs = their_sdk
            .wh_deliveries(&WhDeliveries::default())
            .await
            .unwrap();
        assert_eq!(theirs.total, 0, "{theirs:?}");
        api_error(
            their_sdk
                .wh_redeliver(&redeliver(&mine[0].delivery_id))
                .await,
            404,
            "delivery_not_found",
        );
        let v = their_sdk
            .wh_redeliver(&since("2000-01-01", None))
            .await
            .unwrap();
        assert_eq!(v.queued, 0);
    }
);

both_backends_with!(
    production_refuses_private_addresses_when_subscribing_and_connecting,
    ServerConfig {
        mode: Mode::Production,
        ..fast()
    },
    |t: TestServer| async move {
        for url in [
            "http://127.0.0.1:9/hook",
            "http://10.1.2.3/hook",
            "http://192.168.0.10/hook",
            "http://169.254.169.254/latest",
            "http://[::1]/hook",
            "http://[fd00::1]/hook",
            "http://0.0.0.0/hook",
            "http://localhost:9/hook",
        ] {
            api_error(
                t.sdk().wh_subscribe(&subscribe_to(url)).await,
                400,
                "validation_error",
            );
        }
        // A subscription whose name pointed elsewhere when it was made (DNS rebinding),
        // and a literal address: both refused at connect time.
        let rx = Receiver::start(&t.creds.api_secret).await;
        for url in [rx.url.clone(), format!("http://localhost:{}/hook", rx.port)] {
            let now = common::now_micros();
            let mut tx = t.store.begin().await.unwrap();
            issuing_store::subscriptions::insert(
                &mut tx,
                &issuing_store::subscriptions::SubscriptionRecord {
                    id: issuing_domain::ids::new_id(),
                    project_id: t.creds.project_id.clone(),
                    url,
                    title: String::new(),
                    event_types: vec![],
                    active: true,
                    created_at: now,
                    updated_at: now,
                    deactivated_at: None,
                    deactivated_reason: None,
                },
            )
            .await
            .unwrap();
            tx.commit().await.unwrap();
        }
        let mut tx = t.store.begin().await.unwrap();
        issuing_store::events::insert(
            &mut tx,
            &issuing_store::events::NewEvent {
                project_id: &t.creds.project_id,
                event_type: "card.freeze",
                card_id: None,
                order_id: None,
                payload: &json!({"card_id": "c", "order_id": "o", "status": "frozen"}),
                now: common::now_micros(),
            },
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
        let start = std::time::Instant::now();
        loop {
            let items = t.deliveries(WhDeliveries::default()).await;
            assert_eq!(items.len(), 2);
            if items
                .iter()
                .all(|d| d.attempts >= 1 && d.last_error.is_some())
            {
                let errors: Vec<&str> = items
                    .iter()
                    .map(|d| d.last_error.as_deref().unwrap())
                    .collect();
                assert!(
                    errors.iter().any(|e| e.contains("non-public address")),
                    "{errors:?}"
                );
                assert!(
                    errors.iter().any(|e| e.contains("no public address")),
                    "{errors:?}"
                );
                break;
            }
            assert!(start.elapsed() < WAIT, "{items:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            rx.received().is_empty(),
            "nothing reached the private address"
        );
    }
);

/// Two server processes on one PostgreSQL database: every event is delivered, and no
/// delivery is ever being attempted by both at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_postgres_deliver_everything_without_concurrent_attempts() {
    let Some(t) = TestServer::start_with(common::Backend::Postgres, fast()).await else {
        return;
    };
    let sibling = t.sibling_with(fast()).await;
    let sibling_base = format!("http://{}", sibling.addr);
    let rx = Receiver::start(&t.creds.api_secret).await;
    // Slow answers and a first failure for many deliveries: attempts of both processes
    // overlap in time, and retries are picked up by whichever process is free.
    rx.hold(Duration::from_millis(200));
    rx.script(&[Behaviour::Status(500); 10]);
    t.subscribe(&rx.url).await;
    let card = t.funded_card("ada").await;
    for i in 0..30 {
        let base = if i % 3 == 0 { &sibling_base } else { &t.base };
        let sdk = t.sdk_on(base, &t.creds);
        let request = of_user("ada", &card);
        if i % 2 == 0 {
            sdk.cards_freeze(&request).await.unwrap();
        } else {
            sdk.cards_unfreeze(&request).await.unwrap();
        }
    }
    let start = std::time::Instant::now();
    loop {
        let v = t
            .sdk()
            .wh_deliveries(&states(&["succeeded"]))
            .await
            .unwrap();
        if v.total == 31 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "{v:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let delivered: std::collections::HashSet<String> = rx
        .delivered()
        .iter()
        .map(|e| e["delivery_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(delivered.len(), 31, "every event arrived");
    assert!(
        rx.overlaps().is_empty(),
        "concurrent attempts of one delivery: {:?}",
        rx.overlaps()
    );
    sibling.shutdown().await;
}

// Unsubscribing while a subscription's deliveries are being attempted and recorded.
// The receiver alternates success and 500, so nearly every batch of recorded outcomes
// moves the subscription's failing clock (`note_success`/`note_failure` update its
// row) while it holds the deliveries it just recorded; an unsubscribe updates the
// same row and those same deliveries. On PostgreSQL, taking these locks in opposite
// orders deadlocked, and the aborted unsubscribe answered 500. Every unsubscribe must
// succeed, leave nothing pending, and nothing may be delivered afterwards.
both_backends_with!(
    unsubscribe_while_deliveries_are_in_flight,
    fast(),
    |t: TestServer| async move {
        const ROUNDS: usize = 8;
        const SUBS: usize = 3;
        const EVENTS: usize = 24;
        let rx = Receiver::start(&t.creds.api_secret).await;
        let answers: Vec<Behaviour> = (0..200_000)
            .map(|i| {
                if i % 2 == 0 {
                    Behaviour::Succeed
                } else {
                    Behaviour::Status(500)
                }
            })
            .collect();
        rx.script(&answers);
        let card = t.funded_card("ada").await;
        let sdk = t.sdk();
        let count = |sub: String, state: &'static str| {
            let sdk = t.sdk();
            async move {
                sdk.wh_deliveries(&WhDeliveries {
                    subscription_ids: vec![sub],
                    ..states(&[state])
                })
                .await
                .unwrap()
                .total
            }
        };
        // Per subscription: its deliveries that had succeeded when it was unsubscribed.
        let mut ended = Vec::new();
        let mut cut_short = 0;
        for round in 0..ROUNDS {
            let mut subs = Vec::new();
            for _ in 0..SUBS {
                subs.push(t.subscribe(&rx.url).await);
            }
            let seen = rx.received().len();
            for i in 0..EVENTS {
                if i % 2 == 0 {
                    t.freeze("ada", &card).await;
                } else {
                    t.unfreeze("ada", &card).await;
                }
            }
            // Half the attempts answered: the rest are in flight or waiting to retry.
            rx.wait_until("attempts of this round", WAIT, |r| {
                r.len() >= seen + SUBS * EVENTS / 2
            })
            .await;
            let offs = futures::future::join_all(subs.iter().map(|s| sdk.wh_unsubscribe(s))).await;
            for (sub, off) in subs.iter().zip(offs) {
                let off = off.unwrap_or_else(|e| panic!("round {round}: unsubscribe {sub}: {e:?}"));
                assert!(!off.active, "{off:?}");
                assert_eq!(count(sub.clone(), "pending").await, 0, "nothing pending");
                let failed = count(sub.clone(), "failed").await;
                cut_short += failed;
                let succeeded = count(sub.clone(), "succeeded").await;
                assert_eq!(
                    failed + succeeded,
                    EVENTS as u64,
                    "every delivery of {sub} ended"
                );
                ended.push((sub.clone(), succeeded));
            }
        }
        assert!(
            cut_short > 0,
            "some deliveries were still pending when unsubscribed"
        );
        // Attempts already sent when their subscription ended get their answer within
        // the attempt timeout (1 s); retries would come every second.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let quiet = rx.received().len();
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(rx.received().len(), quiet, "no attempt after unsubscribing");
        for (sub, succeeded) in ended {
            assert_eq!(count(sub.clone(), "pending").await, 0);
            assert_eq!(
                count(sub.clone(), "succeeded").await,
                succeeded,
                "nothing of {sub} delivered after it was unsubscribed"
            );
        }
    }
);
