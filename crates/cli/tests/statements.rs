//! Statements (CONTRACT §17) through the public HTTP API, on both backends: random
//! ledger histories over several UTC months against an independent sum (opening +
//! movements = closing, totals, order, paging, month boundaries), and a month of real
//! card activity (topups, purchases, a hold, a refund, a dispute, a closed card).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::TestServer;
use issuing_domain::ledger::AccountKind;
use issuing_domain::statement::{card_category, Period};
use issuing_store::writer::AsBatch;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use std::collections::BTreeMap;

const DAY: i64 = 86_400_000_000;

/// One synthetic transfer: the card's funds (`card`) and its holds (`hold`) change by
/// these amounts, the network's by minus their sum.
#[derive(Debug, Clone)]
struct Op {
    at: i64,
    kind: &'static str,
    card: i64,
    hold: i64,
}

fn micros(v: &Value) -> i64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a decimal: {v}"));
    issuing_wire::Amount::parse_decimal(s).unwrap().micros()
}

/// Writes `ops` as transfers and entries with their own times (entries can only be
/// inserted, never changed: the history is written as it would have been).
async fn write_history(t: &TestServer, card_id: &str, ops: &[Op]) {
    let p = &t.creds.project_id;
    let mut conn = t.store.conn().await.unwrap();
    let card = issuing_store::ledger::card_account_id(&mut conn, p, card_id, AccountKind::Card)
        .await
        .unwrap();
    let hold = issuing_store::ledger::card_account_id(&mut conn, p, card_id, AccountKind::CardHold)
        .await
        .unwrap();
    let network =
        issuing_store::ledger::project_account(&mut conn.as_batch(), p, AccountKind::Network)
            .await
            .unwrap();
    drop(conn);
    let mut balances: BTreeMap<String, i64> = BTreeMap::new();
    let mut sorted = ops.to_vec();
    sorted.sort_by_key(|o| o.at);
    for (i, op) in sorted.iter().enumerate() {
        let transfer = format!("synthetic-{i:06}");
        sqlx::query(
            "INSERT INTO transfers (id, project_id, kind, order_id, card_id, reference, created_at) \
             VALUES ($1, $2, $3, NULL, $4, $5, $6)",
        )
        .bind(&transfer)
        .bind(p)
        .bind(op.kind)
        .bind(card_id)
        .bind(format!("synthetic:{i}"))
        .bind(op.at)
        .execute(t.store.pool())
        .await
        .unwrap();
        for (account, amount) in [
            (&card, op.card),
            (&hold, op.hold),
            (&network, -(op.card + op.hold)),
        ] {
            if amount == 0 {
                continue;
            }
            let after = balances.entry(account.clone()).or_insert(0);
            *after += amount;
            sqlx::query(
                "INSERT INTO entries (transfer_id, account_id, amount, balance_after, created_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(&transfer)
            .bind(account)
            .bind(amount)
            .bind(*after)
            .bind(op.at)
            .execute(t.store.pool())
            .await
            .unwrap();
        }
    }
}

/// A random history over the last `months` UTC months (the current one up to now).
fn history(seed: u64, now: i64, months: i64) -> Vec<Op> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let first = Period::of(now - months * 31 * DAY).unwrap().start;
    let n = rng.gen_range(20..120);
    (0..n)
        .map(|_| {
            // Some exactly on a month's first microsecond, some just before it.
            let at = match rng.gen_range(0..10) {
                0 => Period::of(rng.gen_range(first..now)).unwrap().start,
                1 => Period::of(rng.gen_range(first..now)).unwrap().start - 1,
                _ => rng.gen_range(first..now),
            };
            let a = rng.gen_range(1..5_000_000_000i64);
            let (kind, card, hold) = match rng.gen_range(0..8) {
                0 => ("card_topup", a, 0),
                1 => ("card_withdraw", -a, 0),
                2 => ("card_spend", 0, -a),
                3 => ("card_spend", -a, 0),
                4 => ("card_refund", a, 0),
                5 => ("card_auth_hold", -a, a),
                6 => ("dispute_credit", a, 0),
                _ => ("dispute_debit", -a, 0),
            };
            Op {
                at,
                kind,
                card,
                hold,
            }
        })
        .collect()
}

both_backends!(
    statements_add_up_for_random_histories,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 100_000_000).await;
        let card = t.active_card("ada", "virtual_usd").await;
        let now = common::now_micros();
        // A new history each run; the seed is printed to replay a failure.
        let seed = 0x5eed ^ (now as u64 % 1_000_000);
        eprintln!("statement history seed {seed}");
        let ops = history(seed, now, 4);
        write_history(&t, &card, &ops).await;
        let mut previous_closing: Option<i64> = None;
        let mut month = Period::of(now - 4 * 31 * DAY).unwrap();
        loop {
            let close = month.close(now);
            // The independent sums: only the generated history moves this card.
            let before = |at: i64| -> i64 {
                ops.iter()
                    .filter(|o| o.at < at)
                    .map(|o| o.card + o.hold)
                    .sum()
            };
            let mut inside: Vec<&Op> = ops
                .iter()
                .filter(|o| o.at >= month.start && o.at < close && o.card + o.hold != 0)
                .collect();
            inside.sort_by_key(|o| o.at);
            let mut totals: BTreeMap<&str, i64> = BTreeMap::new();
            for o in &inside {
                *totals.entry(card_category(o.kind).0).or_insert(0) += o.card + o.hold;
            }

            let mut items = Vec::new();
            let mut first: Option<Value> = None;
            loop {
                let s = t
                    .ok(
                        "cards/statement",
                        json!({"card_id": card, "period": month.label(), "skip": items.len(), "limit": 7}),
                    )
                    .await;
                let page = s["items"].as_array().unwrap().clone();
                let done = page.len() < 7;
                items.extend(page);
                first.get_or_insert(s);
                if done {
                    break;
                }
            }
            let s = first.unwrap();
            assert_eq!(s["period"], month.label());
            let opening = micros(&s["opening_balance"]);
            let closing = micros(&s["closing_balance"]);
            assert_eq!(opening, before(month.start), "{}", month.label());
            assert_eq!(closing, before(close), "{}", month.label());
            if let Some(prev) = previous_closing {
                assert_eq!(opening, prev, "a month opens where the last one closed");
            }
            assert_eq!(s["total"], json!(inside.len()));
            assert_eq!(items.len(), inside.len());
            let mut running = opening;
            for (item, op) in items.iter().zip(&inside) {
                let amount = micros(&item["amount"]);
                assert_eq!(amount, op.card + op.hold, "{item}");
                running += amount;
                assert_eq!(micros(&item["balance_after"]), running, "{item}");
                assert_eq!(item["kind"], card_category(op.kind).1);
            }
            assert_eq!(running, closing, "opening + items = closing");
            for (name, value) in s["totals"].as_object().unwrap() {
                assert_eq!(
                    micros(value),
                    totals.get(name.as_str()).copied().unwrap_or(0),
                    "{name} in {}",
                    month.label()
                );
            }
            previous_closing = Some(closing);
            if close == now.min(month.end) && month.end > now {
                break;
            }
            month = Period::of(month.end).unwrap();
        }
    }
);

both_backends!(a_month_of_real_activity, |t: TestServer| async move {
    t.deposit(&t.creds.project_id, 1_000_000_000).await;
    let card = t.active_card("bo", "virtual_usd").await;
    let (s, v) = t.topup(&card, json!("100"), "fund").await;
    assert_eq!(s, 200, "{v}");
    t.wait_order(v["order_id"].as_str().unwrap()).await;
    let auth = |amount: &str| {
        let t = &t;
        let card = card.clone();
        let amount = amount.to_owned();
        async move {
            t.ok(
                    "simulate/cards/auth",
                    json!({"card_id": card, "transactionAmount": amount,
                           "merchant": {"name": "Corner, \"Shop\"", "mcc": "5411", "country": "US"}}),
                )
                .await["transactionId"]
                    .as_str()
                    .unwrap()
                    .to_owned()
        }
    };
    let a = auth("30").await;
    t.ok("simulate/cards/clear", json!({"transactionId": a}))
        .await;
    t.ok(
        "simulate/cards/refund",
        json!({"transactionId": a, "amount": "5"}),
    )
    .await;
    let _held = auth("12.5").await;
    let d = t
            .call_with_headers(
                "disputes/create",
                json!({"transaction_id": a, "reason": "other", "amount": "10", "provisional_credit": true}),
                &[("Idempotency-Key", "d")],
            )
            .await;
    assert_eq!(d.0, 200, "{}", d.1);

    let period = Period::of(common::now_micros()).unwrap().label();
    let s = t
        .ok(
            "cards/statement",
            json!({"card_id": card, "external_user_id": "bo", "period": period}),
        )
        .await;
    assert_eq!(s["opening_balance"], "0.00");
    // 100 − 30 + 5 + 10 = 85, of which 12.50 held.
    assert_eq!(s["closing_balance"], "85.00");
    assert_eq!(s["pending_at_close"], "12.50");
    let b = t
        .ok(
            "cards/balance",
            json!({"card_id": card, "external_user_id": "bo"}),
        )
        .await;
    assert_eq!(b["available"], "72.50", "{b}");
    let totals = &s["totals"];
    assert_eq!(totals["topups"], "100.00");
    assert_eq!(totals["purchases"], "-30.00");
    assert_eq!(totals["refunds"], "5.00");
    assert_eq!(totals["dispute_credits"], "10.00");
    assert_eq!(totals["withdrawals"], "0.00");
    let kinds: Vec<&str> = s["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["topup", "purchase", "refund", "dispute_credit"],
        "the hold is not a movement"
    );
    let purchase = &s["items"][1];
    assert_eq!(purchase["transaction_id"], a.as_str());
    assert_eq!(purchase["description"], "Purchase: Corner, \"Shop\"");
    assert_eq!(purchase["balance_after"], "70.00");
    assert!(s["items"][0]["order_id"].is_string());
    assert!(s["items"][3]["dispute_id"].is_string());
    assert_eq!(
        s["items"][3]["description"],
        "Dispute credit: Corner, \"Shop\""
    );

    // The project: a deposit, an issue fee, a topup and its fee, then a close.
    let (s, v) = t
        .call_with_headers(
            "cards/close",
            json!({"card_id": card}),
            &[("Idempotency-Key", "close")],
        )
        .await;
    assert_eq!(s, 200, "{v}");
    if let Some(w) = v["withdraw_order"]["order_id"].as_str() {
        t.wait_order(w).await;
    }
    let p = t.ok("project/statement", json!({"period": period})).await;
    assert_eq!(p["opening_balance"], "0.00");
    let balance = t.balance().await;
    assert_eq!(p["closing_balance"], balance.as_str());
    let pt = &p["totals"];
    assert_eq!(pt["deposits"], "1000.00");
    assert_eq!(pt["card_issue_fees"], "-2.00");
    assert_eq!(pt["card_topups"], "-101.50", "the topup and its fee");
    assert_eq!(pt["card_withdrawals"], "0.00");
    assert!(micros(&pt["card_closes"]) > 0, "{pt}");
    let sum: i64 = pt.as_object().unwrap().values().map(micros).sum();
    assert_eq!(
        micros(&p["opening_balance"]) + sum,
        micros(&p["closing_balance"])
    );
    let txs = t.ok("project/txs", json!({"limit": 100})).await;
    assert_eq!(p["total"], txs["total"], "items as project/txs lists them");

    // Refusals.
    t.expect_error(
        "cards/statement",
        json!({"card_id": card, "period": "2999-01"}),
        400,
        "validation_error",
    )
    .await;
    t.expect_error(
        "cards/statement",
        json!({"card_id": card, "period": "2026-1"}),
        400,
        "validation_error",
    )
    .await;
    t.expect_error(
        "cards/statement",
        json!({"card_id": card, "period": period, "limit": 501}),
        400,
        "validation_error",
    )
    .await;
    t.expect_error(
        "cards/statement",
        json!({"card_id": "nope", "period": period}),
        404,
        "card_not_found",
    )
    .await;
    let other = t.new_project("other").await;
    let (s, v) = t
        .call_as(
            &other,
            "cards/statement",
            json!({"card_id": card, "period": period}),
        )
        .await;
    assert_eq!((s, v["error_slug"].clone()), (404, json!("card_not_found")));
    let (_, theirs) = t
        .call_as(&other, "project/statement", json!({"period": period}))
        .await;
    assert_eq!(theirs["total"], 0, "{theirs}");
    t.verify_ledger().await;
});
