//! ASA decisions (CONTRACT §11, §14) through signed requests from the fake Lithic: each
//! declining stage answers its own `result`, the project's decision webhook (a real
//! endpoint on port 0) is asked within the ASA budget, and a webhook slower than the
//! budget is decided by its `on_timeout` before Lithic's answer is due, so what we
//! answer is what our ledger holds. Every case ends with the fake's check and the
//! ledger verified.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::lithic::harness::{usdt, Lithic};
use common::lithic::{Merchant, Sign};
use common::spend::{Answer, Decider};
use common::Backend;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The case `$name` (an `async fn(&Lithic)`) on both backends, the subprovider with
/// the settings `$extra`.
macro_rules! asa_case {
    ($name:ident, $extra:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                if let Some(l) = Lithic::start(Backend::Sqlite, $extra).await {
                    super::$name(&l).await;
                    l.finish().await;
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(l) = Lithic::start(Backend::Postgres, $extra).await {
                    super::$name(&l).await;
                    l.finish().await;
                }
            }
        }
    };
}

/// Our transaction an ASA request became (the newest of the card), as `cards/txs`
/// lists it: (status, failure_reason).
async fn last_outcome(l: &Lithic, card_id: &str) -> (String, Option<String>, Value) {
    let tx = l
        .txs("ada", card_id)
        .await
        .into_iter()
        .next()
        .expect("a transaction");
    let d = tx["card_tx_data"].clone();
    (
        d["status"].as_str().unwrap_or_default().to_owned(),
        d["failure_reason"].as_str().map(str::to_owned),
        d,
    )
}

asa_case!(declines_per_reason, "");
async fn declines_per_reason(l: &Lithic) {
    let (card_id, token) = l.card("ada", "50").await;
    let coffee = Merchant::coffee();
    let untouched = (usdt("50"), usdt("0"));

    // An active rule on the merchant's MCC: UNAUTHORIZED_MERCHANT, nothing held.
    let rule = l
        .t
        .ok(
            "rules/create",
            json!({"name": "no coffee", "conditions": [{"attribute": "mcc", "operator": "is_one_of", "value": ["5814"]}]}),
        )
        .await;
    let asa = l.fake.authorize(&token, 1250, &coffee).await;
    assert_eq!(
        (asa.status, asa.result()),
        (200, "UNAUTHORIZED_MERCHANT"),
        "{:?}",
        asa.answer
    );
    let (status, reason, data) = last_outcome(l, &card_id).await;
    assert_eq!(
        (status.as_str(), reason.as_deref()),
        ("declined", Some("mcc_blocked"))
    );
    assert_eq!(data["decline"]["rule_ids"], json!([rule["rule_id"]]));
    assert_eq!(l.balance("ada", &card_id).await, untouched);
    l.t.ok("rules/delete", json!({"rule_id": rule["rule_id"]}))
        .await;

    // A rule on the merchant's country: Lithic's alpha-3 is matched as alpha-2.
    let rule = l
        .t
        .ok(
            "rules/create",
            json!({"name": "not here", "conditions": [{"attribute": "merchant_country", "operator": "is_one_of", "value": ["US"]}]}),
        )
        .await;
    let asa = l.fake.authorize(&token, 1250, &coffee).await;
    assert_eq!(asa.result(), "UNAUTHORIZED_MERCHANT");
    let (_, reason, _) = last_outcome(l, &card_id).await;
    assert_eq!(reason.as_deref(), Some("country_blocked"));
    l.t.ok("rules/delete", json!({"rule_id": rule["rule_id"]}))
        .await;

    // A spending limit: VELOCITY_EXCEEDED, nothing held, nothing counted.
    l.t.ok(
        "cards/limits/set",
        json!({"card_id": card_id, "limits": [{"interval": "daily", "amount": "10"}]}),
    )
    .await;
    let asa = l.fake.authorize(&token, 1250, &coffee).await;
    assert_eq!(asa.result(), "VELOCITY_EXCEEDED", "{:?}", asa.answer);
    let (status, reason, data) = last_outcome(l, &card_id).await;
    assert_eq!(
        (status.as_str(), reason.as_deref()),
        ("declined", Some("spending_limit_exceeded"))
    );
    assert_eq!(data["decline"]["interval"], "daily");
    assert_eq!(l.balance("ada", &card_id).await, untouched);
    let limits =
        l.t.ok("cards/limits/get", json!({"card_id": card_id}))
            .await;
    assert_eq!(limits["limits"][0]["used_count"], 0, "{limits}");
    // Within the limit the same card is approved: the limit, not the card, declined.
    let asa = l.fake.authorize(&token, 900, &coffee).await;
    assert_eq!(asa.result(), "APPROVED");
    l.t.ok(
        "cards/limits/set",
        json!({"card_id": card_id, "limits": []}),
    )
    .await;

    // The project's decision webhook declines: UNAUTHORIZED_MERCHANT, the hold it had
    // tentatively is released, its reason kept.
    let decider = Decider::start(
        &l.t.creds.api_secret,
        Answer::Decline(Some("velocity check".into())),
    )
    .await;
    l.t.ok("wh/decision/set", json!({"url": decider.url})).await;
    let before = l.balance("ada", &card_id).await;
    let asa = l.fake.authorize(&token, 1250, &coffee).await;
    assert_eq!(asa.result(), "UNAUTHORIZED_MERCHANT", "{:?}", asa.answer);
    let (status, reason, data) = last_outcome(l, &card_id).await;
    assert_eq!(
        (status.as_str(), reason.as_deref()),
        ("declined", Some("webhook_declined"))
    );
    assert_eq!(data["decision_reason"], "velocity check");
    assert_eq!(
        l.balance("ada", &card_id).await,
        before,
        "no hold left behind"
    );
    let asked = decider.requests();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].1["amount"], usdt("12.5"));

    // The endpoint answering an error status: its on_timeout (decline) applies.
    decider.set(Answer::Status(500));
    let asa = l.fake.authorize(&token, 1250, &coffee).await;
    assert_eq!(asa.result(), "UNAUTHORIZED_MERCHANT");
    let (_, reason, _) = last_outcome(l, &card_id).await;
    assert_eq!(reason.as_deref(), Some("webhook_error"));
    assert_eq!(l.balance("ada", &card_id).await, before);

    // Insufficient funds is decided before the webhook is asked.
    let asa = l.fake.authorize(&token, 9000, &coffee).await;
    assert_eq!(asa.result(), "INSUFFICIENT_FUNDS");
    assert_eq!(
        decider.requests().len(),
        2,
        "not asked about a declined one"
    );

    // And the endpoint approving: APPROVED, held.
    decider.set(Answer::Approve);
    let asa = l.fake.authorize(&token, 1250, &coffee).await;
    assert_eq!(asa.result(), "APPROVED");
    assert_eq!(
        l.balance("ada", &card_id).await,
        (usdt("28.5"), usdt("21.5"))
    );
}

/// Lithic's answer is due within 600 ms here; the endpoint takes 3 s and has 2 s.
const BUDGET: &str = "asa_budget_ms = 600";
const BUDGET_MS: u64 = 600;

asa_case!(a_slow_decision_webhook_within_the_budget, BUDGET);
async fn a_slow_decision_webhook_within_the_budget(l: &Lithic) {
    let (card_id, token) = l.card("ada", "50").await;
    let coffee = Merchant::coffee();
    let decider = Decider::start(&l.t.creds.api_secret, Answer::Slow(Duration::from_secs(3))).await;
    l.t.ok(
        "wh/decision/set",
        json!({"url": decider.url, "timeout_ms": 2000, "on_timeout": "decline"}),
    )
    .await;
    // The endpoint is asked, times out within the budget, and on_timeout declines:
    // our answer and our ledger agree at once (no hold waits for Lithic's event).
    let started = Instant::now();
    let asa = l
        .fake
        .asa(&token, "AUTHORIZATION", 1250, &coffee, Sign::Good, None)
        .await;
    let took = started.elapsed();
    assert_eq!(
        (asa.status, asa.result()),
        (200, "UNAUTHORIZED_MERCHANT"),
        "{:?}",
        asa.answer
    );
    assert!(
        took < Duration::from_millis(BUDGET_MS + 300),
        "answered in {took:?}"
    );
    let (status, reason, _) = last_outcome(l, &card_id).await;
    assert_eq!(
        (status.as_str(), reason.as_deref()),
        ("declined", Some("webhook_timeout"))
    );
    assert_eq!(l.balance("ada", &card_id).await, (usdt("50"), usdt("0")));
    let asked = decider.requests();
    assert_eq!(asked.len(), 1, "the endpoint was asked");
    // Its deadline is the budget's, not its own 2 s.
    let deadline =
        chrono::DateTime::parse_from_rfc3339(asked[0].1["deadline_at"].as_str().unwrap()).unwrap();
    let within = deadline.signed_duration_since(chrono::Utc::now());
    assert!(
        within < chrono::Duration::milliseconds(BUDGET_MS as i64),
        "deadline_at {deadline} is {within} ahead"
    );

    // on_timeout approve: APPROVED within the budget, and the hold is there.
    l.t.ok(
        "wh/decision/set",
        json!({"url": decider.url, "timeout_ms": 2000, "on_timeout": "approve"}),
    )
    .await;
    let started = Instant::now();
    let asa = l.fake.authorize(&token, 1250, &coffee).await;
    assert_eq!(asa.result(), "APPROVED", "{:?}", asa.answer);
    let (status, reason, _) = last_outcome(l, &card_id).await;
    assert_eq!((status.as_str(), reason), ("pending", None));
    assert_eq!(
        l.balance("ada", &card_id).await,
        (usdt("37.5"), usdt("12.5"))
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answered and delivered in {:?}",
        started.elapsed()
    );
    // The late answer, when it comes, changes nothing; the clearing then settles
    // the hold that was approved.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        l.balance("ada", &card_id).await,
        (usdt("37.5"), usdt("12.5"))
    );
    assert_eq!(l.fake.clear(&asa.token, 1250).await, vec![200]);
    assert_eq!(l.balance("ada", &card_id).await, (usdt("37.5"), usdt("0")));
    assert_eq!(decider.requests().len(), 2);
}
