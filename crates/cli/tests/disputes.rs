//! Disputes (CONTRACT §15) through the public HTTP API, on both backends: every rule
//! and error of `disputes/create`, idempotency, every state move and refusal, the money
//! of each outcome (with and without provisional credit, on active and closed cards,
//! and when the card has spent the credit), card transactions and webhooks, evidence
//! (sealed, checked, bounded, the larger body limit on that endpoint alone), find, and
//! a ledger that verifies after every test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::receiver::Receiver;
use common::TestServer;
use issuing_client::{DisputesCreate, DisputesEvidenceAdd, SimulateDisputesAdvance};
use serde_json::{json, Value};
use sqlx::Row;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

impl TestServer {
    /// An active card of `user` holding `units` after its topup.
    async fn funded_card(&self, user: &str, units: u32) -> String {
        self.deposit(&self.creds.project_id, 10_000_000_000).await;
        let card = self.active_card(user, "virtual_usd").await;
        let (s, v) = self
            .topup(&card, json!(units.to_string()), &format!("fund-{user}"))
            .await;
        assert_eq!(s, 200, "{v}");
        let o = self.wait_order(v["order_id"].as_str().unwrap()).await;
        assert_eq!(o["status"], "completed", "{o}");
        card
    }

    /// A transaction of `amount` on `card`, authorized and cleared.
    async fn settled(&self, card: &str, amount: &str) -> String {
        let a = self
            .ok(
                "simulate/cards/auth",
                json!({"card_id": card, "transactionAmount": amount,
                       "merchant": {"name": "Shop", "mcc": "5999", "country": "US"}}),
            )
            .await;
        let id = a["transactionId"].as_str().unwrap().to_owned();
        self.ok("simulate/cards/clear", json!({"transactionId": id}))
            .await;
        id
    }

    async fn dispute(&self, body: Value, key: &str) -> (u16, Value) {
        self.call_with_headers("disputes/create", body, &[("Idempotency-Key", key)])
            .await
    }

    async fn open(&self, tx: &str, provisional: bool, key: &str) -> Value {
        let (s, v) = self
            .dispute(
                json!({"transaction_id": tx, "reason": "goods_services_not_received",
                       "provisional_credit": provisional}),
                key,
            )
            .await;
        assert_eq!(s, 200, "{v}");
        v
    }

    async fn advance(&self, id: &str, to: &str) -> Value {
        self.ok(
            "simulate/disputes/advance",
            json!({"dispute_id": id, "to": to}),
        )
        .await
    }

    /// The project's dispute account (micro-units).
    async fn dispute_account(&self, project_id: &str) -> i64 {
        sqlx::query(
            "SELECT balance FROM accounts WHERE project_id = $1 AND kind = 'dispute' AND card_id IS NULL",
        )
        .bind(project_id)
        .fetch_one(self.store.pool())
        .await
        .unwrap()
        .get::<i64, _>("balance")
    }

    /// The card's transactions of type `other` (dispute movements), newest first.
    async fn dispute_txs(&self, user: &str, card: &str) -> Vec<Value> {
        let v = self
            .ok(
                "cards/txs",
                json!({"card_id": card, "external_user_id": user, "limit": 100}),
            )
            .await;
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["card_tx_data"]["type"] == "other")
            .cloned()
            .collect()
    }
}

fn id(v: &Value) -> String {
    v["dispute_id"].as_str().unwrap().to_owned()
}

fn statuses(d: &Value) -> Vec<String> {
    d["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap().to_owned())
        .collect()
}

both_backends!(
    a_provisional_credit_is_fronted_then_won_or_taken_back,
    |t: TestServer| async move {
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.ok("wh/subscribe", json!({"url": rx.url})).await;
        let card = t.funded_card("ada", 100).await;
        let tx = t.settled(&card, "40").await;
        assert_eq!(t.card_balance("ada", &card).await, "60.00");
        let master_before = t.balance().await;

        // Created with a provisional credit: the card gets 40 at once, fronted.
        let d = t.open(&tx, true, "d-1").await;
        assert_eq!(d["status"], "submitted");
        assert_eq!(d["amount"], "40.00", "defaults to the disputable amount");
        assert_eq!(d["currency"], "usdt");
        assert_eq!(d["provisional_credit"], true);
        assert_eq!(d["card_id"], card.as_str());
        assert_eq!(d["external_user_id"], "ada");
        assert_eq!(d["resolution_reason"], Value::Null);
        assert_eq!(statuses(&d), ["submitted"]);
        let did = id(&d);
        assert_eq!(t.card_balance("ada", &card).await, "100.00");
        assert_eq!(t.dispute_account(&t.creds.project_id).await, -40_000_000);
        assert_eq!(
            t.balance().await,
            master_before,
            "the master is not touched"
        );
        let moves = t.dispute_txs("ada", &card).await;
        assert_eq!(moves.len(), 1, "{moves:?}");
        let credit = &moves[0];
        assert_eq!(
            credit["tx_type"],
            "transaction_created_dispute_credit_approved"
        );
        assert_eq!(credit["card_tx_data"]["status"], "approved");
        assert_eq!(credit["card_tx_data"]["dispute_id"], did.as_str());
        assert_eq!(credit["card_tx_data"]["card_amount"], json!(40.0));
        assert_eq!(
            credit["card_tx_data"]["original_transaction_id"],
            tx.as_str()
        );
        t.verify_ledger().await;

        // Representment, then won: the network pays the dispute account back.
        let d = t.advance(&did, "representment").await;
        assert_eq!(d["status"], "representment");
        let d = t.advance(&did, "won").await;
        assert_eq!(d["status"], "won");
        assert_eq!(d["resolution_reason"], "won_first_chargeback");
        assert!(d["resolved_at"].is_string());
        assert_eq!(statuses(&d), ["submitted", "representment", "won"]);
        assert_eq!(t.card_balance("ada", &card).await, "100.00");
        assert_eq!(t.dispute_account(&t.creds.project_id).await, 0);
        assert_eq!(t.dispute_txs("ada", &card).await.len(), 1, "no card move");
        t.verify_ledger().await;

        // Another transaction, credited, spent, then lost: the card has nothing left,
        // so the master balance pays the credit back.
        let tx2 = t.settled(&card, "30").await;
        let d2 = t.open(&tx2, true, "d-2").await;
        assert_eq!(t.card_balance("ada", &card).await, "100.00");
        t.settled(&card, "100").await;
        assert_eq!(t.card_balance("ada", &card).await, "0.00");
        let master = t.balance().await;
        let d2 = t.advance(&id(&d2), "lost").await;
        assert_eq!(d2["resolution_reason"], "case_lost");
        assert_eq!(t.card_balance("ada", &card).await, "0.00");
        let expected_master = format!("{:.2}", master.parse::<f64>().unwrap() - 30.0);
        assert_eq!(t.balance().await, expected_master, "the shortfall");
        assert_eq!(t.dispute_account(&t.creds.project_id).await, 0);
        let txs = t
            .ok("project/txs", json!({"type": "dispute_shortfall"}))
            .await;
        assert_eq!(txs["total"], 1, "{txs}");
        let moves = t.dispute_txs("ada", &card).await;
        assert_eq!(
            moves[0]["tx_type"],
            "transaction_created_dispute_debit_approved"
        );
        assert_eq!(moves[0]["card_tx_data"]["card_amount"], json!(30.0));
        t.verify_ledger().await;

        // Webhooks: dispute.updated on create and on every change, card_transaction
        // for each card-side movement (two credits, one debit).
        rx.wait_until("every dispute event", WAIT, |got| {
            let n = |ty: &str| got.iter().filter(|r| r.event["event_type"] == ty).count();
            n("dispute.updated") >= 5
        })
        .await;
        let updates: Vec<Value> = rx
            .delivered()
            .into_iter()
            .filter(|e| e["event_type"] == "dispute.updated")
            .collect();
        let of = |d: &str| -> Vec<String> {
            updates
                .iter()
                .filter(|e| e["data"]["dispute_id"] == d)
                .map(|e| e["data"]["status"].as_str().unwrap().to_owned())
                .collect()
        };
        assert_eq!(of(&did), ["submitted", "representment", "won"]);
        assert_eq!(of(&id(&d2)), ["submitted", "lost"]);
        assert!(updates
            .iter()
            .all(|e| e["data"].get("timeline").is_none() && e["data"].get("evidence").is_none()));
        rx.wait_until("the card-side movements", WAIT, |got| {
            got.iter()
                .filter(|r| r.event["card_tx_data"]["type"] == "other")
                .count()
                >= 3
        })
        .await;
    }
);

both_backends!(
    without_a_provisional_credit_only_a_won_dispute_moves_money,
    |t: TestServer| async move {
        let card = t.funded_card("bo", 100).await;
        let tx = t.settled(&card, "25").await;
        let d = t.open(&tx, false, "k1").await;
        assert_eq!(t.card_balance("bo", &card).await, "75.00");
        assert!(t.dispute_txs("bo", &card).await.is_empty());
        let d = t.advance(&id(&d), "prearbitration").await;
        let d = t.advance(&id(&d), "won").await;
        assert_eq!(d["resolution_reason"], "won_prearbitration");
        assert_eq!(
            t.card_balance("bo", &card).await,
            "100.00",
            "paid to the card"
        );
        assert_eq!(t.dispute_account(&t.creds.project_id).await, 0);
        assert_eq!(t.dispute_txs("bo", &card).await.len(), 1);

        // A won dispute keeps claiming its amount: nothing is left to dispute.
        t.expect_error(
            "disputes/create",
            json!({"transaction_id": tx, "reason": "other", "idempotency_key": "k2"}),
            400,
            "invalid_amount",
        )
        .await;

        // Lost without a credit: nothing moves, and the amount is disputable again.
        let tx2 = t.settled(&card, "10").await;
        let d2 = t.open(&tx2, false, "k3").await;
        let d2 = t
            .ok(
                "simulate/disputes/advance",
                json!({"dispute_id": id(&d2), "to": "lost", "resolution_reason": "no_dispute_rights"}),
            )
            .await;
        assert_eq!(d2["resolution_reason"], "no_dispute_rights");
        assert_eq!(t.card_balance("bo", &card).await, "90.00");
        let again = t.open(&tx2, false, "k4").await;
        assert_eq!(again["amount"], "10.00");
        t.verify_ledger().await;
    }
);

both_backends!(
    create_refuses_what_contract_15_refuses,
    |t: TestServer| async move {
        let card = t.funded_card("cy", 100).await;
        let tx = t.settled(&card, "40").await;
        let body = |tx: &str, extra: Value| {
            let mut b = json!({"transaction_id": tx, "reason": "fraud_card_not_present"});
            for (k, v) in extra.as_object().unwrap() {
                b[k] = v.clone();
            }
            b
        };
        let refused = |b: Value, key: &'static str, status: u16, slug: &'static str| {
            let t = &t;
            async move {
                let (s, v) = t.dispute(b, key).await;
                assert_eq!(
                    (s, v["error_slug"].as_str().unwrap_or("")),
                    (status, slug),
                    "{v}"
                );
            }
        };
        refused(body("nope", json!({})), "e1", 404, "transaction_not_found").await;
        refused(
            body(&tx, json!({"reason": "FRAUD"})),
            "e2",
            400,
            "validation_error",
        )
        .await;
        refused(
            body(&tx, json!({"amount": "40.01"})),
            "e3",
            400,
            "invalid_amount",
        )
        .await;
        refused(
            body(&tx, json!({"amount": "0"})),
            "e4",
            400,
            "invalid_amount",
        )
        .await;
        refused(
            body(&tx, json!({"amount": "-1"})),
            "e5",
            400,
            "invalid_amount",
        )
        .await;
        refused(
            body(&tx, json!({"customer_note": "x".repeat(5_001)})),
            "e6",
            400,
            "validation_error",
        )
        .await;
        let (s, v) = t.call("disputes/create", body(&tx, json!({}))).await;
        assert_eq!(
            (s, v["error_slug"].clone()),
            (400, json!("idempotency_key_required"))
        );

        // Never settled: a pending authorization, a declined one, a reversal, a refund.
        let pending = t
            .ok(
                "simulate/cards/auth",
                json!({"card_id": card, "transactionAmount": "5"}),
            )
            .await["transactionId"]
            .as_str()
            .unwrap()
            .to_owned();
        refused(
            body(&pending, json!({})),
            "e7",
            422,
            "transaction_not_disputable",
        )
        .await;
        let declined = t
            .ok(
                "simulate/cards/auth",
                json!({"card_id": card, "transactionAmount": "5000"}),
            )
            .await["transactionId"]
            .as_str()
            .unwrap()
            .to_owned();
        refused(
            body(&declined, json!({})),
            "e8",
            422,
            "transaction_not_disputable",
        )
        .await;
        let refund = t
            .ok(
                "simulate/cards/refund",
                json!({"transactionId": tx, "amount": "5"}),
            )
            .await["transactionId"]
            .as_str()
            .unwrap()
            .to_owned();
        refused(
            body(&refund, json!({})),
            "e9",
            422,
            "transaction_not_disputable",
        )
        .await;
        let reversed = t
            .ok("simulate/cards/reversal", json!({"transactionId": pending}))
            .await["transactionId"]
            .as_str()
            .unwrap()
            .to_owned();
        refused(
            body(&reversed, json!({})),
            "e10",
            422,
            "transaction_not_disputable",
        )
        .await;

        // The refund counts: 35 left of 40.
        refused(
            body(&tx, json!({"amount": "35.01"})),
            "e11",
            400,
            "invalid_amount",
        )
        .await;
        let (s, d) = t.dispute(body(&tx, json!({"amount": "10"})), "ok-1").await;
        assert_eq!(s, 200, "{d}");
        // One open dispute per transaction.
        refused(
            body(&tx, json!({"amount": "5"})),
            "e12",
            409,
            "dispute_already_exists",
        )
        .await;
        // Withdrawn: the transaction may be disputed again, for what is left (35).
        t.ok("disputes/withdraw", json!({"dispute_id": id(&d)}))
            .await;
        let (s, d) = t.dispute(body(&tx, json!({})), "ok-2").await;
        assert_eq!((s, d["amount"].clone()), (200, json!("35.00")), "{d}");

        // Another project cannot see the transaction or the dispute.
        let other = t.new_project("other").await;
        let (s, v) = t
            .call_as(
                &other,
                "disputes/create",
                body(&tx, json!({"idempotency_key": "x"})),
            )
            .await;
        assert_eq!(
            (s, v["error_slug"].clone()),
            (404, json!("transaction_not_found"))
        );
        let (s, v) = t
            .call_as(&other, "disputes/get", json!({"dispute_id": id(&d)}))
            .await;
        assert_eq!(
            (s, v["error_slug"].clone()),
            (404, json!("dispute_not_found"))
        );
        let (s, v) = t
            .call_as(&other, "disputes/withdraw", json!({"dispute_id": id(&d)}))
            .await;
        assert_eq!(
            (s, v["error_slug"].clone()),
            (404, json!("dispute_not_found"))
        );
        t.expect_error(
            "disputes/get",
            json!({"dispute_id": "missing"}),
            404,
            "dispute_not_found",
        )
        .await;

        // More than 120 days after it settled.
        let old = t.settled(&card, "3").await;
        let long_ago = common::now_micros() - 121 * 24 * 3600 * 1_000_000;
        sqlx::query("UPDATE card_transactions SET settled_at = $1 WHERE id = $2")
            .bind(long_ago)
            .bind(&old)
            .execute(t.store.pool())
            .await
            .unwrap();
        refused(body(&old, json!({})), "e13", 422, "dispute_window_closed").await;
        t.verify_ledger().await;
    }
);

both_backends!(
    the_same_key_answers_the_same_dispute,
    |t: TestServer| async move {
        let card = t.funded_card("di", 100).await;
        let tx = t.settled(&card, "20").await;
        let sdk = t.sdk();
        let req = DisputesCreate {
            transaction_id: tx.clone(),
            reason: "duplicated".into(),
            provisional_credit: Some(true),
            ..DisputesCreate::default()
        };
        let first = sdk.disputes_create(&req, "same").await.unwrap();
        let second = sdk.disputes_create(&req, "same").await.unwrap();
        assert_eq!(first.dispute_id, second.dispute_id);
        assert_eq!(t.card_balance("di", &card).await, "100.00", "credited once");
        let other = DisputesCreate {
            amount: Some("5".into()),
            ..req.clone()
        };
        common::api_error(
            sdk.disputes_create(&other, "same").await,
            400,
            "idempotency_conflict",
        );
        // Many parallel creates with distinct keys: one dispute, one credit.
        let tx2 = t.settled(&card, "10").await;
        let mut calls = Vec::new();
        for i in 0..8 {
            let sdk = t.sdk();
            let req = DisputesCreate {
                transaction_id: tx2.clone(),
                reason: "other".into(),
                provisional_credit: Some(true),
                ..DisputesCreate::default()
            };
            calls.push(tokio::spawn(async move {
                sdk.disputes_create(&req, &format!("race-{i}")).await
            }));
        }
        let mut won = 0;
        for c in calls {
            match c.await.unwrap() {
                Ok(_) => won += 1,
                Err(e) => assert_eq!(e.slug(), Some("dispute_already_exists"), "{e:?}"),
            }
        }
        assert_eq!(won, 1);
        assert_eq!(
            t.card_balance("di", &card).await,
            "100.00",
            "10 spent, 10 credited"
        );
        assert_eq!(t.dispute_account(&t.creds.project_id).await, -30_000_000);
        t.verify_ledger().await;
    }
);

both_backends!(
    every_move_and_refusal_of_the_state_machine,
    |t: TestServer| async move {
        let card = t.funded_card("ed", 200).await;
        let tx = t.settled(&card, "10").await;
        let d = t.open(&tx, true, "m1").await;
        let did = id(&d);
        let refused = |body: Value, status: u16, slug: &'static str| {
            let t = &t;
            async move {
                t.expect_error("simulate/disputes/advance", body, status, slug)
                    .await;
            }
        };
        refused(
            json!({"dispute_id": did, "to": "submitted"}),
            422,
            "invalid_status_transition",
        )
        .await;
        refused(
            json!({"dispute_id": did, "to": "closed"}),
            400,
            "validation_error",
        )
        .await;
        refused(
            json!({"dispute_id": did, "to": "arbitration", "resolution_reason": "case_lost"}),
            400,
            "validation_error",
        )
        .await;
        refused(
            json!({"dispute_id": did, "to": "won", "resolution_reason": "case_lost"}),
            400,
            "validation_error",
        )
        .await;
        refused(
            json!({"dispute_id": "none", "to": "won"}),
            404,
            "dispute_not_found",
        )
        .await;
        // Stages are optional and only go forward.
        t.advance(&did, "arbitration").await;
        refused(
            json!({"dispute_id": did, "to": "representment"}),
            422,
            "invalid_status_transition",
        )
        .await;
        let d = t.advance(&did, "won").await;
        assert_eq!(d["resolution_reason"], "won_arbitration");
        // Final: nothing moves, withdraw included.
        refused(
            json!({"dispute_id": did, "to": "lost"}),
            422,
            "invalid_status_transition",
        )
        .await;
        t.expect_error(
            "disputes/withdraw",
            json!({"dispute_id": did}),
            422,
            "invalid_status_transition",
        )
        .await;

        // Withdrawn after a provisional credit: taken back from the card.
        let tx2 = t.settled(&card, "15").await;
        let d2 = t.open(&tx2, true, "m2").await;
        let before = t.card_balance("ed", &card).await;
        let w = t
            .ok("disputes/withdraw", json!({"dispute_id": id(&d2)}))
            .await;
        assert_eq!(w["status"], "withdrawn");
        assert_eq!(w["resolution_reason"], "withdrawn");
        let after = t.card_balance("ed", &card).await;
        assert_eq!(
            before.parse::<f64>().unwrap() - after.parse::<f64>().unwrap(),
            15.0
        );
        let sdk = t.sdk();
        let d = sdk.disputes_get(&id(&d2)).await.unwrap();
        assert_eq!(
            d.timeline
                .iter()
                .map(|e| e.status.as_str())
                .collect::<Vec<_>>(),
            ["submitted", "withdrawn"]
        );
        assert_eq!(t.dispute_account(&t.creds.project_id).await, 0);

        // Every final state with each of its reasons, through the typed client.
        for (to, reason) in [
            ("won", "won_first_chargeback"),
            ("won", "won_prearbitration"),
            ("lost", "network_rejected"),
            ("lost", "past_filing_date"),
        ] {
            let tx = t.settled(&card, "1").await;
            let d = t.open(&tx, false, &format!("r-{to}-{reason}")).await;
            let moved = sdk
                .simulate_disputes_advance(&SimulateDisputesAdvance {
                    dispute_id: id(&d),
                    to: to.into(),
                    resolution_reason: Some(reason.into()),
                })
                .await
                .unwrap();
            assert_eq!(
                (moved.status.as_str(), moved.resolution_reason.as_deref()),
                (to, Some(reason))
            );
        }
        t.verify_ledger().await;
    }
);

both_backends!(
    a_closed_cards_credits_go_to_the_master_balance,
    |t: TestServer| async move {
        let card = t.funded_card("fi", 50).await;
        let tx = t.settled(&card, "20").await;
        let tx2 = t.settled(&card, "10").await;
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
        let master = t.balance().await.parse::<f64>().unwrap();
        // A provisional credit on a closed card reaches the master balance.
        let d = t.open(&tx, true, "c1").await;
        let now = t.balance().await.parse::<f64>().unwrap();
        assert_eq!(now - master, 20.0);
        assert_eq!(t.card_balance("fi", &card).await, "0.00");
        assert_eq!(
            t.dispute_txs("fi", &card).await.len(),
            1,
            "still in its history"
        );
        // Lost: taken back from the master balance (the card holds nothing).
        t.advance(&id(&d), "lost").await;
        assert_eq!(t.balance().await.parse::<f64>().unwrap(), master);
        // Won without a credit: the network pays the master balance.
        let d2 = t.open(&tx2, false, "c2").await;
        t.advance(&id(&d2), "won").await;
        assert_eq!(t.balance().await.parse::<f64>().unwrap() - master, 10.0);
        let credits = t.ok("project/txs", json!({"type": "dispute_credit"})).await;
        assert_eq!(credits["total"], 2, "{credits}");
        t.verify_ledger().await;
    }
);

/// A file of `len` bytes that starts as a `kind` file.
fn file(magic: &[u8], len: usize) -> Vec<u8> {
    let mut f = magic.to_vec();
    f.resize(len, b'x');
    f
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

both_backends!(
    evidence_is_checked_sealed_and_bounded,
    |t: TestServer| async move {
        let card = t.funded_card("gu", 100).await;
        let tx = t.settled(&card, "10").await;
        let d = t.open(&tx, false, "ev").await;
        let did = id(&d);
        let sdk = t.sdk();
        let pdf = file(b"%PDF-1.7\n", 4 * 1024 * 1024);
        let add = |name: &str, ty: &str, bytes: &[u8]| DisputesEvidenceAdd {
            dispute_id: did.clone(),
            filename: name.into(),
            content_type: ty.into(),
            content: b64(bytes),
        };
        // The largest file fits: its body is beyond every other endpoint's limit.
        let e = sdk
            .disputes_evidence_add(&add("receipt.pdf", "application/pdf", &pdf))
            .await
            .unwrap();
        assert_eq!(e.size, 4 * 1024 * 1024);
        assert_eq!(e.content_type, "application/pdf");
        let got = sdk
            .disputes_evidence_get(&did, &e.evidence_id)
            .await
            .unwrap();
        assert_eq!(got.content, b64(&pdf));
        assert_eq!(got.sha256, e.sha256);
        // Sealed at rest: the stored text is not the file.
        let sealed: String = sqlx::query("SELECT sealed FROM dispute_evidence WHERE id = $1")
            .bind(&e.evidence_id)
            .fetch_one(t.store.pool())
            .await
            .unwrap()
            .get("sealed");
        assert!(!sealed.contains(&b64(b"%PDF-1.7")), "stored plain");
        assert_eq!(t.master.open(&sealed).unwrap(), pdf);
        let big = file(b"%PDF-", 4 * 1024 * 1024 + 1);
        common::api_error(
            sdk.disputes_evidence_add(&add("big.pdf", "application/pdf", &big))
                .await,
            400,
            "validation_error",
        );
        // Other endpoints keep their limit.
        let (s, v) = t
            .call("users/find", json!({"pad": "x".repeat(1024 * 1024)}))
            .await;
        assert_eq!(
            (s, v["error_slug"].clone()),
            (413, json!("payload_too_large"))
        );

        for (name, ty, bytes) in [
            ("a.png", "image/png", b"%PDF-1.7".as_slice()),
            ("a.txt", "text/plain", b"hello"),
            ("../a.pdf", "application/pdf", b"%PDF-1.7"),
        ] {
            common::api_error(
                sdk.disputes_evidence_add(&add(name, ty, bytes)).await,
                400,
                "validation_error",
            );
        }
        for i in 1..10 {
            let png = file(b"\x89PNG\r\n\x1a\n", 64);
            sdk.disputes_evidence_add(&add(&format!("{i}.png"), "image/png", &png))
                .await
                .unwrap();
        }
        let jpeg = file(b"\xff\xd8\xff\xe0", 64);
        common::api_error(
            sdk.disputes_evidence_add(&add("11.jpg", "image/jpeg", &jpeg))
                .await,
            400,
            "validation_error",
        );
        let d = sdk.disputes_get(&did).await.unwrap();
        assert_eq!(d.evidence.len(), 10);
        common::api_error(
            sdk.disputes_evidence_get(&did, "missing").await,
            404,
            "evidence_not_found",
        );

        // A final dispute takes no more evidence, and keeps what it has.
        let tx2 = t.settled(&card, "5").await;
        let d2 = t.open(&tx2, false, "ev2").await;
        t.advance(&id(&d2), "lost").await;
        let add2 = DisputesEvidenceAdd {
            dispute_id: id(&d2),
            ..add("late.jpg", "image/jpeg", &jpeg)
        };
        common::api_error(
            sdk.disputes_evidence_add(&add2).await,
            422,
            "invalid_status_transition",
        );
        // Another project cannot read it.
        let other = t.new_project("other").await;
        common::api_error(
            t.sdk_as(&other)
                .disputes_evidence_get(&did, &e.evidence_id)
                .await,
            404,
            "dispute_not_found",
        );
        t.verify_ledger().await;
    }
);

both_backends!(find_filters_and_pages, |t: TestServer| async move {
    let card = t.funded_card("ha", 100).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let tx = t.settled(&card, "2").await;
        ids.push(id(&t.open(&tx, false, &format!("f{i}")).await));
    }
    t.advance(&ids[0], "won").await;
    let all = t.ok("disputes/find", json!({})).await;
    assert_eq!(all["total"], 3);
    let listed: Vec<&str> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["dispute_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [&ids[2], &ids[1], &ids[0]], "newest first");
    let won = t.ok("disputes/find", json!({"status": "won"})).await;
    assert_eq!(won["total"], 1);
    let open = t
        .ok(
            "disputes/find",
            json!({"statuses": ["submitted"], "card_id": card, "limit": 1}),
        )
        .await;
    assert_eq!(
        (
            open["total"].clone(),
            open["items"].as_array().unwrap().len()
        ),
        (json!(2), 1)
    );
    let one = t
        .ok("disputes/find", json!({"dispute_ids": [ids[1]]}))
        .await;
    assert_eq!(one["items"][0]["dispute_id"], ids[1].as_str());
    let none = t
        .ok("disputes/find", json!({"created_to": "2000-01-01"}))
        .await;
    assert_eq!(none["total"], 0);
    let other = t.new_project("other").await;
    let (_, theirs) = t.call_as(&other, "disputes/find", json!({})).await;
    assert_eq!(theirs["total"], 0);
});

both_backends!(
    verify_ledger_finds_a_dispute_whose_money_does_not_match,
    |t: TestServer| async move {
        let card = t.funded_card("iv", 100).await;
        let tx = t.settled(&card, "10").await;
        let d = t.open(&tx, true, "v1").await;
        t.advance(&id(&d), "won").await;
        t.verify_ledger().await;
        // A status that says lost with the money of a won dispute.
        sqlx::query("UPDATE disputes SET status = 'lost' WHERE id = $1")
            .bind(id(&d))
            .execute(t.store.pool())
            .await
            .unwrap();
        let mut conn = t.store.conn().await.unwrap();
        let problems = issuing_store::ledger::verify(&mut conn).await.unwrap();
        assert!(
            problems.iter().any(|p| matches!(
                p,
                issuing_store::ledger::Mismatch::DisputeDiffers {
                    expected: (10_000_000, 0, 10_000_000),
                    actual: (10_000_000, 10_000_000, 0),
                    ..
                }
            )),
            "{problems:?}"
        );
        // Open again: the dispute account should still be fronting it.
        sqlx::query("UPDATE disputes SET status = 'submitted' WHERE id = $1")
            .bind(id(&d))
            .execute(t.store.pool())
            .await
            .unwrap();
        let problems = issuing_store::ledger::verify(&mut conn).await.unwrap();
        assert!(
            problems.iter().any(|p| matches!(
                p,
                issuing_store::ledger::Mismatch::DisputeAccountDiffers {
                    balance: 0,
                    fronted: 10_000_000,
                    ..
                }
            )),
            "{problems:?}"
        );
        // Put back, so the database is whole again.
        sqlx::query("UPDATE disputes SET status = 'won' WHERE id = $1")
            .bind(id(&d))
            .execute(t.store.pool())
            .await
            .unwrap();
        t.verify_ledger().await;
    }
);

/// Disputes moved by the real binary, killed with SIGKILL while many moves are in
/// flight: after the restart every answered move is there with its money, nothing is
/// half-applied (the ledger verifies), and the rest can still be moved.
mod sigkill {
    use super::*;
    use common::process::ServeProcess;
    use common::{Creds, TestDb};
    use issuing_client::{CardholdersCreate, CardsCreate, CardsTopup, SimulateAuth, SimulateClear};

    const DISPUTES: usize = 40;

    async fn case(backend: common::Backend) {
        let Some(t) = TestServer::start(backend).await else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::create(t.db.backend).await.unwrap();
        let server = ServeProcess::start(dir.path(), &db.url).await;
        let creds = Creds {
            project_id: server.banner_value("project_id").unwrap(),
            api_key: server.banner_value("api_key").unwrap(),
            api_secret: server.banner_value("api_secret").unwrap(),
            deposit_address: String::new(),
        };
        let store = issuing_store::Store::connect(&db.url).await.unwrap();
        {
            let mut tx = store.begin().await.unwrap();
            issuing_store::ledger::deposit(
                &mut tx,
                &creds.project_id,
                issuing_wire::Amount::from_micros(1_000_000_000),
                None,
            )
            .await
            .unwrap();
            tx.commit().await.unwrap();
        }
        let sdk = t.sdk_on(&server.base, &creds);
        sdk.cardholders_create(&CardholdersCreate {
            external_user_id: "ada".into(),
            subprovider_code: "sandbox".into(),
            kyc_data: Some(serde_json::from_value(common::cards::kyc()).unwrap()),
            ..CardholdersCreate::default()
        })
        .await
        .unwrap();
        let card = sdk
            .cards_create(
                &CardsCreate {
                    external_user_id: "ada".into(),
                    product_code: "virtual_usd".into(),
                    ..CardsCreate::default()
                },
                "issue",
            )
            .await
            .unwrap();
        sdk.wait_order(&card.order.order_id, WAIT).await.unwrap();
        let topup = sdk
            .cards_topup(
                &CardsTopup {
                    card_id: card.card_id.clone(),
                    amount: "500".into(),
                    ..CardsTopup::default()
                },
                "fund",
            )
            .await
            .unwrap();
        sdk.wait_order(&topup.order_id, WAIT).await.unwrap();
        let mut disputes = Vec::new();
        for i in 0..DISPUTES {
            let auth = sdk
                .simulate_cards_auth(&SimulateAuth {
                    card_id: card.card_id.clone(),
                    transaction_amount: "2".into(),
                    ..SimulateAuth::default()
                })
                .await
                .unwrap();
            sdk.simulate_cards_clear(&SimulateClear {
                transaction_id: Some(auth.transaction_id.clone()),
                ..SimulateClear::default()
            })
            .await
            .unwrap();
            let d = sdk
                .disputes_create(
                    &DisputesCreate {
                        transaction_id: auth.transaction_id,
                        reason: "fraud_other".into(),
                        provisional_credit: Some(i % 2 == 0),
                        ..DisputesCreate::default()
                    },
                    &format!("d-{i}"),
                )
                .await
                .unwrap();
            disputes.push(d.dispute_id);
        }

        // Every dispute moved at once (won, lost or withdrawn); the server dies with the
        // first answer.
        let (answered_tx, mut answered_rx) = tokio::sync::mpsc::unbounded_channel();
        for (i, d) in disputes.iter().enumerate() {
            let sdk = sdk.clone();
            let d = d.clone();
            let tx = answered_tx.clone();
            tokio::spawn(async move {
                let moved = match i % 3 {
                    0 => sdk.disputes_withdraw(&d).await,
                    n => {
                        sdk.simulate_disputes_advance(&SimulateDisputesAdvance {
                            dispute_id: d.clone(),
                            to: if n == 1 { "won" } else { "lost" }.into(),
                            resolution_reason: None,
                        })
                        .await
                    }
                };
                let _ = tx.send((d, moved.ok().map(|m| m.status)));
            });
        }
        drop(answered_tx);
        let first = answered_rx.recv().await;
        server.kill().await;
        let mut answered: Vec<(String, String)> = Vec::new();
        if let Some((d, Some(status))) = first {
            answered.push((d, status));
        }
        while let Some((d, status)) = answered_rx.recv().await {
            if let Some(s) = status {
                answered.push((d, s));
            }
        }
        assert!(
            answered.len() < DISPUTES,
            "killed too late to prove anything: all {DISPUTES} moves were answered"
        );

        // What was answered is there; nothing is half-applied.
        for (d, status) in &answered {
            let (stored,): (String,) = sqlx::query_as("SELECT status FROM disputes WHERE id = $1")
                .bind(d)
                .fetch_one(store.pool())
                .await
                .unwrap();
            assert_eq!(&stored, status, "answered {status}, stored {stored}");
        }
        let mut conn = store.conn().await.unwrap();
        let problems = issuing_store::ledger::verify(&mut conn).await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        drop(conn);

        // After a restart the rest still moves, and the ledger still verifies.
        let server = ServeProcess::start(dir.path(), &db.url).await;
        let sdk = t.sdk_on(&server.base, &creds);
        let mut finals = 0;
        for d in &disputes {
            let now = sdk.disputes_get(d).await.unwrap();
            if matches!(now.status.as_str(), "won" | "lost" | "withdrawn") {
                finals += 1;
                continue;
            }
            let moved = sdk.disputes_withdraw(d).await.unwrap();
            assert_eq!(moved.status, "withdrawn");
        }
        assert!(finals >= answered.len());
        server.kill().await;
        let mut conn = store.conn().await.unwrap();
        let problems = issuing_store::ledger::verify(&mut conn).await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
        drop(conn);
        store.close().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        case(common::Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        case(common::Backend::Postgres).await;
    }
}
