//! Data that grows (CONTRACT §13): final webhook deliveries and the events they leave
//! behind are deleted after the retention, pending ones and everything of the ledger
//! are kept; subscriptions whose receivers keep failing are deactivated as `failing`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::receiver::{Behaviour, Receiver};
use common::TestServer;
use issuing_client::{CardsFreeze, Subscription, WhDeliveries, WhSubscribe};
use issuing_server::ServerConfig;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);

fn config(retention_secs: u64, disable_after_secs: u64) -> ServerConfig {
    ServerConfig {
        retention: Duration::from_secs(retention_secs),
        webhook_disable_after: Duration::from_secs(disable_after_secs),
        cleanup_interval: Duration::from_millis(500),
        webhook_retry_interval: Duration::from_secs(1),
        webhook_timeout: Duration::from_secs(1),
        webhook_max_age: Duration::from_secs(120),
        metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    }
}

impl TestServer {
    async fn subscribe_url(&self, url: &str) -> Subscription {
        self.sdk()
            .wh_subscribe(&WhSubscribe {
                url: url.into(),
                ..WhSubscribe::default()
            })
            .await
            .unwrap()
    }

    async fn deliveries_of(&self, subscription: &str) -> Vec<issuing_client::Delivery> {
        let filter = WhDeliveries {
            subscription_ids: vec![subscription.into()],
            ..WhDeliveries::default()
        };
        self.sdk().wh_deliveries(&filter).await.unwrap().items
    }

    async fn subscription(&self, id: &str) -> Subscription {
        let page = self
            .sdk()
            .wh_subscriptions(&issuing_client::ListQuery::default())
            .await
            .unwrap();
        page.items.into_iter().find(|s| s.id == id).unwrap()
    }

    async fn count(&self, table: &str) -> i64 {
        let (n,): (i64,) = sqlx::query_as(&format!("SELECT COUNT(*) FROM {table}"))
            .fetch_one(self.store.pool())
            .await
            .unwrap();
        n
    }

    async fn event_exists(&self, id: &str) -> bool {
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM events WHERE id = $1")
            .bind(id)
            .fetch_one(self.store.pool())
            .await
            .unwrap();
        n == 1
    }

    async fn metric(&self, line_prefix: &str) -> u64 {
        let addr = self.metrics_addr().unwrap();
        let text = reqwest::get(format!("http://{addr}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(line_prefix))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {line_prefix} in\n{text}"))
    }

    async fn freeze_card(&self, card: &str) {
        let req = CardsFreeze {
            card_id: card.into(),
            external_user_id: Some("ret".into()),
        };
        self.sdk().cards_freeze(&req).await.unwrap();
    }

    async fn unfreeze_card(&self, card: &str) {
        let req = CardsFreeze {
            card_id: card.into(),
            external_user_id: Some("ret".into()),
        };
        self.sdk().cards_unfreeze(&req).await.unwrap();
    }
}

async fn until<F, Fut>(what: &str, check: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < WAIT, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Tables retention never touches, with their row counts.
const KEPT: [&str; 7] = [
    "transfers",
    "entries",
    "orders",
    "cards",
    "card_transactions",
    "idempotency_keys",
    "chain_deposits",
];

both_backends_with!(
    final_deliveries_and_their_events_are_deleted_after_the_retention,
    config(2, 0),
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 100_000_000).await;
        // Issued before any subscription: its card.created event has no delivery.
        let card = t.active_card("ret", "virtual_usd").await;
        let undelivered = t.events(&t.creds.project_id).await[0].id.clone();

        let ok = Receiver::start(&t.creds.api_secret).await;
        let dropped = Receiver::start(&t.creds.api_secret).await;
        dropped.set(Behaviour::Status(500));
        let waiting = Receiver::start(&t.creds.api_secret).await;
        waiting.set(Behaviour::Status(500));
        let a = t.subscribe_url(&ok.url).await.id;
        let b = t.subscribe_url(&dropped.url).await.id;
        let c = t.subscribe_url(&waiting.url).await.id;
        t.freeze_card(&card).await;
        ok.wait_until("the freeze", WAIT, |r| !r.is_empty()).await;
        dropped
            .wait_until("an attempt", WAIT, |r| !r.is_empty())
            .await;
        // Unsubscribing ends b's delivery as failed; c's keeps being retried (pending).
        t.sdk().wh_unsubscribe(&b).await.unwrap();
        let freeze_event = t.deliveries_of(&a).await[0].event_id.clone();
        let kept: Vec<i64> =
            futures::future::join_all(KEPT.iter().map(|table| t.count(table))).await;

        until("a's and b's final deliveries are deleted", || async {
            t.deliveries_of(&a).await.is_empty() && t.deliveries_of(&b).await.is_empty()
        })
        .await;
        until("the event nobody was sent is deleted", || async {
            !t.event_exists(&undelivered).await
        })
        .await;
        let pending = t.deliveries_of(&c).await;
        assert_eq!(pending.len(), 1, "{pending:?}");
        assert_eq!(pending[0].state, "pending");
        assert!(
            t.event_exists(&freeze_event).await,
            "an event with a pending delivery is kept"
        );
        assert!(
            t.metric("issuing_retention_deleted_rows_total{table=\"webhook_deliveries\"}")
                .await
                >= 2
        );
        assert!(
            t.metric("issuing_retention_deleted_rows_total{table=\"events\"}")
                .await
                >= 1
        );

        // Once c's delivery is final too, the event goes with it.
        t.sdk().wh_unsubscribe(&c).await.unwrap();
        until(
            "the freeze event is deleted with its last delivery",
            || async {
                !t.event_exists(&freeze_event).await && t.deliveries_of(&c).await.is_empty()
            },
        )
        .await;
        // The money's history, the orders and the card's transactions are all there.
        let after: Vec<i64> =
            futures::future::join_all(KEPT.iter().map(|table| t.count(table))).await;
        assert_eq!(kept, after, "{KEPT:?}");
        t.verify_ledger().await;
        // Subscriptions themselves are kept: wh/subscriptions still shows all three.
        assert!(!t.subscription(&b).await.active);
    }
);

both_backends_with!(
    retention_zero_keeps_everything,
    config(0, 0),
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 100_000_000).await;
        let ok = Receiver::start(&t.creds.api_secret).await;
        let a = t.subscribe_url(&ok.url).await.id;
        let card = t.active_card("ret", "virtual_usd").await;
        ok.wait_until("card.created", WAIT, |r| !r.is_empty()).await;
        until("the delivery is final", || async {
            t.deliveries_of(&a)
                .await
                .iter()
                .all(|d| d.state == "succeeded")
        })
        .await;
        t.freeze_card(&card).await;
        ok.wait_until("the freeze", WAIT, |r| r.len() >= 2).await;
        // Several cleanup passes later, nothing is gone.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(t.deliveries_of(&a).await.len(), 2);
        assert_eq!(t.events(&t.creds.project_id).await.len(), 2);
        assert_eq!(
            t.metric("issuing_retention_deleted_rows_total{table=\"webhook_deliveries\"}")
                .await,
            0
        );
    }
);

both_backends_with!(
    a_subscription_failing_for_long_is_deactivated,
    config(0, 4),
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 100_000_000).await;
        let card = t.active_card("ret", "virtual_usd").await;
        let dead = Receiver::start(&t.creds.api_secret).await;
        dead.set(Behaviour::Status(500));
        let flaky = Receiver::start(&t.creds.api_secret).await;
        // Fails twice, then one success resets its clock.
        flaky.script(&[Behaviour::Status(500), Behaviour::Status(500)]);
        let healthy = Receiver::start(&t.creds.api_secret).await;
        let f = t.subscribe_url(&dead.url).await;
        let h = t.subscribe_url(&flaky.url).await.id;
        let g = t.subscribe_url(&healthy.url).await.id;

        t.freeze_card(&card).await;
        flaky
            .wait_until("a success after two failures", WAIT, |r| {
                r.iter().any(|x| x.answered == Behaviour::Succeed)
            })
            .await;
        // From now on it fails again: its clock starts at this second event.
        flaky.set(Behaviour::Status(500));
        t.unfreeze_card(&card).await;
        flaky
            .wait_until("the unfreeze failing", WAIT, |r| r.len() >= 4)
            .await;

        until(
            "the dead receiver's subscription is deactivated",
            || async { !t.subscription(&f.id).await.active },
        )
        .await;
        let deactivated = t.subscription(&f.id).await;
        assert_eq!(deactivated.deactivated_reason.as_deref(), Some("failing"));
        assert!(deactivated.deactivated_at.is_some(), "{deactivated:?}");
        // Its pending deliveries failed with it; nothing more is sent there.
        let ds = t.deliveries_of(&f.id).await;
        assert!(
            !ds.is_empty() && ds.iter().all(|d| d.state == "failed"),
            "{ds:?}"
        );
        // The one that succeeded meanwhile is still active, the healthy one too.
        assert!(
            t.subscription(&h).await.active,
            "one success resets the clock"
        );
        assert!(t.subscription(&g).await.active);
        assert!(
            t.metric("issuing_webhook_subscriptions_deactivated_total{reason=\"failing\"}")
                .await
                >= 1
        );
        let attempts = dead.received().len();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(
            dead.received().len(),
            attempts,
            "no attempt after deactivation"
        );

        // Its own clock runs out later.
        until(
            "the flaky receiver's subscription is deactivated",
            || async { !t.subscription(&h).await.active },
        )
        .await;
        assert!(t.subscription(&g).await.active);

        // Subscribing the same URL again makes a new, active subscription.
        let again = t.subscribe_url(&dead.url).await;
        assert!(again.active);
        assert_ne!(again.id, f.id);
        dead.set(Behaviour::Succeed);
        t.freeze_card(&card).await;
        until("the new subscription is delivered to", || async {
            t.deliveries_of(&again.id)
                .await
                .iter()
                .any(|d| d.state == "succeeded")
        })
        .await;
    }
);
