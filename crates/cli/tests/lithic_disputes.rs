//! Disputes of Lithic cards (CONTRACT §15, §14) against the fake Lithic, which checks
//! every request, answer and event against Lithic's published document: a dispute is
//! filed with `POST /v1/disputes` (cents, upper-case reason), its evidence goes to
//! Lithic and its bytes to the `upload_url`, a withdrawal is a `DELETE`, and Lithic's
//! `dispute.updated` events drive the status with the money of each outcome. A failure
//! at Lithic leaves no dispute. Both backends; each case ends with the fake's check and
//! the ledger verified.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use base64::Engine as _;
use common::lithic::harness::{usdt, Lithic};
use common::lithic::{Fault, Merchant};
use common::Backend;
use serde_json::{json, Value};
use sqlx::Row;

/// The case `$name` (an `async fn(&Lithic)`) on both backends.
macro_rules! lithic_case {
    ($name:ident) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                if let Some(l) = Lithic::start(Backend::Sqlite, "").await {
                    super::$name(&l).await;
                    l.finish().await;
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(l) = Lithic::start(Backend::Postgres, "").await {
                    super::$name(&l).await;
                    l.finish().await;
                }
            }
        }
    };
}

/// A purchase of `cents` on the card `token`, authorized and cleared at Lithic: its
/// Lithic transaction token and our transaction id.
async fn settled(
    l: &Lithic,
    user: &str,
    card_id: &str,
    token: &str,
    cents: i64,
) -> (String, String) {
    let asa = l.fake.authorize(token, cents, &Merchant::coffee()).await;
    assert_eq!(asa.result(), "APPROVED", "{:?}", asa.answer);
    assert!(l
        .fake
        .clear(&asa.token, cents)
        .await
        .iter()
        .all(|s| *s == 200));
    let ours = l
        .txs(user, card_id)
        .await
        .into_iter()
        .filter(|t| t["card_tx_data"]["type"] == "auth")
        .map(|t| t["transaction_id"].as_str().unwrap().to_owned())
        .next()
        .unwrap();
    (asa.token, ours)
}

async fn create(l: &Lithic, body: Value, key: &str) -> (u16, Value) {
    l.t.call_with_headers("disputes/create", body, &[("Idempotency-Key", key)])
        .await
}

async fn get(l: &Lithic, id: &str) -> Value {
    l.t.ok("disputes/get", json!({"dispute_id": id})).await
}

fn statuses(d: &Value) -> Vec<String> {
    d["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap().to_owned())
        .collect()
}

/// Lithic's token of our dispute.
async fn lithic_token(l: &Lithic, id: &str) -> String {
    sqlx::query("SELECT provider_dispute_id FROM disputes WHERE id = $1")
        .bind(id)
        .fetch_one(l.t.store.pool())
        .await
        .unwrap()
        .get::<Option<String>, _>("provider_dispute_id")
        .expect("the dispute has Lithic's token")
}

async fn dispute_account(l: &Lithic) -> i64 {
    sqlx::query(
        "SELECT balance FROM accounts WHERE project_id = $1 AND kind = 'dispute' AND card_id IS NULL",
    )
    .bind(&l.t.creds.project_id)
    .fetch_one(l.t.store.pool())
    .await
    .unwrap()
    .get::<i64, _>("balance")
}

/// A dispute of `amount` with a provisional credit, filed: our dispute and Lithic's.
async fn filed(l: &Lithic, tx: &str, amount: &str, key: &str) -> (Value, Value) {
    let (s, d) = create(
        l,
        json!({"transaction_id": tx, "reason": "goods_services_not_received",
               "amount": amount, "customer_note": "It never arrived.",
               "provisional_credit": true}),
        key,
    )
    .await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(d["status"], "submitted");
    let token = lithic_token(l, d["dispute_id"].as_str().unwrap()).await;
    let theirs = l.fake.dispute(&token).expect("Lithic has the dispute");
    (d, theirs)
}

fn applied(answers: &[(u16, Option<Value>)]) -> bool {
    assert!(!answers.is_empty());
    answers.iter().all(|(s, a)| {
        assert_eq!(*s, 200, "{a:?}");
        a.as_ref().and_then(|a| a.get("applied")) != Some(&json!(false))
    })
}

lithic_case!(filed_with_evidence_then_won_by_events);
async fn filed_with_evidence_then_won_by_events(l: &Lithic) {
    let (card_id, card_token) = l.card("ada", "100").await;
    let (lithic_tx, tx) = settled(l, "ada", &card_id, &card_token, 2500).await;
    assert_eq!(l.balance("ada", &card_id).await.0, usdt("75"));

    let (d, theirs) = filed(l, &tx, "20", "dispute-1").await;
    let id = d["dispute_id"].as_str().unwrap().to_owned();
    // Lithic's request as its document has it: cents, the reason in upper case.
    assert_eq!(theirs["transaction_token"], lithic_tx);
    assert_eq!(theirs["amount"], 2000);
    assert_eq!(theirs["reason"], "GOODS_SERVICES_NOT_RECEIVED");
    assert_eq!(theirs["customer_note"], "It never arrived.");
    assert!(theirs["customer_filed_date"].is_string());
    assert_eq!(l.fake.calls("POST", "/v1/disputes"), 1);
    // The provisional credit, fronted by the dispute account.
    assert_eq!(l.balance("ada", &card_id).await.0, usdt("95"));
    assert_eq!(dispute_account(l).await, -20_000_000);
    l.t.verify_ledger().await;

    // The same request again answers the same dispute; nothing more is filed.
    let (s, again) = create(
        l,
        json!({"transaction_id": tx, "reason": "goods_services_not_received",
               "amount": "20", "customer_note": "It never arrived.",
               "provisional_credit": true}),
        "dispute-1",
    )
    .await;
    assert_eq!((s, &again["dispute_id"]), (200, &d["dispute_id"]));
    assert_eq!(l.fake.disputes().len(), 1);

    // Evidence: ours sealed, Lithic's made, the exact bytes PUT to its upload_url.
    let mut pdf = b"%PDF-1.7\n".to_vec();
    pdf.extend((0..3000u32).map(|i| (i % 251) as u8));
    let e =
        l.t.ok(
            "disputes/evidence/add",
            json!({"dispute_id": id, "filename": "receipt.pdf",
               "content_type": "application/pdf",
               "content": base64::engine::general_purpose::STANDARD.encode(&pdf)}),
        )
        .await;
    assert_eq!(e["size"], pdf.len());
    let evidences = l.fake.evidences();
    assert_eq!(evidences.len(), 1);
    assert_eq!(evidences[0]["filename"], "receipt.pdf");
    assert_eq!(evidences[0]["upload_status"], "UPLOADED");
    let uploads = l.fake.uploads();
    assert_eq!(uploads.len(), 1);
    assert_eq!(uploads[0].0, evidences[0]["token"].as_str().unwrap());
    assert_eq!(uploads[0].1, "application/pdf");
    assert!(uploads[0].2 == pdf, "the bytes arrive as they are");

    // Lithic's events: REPRESENTMENT (twice: the second changes nothing), then won.
    let token = lithic_token(l, &id).await;
    assert!(applied(
        &l.fake.update_dispute(&token, "REPRESENTMENT", None).await
    ));
    assert!(applied(
        &l.fake.update_dispute(&token, "REPRESENTMENT", None).await
    ));
    let d = get(l, &id).await;
    assert_eq!(d["status"], "representment");
    assert_eq!(statuses(&d), ["submitted", "representment"]);
    assert!(applied(
        &l.fake
            .update_dispute(&token, "CASE_WON", Some("WON_FIRST_CHARGEBACK"))
            .await
    ));
    let d = get(l, &id).await;
    assert_eq!(d["status"], "won");
    assert_eq!(d["resolution_reason"], "won_first_chargeback");
    // Won: the network pays the dispute account back; the card keeps the credit.
    assert_eq!(dispute_account(l).await, 0);
    assert_eq!(l.balance("ada", &card_id).await.0, usdt("95"));
    l.t.verify_ledger().await;

    // Repeated, and an older event delivered late: acknowledged, nothing changes.
    assert!(applied(
        &l.fake.update_dispute(&token, "CASE_WON", None).await
    ));
    let late = l.fake.update_dispute(&token, "PREARBITRATION", None).await;
    assert!(!applied(&late), "{late:?}");
    let d = get(l, &id).await;
    assert_eq!(statuses(&d), ["submitted", "representment", "won"]);
    assert_eq!(l.balance("ada", &card_id).await.0, usdt("95"));
}

lithic_case!(withdrawn_here_or_at_lithic);
async fn withdrawn_here_or_at_lithic(l: &Lithic) {
    let (card_id, card_token) = l.card("bea", "100").await;
    let (_, tx1) = settled(l, "bea", &card_id, &card_token, 1000).await;
    let (d, _) = filed(l, &tx1, "10", "w-1").await;
    let id = d["dispute_id"].as_str().unwrap().to_owned();
    assert_eq!(l.balance("bea", &card_id).await.0, usdt("100"));

    // Lithic would not take a file: ours is not kept either.
    l.fake.fail(
        "POST",
        "/v1/disputes/{dispute_token}/evidences",
        Fault::Refuse(404, "Dispute not found"),
        1,
    );
    let (s, v) =
        l.t.call(
            "disputes/evidence/add",
            json!({"dispute_id": id, "filename": "a.png", "content_type": "image/png",
               "content": base64::engine::general_purpose::STANDARD.encode(b"\x89PNG\r\n\x1a\n..")}),
        )
        .await;
    assert_eq!(
        (s, v["error_slug"].as_str()),
        (500, Some("provider_error")),
        "{v}"
    );
    assert_eq!(get(l, &id).await["evidence"].as_array().unwrap().len(), 0);
    assert!(l.fake.uploads().is_empty());

    // Lithic refuses the withdrawal: ours stays open, the credit where it is.
    l.fake.fail(
        "DELETE",
        "/v1/disputes/{dispute_token}",
        Fault::Refuse(400, "The dispute cannot be withdrawn"),
        1,
    );
    let (s, v) =
        l.t.call("disputes/withdraw", json!({"dispute_id": id}))
            .await;
    assert_eq!(
        (s, v["error_slug"].as_str()),
        (500, Some("provider_error")),
        "{v}"
    );
    assert_eq!(get(l, &id).await["status"], "submitted");
    assert_eq!(l.balance("bea", &card_id).await.0, usdt("100"));

    // disputes/withdraw: DELETE at Lithic first, then ours, the credit taken back.
    let w = l.t.ok("disputes/withdraw", json!({"dispute_id": id})).await;
    assert_eq!(w["status"], "withdrawn");
    assert_eq!(l.fake.calls("DELETE", "/v1/disputes/{dispute_token}"), 2);
    let token = lithic_token(l, &id).await;
    let theirs = l.fake.dispute(&token).unwrap();
    assert_eq!(
        (
            theirs["status"].as_str(),
            theirs["resolution_reason"].as_str()
        ),
        (Some("CASE_CLOSED"), Some("WITHDRAWN"))
    );
    assert_eq!(l.balance("bea", &card_id).await.0, usdt("90"));
    assert_eq!(dispute_account(l).await, 0);
    // Lithic's event of that withdrawal finds ours withdrawn: nothing changes.
    assert!(applied(
        &l.fake
            .update_dispute(&token, "CASE_CLOSED", Some("WITHDRAWN"))
            .await
    ));
    assert_eq!(statuses(&get(l, &id).await), ["submitted", "withdrawn"]);
    l.t.verify_ledger().await;

    // Withdrawn at Lithic (its dashboard): the event withdraws ours.
    let (_, tx2) = settled(l, "bea", &card_id, &card_token, 500).await;
    let (d, _) = filed(l, &tx2, "5", "w-2").await;
    let id = d["dispute_id"].as_str().unwrap().to_owned();
    let token = lithic_token(l, &id).await;
    assert_eq!(l.balance("bea", &card_id).await.0, usdt("90"));
    assert!(applied(
        &l.fake
            .update_dispute(&token, "CASE_CLOSED", Some("WITHDRAWN"))
            .await
    ));
    let d = get(l, &id).await;
    assert_eq!(
        (d["status"].as_str(), d["resolution_reason"].as_str()),
        (Some("withdrawn"), Some("withdrawn"))
    );
    assert_eq!(l.balance("bea", &card_id).await.0, usdt("85"));
    assert_eq!(l.fake.calls("DELETE", "/v1/disputes/{dispute_token}"), 2);
    // A withdrawn dispute is not withdrawn again, here or there.
    l.t.expect_error(
        "disputes/withdraw",
        json!({"dispute_id": id}),
        422,
        "invalid_status_transition",
    )
    .await;
    assert_eq!(l.fake.calls("DELETE", "/v1/disputes/{dispute_token}"), 2);
}

lithic_case!(no_dispute_rights_takes_the_credit_back);
async fn no_dispute_rights_takes_the_credit_back(l: &Lithic) {
    let (card_id, card_token) = l.card("cy", "50").await;
    let (_, tx) = settled(l, "cy", &card_id, &card_token, 3000).await;
    let (d, _) = filed(l, &tx, "30", "n-1").await;
    let id = d["dispute_id"].as_str().unwrap().to_owned();
    assert_eq!(l.balance("cy", &card_id).await.0, usdt("50"));
    let token = lithic_token(l, &id).await;
    assert!(applied(
        &l.fake.update_dispute(&token, "SUBMITTED", None).await
    ));
    let answers = l
        .fake
        .update_dispute(&token, "CASE_CLOSED", Some("NO_DISPUTE_RIGHTS_3DS"))
        .await;
    assert!(applied(&answers), "{answers:?}");
    let d = get(l, &id).await;
    assert_eq!(
        (d["status"].as_str(), d["resolution_reason"].as_str()),
        (Some("lost"), Some("no_dispute_rights"))
    );
    assert_eq!(statuses(&d), ["submitted", "lost"]);
    assert_eq!(l.balance("cy", &card_id).await.0, usdt("20"));
    assert_eq!(dispute_account(l).await, 0);
    l.t.verify_ledger().await;
    // Again: nothing more is taken.
    assert!(applied(
        &l.fake
            .update_dispute(&token, "CASE_CLOSED", Some("NO_DISPUTE_RIGHTS_3DS"))
            .await
    ));
    assert_eq!(l.balance("cy", &card_id).await.0, usdt("20"));
    assert_eq!(statuses(&get(l, &id).await), ["submitted", "lost"]);
}

lithic_case!(a_failure_at_lithic_leaves_no_dispute);
async fn a_failure_at_lithic_leaves_no_dispute(l: &Lithic) {
    let (card_id, card_token) = l.card("dee", "50").await;
    let (_, tx) = settled(l, "dee", &card_id, &card_token, 1000).await;
    let body = json!({"transaction_id": tx, "reason": "fraud_card_not_present",
                      "provisional_credit": true});
    for (i, (fault, times)) in [
        (
            Fault::Refuse(422, "Transaction is not eligible for a dispute"),
            1,
        ),
        (Fault::Status(503), 4),
    ]
    .into_iter()
    .enumerate()
    {
        l.fake.fail("POST", "/v1/disputes", fault, times);
        let (s, v) = create(l, body.clone(), &format!("f-{i}")).await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (500, Some("provider_error")),
            "{v}"
        );
        l.fake.clear_faults();
        let found = l.t.ok("disputes/find", json!({})).await;
        assert_eq!(found["items"].as_array().unwrap().len(), 0, "{found}");
        assert_eq!(l.balance("dee", &card_id).await.0, usdt("40"));
        assert_eq!(dispute_account(l).await, 0);
        l.t.verify_ledger().await;
    }
    assert!(l.fake.disputes().is_empty());
    // Filed, then the answer lost: found at Lithic and recorded, filed once.
    l.fake
        .fail("POST", "/v1/disputes", Fault::DoneThenStatus(500), 1);
    let (s, d) = create(l, body.clone(), "f-lost").await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(l.fake.calls("POST", "/v1/disputes"), 3);
    let theirs = l.fake.disputes();
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0]["amount"], 1000, "the whole transaction, in cents");
    assert_eq!(theirs[0]["reason"], "FRAUD_CARD_NOT_PRESENT");
    let id = d["dispute_id"].as_str().unwrap();
    assert_eq!(
        lithic_token(l, id).await,
        theirs[0]["token"].as_str().unwrap()
    );
    assert_eq!(l.balance("dee", &card_id).await.0, usdt("50"));
    // Another request for the transaction: ours is open.
    let (s, v) = create(l, body, "f-again").await;
    assert_eq!(
        (s, v["error_slug"].as_str()),
        (409, Some("dispute_already_exists")),
        "{v}"
    );
}

lithic_case!(a_filing_left_unrecorded_is_recorded_by_the_next_request);
async fn a_filing_left_unrecorded_is_recorded_by_the_next_request(l: &Lithic) {
    let (card_id, card_token) = l.card("eve", "50").await;
    let (lithic_tx, tx) = settled(l, "eve", &card_id, &card_token, 1000).await;
    // Lithic filed, and our side crashed before it recorded anything: nothing here, the
    // dispute open there.
    let theirs = l.fake.add_dispute(&lithic_tx, 400, "OTHER");
    let body = json!({"transaction_id": tx, "reason": "other", "amount": "4"});
    // Another amount is another dispute: refused while Lithic's is open.
    let (s, v) = create(
        l,
        json!({"transaction_id": tx, "reason": "other", "amount": "5"}),
        "u-2",
    )
    .await;
    assert_eq!(
        (s, v["error_slug"].as_str()),
        (409, Some("dispute_already_exists")),
        "{v}"
    );
    // The same request: Lithic's dispute is recorded, nothing filed again.
    let (s, d) = create(l, body, "u-3").await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(l.fake.disputes().len(), 1);
    assert_eq!(l.fake.calls("POST", "/v1/disputes"), 0);
    assert_eq!(
        lithic_token(l, d["dispute_id"].as_str().unwrap()).await,
        theirs
    );
}

lithic_case!(events_we_cannot_apply_are_acknowledged);
async fn events_we_cannot_apply_are_acknowledged(l: &Lithic) {
    let types = l.fake.subscription_event_types();
    assert!(types.iter().any(|t| t == "dispute.updated"), "{types:?}");
    // A dispute we never filed.
    let unknown = json!({
        "event_type": "dispute.updated", "token": "b24230fa-181e-4b31-9a5c-276747e619a0",
        "transaction_token": "12345624-aa69-4cbc-a946-30d90181b621", "amount": 200,
        "reason": "GOODS_SERVICES_NOT_RECEIVED", "status": "CASE_WON",
        "created": "2023-07-19T18:39:34.768Z", "customer_filed_date": null,
        "customer_note": null, "network_claim_ids": null, "network_filed_date": null,
        "network_reason_code": null, "prearbitration_date": null, "primary_claim_id": null,
        "representment_date": null, "resolution_date": null, "resolution_note": null,
        "resolution_reason": null, "arbitration_date": null,
    });
    let answers = l.fake.dispute_event(&unknown).await;
    assert!(!applied(&answers), "{answers:?}");
    // Signed but not a message we can apply: acknowledged, never a 5xx.
    for bad in [
        json!({"event_type": "dispute.updated", "token": "x", "status": "CASE_WON"}),
        json!({"event_type": "dispute.updated",
               "token": "b24230fa-181e-4b31-9a5c-276747e619a0", "status": "LOST"}),
        json!({"event_type": "dispute.updated",
               "token": "b24230fa-181e-4b31-9a5c-276747e619a0", "status": 5}),
    ] {
        for (s, a) in l.fake.event_raw("dispute.updated", &bad.to_string()).await {
            assert_eq!(s, 200, "{bad} {a:?}");
            assert_eq!(a.unwrap()["applied"], false, "{bad}");
        }
    }
}

lithic_case!(two_requests_racing_leave_one_dispute_open_at_lithic);
async fn two_requests_racing_leave_one_dispute_open_at_lithic(l: &Lithic) {
    let (card_id, card_token) = l.card("fay", "50").await;
    let (_, tx) = settled(l, "fay", &card_id, &card_token, 1200).await;
    let body = json!({"transaction_id": tx, "reason": "duplicated", "provisional_credit": true});
    let (a, b) = tokio::join!(
        create(l, body.clone(), "race-a"),
        create(l, body.clone(), "race-b")
    );
    let mut statuses = [a.0, b.0];
    statuses.sort_unstable();
    assert_eq!(statuses, [200, 409], "{a:?} {b:?}");
    let won = if a.0 == 200 { &a.1 } else { &b.1 };
    let token = lithic_token(l, won["dispute_id"].as_str().unwrap()).await;
    // The dispute recorded is open at Lithic; any other filing was withdrawn there.
    let theirs = l.fake.disputes();
    assert_eq!(l.fake.dispute(&token).unwrap()["status"], "NEW");
    assert_eq!(
        theirs.iter().filter(|d| d["status"] == "NEW").count(),
        1,
        "{theirs:?}"
    );
    assert_eq!(l.balance("fay", &card_id).await.0, usdt("50"));
}
