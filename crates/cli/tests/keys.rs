//! Keys and projects over HTTP: rotation with and without a grace period, expiry,
//! revocation seen by every process within seconds, the last-key guard, suspension and resume
//! (requests, in-flight orders, waiting webhooks), and webhooks sealed with the newest key.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::receiver::{Behaviour, Receiver};
use common::{api_error, Creds, TestServer};
use issuing_app::projects::{self as admin, AdminError};
use issuing_client::{CardsCreate, CardsFreeze, WhSubscribe};
use issuing_server::ServerConfig;
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const HOUR: Duration = Duration::from_secs(3600);

impl TestServer {
    /// Rotates the default project's key; returns the new credentials and the JSON the
    /// operator would see.
    async fn rotate(&self, grace: Duration) -> (Creds, Value) {
        let r = admin::rotate_key(&self.store, &self.master, &self.creds.project_id, grace)
            .await
            .unwrap();
        let shown = serde_json::to_value(&r).unwrap();
        let creds = Creds {
            project_id: r.project_id,
            api_key: r.api_key,
            api_secret: r.api_secret,
            deposit_address: self.creds.deposit_address.clone(),
        };
        (creds, shown)
    }

    /// The HTTP status and error slug (None on success) of a call with `creds` on `base`.
    async fn status_on(&self, base: &str, creds: &Creds) -> (u16, Option<String>) {
        match self.sdk_on(base, creds).project_balance().await {
            Ok(_) => (200, None),
            Err(e) => (
                e.status().unwrap_or_else(|| panic!("{e}")),
                e.slug().map(str::to_owned),
            ),
        }
    }

    /// Asserts that calls with `creds` on `base` get `want`, allowing the servers' key
    /// caches up to their TTL (2 s) and a margin to see a change.
    async fn expect_status(&self, base: &str, creds: &Creds, want: (u16, Option<String>)) {
        let deadline = std::time::Instant::now() + Duration::from_secs(4);
        loop {
            let got = self.status_on(base, creds).await;
            if got == want || std::time::Instant::now() > deadline {
                assert_eq!(got, want, "{base}");
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn set_expiry(&self, api_key: &str, at: i64) {
        sqlx::query("UPDATE api_keys SET expires_at = $1 WHERE api_key = $2")
            .bind(at)
            .bind(api_key)
            .execute(self.store.pool())
            .await
            .unwrap();
    }

    async fn scalar(&self, sql: &str, id: &str) -> String {
        let row = sqlx::query(sql)
            .bind(id)
            .fetch_one(self.store.pool())
            .await
            .unwrap();
        sqlx::Row::get(&row, 0)
    }
}

/// A subscription of every event type to `url`, titled "test".
fn subscription(url: &str) -> WhSubscribe {
    WhSubscribe {
        url: url.into(),
        title: Some("test".into()),
        ..WhSubscribe::default()
    }
}

fn ok() -> (u16, Option<String>) {
    (200, None)
}

fn not_found() -> (u16, Option<String>) {
    (401, Some("api_key_not_found".into()))
}

fn no_access() -> (u16, Option<String>) {
    (403, Some("api_key_invalid".into()))
}

both_backends!(
    rotation_keeps_old_keys_for_the_grace_period,
    |t: TestServer| async move {
        let old = t.creds.clone();
        let before = common::now_micros();
        let (new, shown) = t.rotate(HOUR).await;
        assert_ne!(new.api_key, old.api_key);
        assert_ne!(new.api_secret, old.api_secret);
        assert!(new.api_key.starts_with("pk_") && new.api_secret.starts_with("sk_"));
        assert_eq!(shown["project_id"], json!(old.project_id));
        let until = issuing_domain::time::parse_instant(&shown["old_keys_valid_until"]).unwrap();
        assert!(
            (before + 3_600_000_000..=common::now_micros() + 3_600_000_000).contains(&until),
            "{shown}"
        );

        // Both work during the grace period, and reach the same project.
        t.expect_status(&t.base, &old, ok()).await;
        t.expect_status(&t.base, &new, ok()).await;
        let a = t.sdk_as(&old).project_wallet_trc20().await.unwrap();
        let b = t.sdk_as(&new).project_wallet_trc20().await.unwrap();
        assert_eq!(a.usdt_trc20, b.usdt_trc20);

        let keys = admin::list_keys(&t.store, &old.project_id).await.unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].api_key, old.api_key);
        assert_eq!(keys[0].expires_at, Some(until));
        assert_eq!((keys[1].expires_at, keys[1].revoked_at), (None, None));

        // Once the grace period is over the old key is refused like an unknown one.
        t.set_expiry(&old.api_key, common::now_micros() - 1).await;
        t.expect_status(&t.base, &old, not_found()).await;
        t.expect_status(&t.base, &new, ok()).await;

        // A second rotation never extends an earlier, shorter expiry.
        t.set_expiry(&old.api_key, common::now_micros() + 60_000_000)
            .await;
        let (newest, shown) = t.rotate(HOUR).await;
        let keys = admin::list_keys(&t.store, &old.project_id).await.unwrap();
        assert!(keys[0].expires_at.unwrap() < common::now_micros() + 61_000_000);
        assert!(keys[1].expires_at.is_some() && keys[2].expires_at.is_none());
        assert!(shown["old_keys_valid_until"].is_string(), "{shown}");
        for c in [&old, &new, &newest] {
            t.expect_status(&t.base, c, ok()).await;
        }

        let e = admin::rotate_key(&t.store, &t.master, "nope", HOUR)
            .await
            .unwrap_err();
        assert!(matches!(e, AdminError::ProjectNotFound(_)), "{e}");
    }
);

both_backends!(
    rotation_without_grace_refuses_old_keys_at_once,
    |t: TestServer| async move {
        let other = t.new_project("other").await;
        let old = t.creds.clone();
        t.expect_status(&t.base, &old, ok()).await;
        let (new, shown) = t.rotate(Duration::ZERO).await;
        assert_eq!(shown["old_keys_valid_until"], Value::Null, "{shown}");
        t.expect_status(&t.base, &old, not_found()).await;
        t.expect_status(&t.base, &new, ok()).await;
        // Other projects are untouched.
        t.expect_status(&t.base, &other, ok()).await;
        let keys = admin::list_keys(&t.store, &old.project_id).await.unwrap();
        assert!(!keys[0].valid_at(common::now_micros()));
        assert!(keys[1].valid_at(common::now_micros()));
    }
);

both_backends!(
    revocation_reaches_every_process_within_seconds,
    |t: TestServer| async move {
        let sibling = t.sibling().await;
        let there = format!("http://{}", sibling.addr);
        let old = t.creds.clone();
        let (new, _) = t.rotate(HOUR).await;
        for base in [&t.base, &there] {
            t.expect_status(base, &old, ok()).await;
            t.expect_status(base, &new, ok()).await;
        }

        let r = admin::revoke_key(&t.store, &old.api_key, false)
            .await
            .unwrap();
        assert_eq!(
            (r.project_id.as_str(), r.valid_keys_left),
            (old.project_id.as_str(), 1)
        );
        for base in [&t.base, &there] {
            t.expect_status(base, &old, not_found()).await;
            t.expect_status(base, &new, ok()).await;
        }
        // Revoking again changes nothing and reports the first revocation.
        let again = admin::revoke_key(&t.store, &old.api_key, false)
            .await
            .unwrap();
        assert_eq!(again.revoked_at, r.revoked_at);

        // The last valid key is kept unless forced.
        let e = admin::revoke_key(&t.store, &new.api_key, false)
            .await
            .unwrap_err();
        assert!(matches!(e, AdminError::LastValidKey(_)), "{e}");
        assert!(e.to_string().contains("--force"), "{e}");
        t.expect_status(&there, &new, ok()).await;
        let e = admin::revoke_key(&t.store, "pk_nope", false)
            .await
            .unwrap_err();
        assert!(matches!(e, AdminError::KeyNotFound(_)), "{e}");

        // An expired key does not count as a valid one that would remain.
        let (newest, _) = t.rotate(HOUR).await;
        t.set_expiry(&new.api_key, common::now_micros() - 1).await;
        let e = admin::revoke_key(&t.store, &newest.api_key, false)
            .await
            .unwrap_err();
        assert!(matches!(e, AdminError::LastValidKey(_)), "{e}");
        let r = admin::revoke_key(&t.store, &newest.api_key, true)
            .await
            .unwrap();
        assert_eq!(r.valid_keys_left, 0);
        for base in [&t.base, &there] {
            t.expect_status(base, &newest, not_found()).await;
        }
        let keys = admin::list_keys(&t.store, &old.project_id).await.unwrap();
        assert!(keys.iter().all(|k| !k.valid_at(common::now_micros())));
        // A rotation gives the project a working key again.
        let (fresh, shown) = t.rotate(HOUR).await;
        assert_eq!(shown["old_keys_valid_until"], Value::Null);
        t.expect_status(&there, &fresh, ok()).await;
        sibling.shutdown().await;
    }
);

both_backends!(
    suspension_refuses_requests_until_resumed,
    |t: TestServer| async move {
        let sibling = t.sibling().await;
        let there = format!("http://{}", sibling.addr);
        let other = t.new_project("other").await;
        let (rotated, _) = t.rotate(HOUR).await;
        let before = admin::set_project_status(&t.store, &t.creds.project_id, admin::SUSPENDED)
            .await
            .unwrap();
        assert_eq!(before, "active");
        for base in [&t.base, &there] {
            t.expect_status(base, &t.creds, no_access()).await;
            t.expect_status(base, &rotated, no_access()).await;
            t.expect_status(base, &other, ok()).await;
        }
        api_error(t.sdk().system_health().await, 403, "api_key_invalid");
        // Suspending twice is harmless.
        let before = admin::set_project_status(&t.store, &t.creds.project_id, admin::SUSPENDED)
            .await
            .unwrap();
        assert_eq!(before, "suspended");

        let before = admin::set_project_status(&t.store, &t.creds.project_id, admin::ACTIVE)
            .await
            .unwrap();
        assert_eq!(before, "suspended");
        for base in [&t.base, &there] {
            t.expect_status(base, &t.creds, ok()).await;
            t.expect_status(base, &rotated, ok()).await;
        }
        let e = admin::set_project_status(&t.store, "nope", admin::SUSPENDED)
            .await
            .unwrap_err();
        assert!(matches!(e, AdminError::ProjectNotFound(_)), "{e}");
        sibling.shutdown().await;
    }
);

/// Retries every second, webhooks give up after 4 s, provider calls take 1 s.
fn slow_provider_fast_webhooks() -> ServerConfig {
    let mut c = ServerConfig {
        webhook_retry_interval: Duration::from_secs(1),
        webhook_timeout: Duration::from_secs(1),
        webhook_max_age: Duration::from_secs(4),
        ..Default::default()
    };
    c.sandbox.latency = Duration::from_secs(1);
    c
}

both_backends_with!(
    a_suspended_project_finishes_its_orders_and_its_webhooks_wait,
    slow_provider_fast_webhooks(),
    |t: TestServer| async move {
        let project = t.creds.project_id.clone();
        t.deposit(&project, 100_000_000).await;
        let sdk = t.sdk();
        sdk.cardholders_create(&issuing_client::CardholdersCreate {
            external_user_id: "ada".into(),
            subprovider_code: "sandbox".into(),
            kyc_data: Some(serde_json::from_value(common::cards::kyc()).unwrap()),
            ..Default::default()
        })
        .await
        .unwrap();
        let rx = Receiver::start(&t.creds.api_secret).await;
        rx.set(Behaviour::Status(500));
        sdk.wh_subscribe(&subscription(&rx.url)).await.unwrap();
        let v = sdk
            .cards_create(
                &CardsCreate {
                    external_user_id: "ada".into(),
                    product_code: "virtual_usd".into(),
                    ..CardsCreate::default()
                },
                "issue-ada",
            )
            .await
            .unwrap();
        let order = v.order.order_id;
        admin::set_project_status(&t.store, &project, admin::SUSPENDED)
            .await
            .unwrap();
        let order_status = "SELECT status FROM orders WHERE id = $1";
        assert_ne!(
            t.scalar(order_status, &order).await,
            "completed",
            "the order was meant to be in flight when the project was suspended"
        );
        t.expect_status(&t.base, &t.creds, no_access()).await;

        // The order worker still finishes it: no money stuck in flight.
        let start = std::time::Instant::now();
        while t.scalar(order_status, &order).await != "completed" {
            assert!(start.elapsed() < WAIT, "the order never finished");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        t.verify_ledger().await;

        // The card.created delivery waits: no attempts, still pending, even past
        // webhook_max_age (4 s).
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let seen = rx.received().len();
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(rx.received().len(), seen, "no attempt while suspended");
        let state = "SELECT state FROM webhook_deliveries WHERE project_id = $1";
        assert_eq!(t.scalar(state, &project).await, "pending");

        // On resume it is sent again with a fresh retry window: one more failure does
        // not end it, and the next attempt succeeds.
        admin::set_project_status(&t.store, &project, admin::ACTIVE)
            .await
            .unwrap();
        rx.wait_until("an attempt after resume", WAIT, |r| r.len() > seen)
            .await;
        rx.set(Behaviour::Succeed);
        rx.wait_until("the delivery", WAIT, |r| {
            r.iter().any(|r| r.answered == Behaviour::Succeed)
        })
        .await;
        let delivered = rx.delivered();
        assert_eq!(delivered[0]["event_type"], "card.created", "{delivered:?}");
        assert_eq!(delivered[0]["data"]["order_id"], json!(order));
        let start = std::time::Instant::now();
        while t.scalar(state, &project).await != "succeeded" {
            assert!(start.elapsed() < WAIT, "the delivery was never recorded");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
);

both_backends!(
    webhooks_are_sealed_with_the_newest_key,
    |t: TestServer| async move {
        let old = t.creds.clone();
        t.deposit(&old.project_id, 100_000_000).await;
        let card = t.active_card("ada", "virtual_usd").await;
        let (new, _) = t.rotate(HOUR).await;
        // Receivers that switched to the new secret, and one that did not.
        let rx = Receiver::start(&new.api_secret).await;
        let stale = Receiver::start(&old.api_secret).await;
        let old_sdk = t.sdk_as(&old);
        for url in [&rx.url, &stale.url] {
            // The old key still works during the grace period.
            old_sdk.wh_subscribe(&subscription(url)).await.unwrap();
        }
        old_sdk
            .cards_freeze(&CardsFreeze {
                external_user_id: Some("ada".into()),
                ..CardsFreeze::new(&card)
            })
            .await
            .unwrap();
        rx.wait_until("the freeze", WAIT, |r| !r.is_empty()).await;
        stale
            .wait_until("the freeze", WAIT, |r| !r.is_empty())
            .await;
        let got = &rx.received()[0];
        assert_eq!(got.api_key.as_deref(), Some(new.api_key.as_str()));
        assert_eq!(got.event["event_type"], "card.freeze", "{:?}", got.event);
        assert_eq!(got.event["data"]["card_id"], json!(card));
        let got = &stale.received()[0];
        assert_eq!(got.api_key.as_deref(), Some(new.api_key.as_str()));
        assert_eq!(got.event, Value::Null, "the old secret cannot open it");
    }
);
