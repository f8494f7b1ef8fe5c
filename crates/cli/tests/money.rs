//! Money over HTTP: cards/topup and cards/withdraw orders through the worker, initial
//! topups on cards/create, the sandbox decline triggers, idempotency keys, concurrency
//! on one master balance and one card, and a property test of random operation
//! sequences against an in-memory model of every balance.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::cards::kyc;
use common::{Creds, TestServer};
use issuing_client::{CardsTopup, ListQuery, ProjectTx, ProjectTxs};
use issuing_wire::Amount;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};

/// Micro-units of a decimal string.
fn m(s: &str) -> i64 {
    Amount::parse_decimal(s).unwrap().micros()
}

/// The wire form of an amount in micro-units (`"12.50"`, `"0.000001"`).
fn s(micros: i64) -> String {
    Amount::from_micros(micros).to_string()
}

/// Sandbox catalog (CONTRACT §8): topup fee 1% (rounded up to a micro-unit) + 0.50.
fn topup_fee(amount: i64) -> i64 {
    (amount + 99) / 100 + 500_000
}

const ISSUE_FEE: i64 = 2_000_000;
const NO_CARD: &str = "000000000000000000000000";

/// The sandbox provider declines topups and withdraws whose amount ends in exactly .66.
fn declined(amount: i64) -> bool {
    amount % 1_000_000 == 660_000
}

async fn master(t: &TestServer) -> i64 {
    m(&t.balance().await)
}

/// Master-account history lines of one order, oldest first: (type, amount, item).
async fn lines_of(t: &TestServer, order_id: &str) -> Vec<(String, String, ProjectTx)> {
    let page = t
        .sdk()
        .project_txs(&ProjectTxs {
            order_ids: vec![order_id.to_owned()],
            page: ListQuery {
                sort_dir: Some("asc".into()),
                ..ListQuery::default()
            },
            ..ProjectTxs::default()
        })
        .await
        .unwrap();
    page.items
        .into_iter()
        .map(|i| (i.kind.clone(), i.amount.as_str().to_owned(), i))
        .collect()
}

fn order_id(v: &Value) -> String {
    v["order_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no order_id in {v}"))
        .to_owned()
}

both_backends!(
    topup_happy_path_moves_money_through_the_order,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, m("200")).await;
        let card = t.active_card("ada", "virtual_usd").await;
        assert_eq!(t.balance().await, "198.00");

        let (status, v) = t.topup(&card, json!("100"), "t1").await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["success"], true);
        assert_eq!(v["order_type"], "card_topup", "{v}");
        assert_eq!(v["status"], "new");
        assert_eq!(v["topup_status"], "new");
        assert_eq!(v["card_id"], json!(card));
        assert_eq!(v["balance_before"], "198.00");
        assert_eq!(v["balance_after"], "96.50");
        assert_eq!(v["data"]["amount"], "100.00");
        assert_eq!(v["data"]["fee"], "1.50");
        assert_eq!(v["data"]["total"], "101.50");
        assert!(
            v["issue_status"].is_null() && v["completed_at"].is_null(),
            "{v}"
        );
        let id = order_id(&v);
        // The master balance pays when the order is created, before the provider runs.
        assert_eq!(t.balance().await, "96.50");

        let done = t.wait_order(&id).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["topup_status"], "completed");
        assert_eq!(done["order_type"], "card_topup");
        assert!(done["completed_at"].is_string() && done["failed_at"].is_null());
        assert!(done["last_error_slug"].is_null(), "{done}");
        assert_eq!(t.card_balance("ada", &card).await, "100.00");
        assert_eq!(t.balance().await, "96.50");

        let lines = lines_of(&t, &id).await;
        let kinds: Vec<(&str, &str)> = lines
            .iter()
            .map(|(k, a, _)| (k.as_str(), a.as_str()))
            .collect();
        assert_eq!(kinds, [("card_topup", "-100.00"), ("fee", "-1.50")]);
        for (_, _, item) in &lines {
            assert_eq!(item.order_id.as_deref(), Some(id.as_str()));
            assert_eq!(item.card_id.as_deref(), Some(card.as_str()));
        }
        assert_eq!(lines[1].2.balance_after.as_str(), "96.50");

        let events = t.events(&t.creds.project_id).await;
        let topups: Vec<_> = events
            .iter()
            .filter(|e| e.event_type == "card.topup")
            .collect();
        assert_eq!(topups.len(), 1, "{events:?}");
        assert_eq!(topups[0].payload["amount"], "100.00");
        assert_eq!(topups[0].payload["order_id"], json!(id));
        assert_eq!(topups[0].card_id.as_deref(), Some(card.as_str()));

        // A JSON number is an amount too; sub-cent fees are kept to the micro-unit.
        let (status, v) = t.topup(&card, json!(20.5), "t2").await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["data"]["amount"], "20.50");
        assert_eq!(v["data"]["fee"], "0.705");
        let done = t.wait_order(&order_id(&v)).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(t.card_balance("ada", &card).await, "120.50");
        assert_eq!(t.balance().await, "75.295");
        t.verify_ledger().await;
    }
);

both_backends!(
    topup_validation_errors_charge_nothing,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, m("50")).await;
        let card = t.active_card("ada", "virtual_usd").await;
        let mut model = m("48");
        let topup = |amount: Value, key: &str| json!({"card_id": card, "amount": amount, "idempotency_key": key});

        t.expect_error(
            "cards/topup",
            json!({"card_id": card, "amount": "10"}),
            400,
            "idempotency_key_required",
        )
        .await;
        t.expect_error(
            "cards/topup",
            json!({"card_id": card, "amount": "10", "idempotency_key": ""}),
            400,
            "idempotency_key_required",
        )
        .await;
        // One key for every refused request: a refused request releases its key.
        for bad in [
            json!("abc"),
            json!("0"),
            json!("-5"),
            json!("1.0000001"),
            json!(-5),
            json!(0),
            json!(""),
            json!(null),
            json!(true),
        ] {
            t.expect_error("cards/topup", topup(bad, "v"), 400, "invalid_amount")
                .await;
        }
        t.expect_error(
            "cards/topup",
            json!({"card_id": card, "idempotency_key": "v"}),
            400,
            "invalid_amount",
        )
        .await;
        let mut eur = topup(json!("10"), "v");
        eur["currency"] = json!("EUR");
        t.expect_error("cards/topup", eur, 422, "currency_mismatch")
            .await;
        let mut unknown = topup(json!("10"), "v");
        unknown["card_id"] = json!(NO_CARD);
        t.expect_error("cards/topup", unknown, 404, "card_not_found")
            .await;
        t.expect_error(
            "cards/topup",
            json!({"amount": "10", "idempotency_key": "v"}),
            400,
            "validation_error",
        )
        .await;
        t.ok("users/create", json!({"external_user_id": "eve"}))
            .await;
        let mut other_user = topup(json!("10"), "v");
        other_user["external_user_id"] = json!("eve");
        t.expect_error("cards/topup", other_user, 422, "card_user_mismatch")
            .await;
        t.expect_error(
            "cards/topup",
            topup(json!("9.99"), "v"),
            422,
            "amount_below_minimum",
        )
        .await;
        t.expect_error(
            "cards/topup",
            topup(json!("5000.01"), "v"),
            422,
            "amount_above_maximum",
        )
        .await;
        // Within the limits but more than the master balance holds.
        t.expect_error(
            "cards/topup",
            topup(json!("5000.00"), "v"),
            403,
            "insufficient_funds",
        )
        .await;
        t.expect_error(
            "cards/topup",
            topup(json!("47.53"), "v"),
            403,
            "insufficient_funds",
        )
        .await;
        t.ok("cards/freeze", json!({"card_id": card})).await;
        t.expect_error(
            "cards/topup",
            topup(json!("10"), "v"),
            422,
            "card_not_active",
        )
        .await;
        t.ok("cards/unfreeze", json!({"card_id": card})).await;

        // Nothing above charged anything or created an order.
        assert_eq!(master(&t).await, model);
        let txs = t.ok("project/txs", json!({"type": "card_topup"})).await;
        assert_eq!(txs["total"], 0, "{txs}");
        let events = t.events(&t.creds.project_id).await;
        assert!(!events.iter().any(|e| e.event_type == "card.topup"));

        // USDT in any letter case; the released key works for the corrected request.
        for (currency, key) in [("usdt", "v"), ("USDT", "u2"), (" Usdt ", "u3")] {
            let mut body = topup(json!("10"), key);
            body["currency"] = json!(currency);
            let v = t.ok("cards/topup", body).await;
            assert_eq!(v["data"]["amount"], "10.00");
            assert_eq!(v["data"]["fee"], "0.60");
            model -= m("10.60");
            assert_eq!(t.wait_order(&order_id(&v)).await["status"], "completed");
        }
        // The whole remaining balance, to the micro-unit: 16.20 = 15.544554 + 0.655446.
        assert_eq!(model, m("16.20"));
        let v = t.ok("cards/topup", topup(json!("15.544554"), "all")).await;
        assert_eq!(v["data"]["fee"], "0.655446");
        t.expect_error(
            "cards/topup",
            topup(json!("10"), "after"),
            403,
            "insufficient_funds",
        )
        .await;
        model -= m("15.544554") + m("0.655446");
        assert_eq!(model, 0);
        assert_eq!(master(&t).await, model);
        assert_eq!(t.wait_order(&order_id(&v)).await["status"], "completed");
        assert_eq!(t.card_balance("ada", &card).await, "45.544554");
        t.verify_ledger().await;
    }
);

both_backends!(
    topup_provider_decline_refunds_everything,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, m("100")).await;
        let card = t.active_card("ada", "virtual_usd").await;
        let (status, v) = t.topup(&card, json!("12.66"), "d1").await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["data"]["fee"], "0.6266");
        assert_eq!(v["balance_after"], "84.7134");
        let id = order_id(&v);
        let done = t.wait_order(&id).await;
        assert_eq!(done["status"], "failed", "{done}");
        assert_eq!(done["topup_status"], "failed");
        assert_eq!(done["last_error_slug"], "provider_error");
        assert!(done["last_error"].as_str().is_some_and(|e| !e.is_empty()));
        assert!(done["failed_at"].is_string() && done["completed_at"].is_null());
        assert_eq!(done["balance_after"], "98.00");
        assert_eq!(t.balance().await, "98.00");
        assert_eq!(t.card_balance("ada", &card).await, "0.00");

        let lines = lines_of(&t, &id).await;
        let mut kinds: Vec<(&str, &str)> = lines
            .iter()
            .map(|(k, a, _)| (k.as_str(), a.as_str()))
            .collect();
        kinds.sort();
        assert_eq!(
            kinds,
            [
                ("card_topup", "-12.66"),
                ("fee", "-0.6266"),
                ("refund", "0.6266"),
                ("refund", "12.66")
            ]
        );
        assert!(lines
            .iter()
            .all(|(_, _, i)| i.card_id.as_deref() == Some(card.as_str())));

        // Only .66 declines: a neighbouring amount goes through.
        let sdk = t.sdk();
        let topup = CardsTopup {
            card_id: card.clone(),
            amount: "12.65".into(),
            ..CardsTopup::default()
        };
        let order = sdk.cards_topup(&topup, "d2").await.unwrap();
        let done = sdk
            .wait_order(&order.order_id, std::time::Duration::from_secs(20))
            .await
            .unwrap();
        assert_eq!(done.status, "completed", "{done:?}");
        assert_eq!(t.card_balance("ada", &card).await, "12.65");
        assert_eq!(
            master(&t).await,
            m("98") - m("12.65") - topup_fee(m("12.65"))
        );
        t.verify_ledger().await;
    }
);

both_backends!(
    withdraw_moves_card_funds_back_to_master,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, m("200")).await;
        let card = t.active_card("ada", "virtual_usd").await;
        let (_, v) = t.topup(&card, json!("100"), "t1").await;
        assert_eq!(t.wait_order(&order_id(&v)).await["status"], "completed");
        assert_eq!(t.balance().await, "96.50");

        let (status, v) = t.withdraw(&card, json!("40"), "w1").await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["success"], true);
        assert_eq!(v["order_type"], "card_withdraw", "{v}");
        assert_eq!(v["status"], "new");
        assert_eq!(v["card_id"], json!(card));
        assert_eq!(v["data"]["amount"], "40.00");
        assert!(v["topup_status"].is_null(), "{v}");
        // The funds leave the card at once, whatever the worker is doing.
        assert_eq!(t.card_balance("ada", &card).await, "60.00");
        let id = order_id(&v);
        let done = t.wait_order(&id).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["balance_after"], "136.50");
        assert_eq!(t.card_balance("ada", &card).await, "60.00");
        assert_eq!(t.balance().await, "136.50");
        let lines = lines_of(&t, &id).await;
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(
            (lines[0].0.as_str(), lines[0].1.as_str()),
            ("card_withdraw", "40.00")
        );
        assert_eq!(lines[0].2.card_id.as_deref(), Some(card.as_str()));

        // More than the card holds.
        t.expect_error(
            "cards/withdraw",
            json!({"card_id": card, "amount": "60.01", "idempotency_key": "w2"}),
            403,
            "insufficient_funds",
        )
        .await;
        // Errors shared with topup.
        t.expect_error(
            "cards/withdraw",
            json!({"card_id": card, "amount": "1"}),
            400,
            "idempotency_key_required",
        )
        .await;
        for bad in [json!("abc"), json!("0"), json!("-1"), json!("0.0000001")] {
            t.expect_error(
                "cards/withdraw",
                json!({"card_id": card, "amount": bad, "idempotency_key": "w2"}),
                400,
                "invalid_amount",
            )
            .await;
        }
        t.expect_error(
            "cards/withdraw",
            json!({"card_id": card, "amount": "1", "currency": "EUR", "idempotency_key": "w2"}),
            422,
            "currency_mismatch",
        )
        .await;
        t.expect_error(
            "cards/withdraw",
            json!({"card_id": NO_CARD, "amount": "1", "idempotency_key": "w2"}),
            404,
            "card_not_found",
        )
        .await;
        assert_eq!(t.card_balance("ada", &card).await, "60.00");
        assert_eq!(t.balance().await, "136.50");

        // The sandbox declines .66: the order fails and the card gets its funds back.
        let (status, v) = t.withdraw(&card, json!("10.66"), "w3").await;
        assert_eq!(status, 200, "{v}");
        let done = t.wait_order(&order_id(&v)).await;
        assert_eq!(done["status"], "failed", "{done}");
        assert_eq!(done["last_error_slug"], "provider_error");
        assert!(done["failed_at"].is_string());
        assert_eq!(t.card_balance("ada", &card).await, "60.00");
        assert_eq!(t.balance().await, "136.50");
        // Small amounts and the whole balance, in any currency case.
        let (_, v) = t
            .call(
                "cards/withdraw",
                json!({"card_id": card, "amount": 60, "currency": "Usdt", "idempotency_key": "w4"}),
            )
            .await;
        assert_eq!(t.wait_order(&order_id(&v)).await["status"], "completed");
        assert_eq!(t.card_balance("ada", &card).await, "0.00");
        assert_eq!(t.balance().await, "196.50");

        // A restricted card's provider cannot withdraw.
        let rita = t.active_card("rita", "virtual_usd_restricted").await;
        let (_, v) = t.topup(&rita, json!("10"), "rt").await;
        assert_eq!(t.wait_order(&order_id(&v)).await["status"], "completed");
        t.expect_error(
            "cards/withdraw",
            json!({"card_id": rita, "amount": "5", "idempotency_key": "rw"}),
            422,
            "provider_withdraw_not_supported",
        )
        .await;
        assert_eq!(t.card_balance("rita", &rita).await, "10.00");
        assert_eq!(t.balance().await, "183.90");
        t.verify_ledger().await;
    }
);

both_backends!(
    initial_topup_on_issue_and_issue_declines,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, m("100")).await;
        t.cardholder("ada", "sandbox").await;
        let v = t
            .ok(
                "cards/create",
                json!({"external_user_id": "ada", "product_code": "virtual_usd",
                       "idempotency_key": "i1", "initial_topup": "50"}),
            )
            .await;
        let card = v["card_id"].as_str().unwrap().to_owned();
        assert_eq!(v["order"]["data"]["initial_topup"]["amount"], "50.00");
        assert_eq!(v["order"]["data"]["initial_topup"]["fee"], "1.00");
        assert_eq!(v["order"]["balance_before"], "100.00");
        assert_eq!(v["order"]["balance_after"], "47.00");
        let done = t.wait_order(&order_id(&v["order"])).await;
        assert_eq!(done["status"], "completed", "{done}");
        assert_eq!(done["issue_status"], "completed");
        assert_eq!(done["is_issued"], true);
        assert_eq!(t.card_balance("ada", &card).await, "50.00");
        assert_eq!(t.balance().await, "47.00");
        let lines = lines_of(&t, &order_id(&v["order"])).await;
        let mut kinds: Vec<(&str, &str)> = lines
            .iter()
            .map(|(k, a, _)| (k.as_str(), a.as_str()))
            .collect();
        kinds.sort();
        assert_eq!(
            kinds,
            [
                ("card_issue", "-2.00"),
                ("card_topup", "-50.00"),
                ("fee", "-1.00")
            ]
        );

        // Topup rules apply to the initial topup, before anything is charged.
        t.cardholder("bo", "sandbox").await;
        let create = |key: &str, amount: Value| {
            json!({"external_user_id": "bo", "product_code": "virtual_usd",
                   "idempotency_key": key, "initial_topup": amount})
        };
        t.expect_error(
            "cards/create",
            create("b", json!("9.99")),
            422,
            "amount_below_minimum",
        )
        .await;
        t.expect_error(
            "cards/create",
            create("b", json!("abc")),
            400,
            "invalid_amount",
        )
        .await;
        t.expect_error(
            "cards/create",
            create("b", json!("46")),
            403,
            "insufficient_funds",
        )
        .await;
        assert_eq!(t.balance().await, "47.00");

        // A declined initial topup: the card is issued and keeps its fee, the topup and
        // its fee come back.
        let v = t.ok("cards/create", create("b", json!("20.66"))).await;
        let bo_card = v["card_id"].as_str().unwrap().to_owned();
        let done = t.wait_order(&order_id(&v["order"])).await;
        assert_eq!(done["status"], "failed", "{done}");
        assert_eq!(done["issue_status"], "initial_topup_error");
        assert_eq!(done["last_error_slug"], "provider_error");
        assert_eq!(done["is_issued"], true);
        assert_eq!(t.card_balance("bo", &bo_card).await, "0.00");
        assert_eq!(t.balance().await, "45.00");
        assert_eq!(done["balance_after"], "45.00");

        // A holder named "... Decline": the provider refuses the card; the fee comes back.
        let mut k = kyc();
        k["last_name"] = json!("Decline");
        t.ok(
            "cardholders/create",
            json!({"external_user_id": "dee", "subprovider_code": "sandbox", "kyc_data": k}),
        )
        .await;
        let (status, v) = t.create_card("dee", "virtual_usd", "dee1").await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["order"]["balance_after"], "43.00");
        let done = t.wait_order(&order_id(&v["order"])).await;
        assert_eq!(done["status"], "failed", "{done}");
        assert_eq!(done["issue_status"], "card_create_error");
        assert_eq!(done["last_error_slug"], "provider_error");
        assert_eq!(done["is_issued"], false);
        assert!(
            done["last_error"].as_str().unwrap().contains("Decline"),
            "{done}"
        );
        let c = t
            .ok(
                "cards/get",
                json!({"card_id": v["card_id"], "external_user_id": "dee"}),
            )
            .await;
        assert_eq!(c["status"], "failed");
        assert_eq!(t.balance().await, "45.00");
        // Also with an initial topup: everything comes back.
        let v = t
            .ok(
                "cards/create",
                json!({"external_user_id": "dee", "product_code": "virtual_usd",
                       "idempotency_key": "dee2", "initial_topup": "10"}),
            )
            .await;
        assert_eq!(v["order"]["balance_after"], "32.40");
        let done = t.wait_order(&order_id(&v["order"])).await;
        assert_eq!(done["status"], "failed", "{done}");
        assert_eq!(t.balance().await, "45.00");
        t.verify_ledger().await;
    }
);

both_backends!(
    idempotency_keys_return_the_first_order,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, m("100")).await;
        let card = t.active_card("ada", "virtual_usd").await;
        let (status, first) = t.topup(&card, json!("10"), "k1").await;
        assert_eq!(status, 200, "{first}");
        let id = order_id(&first);
        t.wait_order(&id).await;
        assert_eq!(t.balance().await, "87.40");

        // The same key and parameters: the stored response, no second charge.
        let (status, again) = t.topup(&card, json!("10"), "k1").await;
        assert_eq!(status, 200, "{again}");
        assert_eq!(again, first);
        // Also from another server process on the same database.
        let sibling = t.sibling().await;
        let base = format!("http://{}", sibling.addr);
        let (status, there) = t
            .call_on(
                &base,
                &t.creds,
                "cards/topup",
                json!({"card_id": card, "amount": "10", "idempotency_key": "k1"}),
            )
            .await;
        assert_eq!(status, 200, "{there}");
        assert_eq!(order_id(&there), id);
        drop(sibling);
        assert_eq!(t.balance().await, "87.40");
        assert_eq!(t.card_balance("ada", &card).await, "10.00");
        let txs = t.ok("project/txs", json!({"type": "card_topup"})).await;
        assert_eq!(txs["total"], 1, "{txs}");

        // The same key with other parameters.
        for body in [
            json!({"card_id": card, "amount": "11", "idempotency_key": "k1"}),
            json!({"card_id": card, "amount": "10", "currency": "usdt", "idempotency_key": "k1"}),
        ] {
            let e = t
                .expect_error("cards/topup", body, 400, "idempotency_conflict")
                .await;
            let msg = e["error"].as_str().unwrap();
            assert!(msg.contains("parameters"), "{msg}");
        }
        // Header and body keys must agree.
        let (status, e) = t
            .call_with_headers(
                "cards/topup",
                json!({"card_id": card, "amount": "10", "idempotency_key": "k1"}),
                &[("Idempotency-Key", "k2")],
            )
            .await;
        assert_eq!(
            (status, e["error_slug"].as_str()),
            (400, Some("validation_error")),
            "{e}"
        );

        // The header alone carries the key; the body field names the same key.
        let (status, h) = t
            .call_with_headers(
                "cards/topup",
                json!({"card_id": card, "amount": "10"}),
                &[("Idempotency-Key", "h1")],
            )
            .await;
        assert_eq!(status, 200, "{h}");
        assert_ne!(order_id(&h), id);
        let (_, h2) = t
            .call_with_headers(
                "cards/topup",
                json!({"card_id": card, "amount": "10"}),
                &[("Idempotency-Key", "h1")],
            )
            .await;
        assert_eq!(order_id(&h2), order_id(&h));
        let (_, h3) = t.topup(&card, json!("10"), "h1").await;
        assert_eq!(order_id(&h3), order_id(&h));
        let (_, h4) = t
            .call_with_headers(
                "cards/topup",
                json!({"card_id": card, "amount": "10", "idempotency_key": "h1"}),
                &[("Idempotency-Key", "h1")],
            )
            .await;
        assert_eq!(order_id(&h4), order_id(&h));
        t.wait_order(&order_id(&h)).await;
        assert_eq!(t.balance().await, "76.80");

        // Keys are per endpoint: the topup's key is free on cards/withdraw, and a
        // withdraw retried with its key is done once.
        let (status, w) = t.withdraw(&card, json!("5"), "k1").await;
        assert_eq!(status, 200, "{w}");
        assert_eq!(w["order_type"], "card_withdraw");
        let (_, w2) = t.withdraw(&card, json!("5"), "k1").await;
        assert_eq!(order_id(&w2), order_id(&w));
        t.expect_error(
            "cards/withdraw",
            json!({"card_id": card, "amount": "6", "idempotency_key": "k1"}),
            400,
            "idempotency_conflict",
        )
        .await;
        t.wait_order(&order_id(&w)).await;
        assert_eq!(t.card_balance("ada", &card).await, "15.00");
        assert_eq!(t.balance().await, "81.80");

        // A refused request (here: too little on the card) releases its key.
        let (status, _) = t.withdraw(&card, json!("500"), "k9").await;
        assert_eq!(status, 403);
        let (status, w) = t.withdraw(&card, json!("1"), "k9").await;
        assert_eq!(status, 200, "{w}");
        t.wait_order(&order_id(&w)).await;
        assert_eq!(t.balance().await, "82.80");
        t.verify_ledger().await;
    }
);

both_backends!(
    one_key_in_parallel_creates_one_order,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, m("100")).await;
        let card = t.active_card("ada", "virtual_usd").await;
        let calls = (0..16).map(|_| t.topup(&card, json!("10"), "same"));
        let results = futures::future::join_all(calls).await;
        let mut ids = HashSet::new();
        for (status, v) in &results {
            match status {
                200 => {
                    ids.insert(order_id(v));
                }
                400 => assert_eq!(v["error_slug"], "idempotency_conflict", "{v}"),
                _ => panic!("unexpected {status}: {v}"),
            }
        }
        assert_eq!(ids.len(), 1, "{results:?}");
        assert_eq!(t.balance().await, "87.40");
        let txs = t.ok("project/txs", json!({"type": "card_topup"})).await;
        assert_eq!(txs["total"], 1, "{txs}");
        let id = ids.into_iter().next().unwrap();
        assert_eq!(t.wait_order(&id).await["status"], "completed");
        // Afterwards the key answers the same order every time.
        let (status, v) = t.topup(&card, json!("10"), "same").await;
        assert_eq!((status, order_id(&v)), (200, id));
        assert_eq!(t.card_balance("ada", &card).await, "10.00");
        assert_eq!(t.balance().await, "87.40");
        t.verify_ledger().await;
    }
);

both_backends!(parallel_topups_never_overdraw, |t: TestServer| async move {
    // Room for exactly 7 topups of 10.00 (+0.60 fee) and 5.00 to spare.
    t.deposit(&t.creds.project_id, ISSUE_FEE + 7 * m("10.60") + m("5"))
        .await;
    let card = t.active_card("ada", "virtual_usd").await;
    let calls = (0..50).map(|i| {
        let t = &t;
        let card = &card;
        async move { t.topup(card, json!("10"), &format!("p{i}")).await }
    });
    let results = futures::future::join_all(calls).await;
    let mut orders = Vec::new();
    let mut refused = 0;
    for (status, v) in &results {
        match status {
            200 => {
                // Each order shows its own debit, even with others racing it.
                let before = m(v["balance_before"].as_str().unwrap());
                let after = m(v["balance_after"].as_str().unwrap());
                assert_eq!(before - after, m("10.60"), "{v}");
                orders.push(order_id(v));
            }
            403 => {
                assert_eq!(v["error_slug"], "insufficient_funds", "{v}");
                refused += 1;
            }
            _ => panic!("unexpected {status}: {v}"),
        }
    }
    assert_eq!((orders.len(), refused), (7, 43), "{results:?}");
    assert_eq!(t.balance().await, "5.00");
    for id in &orders {
        assert_eq!(t.wait_order(id).await["status"], "completed");
    }
    assert_eq!(t.card_balance("ada", &card).await, "70.00");
    assert_eq!(t.balance().await, "5.00");
    let txs = t.ok("project/txs", json!({"type": "card_topup"})).await;
    assert_eq!(txs["total"], 7);
    t.verify_ledger().await;
});

both_backends!(
    topups_and_withdraws_racing_on_one_card,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, m("1000")).await;
        let card = t.active_card("ada", "virtual_usd").await;
        let (_, v) = t.topup(&card, json!("30"), "seed").await;
        t.wait_order(&order_id(&v)).await;
        let mut card_model = m("30");
        let mut master_model = m("998") - m("30") - topup_fee(m("30"));
        let mut pending = Vec::new();
        for round in 0..10 {
            // Withdraws larger than a topup, so some find the card short and some do not.
            let topup_amount = m("10") + round * m("1.01");
            let withdraw_amount = m("13.50") + round * m("0.5");
            let (tkey, wkey) = (format!("t{round}"), format!("w{round}"));
            let (top, wd) = tokio::join!(
                t.topup(&card, json!(s(topup_amount)), &tkey),
                t.withdraw(&card, json!(s(withdraw_amount)), &wkey),
            );
            assert_eq!(top.0, 200, "{top:?}");
            master_model -= topup_amount + topup_fee(topup_amount);
            card_model += topup_amount;
            pending.push(order_id(&top.1));
            match wd.0 {
                200 => {
                    card_model -= withdraw_amount;
                    master_model += withdraw_amount;
                    pending.push(order_id(&wd.1));
                }
                403 => assert_eq!(wd.1["error_slug"], "insufficient_funds", "{wd:?}"),
                _ => panic!("unexpected {wd:?}"),
            }
        }
        for id in &pending {
            assert_eq!(t.wait_order(id).await["status"], "completed");
        }
        assert_eq!(m(&t.card_balance("ada", &card).await), card_model);
        assert_eq!(master(&t).await, master_model);
        t.verify_ledger().await;
    }
);

/// Calls made as one project (other than the harness's default one).
struct Api<'a> {
    t: &'a TestServer,
    c: Creds,
}

impl Api<'_> {
    async fn call(&self, path: &str, body: Value) -> (u16, Value) {
        self.t.call_as(&self.c, path, body).await
    }

    async fn ok(&self, path: &str, body: Value) -> Value {
        let (status, v) = self.call(path, body).await;
        assert_eq!(status, 200, "{path}: {v}");
        v
    }

    async fn wait_order(&self, id: &str) -> Value {
        for _ in 0..400 {
            let v = self.ok("orders/check", json!({"order_id": id})).await;
            if v["status"] == "completed" || v["status"] == "failed" {
                return v;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        panic!("order {id} did not finish");
    }

    async fn master(&self) -> i64 {
        m(self.ok("project/balance", json!({})).await["available"]
            .as_str()
            .unwrap())
    }

    async fn card_balance(&self, user: &str, card: &str) -> i64 {
        let v = self
            .ok(
                "cards/balance",
                json!({"card_id": card, "external_user_id": user}),
            )
            .await;
        m(v["available"].as_str().unwrap())
    }

    async fn cardholder(&self, user: &str, last_name: &str) {
        let mut k = kyc();
        k["last_name"] = json!(last_name);
        self.ok(
            "cardholders/create",
            json!({"external_user_id": user, "subprovider_code": "sandbox", "kyc_data": k}),
        )
        .await;
    }
}

/// Whether the project's fee account sorts before its master account: the order in
/// which a transfer between them locks the two rows on PostgreSQL.
async fn fee_account_sorts_first(t: &TestServer, project_id: &str) -> bool {
    use sqlx::Row;
    let mut conn = t.store.conn().await.unwrap();
    let rows =
        sqlx::query("SELECT id, kind FROM accounts WHERE project_id = $1 AND card_id IS NULL")
            .bind(project_id)
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    let id_of = |kind: &str| -> String {
        rows.iter()
            .find(|r| r.get::<String, _>("kind") == kind)
            .map(|r| r.get::<String, _>("id"))
            .unwrap()
    };
    id_of("fee_income") < id_of("master")
}

both_backends!(
    issues_and_topups_racing_on_one_master,
    |t: TestServer| async move {
        // Account ids are random within a second; pick a project whose fee account sorts
        // before its master account, the order in which a topup (master first, then the
        // fee account) and an issue (fee account first, then master) take their locks in
        // opposite order.
        let mut creds = None;
        for i in 0..64 {
            let c = t.new_project(&format!("race {i}")).await;
            if fee_account_sorts_first(&t, &c.project_id).await {
                creds = Some(c);
                break;
            }
        }
        let api = Api {
            t: &t,
            c: creds.expect("no project with the fee account first"),
        };
        t.deposit(&api.c.project_id, m("1000")).await;
        api.cardholder("ada", "Lovelace").await;
        let (_, v) = api
            .call(
                "cards/create",
                json!({"external_user_id": "ada", "product_code": "virtual_usd", "idempotency_key": "ada"}),
            )
            .await;
        let card = v["card_id"].as_str().unwrap().to_owned();
        assert_eq!(
            api.wait_order(&order_id(&v["order"])).await["status"],
            "completed"
        );
        for i in 0..12 {
            api.cardholder(&format!("u{i}"), "Lovelace").await;
        }
        let mut model = m("998");
        for round in 0..3 {
            let issues = (0..4).map(|i| {
                let api = &api;
                let user = format!("u{}", round * 4 + i);
                async move {
                    api.call(
                        "cards/create",
                        json!({"external_user_id": user, "product_code": "virtual_usd", "idempotency_key": user}),
                    )
                    .await
                }
            });
            let topups = (0..4).map(|i| {
                let api = &api;
                let card = &card;
                async move {
                    api.call(
                        "cards/topup",
                        json!({"card_id": card, "amount": "10", "idempotency_key": format!("r{round}t{i}")}),
                    )
                    .await
                }
            });
            let (issues, topups) = tokio::join!(
                futures::future::join_all(issues),
                futures::future::join_all(topups)
            );
            for (status, v) in issues.iter().chain(&topups) {
                assert_eq!(*status, 200, "{v}");
            }
            model -= 4 * ISSUE_FEE + 4 * m("10.60");
            for (_, v) in &issues {
                api.wait_order(&order_id(&v["order"])).await;
            }
            for (_, v) in &topups {
                api.wait_order(&order_id(v)).await;
            }
        }
        assert_eq!(api.master().await, model);
        assert_eq!(api.card_balance("ada", &card).await, m("120"));
        t.verify_ledger().await;
    }
);

// ---------------------------------------------------------------------------------
// Property test: random operation sequences against a model of every balance.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

#[derive(Debug, Clone)]
enum Op {
    /// Credit the master balance.
    Deposit(i64),
    /// A new user and card; `decline` names the holder "... Decline".
    Issue { decline: bool },
    /// Top up the card at `card` (index modulo the cards issued so far).
    Topup { card: usize, amount: i64 },
    /// Withdraw `percent` of the card's balance (over 100: more than it holds).
    Withdraw {
        card: usize,
        percent: i64,
        decline: bool,
    },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (1i64..=150_000_000).prop_map(Op::Deposit),
        2 => prop::bool::weighted(0.25).prop_map(|decline| Op::Issue { decline }),
        4 => (any::<usize>(), 5_000_000i64..=120_000_000, prop::bool::weighted(0.2)).prop_map(
            |(card, amount, decline)| Op::Topup {
                card,
                // An amount ending in .66 is declined by the sandbox provider.
                amount: if decline { amount / 1_000_000 * 1_000_000 + 660_000 } else { amount },
            }
        ),
        3 => (any::<usize>(), 1i64..=130, prop::bool::weighted(0.2)).prop_map(
            |(card, percent, decline)| Op::Withdraw { card, percent, decline }
        ),
    ]
}

struct ModelCard {
    id: String,
    user: String,
    active: bool,
    balance: i64,
}

async fn run_ops(api: &Api<'_>, ops: &[Op], tally: &mut BTreeMap<&'static str, usize>) {
    let mut master = 0i64;
    let mut cards: Vec<ModelCard> = Vec::new();
    let mut n = 0;
    for (step, op) in ops.iter().enumerate() {
        let ctx = format!("step {step} {op:?} of {ops:?}");
        n += 1;
        let key = format!("op{n}");
        // Refused steps leave the loop body early through `break 'step`; the checks
        // after it run for every step.
        let outcome: &str = 'step: {
            match op {
                Op::Deposit(amount) => {
                    api.t.deposit(&api.c.project_id, *amount).await;
                    master += amount;
                    "deposit"
                }
                Op::Issue { decline } => {
                    let user = format!("user{n}");
                    api.cardholder(&user, if *decline { "Decline" } else { "Lovelace" })
                        .await;
                    let (status, v) = api
                    .call(
                        "cards/create",
                        json!({"external_user_id": user, "product_code": "virtual_usd", "idempotency_key": key}),
                    )
                    .await;
                    if master < ISSUE_FEE {
                        assert_eq!(
                            (status, v["error_slug"].as_str()),
                            (403, Some("insufficient_funds")),
                            "{ctx}: {v}"
                        );
                        break 'step "issue refused";
                    }
                    assert_eq!(status, 200, "{ctx}: {v}");
                    let done = api.wait_order(&order_id(&v["order"])).await;
                    let expected = if *decline { "failed" } else { "completed" };
                    assert_eq!(done["status"], expected, "{ctx}: {done}");
                    if !*decline {
                        master -= ISSUE_FEE;
                    }
                    cards.push(ModelCard {
                        id: v["card_id"].as_str().unwrap().to_owned(),
                        user,
                        active: !*decline,
                        balance: 0,
                    });
                    if *decline {
                        "issue declined"
                    } else {
                        "issue completed"
                    }
                }
                Op::Topup { card, amount } => {
                    if cards.is_empty() {
                        break 'step "no card yet";
                    }
                    let count = cards.len();
                    let c = &mut cards[card % count];
                    let fee = topup_fee(*amount);
                    let (status, v) = api
                        .call(
                            "cards/topup",
                            json!({"card_id": c.id, "amount": s(*amount), "idempotency_key": key}),
                        )
                        .await;
                    let refused = if !c.active {
                        Some((422, "card_not_active"))
                    } else if *amount < m("10") {
                        Some((422, "amount_below_minimum"))
                    } else if master < amount + fee {
                        Some((403, "insufficient_funds"))
                    } else {
                        None
                    };
                    if let Some((code, slug)) = refused {
                        assert_eq!(
                            (status, v["error_slug"].as_str()),
                            (code, Some(slug)),
                            "{ctx}: {v}"
                        );
                        break 'step slug;
                    }
                    assert_eq!(status, 200, "{ctx}: {v}");
                    assert_eq!(v["data"]["fee"], s(fee), "{ctx}");
                    let done = api.wait_order(&order_id(&v)).await;
                    if declined(*amount) {
                        assert_eq!(done["status"], "failed", "{ctx}: {done}");
                        assert_eq!(done["last_error_slug"], "provider_error", "{ctx}");
                        "topup declined"
                    } else {
                        assert_eq!(done["status"], "completed", "{ctx}: {done}");
                        master -= amount + fee;
                        c.balance += amount;
                        "topup completed"
                    }
                }
                Op::Withdraw {
                    card,
                    percent,
                    decline,
                } => {
                    if cards.is_empty() {
                        break 'step "no card yet";
                    }
                    // A card with funds when there is one, so most withdraws can succeed.
                    let funded: Vec<usize> =
                        (0..cards.len()).filter(|i| cards[*i].balance > 0).collect();
                    let index = if funded.is_empty() {
                        card % cards.len()
                    } else {
                        funded[card % funded.len()]
                    };
                    let c = &mut cards[index];
                    let mut amount = (c.balance * percent / 100).max(1);
                    if *decline {
                        amount = amount / 1_000_000 * 1_000_000 + 660_000;
                    }
                    let (status, v) = api
                        .call(
                            "cards/withdraw",
                            json!({"card_id": c.id, "amount": s(amount), "idempotency_key": key}),
                        )
                        .await;
                    if !c.active {
                        assert_eq!(
                            (status, v["error_slug"].as_str()),
                            (422, Some("card_not_active")),
                            "{ctx}: {v}"
                        );
                        break 'step "withdraw card_not_active";
                    }
                    if c.balance < amount {
                        assert_eq!(
                            (status, v["error_slug"].as_str()),
                            (403, Some("insufficient_funds")),
                            "{ctx}: {v}"
                        );
                        break 'step "withdraw insufficient_funds";
                    }
                    assert_eq!(status, 200, "{ctx}: {v}");
                    let done = api.wait_order(&order_id(&v)).await;
                    if declined(amount) {
                        assert_eq!(done["status"], "failed", "{ctx}: {done}");
                        assert_eq!(done["last_error_slug"], "provider_error", "{ctx}");
                        "withdraw declined"
                    } else {
                        assert_eq!(done["status"], "completed", "{ctx}: {done}");
                        master += amount;
                        c.balance -= amount;
                        "withdraw completed"
                    }
                }
            }
        };
        *tally.entry(outcome).or_default() += 1;
        assert_eq!(api.master().await, master, "{ctx}");
        for c in &cards {
            assert_eq!(
                api.card_balance(&c.user, &c.id).await,
                c.balance,
                "{ctx}: card {}",
                c.id
            );
        }
        api.t.verify_ledger().await;
    }
}

both_backends!(
    random_operation_sequences_keep_the_books,
    |t: TestServer| async move {
        // Cases are drawn without proptest's runner loop (it is synchronous) and not
        // shrunk; a failure prints the whole operation list of its case.
        const CASES: u32 = 10;
        let mut runner = TestRunner::default();
        // Every case starts with some money and a card, then runs random operations.
        let strategy = prop::collection::vec(op_strategy(), 5..=30).prop_map(|ops| {
            let mut all = vec![Op::Deposit(60_000_000), Op::Issue { decline: false }];
            all.extend(ops);
            all
        });
        let mut tally = BTreeMap::new();
        for case in 0..CASES {
            let ops = strategy.new_tree(&mut runner).unwrap().current();
            // A fresh project per case: the model starts from zero.
            let api = Api {
                t: &t,
                c: t.new_project(&format!("case {case}")).await,
            };
            run_ops(&api, &ops, &mut tally).await;
        }
        // What the random cases exercised (shown with --nocapture).
        eprintln!("outcomes: {tally:?}");
    }
);

both_backends!(
    topup_retries_run_out_as_topup_attempts_exceeded,
    |t: TestServer| async move {
        let mut t = t;
        t.deposit(&t.creds.project_id, 100_000_000).await;
        let card_id = t.active_card("ada", "virtual_usd").await;
        // From here on only a server whose provider always fails transiently runs.
        t.stop_server().await;
        let failing = issuing_server::ServerConfig {
            sandbox: issuing_server::provider::sandbox::SandboxConfig {
                transient_failures: u32::MAX,
                ..Default::default()
            },
            ..Default::default()
        };
        let server = t.sibling_with(failing).await;
        let base = format!("http://{}", server.addr);
        let creds = t.creds.clone();
        let (s, v) = t
            .call_on(
                &base,
                &creds,
                "cards/topup",
                json!({"card_id": card_id, "amount": "20", "idempotency_key": "exhaust"}),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        let order_id = v["order_id"].as_str().unwrap().to_owned();
        let mut order = Value::Null;
        // Six attempts with exponential backoff take about 13 s.
        for _ in 0..600 {
            let (_, o) = t
                .call_on(&base, &creds, "orders/check", json!({"order_id": order_id}))
                .await;
            if o["status"] == "failed" || o["status"] == "completed" {
                order = o;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_eq!(order["status"], "failed", "{order}");
        assert_eq!(order["last_error_slug"], "topup_attempts_exceeded");
        assert_eq!(order["topup_status"], "failed");
        let (_, b) = t.call_on(&base, &creds, "project/balance", json!({})).await;
        assert_eq!(b["available"], "98.00", "amount and fee refunded: {b}");
        t.verify_ledger().await;
        server.shutdown().await;
    }
);
