//! Card spending through the simulator (CONTRACT §9): holds in the ledger, every row of
//! the transaction table, the error slugs, cards/txs, webhooks for every change,
//! concurrency on one card, replayed network messages, hold expiry, closing cards and
//! a property test against a model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::receiver::Receiver;
use common::TestServer;
use issuing_client::{CardRef, CardsTopup, WhSubscribe};
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
            let sdk = self.sdk();
            let topup = CardsTopup {
                card_id: card.clone(),
                amount: units.to_string().into(),
                ..CardsTopup::default()
            };
            let order = sdk
                .cards_topup(&topup, &format!("fund-{user}"))
                .await
                .unwrap();
            let o = sdk.wait_order(&order.order_id, WAIT).await.unwrap();
            assert_eq!(o.status, "completed", "{o:?}");
        }
        card
    }

    /// Subscribes `url` to `event_types` (all when empty).
    async fn subscribe(&self, url: &str, event_types: &[&str]) {
        self.sdk()
            .wh_subscribe(&WhSubscribe {
                url: url.into(),
                event_types: event_types.iter().map(|e| e.to_string()).collect(),
                ..WhSubscribe::default()
            })
            .await
            .unwrap();
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
            .sdk()
            .cards_balance(&CardRef::new(card, user))
            .await
            .unwrap();
        (
            b.available.as_str().to_owned(),
            b.pending.as_str().to_owned(),
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
        t.subscribe(&rx.url, &["card_transaction"]).await;
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

both_backends!(
    parallel_auths_never_spend_the_same_money,
    |t: TestServer| async move {
        let card = t.card_with("ada", 37).await;
        let t = std::sync::Arc::new(t);
        let mut calls = Vec::new();
        for _ in 0..100 {
            let (t, card) = (t.clone(), card.clone());
            calls.push(tokio::spawn(async move { t.auth(&card, json!("1")).await }));
        }
        let mut approved = 0;
        let mut declined = 0;
        for c in calls {
            let v = c.await.unwrap();
            match v["transaction"]["card_tx_data"]["status"].as_str() {
                Some("pending") => approved += 1,
                Some("declined") => {
                    assert_eq!(
                        v["transaction"]["card_tx_data"]["failure_reason"],
                        "insufficient_funds"
                    );
                    declined += 1
                }
                other => panic!("{other:?}"),
            }
        }
        assert_eq!((approved, declined), (37, 63));
        assert_eq!(t.funds("ada", &card).await, funds("0.00", "37.00"));
        t.verify_ledger().await;
    }
);

both_backends!(
    a_clear_and_a_reversal_racing_on_one_auth_one_wins,
    |t: TestServer| async move {
        let card = t.card_with("ada", 100).await;
        let t = std::sync::Arc::new(t);
        for _ in 0..10 {
            let a = tx_id(&t.auth(&card, json!("5")).await);
            let (t1, t2) = (t.clone(), t.clone());
            let (a1, a2) = (a.clone(), a.clone());
            let clear = tokio::spawn(async move {
                t1.call("simulate/cards/clear", json!({"transactionId": a1}))
                    .await
            });
            let reverse = tokio::spawn(async move {
                t2.call("simulate/cards/reversal", json!({"transactionId": a2}))
                    .await
            });
            let (c, r) = (clear.await.unwrap(), reverse.await.unwrap());
            let wins = [&c, &r].iter().filter(|(s, _)| *s == 200).count();
            assert_eq!(wins, 1, "exactly one wins: {c:?} {r:?}");
            for (s, v) in [&c, &r] {
                if *s != 200 {
                    assert_eq!(
                        (*s, v["error_slug"].as_str()),
                        (422, Some("invalid_transaction_state"))
                    );
                }
            }
            assert_eq!(t.funds("ada", &card).await.1, "0.00");
        }
        t.verify_ledger().await;
    }
);

both_backends!(
    a_replayed_network_message_posts_once,
    |t: TestServer| async move {
        let card = t.card_with("ada", 50).await;
        let auth =
            json!({"card_id": card, "transactionAmount": "10", "network_message_id": "net-auth-1"});
        let first = t.ok("simulate/cards/auth", auth.clone()).await;
        let again = t.ok("simulate/cards/auth", auth).await;
        assert_eq!(first["transactionId"], again["transactionId"]);
        assert_eq!(
            t.funds("ada", &card).await,
            funds("40.00", "10.00"),
            "held once"
        );
        let a = tx_id(&first);
        let clear =
            json!({"transactionId": a, "billAmount": "8", "network_message_id": "net-clear-1"});
        t.ok("simulate/cards/clear", clear.clone()).await;
        let replay = t.ok("simulate/cards/clear", clear).await;
        assert_eq!(
            replay["transaction"]["card_tx_data"]["status"], "approved",
            "the replay answers the transaction"
        );
        assert_eq!(
            t.funds("ada", &card).await,
            funds("42.00", "0.00"),
            "cleared once"
        );
        let refund =
            json!({"transactionId": a, "amount": "3", "network_message_id": "net-refund-1"});
        let r1 = t.ok("simulate/cards/refund", refund.clone()).await;
        let r2 = t.ok("simulate/cards/refund", refund).await;
        assert_eq!(r1["transactionId"], r2["transactionId"]);
        assert_eq!(t.funds("ada", &card).await.0, "45.00", "refunded once");
        // Concurrent copies of one message: one posting.
        let t = std::sync::Arc::new(t);
        let mut calls = Vec::new();
        for _ in 0..8 {
            let (t, card) = (t.clone(), card.clone());
            calls.push(tokio::spawn(async move {
            t.ok("simulate/cards/auth", json!({"card_id": card, "transactionAmount": "1", "network_message_id": "net-auth-2"})).await
        }));
        }
        let mut ids = std::collections::HashSet::new();
        for c in calls {
            ids.insert(
                c.await.unwrap()["transactionId"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
        }
        assert_eq!(ids.len(), 1);
        assert_eq!(t.funds("ada", &card).await, funds("44.00", "1.00"));
        assert_eq!(
            t.txs("ada", &card, json!({"slug": "auth"})).await["total"],
            2
        );
        t.verify_ledger().await;
    }
);

both_backends!(
    partial_reversal_force_post_and_unlinked_refund,
    |t: TestServer| async move {
        let card = t.card_with("ada", 50).await;
        let a = tx_id(&t.auth(&card, json!("20")).await);
        let v = t
            .ok(
                "simulate/cards/reversal",
                json!({"transactionId": a, "amount": "5"}),
            )
            .await;
        assert_eq!(
            v["transaction"]["tx_type"],
            "transaction_updated_auth_pending"
        );
        assert_eq!(v["transaction"]["card_tx_data"]["card_amount"], json!(15.0));
        assert_eq!(t.funds("ada", &card).await, funds("35.00", "15.00"));
        t.expect_error(
            "simulate/cards/reversal",
            json!({"transactionId": a, "amount": "15.01"}),
            400,
            "invalid_amount",
        )
        .await;
        let v = t
            .ok("simulate/cards/reversal", json!({"transactionId": a}))
            .await;
        assert_eq!(v["transaction"]["card_tx_data"]["type"], "reversal");
        assert_eq!(t.funds("ada", &card).await, funds("50.00", "0.00"));

        let v = t
            .ok(
                "simulate/cards/clear",
                json!({"card_id": card, "billAmount": "12.5"}),
            )
            .await;
        assert_eq!(
            v["transaction"]["tx_type"],
            "transaction_created_auth_approved"
        );
        assert_eq!(v["transaction"]["card_tx_data"]["auth_type"], "force_post");
        assert_eq!(t.funds("ada", &card).await, funds("37.50", "0.00"));
        let fp = tx_id(&v);
        t.ok(
            "simulate/cards/refund",
            json!({"transactionId": fp, "amount": "2.5"}),
        )
        .await;
        t.expect_error(
            "simulate/cards/clear",
            json!({"card_id": card, "billAmount": "1000"}),
            403,
            "insufficient_funds",
        )
        .await;
        t.expect_error(
            "simulate/cards/clear",
            json!({"card_id": card}),
            400,
            "invalid_amount",
        )
        .await;

        let v = t
            .ok(
                "simulate/cards/refund",
                json!({"card_id": card, "amount": "7"}),
            )
            .await;
        assert_eq!(
            v["transaction"]["tx_type"],
            "transaction_created_refund_approved"
        );
        assert!(v["transaction"]["card_tx_data"]
            .get("original_transaction_id")
            .is_none());
        assert_eq!(t.funds("ada", &card).await, funds("47.00", "0.00"));
        t.expect_error(
            "simulate/cards/refund",
            json!({"card_id": card}),
            400,
            "invalid_amount",
        )
        .await;
        t.verify_ledger().await;
    }
);

both_backends_with!(
    holds_expire_into_reversals,
    ServerConfig {
        hold_expiry: Duration::from_secs(1),
        ..Default::default()
    },
    |t: TestServer| async move {
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.subscribe(&rx.url, &["card_transaction"]).await;
        let card = t.card_with("ada", 30).await;
        let a = tx_id(&t.auth(&card, json!("12")).await);
        let cleared = tx_id(&t.auth(&card, json!("3")).await);
        t.ok("simulate/cards/clear", json!({"transactionId": cleared}))
            .await;
        let start = std::time::Instant::now();
        loop {
            let items = t.txs("ada", &card, json!({"slug": "reversal"})).await;
            if items["total"] == 1 {
                let item = &items["items"][0];
                assert_eq!(item["transaction_id"], json!(a));
                assert_eq!(item["tx_type"], "transaction_updated_reversal_approved");
                assert_eq!(item["card_tx_data"]["failure_reason"], "expired");
                assert_eq!(item["card_tx_data"]["status"], "approved");
                break;
            }
            assert!(start.elapsed() < WAIT, "the hold never expired");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(t.funds("ada", &card).await, funds("27.00", "0.00"));
        t.expect_error(
            "simulate/cards/clear",
            json!({"transactionId": a}),
            422,
            "invalid_transaction_state",
        )
        .await;
        rx.wait_until("the expiry webhook", WAIT, |r| {
            r.iter().any(|x| {
                x.event["transaction_id"] == a
                    && x.event["card_tx_data"]["failure_reason"] == "expired"
            })
        })
        .await;
        t.verify_ledger().await;
    }
);

both_backends_with!(
    simulation_endpoints_do_not_exist_in_production,
    ServerConfig {
        mode: Mode::Production,
        ..Default::default()
    },
    |t: TestServer| async move {
        for path in [
            "simulate/cards/auth",
            "simulate/cards/clear",
            "simulate/cards/reversal",
            "simulate/cards/refund",
            "simulate/cards/3ds",
        ] {
            t.expect_error(
                path,
                json!({"card_id": "x", "transactionAmount": "1"}),
                404,
                "not_found",
            )
            .await;
        }
    }
);

both_backends!(
    closing_a_card_releases_holds_and_returns_its_funds,
    |t: TestServer| async move {
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.subscribe(&rx.url, &[]).await;
        let card = t.card_with("ada", 40).await;
        let spent = tx_id(&t.auth(&card, json!("10")).await);
        t.ok("simulate/cards/clear", json!({"transactionId": spent}))
            .await;
        let open = tx_id(&t.auth(&card, json!("5")).await);
        let master_before: f64 = t.balance().await.parse().unwrap();
        t.expect_error(
            "cards/close",
            json!({"card_id": card}),
            400,
            "idempotency_key_required",
        )
        .await;
        let close_req = json!({"card_id": card, "external_user_id": "ada", "reason": "lost", "idempotency_key": "close-1"});
        let v = t.ok("cards/close", close_req.clone()).await;
        assert_eq!(v["status"], "closed");
        assert!(v["closed_at"].is_string());
        assert_eq!(v["order"]["order_type"], "card_status_change");
        assert_eq!(v["order"]["data"]["to"], "closed");
        assert_eq!(v["order"]["data"]["reason"], "lost");
        assert_eq!(v["withdraw_order"]["order_type"], "card_withdraw");
        assert_eq!(v["withdraw_order"]["data"]["amount"], "30.00");
        let again = t.ok("cards/close", close_req).await;
        assert_eq!(again, v, "the same key answers the same response");
        t.wait_order(v["withdraw_order"]["order_id"].as_str().unwrap())
            .await;
        let master_after: f64 = t.balance().await.parse().unwrap();
        assert!(
            (master_after - master_before - 30.0).abs() < 1e-9,
            "{master_before} → {master_after}"
        );
        assert_eq!(t.funds("ada", &card).await, funds("0.00", "0.00"));
        let got = t
            .ok(
                "cards/get",
                json!({"card_id": card, "external_user_id": "ada"}),
            )
            .await;
        assert_eq!(got["status"], "closed");
        assert!(got["closed_at"].is_string());
        let released = t.txs("ada", &card, json!({"slug": "reversal"})).await;
        assert_eq!(released["items"][0]["transaction_id"], json!(open));
        assert_eq!(
            released["items"][0]["card_tx_data"]["failure_reason"],
            "card_closed"
        );

        // closed is final.
        let v = t.auth(&card, json!("1")).await;
        assert_eq!(
            v["transaction"]["card_tx_data"]["failure_reason"],
            "card_not_active"
        );
        let (s, v) = t.topup(&card, json!("10"), "after-close").await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (422, Some("card_not_active"))
        );
        t.expect_error(
            "cards/freeze",
            json!({"card_id": card, "external_user_id": "ada"}),
            422,
            "invalid_status_transition",
        )
        .await;
        t.expect_error(
            "cards/unfreeze",
            json!({"card_id": card, "external_user_id": "ada"}),
            422,
            "invalid_status_transition",
        )
        .await;
        t.expect_error(
            "cards/close",
            json!({"card_id": card, "idempotency_key": "close-2"}),
            422,
            "invalid_status_transition",
        )
        .await;
        // A refund of an earlier purchase still lands on it.
        t.ok(
            "simulate/cards/refund",
            json!({"transactionId": spent, "amount": "4"}),
        )
        .await;
        assert_eq!(t.funds("ada", &card).await.0, "4.00");
        // ... and is taken back like any card funds.
        let (s, w) = t.withdraw(&card, json!("4"), "late-refund").await;
        assert_eq!(s, 200, "{w}");
        let done = t.wait_order(w["order_id"].as_str().unwrap()).await;
        assert_eq!(done["status"], "completed");
        assert_eq!(t.funds("ada", &card).await.0, "0.00");

        rx.wait_until("card.close", WAIT, |r| {
            r.iter().any(|x| x.event["event_type"] == "card.close")
        })
        .await;
        let close = rx
            .delivered()
            .into_iter()
            .find(|e| e["event_type"] == "card.close")
            .unwrap();
        assert_eq!(close["data"]["card_id"], json!(card));
        assert_eq!(close["data"]["status"], "closed");
        assert_eq!(close["data"]["order_id"], v_order_id(&t, &card).await);

        // A restricted card holding funds cannot be closed (its provider cannot withdraw).
        let restricted = t.active_card("bob", "virtual_usd_restricted").await;
        let (s, v) = t.topup(&restricted, json!("10"), "fund-bob").await;
        assert_eq!(s, 200, "{v}");
        t.wait_order(v["order_id"].as_str().unwrap()).await;
        t.expect_error(
            "cards/close",
            json!({"card_id": restricted, "idempotency_key": "close-3"}),
            422,
            "provider_withdraw_not_supported",
        )
        .await;
        let other = t.new_project("other").await;
        let (s, v) = t
            .call_as(
                &other,
                "cards/close",
                json!({"card_id": restricted, "idempotency_key": "x"}),
            )
            .await;
        assert_eq!((s, v["error_slug"].as_str()), (404, Some("card_not_found")));
        t.verify_ledger().await;
    }
);

/// The card_status_change order that closed the card.
async fn v_order_id(t: &TestServer, card: &str) -> Value {
    let (id,): (String,) = sqlx::query_as(
        "SELECT id FROM orders WHERE card_id = $1 AND order_type = 'card_status_change'",
    )
    .bind(card)
    .fetch_one(t.store.pool())
    .await
    .unwrap();
    json!(id)
}

// ---------------------------------------------------------------------------------
// Property test: random topup / withdraw / auth / clear / reverse / refund / expire
// sequences on one card against a model, with the ledger verified after every step.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;

#[derive(Debug, Clone)]
enum Op {
    Topup(i64),
    Withdraw(i64),
    Auth(i64),
    /// Clear transaction `tx` (index into those made so far) at `pct` percent of its
    /// hold (None: the hold).
    Clear {
        tx: usize,
        pct: Option<i64>,
    },
    Reverse {
        tx: usize,
        pct: Option<i64>,
    },
    Refund {
        tx: usize,
        pct: Option<i64>,
    },
    Expire {
        tx: usize,
    },
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let pct = prop::option::of(1i64..=150);
    prop_oneof![
        2 => (10i64..=60).prop_map(|u| Op::Topup(u * 1_000_000)),
        1 => (1i64..=40_000_000).prop_map(Op::Withdraw),
        5 => (1i64..=50_000_000).prop_map(Op::Auth),
        3 => (any::<usize>(), pct.clone()).prop_map(|(tx, pct)| Op::Clear { tx, pct }),
        2 => (any::<usize>(), pct.clone()).prop_map(|(tx, pct)| Op::Reverse { tx, pct }),
        2 => (any::<usize>(), pct).prop_map(|(tx, pct)| Op::Refund { tx, pct }),
        1 => any::<usize>().prop_map(|tx| Op::Expire { tx }),
    ]
}

#[derive(Debug, Clone)]
struct ModelTx {
    id: String,
    /// auth / reversal / refund, pending / approved / declined
    kind: &'static str,
    status: &'static str,
    held: i64,
    cleared: i64,
    refunded: i64,
}

fn micros(s: &str) -> i64 {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    let frac = format!("{frac:0<6}");
    whole.parse::<i64>().unwrap() * 1_000_000 + frac[..6].parse::<i64>().unwrap()
}

fn dec(m: i64) -> String {
    format!("{}.{:06}", m / 1_000_000, m % 1_000_000)
}

both_backends_with!(
    random_card_transaction_sequences_keep_the_books,
    ServerConfig {
        hold_expiry: Duration::from_secs(3600),
        ..Default::default()
    },
    |t: TestServer| async move {
        const CASES: u32 = 8;
        let mut runner = TestRunner::default();
        let strategy = prop::collection::vec(op_strategy(), 10..=30);
        let mut counts = std::collections::BTreeMap::new();
        for case in 0..CASES {
            let ops = strategy.new_tree(&mut runner).unwrap().current();
            let user = format!("u{case}");
            let card = t.card_with(&user, 50).await;
            let (mut available, mut txs) = (50_000_000i64, Vec::<ModelTx>::new());
            for (step, op) in ops.iter().enumerate() {
                let ctx = format!("case {case} step {step} {op:?} in {ops:?}");
                let pick = |i: usize| (!txs.is_empty()).then(|| i % txs.len());
                let outcome: &str = match op.clone() {
                    Op::Topup(a) => {
                        let (s, v) = t
                            .topup(&card, json!(dec(a)), &format!("p{case}-{step}"))
                            .await;
                        assert_eq!(s, 200, "{ctx}: {v}");
                        let o = t.wait_order(v["order_id"].as_str().unwrap()).await;
                        assert_eq!(o["status"], "completed", "{ctx}");
                        available += a;
                        "topup"
                    }
                    Op::Withdraw(a) => {
                        let (s, v) = t
                            .withdraw(&card, json!(dec(a)), &format!("p{case}-{step}"))
                            .await;
                        if a <= available {
                            assert_eq!(s, 200, "{ctx}: {v}");
                            t.wait_order(v["order_id"].as_str().unwrap()).await;
                            available -= a;
                            "withdraw"
                        } else {
                            assert_eq!(
                                (s, v["error_slug"].as_str()),
                                (403, Some("insufficient_funds")),
                                "{ctx}"
                            );
                            "withdraw refused"
                        }
                    }
                    Op::Auth(a) => {
                        let v = t.auth(&card, json!(dec(a))).await;
                        let status = v["transaction"]["card_tx_data"]["status"]
                            .as_str()
                            .unwrap()
                            .to_owned();
                        let approved = a <= available;
                        assert_eq!(
                            status,
                            if approved { "pending" } else { "declined" },
                            "{ctx}"
                        );
                        txs.push(ModelTx {
                            id: tx_id(&v),
                            kind: "auth",
                            status: if approved { "pending" } else { "declined" },
                            held: if approved { a } else { 0 },
                            cleared: 0,
                            refunded: 0,
                        });
                        if approved {
                            available -= a;
                            "auth"
                        } else {
                            "auth declined"
                        }
                    }
                    Op::Clear { tx, pct } => match pick(tx) {
                        None => "skip",
                        Some(i) => {
                            let m = txs[i].clone();
                            let bill = pct.map(|p| (m.held * p / 100).max(1));
                            let mut body = json!({"transactionId": m.id});
                            if let Some(b) = bill {
                                body["billAmount"] = json!(dec(b));
                            }
                            let (s, v) = t.call("simulate/cards/clear", body).await;
                            let bill = bill.unwrap_or(m.held);
                            if m.kind != "auth" || m.status != "pending" {
                                assert_eq!(
                                    (s, v["error_slug"].as_str()),
                                    (422, Some("invalid_transaction_state")),
                                    "{ctx}"
                                );
                                "clear refused"
                            } else if bill > m.held + available {
                                assert_eq!(
                                    (s, v["error_slug"].as_str()),
                                    (403, Some("insufficient_funds")),
                                    "{ctx}"
                                );
                                "clear over funds"
                            } else if m.held == 0 && pct.is_none() {
                                // Defaults to the held amount, which a fully reversed
                                // auth no longer has: cannot happen for a pending one.
                                unreachable!()
                            } else {
                                assert_eq!(s, 200, "{ctx}: {v}");
                                available += m.held - bill;
                                txs[i] = ModelTx {
                                    status: "approved",
                                    held: 0,
                                    cleared: bill,
                                    ..m
                                };
                                "clear"
                            }
                        }
                    },
                    Op::Reverse { tx, pct } => match pick(tx) {
                        None => "skip",
                        Some(i) => {
                            let m = txs[i].clone();
                            let amount = pct.map(|p| (m.held * p / 100).max(1));
                            let mut body = json!({"transactionId": m.id});
                            if let Some(a) = amount {
                                body["amount"] = json!(dec(a));
                            }
                            let (s, v) = t.call("simulate/cards/reversal", body).await;
                            let amount = amount.unwrap_or(m.held);
                            if m.kind != "auth" || m.status != "pending" {
                                assert_eq!(
                                    (s, v["error_slug"].as_str()),
                                    (422, Some("invalid_transaction_state")),
                                    "{ctx}"
                                );
                                "reverse refused"
                            } else if amount > m.held {
                                assert_eq!(
                                    (s, v["error_slug"].as_str()),
                                    (400, Some("invalid_amount")),
                                    "{ctx}"
                                );
                                "reverse too much"
                            } else {
                                assert_eq!(s, 200, "{ctx}: {v}");
                                available += amount;
                                let held = m.held - amount;
                                txs[i] = if held == 0 {
                                    ModelTx {
                                        kind: "reversal",
                                        status: "approved",
                                        held: 0,
                                        ..m
                                    }
                                } else {
                                    ModelTx { held, ..m }
                                };
                                "reverse"
                            }
                        }
                    },
                    Op::Refund { tx, pct } => match pick(tx) {
                        None => "skip",
                        Some(i) => {
                            let m = txs[i].clone();
                            let remaining = m.cleared - m.refunded;
                            let amount = pct.map(|p| (m.cleared * p / 100).max(1));
                            let mut body = json!({"transactionId": m.id});
                            if let Some(a) = amount {
                                body["amount"] = json!(dec(a));
                            }
                            let (s, v) = t.call("simulate/cards/refund", body).await;
                            let amount = amount.unwrap_or(remaining);
                            if !(m.kind == "auth" && m.status == "approved") {
                                assert_eq!(
                                    (s, v["error_slug"].as_str()),
                                    (422, Some("invalid_transaction_state")),
                                    "{ctx}"
                                );
                                "refund refused"
                            } else if amount > remaining || amount == 0 {
                                assert_eq!(
                                    (s, v["error_slug"].as_str()),
                                    (400, Some("invalid_amount")),
                                    "{ctx}"
                                );
                                "refund too much"
                            } else {
                                assert_eq!(s, 200, "{ctx}: {v}");
                                available += amount;
                                txs[i].refunded += amount;
                                txs.push(ModelTx {
                                    id: tx_id(&v),
                                    kind: "refund",
                                    status: "approved",
                                    held: 0,
                                    cleared: 0,
                                    refunded: 0,
                                });
                                "refund"
                            }
                        }
                    },
                    Op::Expire { tx } => {
                        match pick(tx) {
                            Some(i) if txs[i].kind == "auth" && txs[i].status == "pending" => {
                                let m = txs[i].clone();
                                sqlx::query("UPDATE card_transactions SET hold_expires_at = 0 WHERE id = $1")
                                .bind(&m.id)
                                .execute(t.store.pool())
                                .await
                                .unwrap();
                                let start = std::time::Instant::now();
                                loop {
                                    let items = t.txs(&user, &card, json!({"limit": 100})).await;
                                    let it = items["items"]
                                        .as_array()
                                        .unwrap()
                                        .iter()
                                        .find(|x| x["transaction_id"] == m.id.as_str())
                                        .unwrap()
                                        .clone();
                                    if it["card_tx_data"]["type"] == "reversal" {
                                        assert_eq!(
                                            it["card_tx_data"]["failure_reason"], "expired",
                                            "{ctx}"
                                        );
                                        break;
                                    }
                                    assert!(start.elapsed() < WAIT, "{ctx}: never expired");
                                    tokio::time::sleep(Duration::from_millis(100)).await;
                                }
                                available += m.held;
                                txs[i] = ModelTx {
                                    kind: "reversal",
                                    status: "approved",
                                    held: 0,
                                    ..m
                                };
                                "expire"
                            }
                            _ => "skip",
                        }
                    }
                };
                *counts.entry(outcome).or_insert(0) += 1;
                let held: i64 = txs.iter().map(|m| m.held).sum();
                let (a, p) = t.funds(&user, &card).await;
                assert_eq!((micros(&a), micros(&p)), (available, held), "{ctx}");
                t.verify_ledger().await;
            }
            // The listing agrees with the model on every transaction's state.
            let items = t.txs(&user, &card, json!({"limit": 100})).await;
            for m in &txs {
                let it = items["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|x| x["transaction_id"] == m.id.as_str())
                    .unwrap();
                assert_eq!(
                    (
                        it["card_tx_data"]["type"].as_str(),
                        it["card_tx_data"]["status"].as_str()
                    ),
                    (Some(m.kind), Some(m.status)),
                    "case {case}: {m:?}"
                );
            }
        }
        eprintln!("outcomes: {counts:?}");
    }
);
