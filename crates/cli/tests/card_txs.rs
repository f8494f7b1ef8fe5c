//! Card spending through the simulator (CONTRACT §9): holds in the ledger, every row of
//! the transaction table, the error slugs, cards/txs, webhooks for every change,
//! concurrency on one card, replayed network messages, hold expiry, closing cards and
//! a property test against a model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::receiver::Receiver;
use common::{api_error, TestServer};
use issuing_client::{
    CardRef, CardTransaction, CardholdersCreate, CardsClose, CardsFreeze, CardsTopup, CardsTxs,
    ListQuery, Merchant, Page, Simulate3ds, SimulateAuth, SimulateClear, SimulateRefund,
    SimulateReversal, SimulatedTransaction, WhSubscribe,
};
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

    /// simulate/cards/auth of `amount` (a decimal string) on `card`.
    async fn auth(&self, card: &str, amount: &str) -> SimulatedTransaction {
        self.sdk()
            .simulate_cards_auth(&auth(card, amount))
            .await
            .unwrap()
    }

    /// simulate/cards/auth with the amount as any JSON value (raw: numbers on purpose).
    async fn auth_json(&self, card: &str, amount: Value) -> Value {
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

    /// cards/txs of the card, optionally of one `slug`, with paging.
    async fn txs(
        &self,
        user: &str,
        card: &str,
        slug: Option<&str>,
        page: ListQuery,
    ) -> Page<CardTransaction> {
        self.sdk()
            .cards_txs(&txs_of(user, card, slug, page))
            .await
            .unwrap()
    }
}

fn auth(card: &str, amount: &str) -> SimulateAuth {
    SimulateAuth {
        card_id: card.into(),
        transaction_amount: amount.into(),
        ..SimulateAuth::default()
    }
}

/// simulate/cards/clear of `tx`, at `bill` (default: the hold).
fn clear(tx: &str, bill: Option<&str>) -> SimulateClear {
    SimulateClear {
        transaction_id: Some(tx.into()),
        bill_amount: bill.map(Into::into),
        ..SimulateClear::default()
    }
}

/// simulate/cards/reversal of `tx`, of `amount` (default: all of the hold).
fn reversal(tx: &str, amount: Option<&str>) -> SimulateReversal {
    SimulateReversal {
        transaction_id: tx.into(),
        amount: amount.map(Into::into),
        ..SimulateReversal::default()
    }
}

/// simulate/cards/refund of `tx`, of `amount` (default: what remains).
fn refund(tx: &str, amount: Option<&str>) -> SimulateRefund {
    SimulateRefund {
        transaction_id: Some(tx.into()),
        amount: amount.map(Into::into),
        ..SimulateRefund::default()
    }
}

fn txs_of(user: &str, card: &str, slug: Option<&str>, page: ListQuery) -> CardsTxs {
    CardsTxs {
        card_id: card.into(),
        external_user_id: user.into(),
        slug: slug.map(Into::into),
        page,
    }
}

fn limit(n: u32) -> ListQuery {
    ListQuery {
        limit: Some(n),
        ..ListQuery::default()
    }
}

fn of_user(card: &str, user: &str) -> CardsFreeze {
    CardsFreeze {
        card_id: card.into(),
        external_user_id: Some(user.into()),
    }
}

fn topup(card: &str, amount: &str) -> CardsTopup {
    CardsTopup {
        card_id: card.into(),
        amount: amount.into(),
        ..CardsTopup::default()
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
        let sdk = t.sdk();
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.subscribe(&rx.url, &["card_transaction"]).await;
        let card = t.card_with("ada", 100).await;
        assert_eq!(t.funds("ada", &card).await, funds("100.00", "0.00"));

        // auth → pending, held.
        let v = sdk
            .simulate_cards_auth(&SimulateAuth {
                merchant: Some(Merchant {
                    name: Some("Coffee".into()),
                    mcc: Some("5814".into()),
                    country: Some("GB".into()),
                }),
                merchant_currency: Some("gbp".into()),
                merchant_amount: Some("24.5".into()),
                ..auth(&card, "30")
            })
            .await
            .unwrap();
        let a1 = v.transaction_id.clone();
        let item = &v.transaction;
        assert_eq!(item.kind, "card_transaction");
        assert_eq!(item.transaction_id, a1);
        assert_eq!(item.tx_type, "transaction_created_auth_pending");
        assert_eq!(item.card_id, card);
        assert!(item.tx_at.ends_with('Z'));
        let d = &item.card_tx_data;
        assert_eq!((d.kind.as_str(), d.status.as_str()), ("auth", "pending"));
        assert_eq!(d.card_amount, 30.0);
        assert_eq!(d.merchant.name.as_deref(), Some("Coffee"));
        assert_eq!(d.merchant.mcc.as_deref(), Some("5814"));
        assert_eq!(d.merchant_currency, "GBP");
        assert_eq!(d.merchant_amount, 24.5);
        assert_eq!(d.card_currency, "USD");
        assert_eq!(d.fee_currency, "usd");
        assert_eq!(d.fee_amount, 0.0);
        assert_eq!(d.card_label.as_ref().unwrap().len(), 4);
        assert!(d.failure_reason.is_none());
        assert_eq!(t.funds("ada", &card).await, funds("70.00", "30.00"));
        let got = sdk.cards_get(&CardRef::new(&card, "ada")).await.unwrap();
        assert_eq!(
            (got.balance.available.as_str(), got.balance.pending.as_str()),
            ("70.00", "30.00")
        );
        // Raw: the singular `card_id` filter name is the legacy form the server still reads.
        let found = t.ok("cards/find", json!({"card_id": card})).await;
        assert_eq!(found["items"][0]["balance"]["pending"], "30.00");

        // A withdraw cannot take held money.
        api_error(
            sdk.cards_withdraw(&topup(&card, "71"), "w-held").await,
            403,
            "insufficient_funds",
        );

        // clear at the held amount → approved; the hold is gone, the money spent.
        let v = sdk.simulate_cards_clear(&clear(&a1, None)).await.unwrap();
        assert_eq!(v.transaction.tx_type, "transaction_updated_auth_approved");
        assert_eq!(v.transaction.card_tx_data.status, "approved");
        assert_eq!(v.transaction.card_tx_data.card_amount, 30.0);
        assert_eq!(t.funds("ada", &card).await, funds("70.00", "0.00"));
        api_error(
            sdk.simulate_cards_clear(&clear(&a1, None)).await,
            422,
            "invalid_transaction_state",
        );
        api_error(
            sdk.simulate_cards_reversal(&reversal(&a1, None)).await,
            422,
            "invalid_transaction_state",
        );

        // refunds: bounded by the cleared amount.
        let v = sdk
            .simulate_cards_refund(&refund(&a1, Some("10")))
            .await
            .unwrap();
        let r1 = &v.transaction;
        assert_eq!(r1.tx_type, "transaction_created_refund_approved");
        assert_eq!(r1.card_tx_data.kind, "refund");
        assert_eq!(
            r1.card_tx_data.original_transaction_id.as_deref(),
            Some(a1.as_str())
        );
        assert_eq!(r1.card_tx_data.card_amount, 10.0);
        assert_ne!(v.transaction_id, a1);
        api_error(
            sdk.simulate_cards_refund(&refund(&a1, Some("20.01"))).await,
            400,
            "invalid_amount",
        );
        let v = sdk.simulate_cards_refund(&refund(&a1, None)).await.unwrap();
        assert_eq!(
            v.transaction.card_tx_data.card_amount, 20.0,
            "defaults to what remains"
        );
        api_error(
            sdk.simulate_cards_refund(&refund(&a1, None)).await,
            400,
            "invalid_amount",
        );
        api_error(
            sdk.simulate_cards_refund(&refund(&v.transaction_id, None))
                .await,
            422,
            "invalid_transaction_state",
        );
        assert_eq!(t.funds("ada", &card).await, funds("100.00", "0.00"));

        // reversal → hold released. (Raw: a JSON number as the amount is accepted too.)
        let a2 = tx_id(&t.auth_json(&card, json!(20)).await);
        api_error(
            sdk.simulate_cards_refund(&refund(&a2, None)).await,
            422,
            "invalid_transaction_state",
        );
        let v = sdk
            .simulate_cards_reversal(&reversal(&a2, None))
            .await
            .unwrap();
        assert_eq!(
            v.transaction.tx_type,
            "transaction_updated_reversal_approved"
        );
        assert_eq!(v.transaction.card_tx_data.kind, "reversal");
        assert_eq!(v.transaction.card_tx_data.card_amount, 20.0);
        assert_eq!(t.funds("ada", &card).await, funds("100.00", "0.00"));
        api_error(
            sdk.simulate_cards_clear(&clear(&a2, None)).await,
            422,
            "invalid_transaction_state",
        );

        // clear below the hold releases the rest; above it uses available funds.
        let a3 = t.auth(&card, "10").await.transaction_id;
        sdk.simulate_cards_clear(&clear(&a3, Some("4")))
            .await
            .unwrap();
        assert_eq!(t.funds("ada", &card).await, funds("96.00", "0.00"));
        let a4 = t.auth(&card, "10").await.transaction_id;
        // Raw: a JSON number as billAmount is accepted too.
        let v = t
            .ok(
                "simulate/cards/clear",
                json!({"transactionId": a4, "billAmount": 15}),
            )
            .await;
        assert_eq!(v["transaction"]["card_tx_data"]["card_amount"], json!(15.0));
        assert_eq!(t.funds("ada", &card).await, funds("81.00", "0.00"));
        // Beyond the card's funds: 403 and nothing changes.
        let a5 = t.auth(&card, "10").await.transaction_id;
        api_error(
            sdk.simulate_cards_clear(&clear(&a5, Some("91.01"))).await,
            403,
            "insufficient_funds",
        );
        assert_eq!(t.funds("ada", &card).await, funds("71.00", "10.00"));
        sdk.simulate_cards_reversal(&reversal(&a5, None))
            .await
            .unwrap();

        // declined: insufficient funds, then a frozen card.
        let v = t.auth(&card, "81.01").await;
        assert_eq!(v.transaction.tx_type, "transaction_created_auth_declined");
        assert_eq!(
            v.transaction.card_tx_data.failure_reason.as_deref(),
            Some("insufficient_funds")
        );
        assert_eq!(t.funds("ada", &card).await, funds("81.00", "0.00"));
        let a6 = t.auth(&card, "5").await.transaction_id;
        sdk.cards_freeze(&of_user(&card, "ada")).await.unwrap();
        let v = t.auth(&card, "1").await;
        assert_eq!(v.transaction.card_tx_data.status, "declined");
        assert_eq!(
            v.transaction.card_tx_data.failure_reason.as_deref(),
            Some("card_not_active")
        );
        api_error(
            sdk.simulate_cards_clear(&clear(&v.transaction_id, None))
                .await,
            422,
            "invalid_transaction_state",
        );
        // An earlier auth still clears on the frozen card.
        sdk.simulate_cards_clear(&clear(&a6, None)).await.unwrap();
        sdk.cards_unfreeze(&of_user(&card, "ada")).await.unwrap();
        assert_eq!(t.funds("ada", &card).await, funds("76.00", "0.00"));

        // Request errors are not transactions.
        for bad in ["0", "abc", "1.0000001"] {
            api_error(
                sdk.simulate_cards_auth(&auth(&card, bad)).await,
                400,
                "invalid_amount",
            );
        }
        // Raw: a negative JSON number and null cannot be sent through the typed request.
        for bad in [json!(-1), Value::Null] {
            t.expect_error(
                "simulate/cards/auth",
                json!({"card_id": card, "transactionAmount": bad}),
                400,
                "invalid_amount",
            )
            .await;
        }
        api_error(
            sdk.simulate_cards_clear(&clear(&a6, Some("0"))).await,
            400,
            "invalid_amount",
        );
        api_error(
            sdk.simulate_cards_auth(&auth("nope", "1")).await,
            404,
            "card_not_found",
        );
        // Raw: a request without card_id.
        t.expect_error(
            "simulate/cards/auth",
            json!({"transactionAmount": "1"}),
            400,
            "validation_error",
        )
        .await;
        api_error(
            sdk.simulate_cards_clear(&clear("nope", None)).await,
            404,
            "transaction_not_found",
        );
        api_error(
            sdk.simulate_cards_reversal(&reversal("nope", None)).await,
            404,
            "transaction_not_found",
        );
        api_error(
            sdk.simulate_cards_refund(&refund("nope", None)).await,
            404,
            "transaction_not_found",
        );
        // Raw: empty requests, without the required fields.
        for path in [
            "simulate/cards/clear",
            "simulate/cards/reversal",
            "simulate/cards/refund",
        ] {
            t.expect_error(path, json!({}), 400, "validation_error")
                .await;
        }

        // cards/txs: newest change first, in the webhook shape.
        let all = t.txs("ada", &card, None, limit(100)).await;
        let items = &all.items;
        assert_eq!(all.total, items.len() as u64);
        assert_eq!(items.len(), 10, "6 approved auths, 2 declines, 2 refunds");
        assert_eq!(items[0].transaction_id, a6, "the last change first");
        let times: Vec<&str> = items.iter().map(|i| i.tx_at.as_str()).collect();
        assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
        let by_id = |id: &str| {
            items
                .iter()
                .find(|i| i.transaction_id == id)
                .unwrap()
                .clone()
        };
        assert_eq!(by_id(&a1).tx_type, "transaction_updated_auth_approved");
        assert_eq!(by_id(&a2).card_tx_data.kind, "reversal");
        let refunds = t
            .txs("ada", &card, Some("refund"), ListQuery::default())
            .await;
        assert_eq!(refunds.total, 2);
        assert!(refunds
            .items
            .iter()
            .all(|i| i.card_tx_data.kind == "refund"));
        assert_eq!(
            t.txs("ada", &card, Some("reversal"), ListQuery::default())
                .await
                .total,
            2
        );
        let page = t
            .txs(
                "ada",
                &card,
                None,
                ListQuery {
                    skip: Some(1),
                    ..limit(2)
                },
            )
            .await;
        assert_eq!((page.skip, page.limit, page.items.len()), (1, 2, 2));
        assert_eq!(page.items[0], items[1]);
        // Raw: a request without external_user_id.
        t.expect_error(
            "cards/txs",
            json!({"card_id": card}),
            400,
            "external_user_id_required",
        )
        .await;
        api_error(
            sdk.cards_txs(&txs_of("ada", &card, Some("nope"), ListQuery::default()))
                .await,
            400,
            "validation_error",
        );
        api_error(
            sdk.cards_txs(&txs_of("nobody", &card, None, ListQuery::default()))
                .await,
            404,
            "card_not_found",
        );
        sdk.cardholders_create(&CardholdersCreate {
            external_user_id: "bob".into(),
            subprovider_code: "sandbox".into(),
            kyc_data: Some(serde_json::from_value(common::cards::kyc()).unwrap()),
            ..CardholdersCreate::default()
        })
        .await
        .unwrap();
        api_error(
            sdk.cards_txs(&txs_of("bob", &card, None, ListQuery::default()))
                .await,
            422,
            "card_user_mismatch",
        );

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
        let other = t.sdk_as(&t.new_project("other").await);
        api_error(
            other.simulate_cards_clear(&clear(&a6, None)).await,
            404,
            "transaction_not_found",
        );
        api_error(
            other.simulate_cards_refund(&refund(&a1, None)).await,
            404,
            "transaction_not_found",
        );
        api_error(
            other.simulate_cards_reversal(&reversal(&a5, None)).await,
            404,
            "transaction_not_found",
        );
        api_error(
            other.simulate_cards_auth(&auth(&card, "1")).await,
            404,
            "card_not_found",
        );
        api_error(
            other
                .cards_txs(&txs_of("ada", &card, None, ListQuery::default()))
                .await,
            404,
            "card_not_found",
        );
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
            calls.push(tokio::spawn(async move { t.auth(&card, "1").await }));
        }
        let mut approved = 0;
        let mut declined = 0;
        for c in calls {
            let v = c.await.unwrap();
            let data = &v.transaction.card_tx_data;
            match data.status.as_str() {
                "pending" => approved += 1,
                "declined" => {
                    assert_eq!(data.failure_reason.as_deref(), Some("insufficient_funds"));
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
            let a = t.auth(&card, "5").await.transaction_id;
            let (sdk1, sdk2) = (t.sdk(), t.sdk());
            let (a1, a2) = (a.clone(), a.clone());
            let clear = tokio::spawn(async move {
                sdk1.simulate_cards_clear(&clear(&a1, None))
                    .await
                    .map(|_| ())
            });
            let reverse = tokio::spawn(async move {
                sdk2.simulate_cards_reversal(&reversal(&a2, None))
                    .await
                    .map(|_| ())
            });
            let (c, r) = (clear.await.unwrap(), reverse.await.unwrap());
            let wins = [&c, &r].iter().filter(|x| x.is_ok()).count();
            assert_eq!(wins, 1, "exactly one wins: {c:?} {r:?}");
            for res in [c, r] {
                if res.is_err() {
                    api_error(res, 422, "invalid_transaction_state");
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
        let sdk = t.sdk();
        let card = t.card_with("ada", 50).await;
        let auth_req = SimulateAuth {
            network_message_id: Some("net-auth-1".into()),
            ..auth(&card, "10")
        };
        let first = sdk.simulate_cards_auth(&auth_req).await.unwrap();
        let again = sdk.simulate_cards_auth(&auth_req).await.unwrap();
        assert_eq!(first.transaction_id, again.transaction_id);
        assert_eq!(
            t.funds("ada", &card).await,
            funds("40.00", "10.00"),
            "held once"
        );
        let a = first.transaction_id;
        let clear_req = SimulateClear {
            network_message_id: Some("net-clear-1".into()),
            ..clear(&a, Some("8"))
        };
        sdk.simulate_cards_clear(&clear_req).await.unwrap();
        let replay = sdk.simulate_cards_clear(&clear_req).await.unwrap();
        assert_eq!(
            replay.transaction.card_tx_data.status, "approved",
            "the replay answers the transaction"
        );
        assert_eq!(
            t.funds("ada", &card).await,
            funds("42.00", "0.00"),
            "cleared once"
        );
        let refund_req = SimulateRefund {
            network_message_id: Some("net-refund-1".into()),
            ..refund(&a, Some("3"))
        };
        let r1 = sdk.simulate_cards_refund(&refund_req).await.unwrap();
        let r2 = sdk.simulate_cards_refund(&refund_req).await.unwrap();
        assert_eq!(r1.transaction_id, r2.transaction_id);
        assert_eq!(t.funds("ada", &card).await.0, "45.00", "refunded once");
        // Concurrent copies of one message: one posting.
        let mut calls = Vec::new();
        for _ in 0..8 {
            let (sdk, card) = (t.sdk(), card.clone());
            calls.push(tokio::spawn(async move {
                sdk.simulate_cards_auth(&SimulateAuth {
                    network_message_id: Some("net-auth-2".into()),
                    ..auth(&card, "1")
                })
                .await
                .unwrap()
            }));
        }
        let mut ids = std::collections::HashSet::new();
        for c in calls {
            ids.insert(c.await.unwrap().transaction_id);
        }
        assert_eq!(ids.len(), 1);
        assert_eq!(t.funds("ada", &card).await, funds("44.00", "1.00"));
        assert_eq!(
            t.txs("ada", &card, Some("auth"), ListQuery::default())
                .await
                .total,
            2
        );
        t.verify_ledger().await;
    }
);

both_backends!(
    partial_reversal_force_post_and_unlinked_refund,
    |t: TestServer| async move {
        let sdk = t.sdk();
        let card = t.card_with("ada", 50).await;
        let a = t.auth(&card, "20").await.transaction_id;
        let v = sdk
            .simulate_cards_reversal(&reversal(&a, Some("5")))
            .await
            .unwrap();
        assert_eq!(v.transaction.tx_type, "transaction_updated_auth_pending");
        assert_eq!(v.transaction.card_tx_data.card_amount, 15.0);
        assert_eq!(t.funds("ada", &card).await, funds("35.00", "15.00"));
        api_error(
            sdk.simulate_cards_reversal(&reversal(&a, Some("15.01")))
                .await,
            400,
            "invalid_amount",
        );
        let v = sdk
            .simulate_cards_reversal(&reversal(&a, None))
            .await
            .unwrap();
        assert_eq!(v.transaction.card_tx_data.kind, "reversal");
        assert_eq!(t.funds("ada", &card).await, funds("50.00", "0.00"));

        let force_post = |bill: Option<&str>| SimulateClear {
            card_id: Some(card.clone()),
            bill_amount: bill.map(Into::into),
            ..SimulateClear::default()
        };
        let v = sdk
            .simulate_cards_clear(&force_post(Some("12.5")))
            .await
            .unwrap();
        assert_eq!(v.transaction.tx_type, "transaction_created_auth_approved");
        assert_eq!(v.transaction.card_tx_data.auth_type, "force_post");
        assert_eq!(t.funds("ada", &card).await, funds("37.50", "0.00"));
        let fp = v.transaction_id;
        sdk.simulate_cards_refund(&refund(&fp, Some("2.5")))
            .await
            .unwrap();
        api_error(
            sdk.simulate_cards_clear(&force_post(Some("1000"))).await,
            403,
            "insufficient_funds",
        );
        api_error(
            sdk.simulate_cards_clear(&force_post(None)).await,
            400,
            "invalid_amount",
        );

        let unlinked = |amount: Option<&str>| SimulateRefund {
            card_id: Some(card.clone()),
            amount: amount.map(Into::into),
            ..SimulateRefund::default()
        };
        // Raw: checks that original_transaction_id is left out, not written as null
        // (the typed answer reads both as None).
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
        api_error(
            sdk.simulate_cards_refund(&unlinked(None)).await,
            400,
            "invalid_amount",
        );
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
        let sdk = t.sdk();
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.subscribe(&rx.url, &["card_transaction"]).await;
        let card = t.card_with("ada", 30).await;
        let a = t.auth(&card, "12").await.transaction_id;
        let cleared = t.auth(&card, "3").await.transaction_id;
        sdk.simulate_cards_clear(&clear(&cleared, None))
            .await
            .unwrap();
        let start = std::time::Instant::now();
        loop {
            let items = t
                .txs("ada", &card, Some("reversal"), ListQuery::default())
                .await;
            if items.total == 1 {
                let item = &items.items[0];
                assert_eq!(item.transaction_id, a);
                assert_eq!(item.tx_type, "transaction_updated_reversal_approved");
                assert_eq!(item.card_tx_data.failure_reason.as_deref(), Some("expired"));
                assert_eq!(item.card_tx_data.status, "approved");
                break;
            }
            assert!(start.elapsed() < WAIT, "the hold never expired");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(t.funds("ada", &card).await, funds("27.00", "0.00"));
        api_error(
            sdk.simulate_cards_clear(&clear(&a, None)).await,
            422,
            "invalid_transaction_state",
        );
        rx.wait_until("the expiry webhook", WAIT, |r| {
            r.iter().any(|x| {
                x.event["transaction_id"] == a.as_str()
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
        let sdk = t.sdk();
        api_error(
            sdk.simulate_cards_auth(&auth("x", "1")).await,
            404,
            "not_found",
        );
        api_error(
            sdk.simulate_cards_clear(&clear("x", Some("1"))).await,
            404,
            "not_found",
        );
        api_error(
            sdk.simulate_cards_reversal(&reversal("x", None)).await,
            404,
            "not_found",
        );
        api_error(
            sdk.simulate_cards_refund(&refund("x", Some("1"))).await,
            404,
            "not_found",
        );
        api_error(
            sdk.simulate_cards_3ds(&Simulate3ds {
                card_id: "x".into(),
                amount: "1".into(),
                ..Simulate3ds::default()
            })
            .await,
            404,
            "not_found",
        );
    }
);

both_backends!(
    closing_a_card_releases_holds_and_returns_its_funds,
    |t: TestServer| async move {
        let sdk = t.sdk();
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.subscribe(&rx.url, &[]).await;
        let card = t.card_with("ada", 40).await;
        let spent = t.auth(&card, "10").await.transaction_id;
        sdk.simulate_cards_clear(&clear(&spent, None))
            .await
            .unwrap();
        let open = t.auth(&card, "5").await.transaction_id;
        let master_before: f64 = t.balance().await.parse().unwrap();
        // Raw: a close without an idempotency key (the SDK always sends one).
        t.expect_error(
            "cards/close",
            json!({"card_id": card}),
            400,
            "idempotency_key_required",
        )
        .await;
        let close_req = CardsClose {
            card_id: card.clone(),
            external_user_id: Some("ada".into()),
            reason: Some("lost".into()),
        };
        let v = sdk.cards_close(&close_req, "close-1").await.unwrap();
        assert_eq!(v.status, "closed");
        assert!(!v.closed_at.is_empty());
        assert_eq!(v.order.order_type, "card_status_change");
        assert_eq!(v.order.data["to"], "closed");
        assert_eq!(v.order.data["reason"], "lost");
        let withdraw_order = v.withdraw_order.as_ref().unwrap();
        assert_eq!(withdraw_order.order_type, "card_withdraw");
        assert_eq!(withdraw_order.data["amount"], "30.00");
        let again = sdk.cards_close(&close_req, "close-1").await.unwrap();
        assert_eq!(again, v, "the same key answers the same response");
        sdk.wait_order(&withdraw_order.order_id, WAIT)
            .await
            .unwrap();
        let master_after: f64 = t.balance().await.parse().unwrap();
        assert!(
            (master_after - master_before - 30.0).abs() < 1e-9,
            "{master_before} → {master_after}"
        );
        assert_eq!(t.funds("ada", &card).await, funds("0.00", "0.00"));
        let got = sdk.cards_get(&CardRef::new(&card, "ada")).await.unwrap();
        assert_eq!(got.status, "closed");
        assert!(got.closed_at.is_some());
        let released = t
            .txs("ada", &card, Some("reversal"), ListQuery::default())
            .await;
        assert_eq!(released.items[0].transaction_id, open);
        assert_eq!(
            released.items[0].card_tx_data.failure_reason.as_deref(),
            Some("card_closed")
        );

        // closed is final.
        let v = t.auth(&card, "1").await;
        assert_eq!(
            v.transaction.card_tx_data.failure_reason.as_deref(),
            Some("card_not_active")
        );
        api_error(
            sdk.cards_topup(&topup(&card, "10"), "after-close").await,
            422,
            "card_not_active",
        );
        api_error(
            sdk.cards_freeze(&of_user(&card, "ada")).await,
            422,
            "invalid_status_transition",
        );
        api_error(
            sdk.cards_unfreeze(&of_user(&card, "ada")).await,
            422,
            "invalid_status_transition",
        );
        let close_of = |card: &str| CardsClose {
            card_id: card.into(),
            ..CardsClose::default()
        };
        api_error(
            sdk.cards_close(&close_of(&card), "close-2").await,
            422,
            "invalid_status_transition",
        );
        // A refund of an earlier purchase still lands on it.
        sdk.simulate_cards_refund(&refund(&spent, Some("4")))
            .await
            .unwrap();
        assert_eq!(t.funds("ada", &card).await.0, "4.00");
        // ... and is taken back like any card funds.
        let w = sdk
            .cards_withdraw(&topup(&card, "4"), "late-refund")
            .await
            .unwrap();
        let done = sdk.wait_order(&w.order_id, WAIT).await.unwrap();
        assert_eq!(done.status, "completed");
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
        let v = sdk
            .cards_topup(&topup(&restricted, "10"), "fund-bob")
            .await
            .unwrap();
        sdk.wait_order(&v.order_id, WAIT).await.unwrap();
        api_error(
            sdk.cards_close(&close_of(&restricted), "close-3").await,
            422,
            "provider_withdraw_not_supported",
        );
        let other = t.sdk_as(&t.new_project("other").await);
        api_error(
            other.cards_close(&close_of(&restricted), "x").await,
            404,
            "card_not_found",
        );
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
        let sdk = t.sdk();
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
                        let v = sdk
                            .cards_topup(&topup(&card, &dec(a)), &format!("p{case}-{step}"))
                            .await
                            .unwrap_or_else(|e| panic!("{ctx}: {e}"));
                        let o = sdk.wait_order(&v.order_id, WAIT).await.unwrap();
                        assert_eq!(o.status, "completed", "{ctx}");
                        available += a;
                        "topup"
                    }
                    Op::Withdraw(a) => {
                        let res = sdk
                            .cards_withdraw(&topup(&card, &dec(a)), &format!("p{case}-{step}"))
                            .await;
                        if a <= available {
                            let v = res.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                            sdk.wait_order(&v.order_id, WAIT).await.unwrap();
                            available -= a;
                            "withdraw"
                        } else {
                            let e = res.unwrap_err();
                            assert_eq!(
                                (e.status(), e.slug()),
                                (Some(403), Some("insufficient_funds")),
                                "{ctx}"
                            );
                            "withdraw refused"
                        }
                    }
                    Op::Auth(a) => {
                        let v = t.auth(&card, &dec(a)).await;
                        let status = v.transaction.card_tx_data.status.clone();
                        let approved = a <= available;
                        assert_eq!(
                            status,
                            if approved { "pending" } else { "declined" },
                            "{ctx}"
                        );
                        txs.push(ModelTx {
                            id: v.transaction_id,
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
                            let res = sdk
                                .simulate_cards_clear(&clear(&m.id, bill.map(dec).as_deref()))
                                .await;
                            let bill = bill.unwrap_or(m.held);
                            if m.kind != "auth" || m.status != "pending" {
                                let e = res.as_ref().unwrap_err();
                                assert_eq!(
                                    (e.status(), e.slug()),
                                    (Some(422), Some("invalid_transaction_state")),
                                    "{ctx}"
                                );
                                "clear refused"
                            } else if bill > m.held + available {
                                let e = res.as_ref().unwrap_err();
                                assert_eq!(
                                    (e.status(), e.slug()),
                                    (Some(403), Some("insufficient_funds")),
                                    "{ctx}"
                                );
                                "clear over funds"
                            } else if m.held == 0 && pct.is_none() {
                                // Defaults to the held amount, which a fully reversed
                                // auth no longer has: cannot happen for a pending one.
                                unreachable!()
                            } else {
                                res.unwrap_or_else(|e| panic!("{ctx}: {e}"));
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
                            let res = sdk
                                .simulate_cards_reversal(&reversal(
                                    &m.id,
                                    amount.map(dec).as_deref(),
                                ))
                                .await;
                            let amount = amount.unwrap_or(m.held);
                            if m.kind != "auth" || m.status != "pending" {
                                let e = res.as_ref().unwrap_err();
                                assert_eq!(
                                    (e.status(), e.slug()),
                                    (Some(422), Some("invalid_transaction_state")),
                                    "{ctx}"
                                );
                                "reverse refused"
                            } else if amount > m.held {
                                let e = res.as_ref().unwrap_err();
                                assert_eq!(
                                    (e.status(), e.slug()),
                                    (Some(400), Some("invalid_amount")),
                                    "{ctx}"
                                );
                                "reverse too much"
                            } else {
                                res.unwrap_or_else(|e| panic!("{ctx}: {e}"));
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
                            let res = sdk
                                .simulate_cards_refund(&refund(&m.id, amount.map(dec).as_deref()))
                                .await;
                            let amount = amount.unwrap_or(remaining);
                            if !(m.kind == "auth" && m.status == "approved") {
                                let e = res.as_ref().unwrap_err();
                                assert_eq!(
                                    (e.status(), e.slug()),
                                    (Some(422), Some("invalid_transaction_state")),
                                    "{ctx}"
                                );
                                "refund refused"
                            } else if amount > remaining || amount == 0 {
                                let e = res.as_ref().unwrap_err();
                                assert_eq!(
                                    (e.status(), e.slug()),
                                    (Some(400), Some("invalid_amount")),
                                    "{ctx}"
                                );
                                "refund too much"
                            } else {
                                let v = res.unwrap_or_else(|e| panic!("{ctx}: {e}"));
                                available += amount;
                                txs[i].refunded += amount;
                                txs.push(ModelTx {
                                    id: v.transaction_id,
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
                                    let items = t.txs(&user, &card, None, limit(100)).await;
                                    let it = items
                                        .items
                                        .into_iter()
                                        .find(|x| x.transaction_id == m.id)
                                        .unwrap();
                                    if it.card_tx_data.kind == "reversal" {
                                        assert_eq!(
                                            it.card_tx_data.failure_reason.as_deref(),
                                            Some("expired"),
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
            let items = t.txs(&user, &card, None, limit(100)).await;
            for m in &txs {
                let it = items
                    .items
                    .iter()
                    .find(|x| x.transaction_id == m.id)
                    .unwrap();
                assert_eq!(
                    (
                        it.card_tx_data.kind.as_str(),
                        it.card_tx_data.status.as_str()
                    ),
                    (m.kind, m.status),
                    "case {case}: {m:?}"
                );
            }
        }
        eprintln!("outcomes: {counts:?}");
    }
);
