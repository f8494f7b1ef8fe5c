//! Money over HTTP: cards/topup and cards/withdraw orders through the worker, initial
//! topups on cards/create, the sandbox decline triggers, idempotency keys, concurrency
//! on one master balance and one card, and a property test of random operation
//! sequences against an in-memory model of every balance.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::cards::kyc;
use common::{api_error, Creds, TestServer};
use issuing_client::{
    CardRef, CardholdersCreate, CardsCreate, CardsFreeze, CardsTopup, Client, ClientError,
    CreateCardResponse, Decimal, ListQuery, Order, ProjectTx, ProjectTxs, UsersCreate,
};
use issuing_wire::Amount;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// A cards/topup or cards/withdraw request (the key is the SDK call's argument).
fn topup_req(card: &str, amount: &str) -> CardsTopup {
    CardsTopup {
        card_id: card.into(),
        amount: amount.into(),
        ..CardsTopup::default()
    }
}

/// An optional decimal of an order, as text.
fn text(d: &Option<Decimal>) -> Option<&str> {
    d.as_ref().map(Decimal::as_str)
}

/// A sandbox cardholder with KYC data whose last name is `last_name`.
fn holder(user: &str, last_name: &str) -> CardholdersCreate {
    let mut k = kyc();
    k["last_name"] = json!(last_name);
    CardholdersCreate {
        external_user_id: user.into(),
        subprovider_code: "sandbox".into(),
        kyc_data: Some(serde_json::from_value(k).unwrap()),
        ..CardholdersCreate::default()
    }
}

/// A virtual_usd card of `user`, with an initial topup when given.
fn issue(user: &str, initial_topup: Option<&str>) -> CardsCreate {
    CardsCreate {
        external_user_id: user.into(),
        product_code: "virtual_usd".into(),
        initial_topup: initial_topup.map(Into::into),
        ..CardsCreate::default()
    }
}

/// The card_topup lines of project/txs.
async fn topup_lines(sdk: &Client) -> u64 {
    sdk.project_txs(&ProjectTxs {
        types: vec!["card_topup".into()],
        ..ProjectTxs::default()
    })
    .await
    .unwrap()
    .total
}

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

        let sdk = t.sdk();
        // A typed answer is a `"success": true` body.
        let v = sdk
            .cards_topup(&topup_req(&card, "100"), "t1")
            .await
            .unwrap();
        assert_eq!(v.order_type, "card_topup", "{v:?}");
        assert_eq!(v.status, "new");
        assert_eq!(v.topup_status.as_deref(), Some("new"));
        assert_eq!(v.card_id.as_deref(), Some(card.as_str()));
        assert_eq!(text(&v.balance_before), Some("198.00"));
        assert_eq!(text(&v.balance_after), Some("96.50"));
        assert_eq!(v.data["amount"], "100.00");
        assert_eq!(v.data["fee"], "1.50");
        assert_eq!(v.data["total"], "101.50");
        assert!(
            v.issue_status.is_none() && v.completed_at.is_none(),
            "{v:?}"
        );
        let id = v.order_id.clone();
        // The master balance pays when the order is created, before the provider runs.
        assert_eq!(t.balance().await, "96.50");

        let done = sdk.wait_order(&id, WAIT).await.unwrap();
        assert_eq!(done.status, "completed", "{done:?}");
        assert_eq!(done.topup_status.as_deref(), Some("completed"));
        assert_eq!(done.order_type, "card_topup");
        assert!(done.completed_at.is_some() && done.failed_at.is_none());
        assert!(done.last_error_slug.is_none(), "{done:?}");
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

        // A JSON number is an amount too (raw, on purpose); sub-cent fees are kept to
        // the micro-unit.
        let (status, v) = t.topup(&card, json!(20.5), "t2").await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["data"]["amount"], "20.50");
        assert_eq!(v["data"]["fee"], "0.705");
        let done = sdk.wait_order(&order_id(&v), WAIT).await.unwrap();
        assert_eq!(done.status, "completed", "{done:?}");
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
        let sdk = t.sdk();
        // Raw (below): no key, an empty key, amounts of the wrong JSON type or none, no
        // card_id.
        let topup = |amount: Value, key: &str| json!({"card_id": card, "amount": amount, "idempotency_key": key});
        let req = |amount: &str| topup_req(&card, amount);

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
        for bad in ["abc", "0", "-5", "1.0000001", ""] {
            api_error(sdk.cards_topup(&req(bad), "v").await, 400, "invalid_amount");
        }
        for bad in [json!(-5), json!(0), json!(null), json!(true)] {
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
        let eur = CardsTopup {
            currency: Some("EUR".into()),
            ..req("10")
        };
        api_error(sdk.cards_topup(&eur, "v").await, 422, "currency_mismatch");
        api_error(
            sdk.cards_topup(&topup_req(NO_CARD, "10"), "v").await,
            404,
            "card_not_found",
        );
        t.expect_error(
            "cards/topup",
            json!({"amount": "10", "idempotency_key": "v"}),
            400,
            "validation_error",
        )
        .await;
        sdk.users_create(&UsersCreate {
            external_user_id: "eve".into(),
        })
        .await
        .unwrap();
        let other_user = CardsTopup {
            external_user_id: Some("eve".into()),
            ..req("10")
        };
        api_error(
            sdk.cards_topup(&other_user, "v").await,
            422,
            "card_user_mismatch",
        );
        api_error(
            sdk.cards_topup(&req("9.99"), "v").await,
            422,
            "amount_below_minimum",
        );
        api_error(
            sdk.cards_topup(&req("5000.01"), "v").await,
            422,
            "amount_above_maximum",
        );
        // Within the limits but more than the master balance holds.
        api_error(
            sdk.cards_topup(&req("5000.00"), "v").await,
            403,
            "insufficient_funds",
        );
        api_error(
            sdk.cards_topup(&req("47.53"), "v").await,
            403,
            "insufficient_funds",
        );
        sdk.cards_freeze(&CardsFreeze::new(&card)).await.unwrap();
        // The card was read above, so its product is remembered and the status is the
        // writer's to check; with an amount the product refuses the status still
        // answers first.
        for amount in ["10", "9.99", "5000.01"] {
            api_error(
                sdk.cards_topup(&req(amount), "v").await,
                422,
                "card_not_active",
            );
        }
        sdk.cards_unfreeze(&CardsFreeze::new(&card)).await.unwrap();

        // Nothing above charged anything or created an order.
        assert_eq!(master(&t).await, model);
        assert_eq!(topup_lines(&sdk).await, 0);
        let events = t.events(&t.creds.project_id).await;
        assert!(!events.iter().any(|e| e.event_type == "card.topup"));

        // USDT in any letter case; the released key works for the corrected request.
        for (currency, key) in [("usdt", "v"), ("USDT", "u2"), (" Usdt ", "u3")] {
            let body = CardsTopup {
                currency: Some(currency.into()),
                ..req("10")
            };
            let v = sdk.cards_topup(&body, key).await.unwrap();
            assert_eq!(v.data["amount"], "10.00");
            assert_eq!(v.data["fee"], "0.60");
            model -= m("10.60");
            assert_eq!(
                sdk.wait_order(&v.order_id, WAIT).await.unwrap().status,
                "completed"
            );
        }
        // The whole remaining balance, to the micro-unit: 16.20 = 15.544554 + 0.655446.
        assert_eq!(model, m("16.20"));
        let v = sdk.cards_topup(&req("15.544554"), "all").await.unwrap();
        assert_eq!(v.data["fee"], "0.655446");
        api_error(
            sdk.cards_topup(&req("10"), "after").await,
            403,
            "insufficient_funds",
        );
        model -= m("15.544554") + m("0.655446");
        assert_eq!(model, 0);
        assert_eq!(master(&t).await, model);
        assert_eq!(
            sdk.wait_order(&v.order_id, WAIT).await.unwrap().status,
            "completed"
        );
        assert_eq!(t.card_balance("ada", &card).await, "45.544554");
        t.verify_ledger().await;
    }
);

both_backends!(
    topup_provider_decline_refunds_everything,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, m("100")).await;
        let card = t.active_card("ada", "virtual_usd").await;
        let sdk = t.sdk();
        let v = sdk
            .cards_topup(&topup_req(&card, "12.66"), "d1")
            .await
            .unwrap();
        assert_eq!(v.data["fee"], "0.6266");
        assert_eq!(text(&v.balance_after), Some("84.7134"));
        let id = v.order_id.clone();
        let done = sdk.wait_order(&id, WAIT).await.unwrap();
        assert_eq!(done.status, "failed", "{done:?}");
        assert_eq!(done.topup_status.as_deref(), Some("failed"));
        assert_eq!(done.last_error_slug.as_deref(), Some("provider_error"));
        assert!(done.last_error.as_ref().is_some_and(|e| !e.is_empty()));
        assert!(done.failed_at.is_some() && done.completed_at.is_none());
        assert_eq!(text(&done.balance_after), Some("98.00"));
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
        let sdk = t.sdk();
        let req = |amount: &str| topup_req(&card, amount);
        let v = sdk.cards_topup(&req("100"), "t1").await.unwrap();
        assert_eq!(
            sdk.wait_order(&v.order_id, WAIT).await.unwrap().status,
            "completed"
        );
        assert_eq!(t.balance().await, "96.50");

        // A typed answer is a `"success": true` body.
        let v = sdk.cards_withdraw(&req("40"), "w1").await.unwrap();
        assert_eq!(v.order_type, "card_withdraw", "{v:?}");
        assert_eq!(v.status, "new");
        assert_eq!(v.card_id.as_deref(), Some(card.as_str()));
        assert_eq!(v.data["amount"], "40.00");
        assert!(v.topup_status.is_none(), "{v:?}");
        // The funds leave the card at once, whatever the worker is doing.
        assert_eq!(t.card_balance("ada", &card).await, "60.00");
        let id = v.order_id.clone();
        let done = sdk.wait_order(&id, WAIT).await.unwrap();
        assert_eq!(done.status, "completed", "{done:?}");
        assert_eq!(text(&done.balance_after), Some("136.50"));
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
        api_error(
            sdk.cards_withdraw(&req("60.01"), "w2").await,
            403,
            "insufficient_funds",
        );
        // Errors shared with topup. Raw: a request without an idempotency key.
        t.expect_error(
            "cards/withdraw",
            json!({"card_id": card, "amount": "1"}),
            400,
            "idempotency_key_required",
        )
        .await;
        for bad in ["abc", "0", "-1", "0.0000001"] {
            api_error(
                sdk.cards_withdraw(&req(bad), "w2").await,
                400,
                "invalid_amount",
            );
        }
        api_error(
            sdk.cards_withdraw(
                &CardsTopup {
                    currency: Some("EUR".into()),
                    ..req("1")
                },
                "w2",
            )
            .await,
            422,
            "currency_mismatch",
        );
        api_error(
            sdk.cards_withdraw(&topup_req(NO_CARD, "1"), "w2").await,
            404,
            "card_not_found",
        );
        assert_eq!(t.card_balance("ada", &card).await, "60.00");
        assert_eq!(t.balance().await, "136.50");

        // The sandbox declines .66: the order fails and the card gets its funds back.
        let v = sdk.cards_withdraw(&req("10.66"), "w3").await.unwrap();
        let done = sdk.wait_order(&v.order_id, WAIT).await.unwrap();
        assert_eq!(done.status, "failed", "{done:?}");
        assert_eq!(done.last_error_slug.as_deref(), Some("provider_error"));
        assert!(done.failed_at.is_some());
        assert_eq!(t.card_balance("ada", &card).await, "60.00");
        assert_eq!(t.balance().await, "136.50");
        // Small amounts and the whole balance, in any currency case (raw: a JSON number).
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
        let v = sdk
            .cards_topup(&topup_req(&rita, "10"), "rt")
            .await
            .unwrap();
        assert_eq!(
            sdk.wait_order(&v.order_id, WAIT).await.unwrap().status,
            "completed"
        );
        api_error(
            sdk.cards_withdraw(&topup_req(&rita, "5"), "rw").await,
            422,
            "provider_withdraw_not_supported",
        );
        assert_eq!(t.card_balance("rita", &rita).await, "10.00");
        assert_eq!(t.balance().await, "183.90");
        t.verify_ledger().await;
    }
);

both_backends!(
    initial_topup_on_issue_and_issue_declines,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, m("100")).await;
        let sdk = t.sdk();
        sdk.cardholders_create(&holder("ada", "Lovelace"))
            .await
            .unwrap();
        let v = sdk
            .cards_create(&issue("ada", Some("50")), "i1")
            .await
            .unwrap();
        let card = v.card_id.clone();
        assert_eq!(v.order.data["initial_topup"]["amount"], "50.00");
        assert_eq!(v.order.data["initial_topup"]["fee"], "1.00");
        assert_eq!(text(&v.order.balance_before), Some("100.00"));
        assert_eq!(text(&v.order.balance_after), Some("47.00"));
        let done = sdk.wait_order(&v.order.order_id, WAIT).await.unwrap();
        assert_eq!(done.status, "completed", "{done:?}");
        assert_eq!(done.issue_status.as_deref(), Some("completed"));
        assert_eq!(done.is_issued, Some(true));
        assert_eq!(t.card_balance("ada", &card).await, "50.00");
        assert_eq!(t.balance().await, "47.00");
        let lines = lines_of(&t, &v.order.order_id).await;
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
        sdk.cardholders_create(&holder("bo", "Lovelace"))
            .await
            .unwrap();
        let create = |amount: &str| issue("bo", Some(amount));
        api_error(
            sdk.cards_create(&create("9.99"), "b").await,
            422,
            "amount_below_minimum",
        );
        api_error(
            sdk.cards_create(&create("abc"), "b").await,
            400,
            "invalid_amount",
        );
        api_error(
            sdk.cards_create(&create("46"), "b").await,
            403,
            "insufficient_funds",
        );
        assert_eq!(t.balance().await, "47.00");

        // A declined initial topup: the card is issued and keeps its fee, the topup and
        // its fee come back.
        let v = sdk.cards_create(&create("20.66"), "b").await.unwrap();
        let bo_card = v.card_id.clone();
        let done = sdk.wait_order(&v.order.order_id, WAIT).await.unwrap();
        assert_eq!(done.status, "failed", "{done:?}");
        assert_eq!(done.issue_status.as_deref(), Some("initial_topup_error"));
        assert_eq!(done.last_error_slug.as_deref(), Some("provider_error"));
        assert_eq!(done.is_issued, Some(true));
        assert_eq!(t.card_balance("bo", &bo_card).await, "0.00");
        assert_eq!(t.balance().await, "45.00");
        assert_eq!(text(&done.balance_after), Some("45.00"));

        // A holder named "... Decline": the provider refuses the card; the fee comes back.
        sdk.cardholders_create(&holder("dee", "Decline"))
            .await
            .unwrap();
        let v = sdk.cards_create(&issue("dee", None), "dee1").await.unwrap();
        assert_eq!(text(&v.order.balance_after), Some("43.00"));
        let done = sdk.wait_order(&v.order.order_id, WAIT).await.unwrap();
        assert_eq!(done.status, "failed", "{done:?}");
        assert_eq!(done.issue_status.as_deref(), Some("card_create_error"));
        assert_eq!(done.last_error_slug.as_deref(), Some("provider_error"));
        assert_eq!(done.is_issued, Some(false));
        assert!(
            done.last_error.as_ref().unwrap().contains("Decline"),
            "{done:?}"
        );
        let c = sdk
            .cards_get(&CardRef::new(&v.card_id, "dee"))
            .await
            .unwrap();
        assert_eq!(c.status, "failed");
        assert_eq!(t.balance().await, "45.00");
        // Also with an initial topup: everything comes back.
        let v = sdk
            .cards_create(&issue("dee", Some("10")), "dee2")
            .await
            .unwrap();
        assert_eq!(text(&v.order.balance_after), Some("32.40"));
        let done = sdk.wait_order(&v.order.order_id, WAIT).await.unwrap();
        assert_eq!(done.status, "failed", "{done:?}");
        assert_eq!(t.balance().await, "45.00");
        t.verify_ledger().await;
    }
);

// Raw on purpose: where the key travels (body field, header, both), exact stored
// responses and the error message are the subject.
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
        assert_eq!(topup_lines(&t.sdk()).await, 1);

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
        let sdk = t.sdk();
        let req = topup_req(&card, "10");
        let calls = (0..16).map(|_| sdk.cards_topup(&req, "same"));
        let results = futures::future::join_all(calls).await;
        let mut ids = HashSet::new();
        for r in &results {
            match r {
                Ok(v) => {
                    ids.insert(v.order_id.clone());
                }
                Err(e) if e.status() == Some(400) => {
                    assert_eq!(e.slug(), Some("idempotency_conflict"), "{e}")
                }
                Err(e) => panic!("unexpected {e}"),
            }
        }
        assert_eq!(ids.len(), 1, "{results:?}");
        assert_eq!(t.balance().await, "87.40");
        assert_eq!(topup_lines(&sdk).await, 1);
        let id = ids.into_iter().next().unwrap();
        assert_eq!(sdk.wait_order(&id, WAIT).await.unwrap().status, "completed");
        // Afterwards the key answers the same order every time.
        let v = sdk.cards_topup(&req, "same").await.unwrap();
        assert_eq!(v.order_id, id);
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
    let sdk = t.sdk();
    let req = topup_req(&card, "10");
    let calls = (0..50).map(|i| {
        let (sdk, req) = (&sdk, &req);
        async move { sdk.cards_topup(req, &format!("p{i}")).await }
    });
    let results = futures::future::join_all(calls).await;
    let mut orders = Vec::new();
    let mut refused = 0;
    for r in &results {
        match r {
            Ok(v) => {
                // Each order shows its own debit, even with others racing it.
                let before = m(text(&v.balance_before).unwrap());
                let after = m(text(&v.balance_after).unwrap());
                assert_eq!(before - after, m("10.60"), "{v:?}");
                orders.push(v.order_id.clone());
            }
            Err(e) if e.status() == Some(403) => {
                assert_eq!(e.slug(), Some("insufficient_funds"), "{e}");
                refused += 1;
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!((orders.len(), refused), (7, 43), "{results:?}");
    assert_eq!(t.balance().await, "5.00");
    for id in &orders {
        assert_eq!(sdk.wait_order(id, WAIT).await.unwrap().status, "completed");
    }
    assert_eq!(t.card_balance("ada", &card).await, "70.00");
    assert_eq!(t.balance().await, "5.00");
    assert_eq!(topup_lines(&sdk).await, 7);
    t.verify_ledger().await;
});

// An error the top-up writer cannot foresee (here a trigger that refuses one card's
// orders) fails its batch; the writer reruns the batch's top-ups one per transaction, so
// only that top-up fails and every other one of its batch stands.
both_backends!(a_failing_topup_fails_alone, |t: TestServer| async move {
    t.deposit(&t.creds.project_id, ISSUE_FEE * 2 + m("1000"))
        .await;
    let card = t.active_card("ada", "virtual_usd").await;
    let poisoned = t.active_card("bob", "virtual_usd").await;
    let trigger = match t.store.backend() {
        issuing_store::Backend::Sqlite => vec![format!(
            "CREATE TRIGGER poison BEFORE INSERT ON orders WHEN NEW.card_id = '{poisoned}' \
             BEGIN SELECT RAISE(ABORT, 'poisoned'); END"
        )],
        issuing_store::Backend::Postgres => vec![
            format!(
                "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF NEW.card_id = '{poisoned}' THEN RAISE EXCEPTION 'poisoned'; END IF; \
                 RETURN NEW; END $$"
            ),
            "CREATE TRIGGER poison BEFORE INSERT ON orders FOR EACH ROW EXECUTE FUNCTION poison()"
                .to_owned(),
        ],
    };
    let mut conn = t.store.conn().await.unwrap();
    for sql in trigger {
        sqlx::query(&sql).execute(&mut *conn).await.unwrap();
    }
    drop(conn);
    let sdk = t.sdk();
    let calls = (0..24).map(|i| {
        let sdk = &sdk;
        let target = if i == 11 { &poisoned } else { &card };
        async move {
            sdk.cards_topup(&topup_req(target, "10"), &format!("f{i}"))
                .await
        }
    });
    let results = futures::future::join_all(calls).await;
    for (i, r) in results.iter().enumerate() {
        match (i, r) {
            (11, Err(e)) => assert_eq!(e.slug(), Some("internal_error"), "{e}"),
            (i, Ok(_)) if i != 11 => {}
            (i, other) => panic!("top-up {i}: {other:?}"),
        }
    }
    assert_eq!(topup_lines(&sdk).await, 23);
    assert_eq!(t.balance().await, s(m("1000") - 23 * m("10.60")));
    // The refused top-up wrote nothing, not even its key: a retry runs anew.
    let retry = sdk.cards_topup(&topup_req(&poisoned, "10"), "f11").await;
    assert_eq!(retry.unwrap_err().slug(), Some("internal_error"));
    t.verify_ledger().await;
});

both_backends!(
    topups_and_withdraws_racing_on_one_card,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, m("1000")).await;
        let card = t.active_card("ada", "virtual_usd").await;
        let sdk = t.sdk();
        let v = sdk
            .cards_topup(&topup_req(&card, "30"), "seed")
            .await
            .unwrap();
        sdk.wait_order(&v.order_id, WAIT).await.unwrap();
        let mut card_model = m("30");
        let mut master_model = m("998") - m("30") - topup_fee(m("30"));
        let mut pending = Vec::new();
        for round in 0..10 {
            // Withdraws larger than a topup, so some find the card short and some do not.
            let topup_amount = m("10") + round * m("1.01");
            let withdraw_amount = m("13.50") + round * m("0.5");
            let (tkey, wkey) = (format!("t{round}"), format!("w{round}"));
            let (top_req, wd_req) = (
                topup_req(&card, &s(topup_amount)),
                topup_req(&card, &s(withdraw_amount)),
            );
            let (top, wd) = tokio::join!(
                sdk.cards_topup(&top_req, &tkey),
                sdk.cards_withdraw(&wd_req, &wkey),
            );
            let top = top.unwrap();
            master_model -= topup_amount + topup_fee(topup_amount);
            card_model += topup_amount;
            pending.push(top.order_id);
            match wd {
                Ok(w) => {
                    card_model -= withdraw_amount;
                    master_model += withdraw_amount;
                    pending.push(w.order_id);
                }
                Err(e) if e.status() == Some(403) => {
                    assert_eq!(e.slug(), Some("insufficient_funds"), "{e}")
                }
                Err(e) => panic!("unexpected {e}"),
            }
        }
        for id in &pending {
            assert_eq!(sdk.wait_order(id, WAIT).await.unwrap().status, "completed");
        }
        assert_eq!(m(&t.card_balance("ada", &card).await), card_model);
        assert_eq!(master(&t).await, master_model);
        t.verify_ledger().await;
    }
);

/// Calls made as one project (other than the harness's default one), typed.
struct Api<'a> {
    t: &'a TestServer,
    c: Creds,
    sdk: Client,
}

impl Api<'_> {
    fn new(t: &TestServer, c: Creds) -> Api<'_> {
        let sdk = t.sdk_as(&c);
        Api { t, c, sdk }
    }

    async fn wait_order(&self, id: &str) -> Order {
        self.sdk.wait_order(id, WAIT).await.unwrap()
    }

    async fn master(&self) -> i64 {
        m(self.sdk.project_balance().await.unwrap().available.as_str())
    }

    async fn card_balance(&self, user: &str, card: &str) -> i64 {
        let b = self
            .sdk
            .cards_balance(&CardRef::new(card, user))
            .await
            .unwrap();
        m(b.available.as_str())
    }

    async fn cardholder(&self, user: &str, last_name: &str) {
        self.sdk
            .cardholders_create(&holder(user, last_name))
            .await
            .unwrap();
    }

    async fn create_card(&self, user: &str, key: &str) -> Result<CreateCardResponse, ClientError> {
        self.sdk.cards_create(&issue(user, None), key).await
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
        // Ids rise within a process (`new_id`), so a project's fee account, opened after
        // its master account, sorts after it. Give it an id that sorts first (before any
        // money moved, so nothing refers to it yet): the order in which a topup (master
        // first, then the fee account) and an issue (fee account first, then master)
        // would take their locks in opposite order if they locked by id.
        let creds = t.new_project("race").await;
        let mut conn = t.store.conn().await.unwrap();
        sqlx::query(
            "UPDATE accounts SET id = '0' || substr(id, 2) \
             WHERE project_id = $1 AND card_id IS NULL AND kind = 'fee_income'",
        )
        .bind(&creds.project_id)
        .execute(&mut *conn)
        .await
        .unwrap();
        drop(conn);
        assert!(fee_account_sorts_first(&t, &creds.project_id).await);
        let api = Api::new(&t, creds);
        t.deposit(&api.c.project_id, m("1000")).await;
        api.cardholder("ada", "Lovelace").await;
        let v = api.create_card("ada", "ada").await.unwrap();
        let card = v.card_id;
        assert_eq!(api.wait_order(&v.order.order_id).await.status, "completed");
        for i in 0..12 {
            api.cardholder(&format!("u{i}"), "Lovelace").await;
        }
        let mut model = m("998");
        for round in 0..3 {
            let issues = (0..4).map(|i| {
                let api = &api;
                let user = format!("u{}", round * 4 + i);
                async move { api.create_card(&user, &user).await.unwrap() }
            });
            let topups = (0..4).map(|i| {
                let api = &api;
                let card = &card;
                async move {
                    api.sdk
                        .cards_topup(&topup_req(card, "10"), &format!("r{round}t{i}"))
                        .await
                        .unwrap()
                }
            });
            let (issues, topups) = tokio::join!(
                futures::future::join_all(issues),
                futures::future::join_all(topups)
            );
            model -= 4 * ISSUE_FEE + 4 * m("10.60");
            for v in &issues {
                api.wait_order(&v.order.order_id).await;
            }
            for v in &topups {
                api.wait_order(&v.order_id).await;
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
                    let res = api.create_card(&user, &key).await;
                    if master < ISSUE_FEE {
                        let e = res.unwrap_err();
                        assert_eq!(
                            (e.status(), e.slug()),
                            (Some(403), Some("insufficient_funds")),
                            "{ctx}: {e}"
                        );
                        break 'step "issue refused";
                    }
                    let v = res.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    let done = api.wait_order(&v.order.order_id).await;
                    let expected = if *decline { "failed" } else { "completed" };
                    assert_eq!(done.status, expected, "{ctx}: {done:?}");
                    if !*decline {
                        master -= ISSUE_FEE;
                    }
                    cards.push(ModelCard {
                        id: v.card_id,
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
                    let res = api
                        .sdk
                        .cards_topup(&topup_req(&c.id, &s(*amount)), &key)
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
                        let e = res.unwrap_err();
                        assert_eq!(
                            (e.status(), e.slug()),
                            (Some(code), Some(slug)),
                            "{ctx}: {e}"
                        );
                        break 'step slug;
                    }
                    let v = res.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    assert_eq!(v.data["fee"], s(fee), "{ctx}");
                    let done = api.wait_order(&v.order_id).await;
                    if declined(*amount) {
                        assert_eq!(done.status, "failed", "{ctx}: {done:?}");
                        assert_eq!(
                            done.last_error_slug.as_deref(),
                            Some("provider_error"),
                            "{ctx}"
                        );
                        "topup declined"
                    } else {
                        assert_eq!(done.status, "completed", "{ctx}: {done:?}");
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
                    let res = api
                        .sdk
                        .cards_withdraw(&topup_req(&c.id, &s(amount)), &key)
                        .await;
                    if !c.active {
                        let e = res.unwrap_err();
                        assert_eq!(
                            (e.status(), e.slug()),
                            (Some(422), Some("card_not_active")),
                            "{ctx}: {e}"
                        );
                        break 'step "withdraw card_not_active";
                    }
                    if c.balance < amount {
                        let e = res.unwrap_err();
                        assert_eq!(
                            (e.status(), e.slug()),
                            (Some(403), Some("insufficient_funds")),
                            "{ctx}: {e}"
                        );
                        break 'step "withdraw insufficient_funds";
                    }
                    let v = res.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                    let done = api.wait_order(&v.order_id).await;
                    if declined(amount) {
                        assert_eq!(done.status, "failed", "{ctx}: {done:?}");
                        assert_eq!(
                            done.last_error_slug.as_deref(),
                            Some("provider_error"),
                            "{ctx}"
                        );
                        "withdraw declined"
                    } else {
                        assert_eq!(done.status, "completed", "{ctx}: {done:?}");
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
            let api = Api::new(&t, t.new_project(&format!("case {case}")).await);
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
            sandbox: issuing_app::provider::sandbox::SandboxConfig {
                transient_failures: u32::MAX,
                ..Default::default()
            },
            ..Default::default()
        };
        let server = t.sibling_with(failing).await;
        let base = format!("http://{}", server.addr);
        let sdk = t.sdk_on(&base, &t.creds);
        let v = sdk
            .cards_topup(&topup_req(&card_id, "20"), "exhaust")
            .await
            .unwrap();
        // Six attempts with exponential backoff take about 13 s.
        let order = sdk
            .wait_order(&v.order_id, Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(order.status, "failed", "{order:?}");
        assert_eq!(
            order.last_error_slug.as_deref(),
            Some("topup_attempts_exceeded")
        );
        assert_eq!(order.topup_status.as_deref(), Some("failed"));
        let b = sdk.project_balance().await.unwrap();
        assert_eq!(
            b.available.as_str(),
            "98.00",
            "amount and fee refunded: {b:?}"
        );
        t.verify_ledger().await;
        server.shutdown().await;
    }
);
