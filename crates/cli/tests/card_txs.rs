//! Card spending through the simulator (CONTRACT §9): holds in the ledger, every row of
//! the transaction table, the error slugs, cards/txs, webhooks for every change,
//! concurrency on one card, replayed network messages, hold expiry, closing cards and
//! a property test against a model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::receiver::Receiver;
use common::TestServer;
use issuing_server::{Mode, ServerConfig};
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

impl TestServer {
    /// An active card holding exactly `units` (the topup's fee comes off the master).
    async fn card_with(&self, user: &str, units: u32) -> String {
        self.deposit(&self.creds.project_id, 10_000_000_000).await;
        let card = self.active_card(user, "virtual_usd").await;
        if units > 0 {
            let (s, v) = self
                .topup(&card, json!(units.to_string()), &format!("fund-{user}"))
                .await;
            assert_eq!(s, 200, "{v}");
            let o = self.wait_order(v["order_id"].as_str().unwrap()).await;
            assert_eq!(o["status"], "completed", "{o}");
        }
        card
    }

    async fn auth(&self, card: &str, amount: Value) -> Value {
        self.ok(
            "simulate/cards/auth",
            json!({"card_id": card, "transactionAmount": amount}),
        )
        .await
    }

    /// (available, pending) of cards/balance, as strings.
    async fn funds(&self, user: &str, card: &str) -> (String, String) {
        let b = self
            .ok(
                "cards/balance",
                json!({"card_id": card, "external_user_id": user}),
            )
            .await;
        (
            b["available"].as_str().unwrap().to_owned(),
            b["pending"].as_str().unwrap().to_owned(),
        )
    }

    async fn txs(&self, user: &str, card: &str, extra: Value) -> Value {
        let mut body = json!({"card_id": card, "external_user_id": user});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        self.ok("cards/txs", body).await
    }
}

fn tx_id(v: &Value) -> String {
    v["transactionId"].as_str().unwrap().to_owned()
}

fn funds(a: &str, p: &str) -> (String, String) {
    (a.to_owned(), p.to_owned())
}

both_backends!(
    the_transaction_lifecycle_moves_money_as_contract_9_says,
    |t: TestServer| async move {
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.ok(
            "wh/subscribe",
            json!({"url": rx.url, "event_types": ["card_transaction"]}),
        )
        .await;
        let card = t.card_with("ada", 100).await;
        assert_eq!(t.funds("ada", &card).await, funds("100.00", "0.00"));

        // auth → pending, held.
        let v = t
        .ok(
            "simulate/cards/auth",
            json!({"card_id": card, "transactionAmount": "30", "merchant": {"name": "Coffee", "mcc": "5814", "country": "GB"}, "merchantCurrency": "gbp", "merchantAmount": "24.5"}),
        )
        .await;
        let a1 = tx_id(&v);
        let item = &v["transaction"];
        assert_eq!(item["type"], "card_transaction");
        assert_eq!(item["transaction_id"], json!(a1));
        assert_eq!(item["tx_type"], "transaction_created_auth_pending");
        assert_eq!(item["card_id"], json!(card));
        assert!(item["tx_at"].as_str().unwrap().ends_with('Z'));
        let d = &item["card_tx_data"];
        assert_eq!(
            (d["type"].as_str(), d["status"].as_str()),
            (Some("auth"), Some("pending"))
        );
        assert_eq!(d["card_amount"], json!(30.0));
        assert_eq!(d["merchant"]["name"], "Coffee");
        assert_eq!(d["merchant"]["mcc"], "5814");
        assert_eq!(d["merchant_currency"], "GBP");
        assert_eq!(d["merchant_amount"], json!(24.5));
        assert_eq!(d["card_currency"], "USD");
        assert_eq!(d["fee_currency"], "usd");
        assert_eq!(d["fee_amount"], json!(0.0));
        assert_eq!(d["card_label"].as_str().unwrap().len(), 4);
        assert!(d["failure_reason"].is_null());
        assert_eq!(t.funds("ada", &card).await, funds("70.00", "30.00"));
        let got = t
            .ok(
                "cards/get",
                json!({"card_id": card, "external_user_id": "ada"}),
            )
            .await;
        assert_eq!(
            (
                got["balance"]["available"].as_str(),
                got["balance"]["pending"].as_str()
            ),
            (Some("70.00"), Some("30.00"))
        );
        let found = t.ok("cards/find", json!({"card_id": card})).await;
        assert_eq!(found["items"][0]["balance"]["pending"], "30.00");

        // A withdraw cannot take held money.
        let (s, v) = t.withdraw(&card, json!("71"), "w-held").await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (403, Some("insufficient_funds")),
            "{v}"
        );

        // clear at the held amount → approved; the hold is gone, the money spent.
        let v = t
            .ok("simulate/cards/clear", json!({"transactionId": a1}))
            .await;
        assert_eq!(
            v["transaction"]["tx_type"],
            "transaction_updated_auth_approved"
        );
        assert_eq!(v["transaction"]["card_tx_data"]["status"], "approved");
        assert_eq!(v["transaction"]["card_tx_data"]["card_amount"], json!(30.0));
        assert_eq!(t.funds("ada", &card).await, funds("70.00", "0.00"));
        t.expect_error(
            "simulate/cards/clear",
            json!({"transactionId": a1}),
            422,
            "invalid_transaction_state",
        )
        .await;
        t.expect_error(
            "simulate/cards/reversal",
            json!({"transactionId": a1}),
            422,
            "invalid_transaction_state",
        )
        .await;

        // refunds: bounded by the cleared amount.
        let v = t
            .ok(
                "simulate/cards/refund",
                json!({"transactionId": a1, "amount": "10"}),
            )
            .await;
        let r1 = &v["transaction"];
        assert_eq!(r1["tx_type"], "transaction_created_refund_approved");
        assert_eq!(r1["card_tx_data"]["type"], "refund");
        assert_eq!(r1["card_tx_data"]["original_transaction_id"], json!(a1));
        assert_eq!(r1["card_tx_data"]["card_amount"], json!(10.0));
        assert_ne!(tx_id(&v), a1);
        t.expect_error(
            "simulate/cards/refund",
            json!({"transactionId": a1, "amount": "20.01"}),
            400,
            "invalid_amount",
        )
        .await;
        let v = t
            .ok("simulate/cards/refund", json!({"transactionId": a1}))
            .await;
        assert_eq!(
            v["transaction"]["card_tx_data"]["card_amount"],
            json!(20.0),
            "defaults to what remains"
        );
        t.expect_error(
            "simulate/cards/refund",
            json!({"transactionId": a1}),
            400,
            "invalid_amount",
        )
        .await;
        t.expect_error(
            "simulate/cards/refund",
            json!({"transactionId": tx_id(&v)}),
            422,
            "invalid_transaction_state",
        )
        .await;
        assert_eq!(t.funds("ada", &card).await, funds("100.00", "0.00"));

        // reversal → hold released.
        let a2 = tx_id(&t.auth(&card, json!(20)).await);
        t.expect_error(
            "simulate/cards/refund",
            json!({"transactionId": a2}),
            422,
            "invalid_transaction_state",
        )
        .await;
        let v = t
            .ok("simulate/cards/reversal", json!({"transactionId": a2}))
            .await;
        assert_eq!(
            v["transaction"]["tx_type"],
            "transaction_updated_reversal_approved"
        );
        assert_eq!(v["transaction"]["card_tx_data"]["type"], "reversal");
        assert_eq!(v["transaction"]["card_tx_data"]["card_amount"], json!(20.0));
        assert_eq!(t.funds("ada", &card).await, funds("100.00", "0.00"));
        t.expect_error(
            "simulate/cards/clear",
            json!({"transactionId": a2}),
            422,
            "invalid_transaction_state",
        )
        .await;

        // clear below the hold releases the rest; above it uses available funds.
        let a3 = tx_id(&t.auth(&card, json!("10")).await);
        t.ok(
            "simulate/cards/clear",
            json!({"transactionId": a3, "billAmount": "4"}),
        )
        .await;
        assert_eq!(t.funds("ada", &card).await, funds("96.00", "0.00"));
        let a4 = tx_id(&t.auth(&card, json!("10")).await);
        let v = t
            .ok(
                "simulate/cards/clear",
                json!({"transactionId": a4, "billAmount": 15}),
            )
            .await;
        assert_eq!(v["transaction"]["card_tx_data"]["card_amount"], json!(15.0));
        assert_eq!(t.funds("ada", &card).await, funds("81.00", "0.00"));
        // Beyond the card's funds: 403 and nothing changes.
        let a5 = tx_id(&t.auth(&card, json!("10")).await);
        t.expect_error(
            "simulate/cards/clear",
            json!({"transactionId": a5, "billAmount": "91.01"}),
            403,
            "insufficient_funds",
        )
        .await;
        assert_eq!(t.funds("ada", &card).await, funds("71.00", "10.00"));
        t.ok("simulate/cards/reversal", json!({"transactionId": a5}))
            .await;

        // declined: insufficient funds, then a frozen card.
        let v = t.auth(&card, json!("81.01")).await;
        assert_eq!(
            v["transaction"]["tx_type"],
            "transaction_created_auth_declined"
        );
        assert_eq!(
            v["transaction"]["card_tx_data"]["failure_reason"],
            "insufficient_funds"
        );
        assert_eq!(t.funds("ada", &card).await, funds("81.00", "0.00"));
        let a6 = tx_id(&t.auth(&card, json!("5")).await);
        t.ok(
            "cards/freeze",
            json!({"card_id": card, "external_user_id": "ada"}),
        )
        .await;
        let v = t.auth(&card, json!("1")).await;
        assert_eq!(v["transaction"]["card_tx_data"]["status"], "declined");
        assert_eq!(
            v["transaction"]["card_tx_data"]["failure_reason"],
            "card_not_active"
        );
        t.expect_error(
            "simulate/cards/clear",
            json!({"transactionId": tx_id(&v)}),
            422,
            "invalid_transaction_state",
        )
        .await;
        // An earlier auth still clears on the frozen card.
        t.ok("simulate/cards/clear", json!({"transactionId": a6}))
            .await;
        t.ok(
            "cards/unfreeze",
            json!({"card_id": card, "external_user_id": "ada"}),
        )
        .await;
        assert_eq!(t.funds("ada", &card).await, funds("76.00", "0.00"));

        // Request errors are not transactions.
        for bad in [
            json!("0"),
            json!(-1),
            json!("abc"),
            json!("1.0000001"),
            Value::Null,
        ] {
            t.expect_error(
                "simulate/cards/auth",
                json!({"card_id": card, "transactionAmount": bad}),
                400,
                "invalid_amount",
            )
            .await;
        }
        t.expect_error(
            "simulate/cards/clear",
            json!({"transactionId": a6, "billAmount": "0"}),
            400,
            "invalid_amount",
        )
        .await;
        t.expect_error(
            "simulate/cards/auth",
            json!({"card_id": "nope", "transactionAmount": "1"}),
            404,
            "card_not_found",
        )
        .await;
        t.expect_error(
            "simulate/cards/auth",
            json!({"transactionAmount": "1"}),
            400,
            "validation_error",
        )
        .await;
        for path in [
            "simulate/cards/clear",
            "simulate/cards/reversal",
            "simulate/cards/refund",
        ] {
            t.expect_error(
                path,
                json!({"transactionId": "nope"}),
                404,
                "transaction_not_found",
            )
            .await;
            t.expect_error(path, json!({}), 400, "validation_error")
                .await;
        }

        // cards/txs: newest change first, in the webhook shape.
        let all = t.txs("ada", &card, json!({"limit": 100})).await;
        let items = all["items"].as_array().unwrap();
        assert_eq!(all["total"], json!(items.len()));
        assert_eq!(items.len(), 10, "6 approved auths, 2 declines, 2 refunds");
        assert_eq!(
            items[0]["transaction_id"],
            json!(a6),
            "the last change first"
        );
        let times: Vec<&str> = items.iter().map(|i| i["tx_at"].as_str().unwrap()).collect();
        assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
        let by_id = |id: &str| {
            items
                .iter()
                .find(|i| i["transaction_id"] == id)
                .unwrap()
                .clone()
        };
        assert_eq!(by_id(&a1)["tx_type"], "transaction_updated_auth_approved");
        assert_eq!(by_id(&a2)["card_tx_data"]["type"], "reversal");
        let refunds = t.txs("ada", &card, json!({"slug": "refund"})).await;
        assert_eq!(refunds["total"], 2);
        assert!(refunds["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["card_tx_data"]["type"] == "refund"));
        assert_eq!(
            t.txs("ada", &card, json!({"slug": "reversal"})).await["total"],
            2
        );
        let page = t.txs("ada", &card, json!({"skip": 1, "limit": 2})).await;
        assert_eq!(
            (
                page["skip"].as_i64(),
                page["limit"].as_i64(),
                page["items"].as_array().unwrap().len()
            ),
            (Some(1), Some(2), 2)
        );
        assert_eq!(page["items"][0], items[1]);
        t.expect_error(
            "cards/txs",
            json!({"card_id": card}),
            400,
            "external_user_id_required",
        )
        .await;
        t.expect_error(
            "cards/txs",
            json!({"card_id": card, "external_user_id": "ada", "slug": "nope"}),
            400,
            "validation_error",
        )
        .await;
        t.expect_error(
            "cards/txs",
            json!({"card_id": card, "external_user_id": "nobody"}),
            404,
            "card_not_found",
        )
        .await;
        t.cardholder("bob", "sandbox").await;
        t.expect_error(
            "cards/txs",
            json!({"card_id": card, "external_user_id": "bob"}),
            422,
            "card_user_mismatch",
        )
        .await;

        // Every change arrived as a card_transaction webhook, in its current shape.
        let expected = 16; // 6 held auths, 2 declines, 4 clears, 2 reversals, 2 refunds
        rx.wait_until("every card_transaction", WAIT, |r| r.len() >= expected)
            .await;
        let events = rx.delivered();
        assert_eq!(events.len(), expected, "{events:#?}");
        assert!(events
            .iter()
            .all(|e| e["type"] == "card_transaction" && e["delivery_id"].is_string()));
        let of = |id: &str| -> Vec<String> {
            events
                .iter()
                .filter(|e| e["transaction_id"] == id)
                .map(|e| e["tx_type"].as_str().unwrap().to_owned())
                .collect()
        };
        let mut a1_types = of(&a1);
        a1_types.sort();
        assert_eq!(
            a1_types,
            [
                "transaction_created_auth_pending",
                "transaction_updated_auth_approved"
            ]
        );
        let mut a2_types = of(&a2);
        a2_types.sort();
        assert_eq!(
            a2_types,
            [
                "transaction_created_auth_pending",
                "transaction_updated_reversal_approved"
            ]
        );
        t.verify_ledger().await;

        // Another project cannot see or touch any of it.
        let other = t.new_project("other").await;
        for (path, body) in [
            ("simulate/cards/clear", json!({"transactionId": a6})),
            ("simulate/cards/refund", json!({"transactionId": a1})),
            ("simulate/cards/reversal", json!({"transactionId": a5})),
        ] {
            let (s, v) = t.call_as(&other, path, body).await;
            assert_eq!(
                (s, v["error_slug"].as_str()),
                (404, Some("transaction_not_found")),
                "{path}"
            );
        }
        let (s, v) = t
            .call_as(
                &other,
                "simulate/cards/auth",
                json!({"card_id": card, "transactionAmount": "1"}),
            )
            .await;
        assert_eq!((s, v["error_slug"].as_str()), (404, Some("card_not_found")));
        let (s, v) = t
            .call_as(
                &other,
                "cards/txs",
                json!({"card_id": card, "external_user_id": "ada"}),
            )
            .await;
        assert_eq!((s, v["error_slug"].as_str()), (404, Some("card_not_found")));
    }
);
