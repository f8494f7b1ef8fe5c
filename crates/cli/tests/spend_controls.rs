//! Card limits and authorization rules (CONTRACT §11) through the HTTP API: validation,
//! every counting rule, windows in the card's time zone, the decision order, rules with
//! their modes, reasons, versions and results, 100 parallel authorizations against a
//! count limit, isolation between projects, and a property test against a model of
//! `spent` and `used_count`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::spend::outcome;
use common::TestServer;
use serde_json::{json, Value};
use std::time::Duration;

fn tx_id(item: &Value) -> String {
    item["transaction_id"].as_str().unwrap().to_owned()
}

/// (spent, used_count) of the card's `i`th limit.
async fn used(t: &TestServer, card: &str, i: usize) -> (String, u64) {
    let v = t.limits(card).await;
    let l = &v["limits"][i];
    (
        l["spent"].as_str().unwrap().to_owned(),
        l["used_count"].as_u64().unwrap(),
    )
}

both_backends!(limits_are_validated, |t: TestServer| async move {
    let card = t.card_holding("ada", 10).await;
    let bad = |limits: Value| json!({"card_id": card, "limits": limits});
    for (limits, slug) in [
        (
            json!([{"interval": "hourly", "amount": "1"}]),
            "validation_error",
        ),
        (json!([{"interval": "daily"}]), "validation_error"),
        (
            json!([{"interval": "daily", "amount": "0"}]),
            "invalid_amount",
        ),
        (
            json!([{"interval": "daily", "amount": "-5"}]),
            "invalid_amount",
        ),
        (
            json!([{"interval": "daily", "amount": "1.0000001"}]),
            "invalid_amount",
        ),
        (
            json!([{"interval": "daily", "count": 0}]),
            "validation_error",
        ),
        (
            json!([{"interval": "per_authorization", "count": 2}]),
            "validation_error",
        ),
        (
            json!([{"interval": "rolling", "amount": "1"}]),
            "validation_error",
        ),
        (
            json!([{"interval": "rolling", "window_seconds": 59, "amount": "1"}]),
            "validation_error",
        ),
        (
            json!([{"interval": "rolling", "window_seconds": 7_776_001, "amount": "1"}]),
            "validation_error",
        ),
        (
            json!([{"interval": "daily", "window_seconds": 600, "amount": "1"}]),
            "validation_error",
        ),
        (
            json!([{"interval": "daily", "amount": "1", "mccs": ["541"]}]),
            "validation_error",
        ),
        (
            json!([{"interval": "daily", "amount": "1", "mccs": ["54a1"]}]),
            "validation_error",
        ),
        (
            json!((0..11)
                .map(|_| json!({"interval": "daily", "amount": "1"}))
                .collect::<Vec<_>>()),
            "validation_error",
        ),
        (json!("daily"), "validation_error"),
    ] {
        t.expect_error("cards/limits/set", bad(limits.clone()), 400, slug)
            .await;
    }
    t.expect_error(
        "cards/limits/set",
        json!({"card_id": card}),
        400,
        "validation_error",
    )
    .await;
    t.expect_error(
        "cards/limits/set",
        json!({"card_id": card, "limits": [], "timezone": "Mars/Olympus"}),
        400,
        "validation_error",
    )
    .await;
    t.expect_error(
        "cards/limits/set",
        json!({"card_id": "nope", "limits": []}),
        404,
        "card_not_found",
    )
    .await;
    t.expect_error(
        "cards/limits/get",
        json!({"card_id": "nope"}),
        404,
        "card_not_found",
    )
    .await;
    t.expect_error(
        "cards/limits/get",
        json!({"card_id": card, "external_user_id": "someone-else"}),
        404,
        "card_not_found",
    )
    .await;

    // Ten limits of every kind are fine; the answer shows them with their windows.
    let v = t
        .set_limits(
            &card,
            json!([
                {"interval": "per_authorization", "amount": "5"},
                {"interval": "daily", "amount": "100", "count": 5},
                {"interval": "weekly", "count": 20},
                {"interval": "monthly", "amount": "1000"},
                {"interval": "yearly", "amount": 5000},
                {"interval": "all_time", "amount": "9999.99"},
                {"interval": "rolling", "window_seconds": 3600, "count": 3},
                {"interval": "daily", "amount": "50", "mccs": ["5411", "5812", "5411"]},
                {"interval": "rolling", "window_seconds": 60, "amount": "1"},
                {"interval": "rolling", "window_seconds": 7_776_000, "amount": "1"},
            ]),
            Some("Europe/Berlin"),
        )
        .await;
    assert_eq!(v["card_id"], card);
    assert_eq!(v["timezone"], "Europe/Berlin");
    let l = v["limits"].as_array().unwrap();
    assert_eq!(l.len(), 10);
    assert_eq!(l[0]["interval"], "per_authorization");
    assert_eq!(l[0]["remaining_amount"], "5.00");
    assert!(l[0].get("window_start").is_none());
    assert_eq!(l[1]["remaining_count"], 5);
    assert_eq!(l[1]["spent"], "0.00");
    assert!(l[1]["window_start"].as_str().unwrap().ends_with('Z'));
    assert!(l[5].get("window_start").is_none(), "all_time has no window");
    assert_eq!(l[6]["window_seconds"], 3600);
    assert_eq!(l[7]["mccs"], json!(["5411", "5812"]));
    assert_eq!(l[4]["amount"], "5000.00");
    // The same through the typed client.
    let got = t
        .sdk()
        .cards_limits_get(&issuing_client::CardsLimitsGet {
            card_id: card.clone(),
            external_user_id: Some("ada".into()),
        })
        .await
        .unwrap();
    assert_eq!(got.limits.len(), 10);
    assert_eq!(got.timezone, "Europe/Berlin");

    // An empty list removes every limit.
    let v = t.set_limits(&card, json!([]), None).await;
    assert_eq!(v["limits"], json!([]));
    assert_eq!(v["timezone"], "UTC");

    // Frozen cards may have limits; closed ones not.
    t.ok("cards/freeze", json!({"card_id": card})).await;
    t.set_limits(&card, json!([{"interval": "daily", "amount": "1"}]), None)
        .await;
    t.ok("cards/unfreeze", json!({"card_id": card})).await;
    t.ok(
        "cards/close",
        json!({"card_id": card, "idempotency_key": "close-1"}),
    )
    .await;
    t.expect_error(
        "cards/limits/set",
        json!({"card_id": card, "limits": []}),
        422,
        "card_not_active",
    )
    .await;
});

both_backends!(what_counts_toward_a_limit, |t: TestServer| async move {
    let card = t.card_holding("ada", 1000).await;
    t.set_limits(
        &card,
        json!([{"interval": "daily", "amount": "100", "count": 6}]),
        None,
    )
    .await;
    // Approved: counts its amount and one.
    let a = t.authorize(&card, "60", "5411").await;
    assert_eq!(outcome(&a), ("pending".into(), None));
    assert_eq!(used(&t, &card, 0).await, ("60.00".into(), 1));
    // Over the limit: declined, with the limit and what was spent; never counted.
    let d = t.authorize(&card, "40.01", "5411").await;
    assert_eq!(
        outcome(&d),
        ("declined".into(), Some("spending_limit_exceeded".into()))
    );
    assert_eq!(
        d["card_tx_data"]["decline"],
        json!({"interval": "daily", "limit": 100.0, "count": 6, "spent": 60.0, "used_count": 1})
    );
    assert_eq!(used(&t, &card, 0).await, ("60.00".into(), 1));
    // An exact fit passes.
    let b = t.authorize(&card, "40", "5411").await;
    assert_eq!(outcome(&b).0, "pending");
    assert_eq!(used(&t, &card, 0).await, ("100.00".into(), 2));
    // A partial reversal gives back the amount, never the count; a full one too.
    t.ok(
        "simulate/cards/reversal",
        json!({"transactionId": tx_id(&b), "amount": "15"}),
    )
    .await;
    assert_eq!(used(&t, &card, 0).await, ("85.00".into(), 2));
    t.ok(
        "simulate/cards/reversal",
        json!({"transactionId": tx_id(&b)}),
    )
    .await;
    assert_eq!(used(&t, &card, 0).await, ("60.00".into(), 2));
    // Clearing below the hold lowers the count to the bill; above adds the excess, and
    // a clearing is never declined by a limit.
    t.ok(
        "simulate/cards/clear",
        json!({"transactionId": tx_id(&a), "billAmount": "50"}),
    )
    .await;
    assert_eq!(used(&t, &card, 0).await, ("50.00".into(), 2));
    let c = t.authorize(&card, "50", "5411").await;
    assert_eq!(outcome(&c).0, "pending");
    assert_eq!(used(&t, &card, 0).await, ("100.00".into(), 3));
    t.ok(
        "simulate/cards/clear",
        json!({"transactionId": tx_id(&c), "billAmount": "70"}),
    )
    .await;
    assert_eq!(used(&t, &card, 0).await, ("120.00".into(), 3));
    // A refund gives nothing back.
    t.ok(
        "simulate/cards/refund",
        json!({"transactionId": tx_id(&a), "amount": "50"}),
    )
    .await;
    assert_eq!(used(&t, &card, 0).await, ("120.00".into(), 3));
    // A force post counts and is never declined by a limit.
    let fp = t
        .ok(
            "simulate/cards/clear",
            json!({"card_id": card, "billAmount": "30"}),
        )
        .await;
    assert_eq!(fp["transaction"]["card_tx_data"]["status"], "approved");
    assert_eq!(used(&t, &card, 0).await, ("150.00".into(), 4));
    let limits = t.limits(&card).await;
    assert_eq!(limits["limits"][0]["remaining_amount"], "0.00");
    assert_eq!(limits["limits"][0]["remaining_count"], 2);
    // Changing limits never resets what was spent.
    t.set_limits(
        &card,
        json!([{"interval": "daily", "amount": "200", "count": 5}]),
        None,
    )
    .await;
    assert_eq!(used(&t, &card, 0).await, ("150.00".into(), 4));
    let e = t.authorize(&card, "50.01", "5411").await;
    assert_eq!(outcome(&e).1.as_deref(), Some("spending_limit_exceeded"));
    let f = t.authorize(&card, "50", "5411").await;
    assert_eq!(outcome(&f).0, "pending");
    // The count: the sixth authorization of a count of 5 declines, whatever its amount.
    let g = t.authorize(&card, "0.01", "5411").await;
    assert_eq!(outcome(&g).1.as_deref(), Some("spending_limit_exceeded"));
    assert_eq!(g["card_tx_data"]["decline"]["used_count"], 5);
    // The listing shows the decline too.
    let txs = t
        .ok(
            "cards/txs",
            json!({"card_id": card, "external_user_id": "ada", "limit": 100}),
        )
        .await;
    let listed = txs["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["transaction_id"] == d["transaction_id"])
        .unwrap()
        .clone();
    assert_eq!(listed["card_tx_data"]["decline"]["interval"], "daily");
    t.verify_ledger().await;
});

both_backends!(
    per_authorization_and_mcc_limits,
    |t: TestServer| async move {
        let card = t.card_holding("ada", 1000).await;
        t.set_limits(
            &card,
            json!([
                {"interval": "per_authorization", "amount": "25"},
                {"interval": "all_time", "amount": "30", "mccs": ["7995"]},
                {"interval": "rolling", "window_seconds": 600, "count": 1, "mccs": ["6011"]},
            ]),
            None,
        )
        .await;
        let big = t.authorize(&card, "25.01", "5411").await;
        assert_eq!(outcome(&big).1.as_deref(), Some("spending_limit_exceeded"));
        assert_eq!(
            big["card_tx_data"]["decline"]["interval"],
            "per_authorization"
        );
        assert_eq!(
            outcome(&t.authorize(&card, "25", "5411").await).0,
            "pending"
        );
        // Only 7995 counts toward the all_time limit.
        assert_eq!(
            outcome(&t.authorize(&card, "20", "7995").await).0,
            "pending"
        );
        assert_eq!(used(&t, &card, 1).await, ("20.00".into(), 1));
        let casino = t.authorize(&card, "10.01", "7995").await;
        assert_eq!(casino["card_tx_data"]["decline"]["mccs"], json!(["7995"]));
        assert_eq!(
            outcome(&t.authorize(&card, "20", "5999").await).0,
            "pending"
        );
        // One ATM withdrawal per 10 minutes.
        assert_eq!(outcome(&t.authorize(&card, "1", "6011").await).0, "pending");
        let second = t.authorize(&card, "1", "6011").await;
        assert_eq!(second["card_tx_data"]["decline"]["window_seconds"], 600);
        let l = t.limits(&card).await;
        assert_eq!(
            l["limits"][0]["spent"], "0.00",
            "per_authorization counts nothing"
        );
        assert_eq!(l["limits"][2]["used_count"], 1);
        t.verify_ledger().await;
    }
);

// The window of a limit is the one `cards/limits/get` reports: a transaction approved
// one microsecond before its start does not count, one at its start does. Calendar
// windows start at local midnight of the card's zone.
both_backends!(
    windows_follow_the_card_time_zone,
    |t: TestServer| async move {
        let card = t.card_holding("ada", 1000).await;
        for zone in [
            "America/New_York",
            "Asia/Kolkata",
            "Pacific/Kiritimati",
            "UTC",
        ] {
            let v = t
            .set_limits(&card, json!([{"interval": "daily", "amount": "500"}, {"interval": "weekly", "amount": "500"}]), Some(zone))
            .await;
            let start = v["limits"][0]["window_start"].as_str().unwrap();
            let end = v["limits"][0]["window_end"].as_str().unwrap();
            let tz = issuing_domain::controls::window::parse_zone(zone).unwrap();
            let local = |s: &str| {
                chrono::DateTime::parse_from_rfc3339(s)
                    .unwrap()
                    .with_timezone(&tz)
                    .naive_local()
            };
            use chrono::{Datelike, Timelike};
            assert_eq!(
                (local(start).hour(), local(start).minute()),
                (0, 0),
                "{zone} {start}"
            );
            assert_eq!(
                (local(end).hour(), local(end).minute()),
                (0, 0),
                "{zone} {end}"
            );
            let hours = (chrono::DateTime::parse_from_rfc3339(end).unwrap()
                - chrono::DateTime::parse_from_rfc3339(start).unwrap())
            .num_hours();
            assert!((23..=25).contains(&hours), "{zone}: {hours} h");
            let week = v["limits"][1]["window_start"].as_str().unwrap();
            assert_eq!(local(week).weekday(), chrono::Weekday::Mon, "{zone}");
        }
        // Move an approved authorization across the start of the card's day.
        t.set_limits(
            &card,
            json!([{"interval": "daily", "amount": "100"}]),
            Some("Asia/Kolkata"),
        )
        .await;
        let a = t.authorize(&card, "40", "5411").await;
        let v = t.limits(&card).await;
        let start =
            chrono::DateTime::parse_from_rfc3339(v["limits"][0]["window_start"].as_str().unwrap())
                .unwrap()
                .timestamp_micros();
        let move_to = |at: i64| {
            let id = tx_id(&a);
            let pool = t.store.pool().clone();
            async move {
                sqlx::query("UPDATE card_transactions SET created_at = $1 WHERE id = $2")
                    .bind(at)
                    .bind(id)
                    .execute(&pool)
                    .await
                    .unwrap();
            }
        };
        move_to(start - 1).await;
        assert_eq!(
            used(&t, &card, 0).await,
            ("0.00".into(), 0),
            "yesterday, local time"
        );
        assert_eq!(
            outcome(&t.authorize(&card, "100", "5411").await).0,
            "pending"
        );
        move_to(start).await;
        assert_eq!(used(&t, &card, 0).await, ("140.00".into(), 2));
        let d = t.authorize(&card, "0.01", "5411").await;
        assert_eq!(outcome(&d).1.as_deref(), Some("spending_limit_exceeded"));
    }
);

both_backends!(the_decision_order, |t: TestServer| async move {
    let card = t.card_holding("ada", 50).await;
    t.set_limits(&card, json!([{"interval": "daily", "amount": "60"}]), None)
        .await;
    t.ok(
        "rules/create",
        json!({"name": "no casinos", "conditions": [{"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}]}),
    )
    .await;
    // Limits before funds: 70 is over both.
    let d = t.authorize(&card, "70", "5411").await;
    assert_eq!(outcome(&d).1.as_deref(), Some("spending_limit_exceeded"));
    // Funds when the limit passes.
    let d = t.authorize(&card, "55", "5411").await;
    assert_eq!(outcome(&d).1.as_deref(), Some("insufficient_funds"));
    assert!(d["card_tx_data"].get("decline").is_none());
    // Rules before limits.
    let d = t.authorize(&card, "70", "7995").await;
    assert_eq!(outcome(&d).1.as_deref(), Some("mcc_blocked"));
    // The card's status before everything.
    t.ok("cards/freeze", json!({"card_id": card})).await;
    let d = t.authorize(&card, "70", "7995").await;
    assert_eq!(outcome(&d).1.as_deref(), Some("card_not_active"));
    let results = t
        .ok("rules/results", json!({"transaction_id": tx_id(&d)}))
        .await;
    assert_eq!(
        results["total"], 0,
        "a frozen card's authorization is not evaluated"
    );
    assert_eq!(used(&t, &card, 0).await, ("0.00".into(), 0));
});

both_backends!(rules_are_validated, |t: TestServer| async move {
    let mcc = json!([{"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}]);
    for (body, status, slug) in [
        (json!({"conditions": mcc}), 400, "validation_error"),
        (
            json!({"name": "", "conditions": mcc}),
            400,
            "validation_error",
        ),
        (json!({"name": "x"}), 400, "validation_error"),
        (
            json!({"name": "x", "conditions": []}),
            400,
            "validation_error",
        ),
        (
            json!({"name": "x", "conditions": [{"attribute": "amount", "operator": "is_one_of", "value": ["1"]}]}),
            400,
            "validation_error",
        ),
        (
            json!({"name": "x", "conditions": [{"attribute": "mcc", "operator": "contains", "value": "79"}]}),
            400,
            "validation_error",
        ),
        (
            json!({"name": "x", "conditions": [{"attribute": "merchant_country", "operator": "greater_than", "value": "1"}]}),
            400,
            "validation_error",
        ),
        (
            json!({"name": "x", "conditions": [{"attribute": "merchant_country", "operator": "is_one_of", "value": ["USA"]}]}),
            400,
            "validation_error",
        ),
        (
            json!({"name": "x", "conditions": [{"attribute": "amount", "operator": "less_than", "value": "abc"}]}),
            400,
            "validation_error",
        ),
        (
            json!({"name": "x", "conditions": [{"attribute": "color", "operator": "is_one_of", "value": ["red"]}]}),
            400,
            "validation_error",
        ),
        (
            json!({"name": "x", "conditions": mcc, "mode": "loud"}),
            400,
            "validation_error",
        ),
        (
            json!({"name": "x", "conditions": mcc, "priority": "high"}),
            400,
            "validation_error",
        ),
        (
            json!({"name": "x", "conditions": mcc, "card_ids": ["nope"]}),
            404,
            "card_not_found",
        ),
    ] {
        t.expect_error("rules/create", body, status, slug).await;
    }
    for path in ["rules/get", "rules/delete", "rules/update"] {
        t.expect_error(path, json!({"rule_id": "nope"}), 404, "rule_not_found")
            .await;
        t.expect_error(path, json!({}), 400, "validation_error")
            .await;
    }
    // At most 50 rules that are not inactive; inactive ones do not count.
    for i in 0..50 {
        t.ok(
            "rules/create",
            json!({"name": format!("r{i}"), "conditions": mcc}),
        )
        .await;
    }
    t.expect_error(
        "rules/create",
        json!({"name": "51st", "conditions": mcc}),
        422,
        "rule_limit_reached",
    )
    .await;
    t.expect_error(
        "rules/create",
        json!({"name": "51st", "conditions": mcc, "mode": "shadow"}),
        422,
        "rule_limit_reached",
    )
    .await;
    let parked = t
        .ok(
            "rules/create",
            json!({"name": "parked", "conditions": mcc, "mode": "inactive"}),
        )
        .await;
    t.expect_error(
        "rules/update",
        json!({"rule_id": parked["rule_id"], "mode": "active"}),
        422,
        "rule_limit_reached",
    )
    .await;
    let list = t.ok("rules/list", json!({"limit": 100})).await;
    assert_eq!(list["total"], 51);
    let first = list["items"][50]["rule_id"].clone();
    t.ok("rules/delete", json!({"rule_id": first})).await;
    t.expect_error(
        "rules/get",
        json!({"rule_id": first}),
        404,
        "rule_not_found",
    )
    .await;
    t.ok(
        "rules/update",
        json!({"rule_id": parked["rule_id"], "mode": "active"}),
    )
    .await;
    let inactive = t.ok("rules/list", json!({"mode": "inactive"})).await;
    assert_eq!(inactive["total"], 0);
    t.expect_error(
        "rules/list",
        json!({"mode": "loud"}),
        400,
        "validation_error",
    )
    .await;
});

both_backends!(
    rules_decline_with_reasons_and_record_results,
    |t: TestServer| async move {
        let card = t.card_holding("ada", 1000).await;
        let other = t.card_holding("bob", 1000).await;
        let sdk = t.sdk();
        let rule = |name: &str, conditions: Value, extra: Value| {
            let mut body = json!({"name": name, "conditions": conditions});
            for (k, v) in extra.as_object().unwrap() {
                body[k] = v.clone();
            }
            body
        };
        let casino = t
            .ok(
                "rules/create",
                rule(
                    "casinos",
                    json!([{"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}]),
                    json!({"priority": 50}),
                ),
            )
            .await;
        assert_eq!(
            (
                casino["mode"].as_str(),
                casino["version"].as_i64(),
                casino["priority"].as_i64()
            ),
            (Some("active"), Some(1), Some(50))
        );
        assert!(casino.get("card_ids").is_none());
        let countries = t
        .ok("rules/create", rule("embargo", json!([{"attribute": "merchant_country", "operator": "is_one_of", "value": ["kp", "IR"]}]), json!({})))
        .await;
        assert_eq!(countries["conditions"][0]["value"], json!(["KP", "IR"]));
        let names = t
        .ok("rules/create", rule("bad shop", json!([{"attribute": "merchant_name", "operator": "contains", "value": "SHADY"}]), json!({"card_ids": [card]})))
        .await;
        let big = t
        .ok("rules/create", rule("big abroad", json!([
            {"attribute": "amount", "operator": "greater_than", "value": "500"},
            {"attribute": "merchant_country", "operator": "is_not_one_of", "value": ["US"]}
        ]), json!({})))
        .await;
        let watch = t
            .ok(
                "rules/create",
                rule(
                    "watch casinos",
                    json!([{"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}]),
                    json!({"mode": "shadow", "priority": 1}),
                ),
            )
            .await;
        let auth = |card: &str, amount: &str, mcc: &str, country: &str, name: &str| {
            t.ok(
                "simulate/cards/auth",
                json!({"card_id": card, "transactionAmount": amount,
                   "merchant": {"name": name, "mcc": mcc, "country": country}}),
            )
        };
        let d = auth(&card, "5", "7995", "US", "Lucky").await["transaction"].clone();
        assert_eq!(outcome(&d).1.as_deref(), Some("mcc_blocked"));
        assert_eq!(
            d["card_tx_data"]["decline"],
            json!({"rule_ids": [casino["rule_id"]]})
        );
        // Every match was recorded: the active one declined, the shadow one decided nothing.
        let results = sdk
            .rules_results(&issuing_client::RulesResults {
                transaction_id: Some(tx_id(&d)),
                ..Default::default()
            })
            .await
            .unwrap();
        let mut got: Vec<(String, String, String, bool)> = results
            .items
            .iter()
            .map(|r| {
                (
                    r.rule_id.clone(),
                    r.mode.clone(),
                    r.decided.clone(),
                    r.matched,
                )
            })
            .collect();
        got.sort();
        let mut want = vec![
            (
                casino["rule_id"].as_str().unwrap().to_owned(),
                "active".to_owned(),
                "declined".to_owned(),
                true,
            ),
            (
                watch["rule_id"].as_str().unwrap().to_owned(),
                "shadow".to_owned(),
                "none".to_owned(),
                true,
            ),
        ];
        want.sort();
        assert_eq!(got, want);
        let d = auth(&card, "5", "5411", "ir", "Tehran Books").await["transaction"].clone();
        assert_eq!(outcome(&d).1.as_deref(), Some("country_blocked"));
        let d = auth(&card, "5", "5411", "US", "The shady corner").await["transaction"].clone();
        assert_eq!(outcome(&d).1.as_deref(), Some("merchant_blocked"));
        // Scoped to one card: the other card buys there.
        let ok = auth(&other, "5", "5411", "US", "The shady corner").await["transaction"].clone();
        assert_eq!(outcome(&ok).0, "pending");
        let d = auth(&card, "500.01", "5411", "FR", "Louvre").await["transaction"].clone();
        assert_eq!(outcome(&d).1.as_deref(), Some("rule_declined"));
        assert_eq!(
            outcome(&auth(&card, "500", "5411", "FR", "Louvre").await["transaction"]).0,
            "pending"
        );
        // Two active matches: the lowest (priority, created_at) gives the reason; both listed.
        let d = auth(&card, "600", "7995", "KP", "x").await["transaction"].clone();
        assert_eq!(outcome(&d).1.as_deref(), Some("mcc_blocked"));
        assert_eq!(
            d["card_tx_data"]["decline"]["rule_ids"]
                .as_array()
                .unwrap()
                .len(),
            3
        );
        t.ok(
            "rules/update",
            json!({"rule_id": countries["rule_id"], "priority": 10}),
        )
        .await;
        let d = auth(&card, "6", "7995", "KP", "x").await["transaction"].clone();
        assert_eq!(outcome(&d).1.as_deref(), Some("country_blocked"));
        assert_eq!(
            d["card_tx_data"]["decline"]["rule_ids"][0],
            countries["rule_id"]
        );
        // A shadow rule never declines; turned active it does; inactive rules are not evaluated.
        t.ok(
            "rules/update",
            json!({"rule_id": casino["rule_id"], "mode": "inactive"}),
        )
        .await;
        t.ok(
            "rules/update",
            json!({"rule_id": countries["rule_id"], "mode": "shadow"}),
        )
        .await;
        let p = auth(&card, "7", "7995", "KP", "x").await["transaction"].clone();
        assert_eq!(outcome(&p).0, "pending");
        let r = t
            .ok("rules/results", json!({"transaction_id": tx_id(&p)}))
            .await;
        assert_eq!(r["total"], 2, "{r}");
        assert!(r["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["decided"] == "none"));
        let updated = t
            .ok(
                "rules/update",
                json!({"rule_id": watch["rule_id"], "mode": "active", "name": "no casinos"}),
            )
            .await;
        assert_eq!(
            (updated["version"].as_i64(), updated["name"].as_str()),
            (Some(2), Some("no casinos"))
        );
        let d = auth(&card, "7", "7995", "US", "x").await["transaction"].clone();
        assert_eq!(outcome(&d).1.as_deref(), Some("mcc_blocked"));
        let r = t
            .ok("rules/results", json!({"rule_id": watch["rule_id"]}))
            .await;
        assert_eq!(
            r["items"][0]["version"], 2,
            "newest first, with the version that ran"
        );
        assert_eq!(r["items"][0]["decided"], "declined");
        assert_eq!(r["items"].as_array().unwrap().last().unwrap()["version"], 1);
        // Deleted rules stop deciding; their results stay.
        t.ok("rules/delete", json!({"rule_id": watch["rule_id"]}))
            .await;
        assert_eq!(
            outcome(&auth(&card, "7", "7995", "US", "x").await["transaction"]).0,
            "pending"
        );
        let r = t
            .ok("rules/results", json!({"rule_id": watch["rule_id"]}))
            .await;
        assert!(r["total"].as_u64().unwrap() >= 2);
        let got = sdk
            .rules_get(names["rule_id"].as_str().unwrap())
            .await
            .unwrap();
        assert_eq!(got.card_ids, Some(vec![card.clone()]));
        let _ = big;
        t.verify_ledger().await;
    }
);

// A rule created through one server is enforced by another on the same database at
// its next authorization (the controls revision, not a timer).
both_backends!(
    rule_changes_reach_every_process,
    |t: TestServer| async move {
        let card = t.card_holding("ada", 100).await;
        let sibling = t.sibling().await;
        let base = format!("http://{}", sibling.addr);
        let auth = |mcc: &'static str| {
            let base = base.clone();
            let t = &t;
            let card = card.clone();
            async move {
                let (s, v) = t
                .call_on(&base, &t.creds, "simulate/cards/auth",
                    json!({"card_id": card, "transactionAmount": "1", "merchant": {"mcc": mcc}}))
                .await;
                assert_eq!(s, 200, "{v}");
                outcome(&v["transaction"])
            }
        };
        assert_eq!(auth("7995").await.0, "pending");
        let r = t
        .ok("rules/create", json!({"name": "x", "conditions": [{"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}]}))
        .await;
        assert_eq!(auth("7995").await.1.as_deref(), Some("mcc_blocked"));
        t.ok("rules/delete", json!({"rule_id": r["rule_id"]})).await;
        assert_eq!(auth("7995").await.0, "pending");
        sibling.shutdown().await;
    }
);

// Cards of one batch read their usage together (one statement on PostgreSQL): each
// card's limit counts its own authorizations only.
both_backends!(
    parallel_authorizations_never_pass_a_count_limit,
    |t: TestServer| async move {
        let counts = [37usize, 11, 23, 5];
        let mut cards = Vec::new();
        for (i, count) in counts.iter().enumerate() {
            let card = t.card_holding(&format!("ada{i}"), 1000).await;
            t.set_limits(&card, json!([{"interval": "daily", "count": count}]), None)
                .await;
            cards.push(card);
        }
        let t = std::sync::Arc::new(t);
        let mut calls = Vec::new();
        for n in 0..160 {
            let k = n % cards.len();
            let (t, card) = (t.clone(), cards[k].clone());
            calls.push((
                k,
                tokio::spawn(async move { t.authorize(&card, "1", "5411").await }),
            ));
        }
        let mut approved = vec![0; cards.len()];
        for (k, c) in calls {
            let item = c.await.unwrap();
            match outcome(&item) {
                (s, None) if s == "pending" => approved[k] += 1,
                (_, Some(r)) => assert_eq!(r, "spending_limit_exceeded"),
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(approved, counts);
        for (card, count) in cards.iter().zip(counts) {
            assert_eq!(
                used(&t, card, 0).await,
                (format!("{count}.00"), count as u64)
            );
        }
        t.verify_ledger().await;
    }
);

both_backends!(isolation_between_projects, |t: TestServer| async move {
    let card = t.card_holding("ada", 100).await;
    t.set_limits(&card, json!([{"interval": "daily", "amount": "5"}]), None)
        .await;
    let rule = t
        .ok("rules/create", json!({"name": "x", "conditions": [{"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}]}))
        .await;
    let d = t.authorize(&card, "1", "7995").await;
    assert_eq!(outcome(&d).1.as_deref(), Some("mcc_blocked"));
    let other = t.new_project("other").await;
    let expect = |path: &'static str, body: Value, status: u16, slug: &'static str| {
        let (t, other) = (&t, other.clone());
        async move {
            let (s, v) = t.call_as(&other, path, body).await;
            assert_eq!(
                (s, v["error_slug"].as_str()),
                (status, Some(slug)),
                "{path}: {v}"
            );
        }
    };
    expect(
        "cards/limits/get",
        json!({"card_id": card}),
        404,
        "card_not_found",
    )
    .await;
    expect(
        "cards/limits/set",
        json!({"card_id": card, "limits": []}),
        404,
        "card_not_found",
    )
    .await;
    expect(
        "rules/get",
        json!({"rule_id": rule["rule_id"]}),
        404,
        "rule_not_found",
    )
    .await;
    expect(
        "rules/update",
        json!({"rule_id": rule["rule_id"], "mode": "inactive"}),
        404,
        "rule_not_found",
    )
    .await;
    expect(
        "rules/delete",
        json!({"rule_id": rule["rule_id"]}),
        404,
        "rule_not_found",
    )
    .await;
    expect("rules/create", json!({"name": "x", "conditions": [{"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}], "card_ids": [card]}), 404, "card_not_found").await;
    let (_, list) = t.call_as(&other, "rules/list", json!({})).await;
    assert_eq!(list["total"], 0);
    let (_, results) = t.call_as(&other, "rules/results", json!({})).await;
    assert_eq!(results["total"], 0);
    let (_, results) = t
        .call_as(&other, "rules/results", json!({"rule_id": rule["rule_id"]}))
        .await;
    assert_eq!(results["total"], 0);
    // The other project's own rule applies to its own cards only.
    let (s, _) = t
        .call_as(&other, "rules/create", json!({"name": "all", "conditions": [{"attribute": "mcc", "operator": "is_one_of", "value": ["5411"]}]}))
        .await;
    assert_eq!(s, 200);
    assert_eq!(outcome(&t.authorize(&card, "1", "5411").await).0, "pending");
    // Nothing changed here.
    assert_eq!(t.limits(&card).await["limits"][0]["amount"], "5.00");
    t.ok("rules/get", json!({"rule_id": rule["rule_id"]})).await;
});

// ---------------------------------------------------------------------------------
// Property test: random auth / clear (below, equal, above) / reversal (full, partial)
// / refund / expiry / limit changes on one card against a model of `spent` and
// `used_count`, with the ledger verified after every step.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

#[derive(Debug, Clone)]
enum Op {
    Auth(i64),
    /// Clear tx (index) at pct percent of its hold.
    Clear {
        tx: usize,
        pct: i64,
    },
    Reverse {
        tx: usize,
        pct: Option<i64>,
    },
    Refund {
        tx: usize,
    },
    Expire {
        tx: usize,
    },
    SetLimit {
        amount: i64,
        count: u32,
    },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1i64..=30).prop_map(|u| Op::Auth(u * 1_000_000)),
        2 => (any::<usize>(), prop_oneof![Just(50i64), Just(100), Just(130)]).prop_map(|(tx, pct)| Op::Clear { tx, pct }),
        2 => (any::<usize>(), prop::option::of(10i64..=90)).prop_map(|(tx, pct)| Op::Reverse { tx, pct }),
        1 => any::<usize>().prop_map(|tx| Op::Refund { tx }),
        1 => any::<usize>().prop_map(|tx| Op::Expire { tx }),
        1 => (40i64..=120, 3u32..=12).prop_map(|(a, count)| Op::SetLimit { amount: a * 1_000_000, count }),
    ]
}

#[derive(Debug, Clone)]
struct Model {
    id: String,
    pending: bool,
    held: i64,
    cleared: i64,
    counted: i64,
}

fn dec(m: i64) -> String {
    format!("{}.{:06}", m / 1_000_000, m % 1_000_000)
}

fn micros(s: &str) -> i64 {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    whole.parse::<i64>().unwrap() * 1_000_000 + format!("{frac:0<6}")[..6].parse::<i64>().unwrap()
}

both_backends_with!(
    random_sequences_count_as_the_model,
    issuing_server::ServerConfig {
        hold_expiry: Duration::from_secs(3600),
        ..Default::default()
    },
    |t: TestServer| async move {
        const CASES: u32 = 3;
        let mut runner = TestRunner::default();
        let strategy = prop::collection::vec(op_strategy(), 10..=25);
        for case in 0..CASES {
            let ops = strategy.new_tree(&mut runner).unwrap().current();
            let user = format!("u{case}");
            let card = t.card_holding(&user, 2000).await;
            let (mut limit, mut count) = (100_000_000i64, 8u32);
            t.set_limits(
                &card,
                json!([{"interval": "all_time", "amount": dec(limit), "count": count}]),
                None,
            )
            .await;
            let mut txs: Vec<Model> = Vec::new();
            let mut used_count = 0u64;
            for (step, op) in ops.iter().enumerate() {
                let ctx = format!("case {case} step {step} {op:?} in {ops:?}");
                let spent: i64 = txs.iter().map(|m| m.counted).sum();
                let pick = |i: usize| (!txs.is_empty()).then(|| i % txs.len());
                match op.clone() {
                    Op::Auth(a) => {
                        let item = t.authorize(&card, &dec(a), "5411").await;
                        let fits = spent + a <= limit && used_count < u64::from(count);
                        if fits {
                            assert_eq!(outcome(&item), ("pending".into(), None), "{ctx}");
                            txs.push(Model {
                                id: tx_id(&item),
                                pending: true,
                                held: a,
                                cleared: 0,
                                counted: a,
                            });
                            used_count += 1;
                        } else {
                            assert_eq!(
                                outcome(&item).1.as_deref(),
                                Some("spending_limit_exceeded"),
                                "{ctx}"
                            );
                        }
                    }
                    Op::Clear { tx, pct } => {
                        if let Some(i) = pick(tx).filter(|&i| txs[i].pending) {
                            let m = &mut txs[i];
                            let bill = (m.held * pct / 100).max(1);
                            t.ok(
                                "simulate/cards/clear",
                                json!({"transactionId": m.id, "billAmount": dec(bill)}),
                            )
                            .await;
                            m.counted = if bill <= m.held {
                                bill
                            } else {
                                m.counted + bill - m.held
                            };
                            (m.pending, m.held, m.cleared) = (false, 0, bill);
                        }
                    }
                    Op::Reverse { tx, pct } => {
                        if let Some(i) = pick(tx).filter(|&i| txs[i].pending) {
                            let m = &mut txs[i];
                            let amount = pct.map_or(m.held, |p| (m.held * p / 100).max(1));
                            t.ok(
                                "simulate/cards/reversal",
                                json!({"transactionId": m.id, "amount": dec(amount)}),
                            )
                            .await;
                            m.held -= amount;
                            m.counted -= amount;
                            m.pending = m.held > 0;
                        }
                    }
                    Op::Refund { tx } => {
                        if let Some(i) = pick(tx).filter(|&i| !txs[i].pending && txs[i].cleared > 0)
                        {
                            let m = &mut txs[i];
                            t.ok("simulate/cards/refund", json!({"transactionId": m.id}))
                                .await;
                            m.cleared = 0;
                        }
                    }
                    Op::Expire { tx } => {
                        if let Some(i) = pick(tx).filter(|&i| txs[i].pending) {
                            let m = &mut txs[i];
                            sqlx::query(
                                "UPDATE card_transactions SET hold_expires_at = 0 WHERE id = $1",
                            )
                            .bind(&m.id)
                            .execute(t.store.pool())
                            .await
                            .unwrap();
                            let start = std::time::Instant::now();
                            loop {
                                let (s, _) = used(&t, &card, 0).await;
                                if micros(&s) == spent - m.counted {
                                    break;
                                }
                                assert!(
                                    start.elapsed() < Duration::from_secs(30),
                                    "{ctx}: never expired"
                                );
                                tokio::time::sleep(Duration::from_millis(100)).await;
                            }
                            (m.pending, m.held, m.counted) = (false, 0, 0);
                        }
                    }
                    Op::SetLimit { amount, count: c } => {
                        (limit, count) = (amount, c);
                        t.set_limits(
                            &card,
                            json!([{"interval": "all_time", "amount": dec(limit), "count": count}]),
                            None,
                        )
                        .await;
                    }
                }
                let spent: i64 = txs.iter().map(|m| m.counted).sum();
                let (s, n) = used(&t, &card, 0).await;
                assert_eq!((micros(&s), n), (spent, used_count), "{ctx}");
                t.verify_ledger().await;
            }
        }
    }
);
