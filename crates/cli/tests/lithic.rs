//! The Lithic provider (CONTRACT §14) against a fake Lithic that checks every request
//! and answer against Lithic's published API document: KYC through account holders,
//! cards, ASA decisions, transaction events, retries and failures, enrolment. The
//! server runs in production mode, as it would with Lithic. Every case ends with the
//! fake's check (no mismatch with Lithic's document) and the ledger verified.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::lithic::{FakeLithic, Fault, Merchant, Sign};
use common::{Backend, TestServer};
use issuing_app::config::ProviderKeys;
use issuing_domain::catalog::{Catalog, CatalogConfig};
use issuing_server::{Mode, ServerConfig};
use serde_json::{json, Value};
use std::time::Duration;

const SUB: &str = "lithic_us";
const PRODUCT: &str = "lithic_virtual";

/// The catalog of these tests as a config file writes it: one lithic subprovider at
/// `base_url` and one product.
fn catalog_toml(base_url: &str) -> String {
    format!(
        r#"
[[catalog.subproviders]]
code = "{SUB}"
kind = "lithic"
base_url = "{base_url}"
api_key_env = "ISSUING_LITHIC_API_KEY"

[[catalog.products]]
code = "{PRODUCT}"
subprovider = "{SUB}"
issue_fee = "1.00"
topup_fee_percent = "0"
topup_fee_fixed = "0"
topup_min = "1"
topup_max = "1000"
"#
    )
}

fn catalog(base_url: &str) -> Catalog {
    #[derive(serde::Deserialize)]
    struct File {
        catalog: CatalogConfig,
    }
    let file: File = toml::from_str(&catalog_toml(base_url)).unwrap();
    Catalog::from_config(&file.catalog).unwrap()
}

fn keys(fake: &FakeLithic) -> ProviderKeys {
    let mut keys = ProviderKeys::default();
    keys.insert(SUB, &fake.api_key);
    keys
}

fn config(fake: &FakeLithic) -> ServerConfig {
    ServerConfig {
        mode: Mode::Production,
        catalog: std::sync::Arc::new(catalog(&fake.base)),
        provider_keys: keys(fake),
        // Our own webhooks go to local receivers in these tests (CONTRACT §6).
        webhook_allowed_networks: issuing_domain::webhooks::AllowedNetworks::parse("127.0.0.0/8")
            .unwrap(),
        metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    }
}

pub struct Case {
    t: TestServer,
    fake: FakeLithic,
}

async fn run<F, Fut>(backend: Backend, body: F)
where
    F: FnOnce(Case) -> Fut,
    Fut: std::future::Future<Output = Case>,
{
    let fake = FakeLithic::start().await;
    let Some(t) = TestServer::start_with(backend, config(&fake)).await else {
        return;
    };
    issuing_app::provider::lithic::admin::enroll(
        &t.store,
        &t.master,
        &catalog(&fake.base),
        &keys(&fake),
        SUB,
        &t.base,
    )
    .await
    .expect("enroll with the fake Lithic");
    let case = body(Case { t, fake }).await;
    case.fake.assert_clean();
    case.t.verify_ledger().await;
}

macro_rules! lithic_case {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                run(Backend::Sqlite, $body).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                run(Backend::Postgres, $body).await;
            }
        }
    };
}

/// US KYC data with what KYC_BASIC needs; `ssn` picks the fake's outcome
/// (`000-00-0002` rejects on the name, anything else is accepted).
fn kyc_us(ssn: &str) -> Value {
    json!({
        "first_name": "Ada",
        "last_name": "Lovelace",
        "birth_date": "1990-12-10",
        "email": "ada@example.com",
        "phone_number_full": "+14155550123",
        "country_iso": "US",
        "address": {"line1": "1 Main Street", "city": "Omaha", "state": "NE",
                    "postal_code": "68022", "country_iso": "US"},
        "id_document": {"type": "ssn", "number": ssn, "country_iso": "US"},
    })
}

/// Micro-units as a decimal string, the way the API answers amounts.
fn usdt(s: &str) -> String {
    issuing_wire::Amount::parse_decimal(s).unwrap().to_string()
}

impl Case {
    async fn holder(&self, user: &str, ssn: &str) -> (u16, Value) {
        self.t
            .call(
                "cardholders/create",
                json!({"external_user_id": user, "subprovider_code": SUB, "kyc_data": kyc_us(ssn)}),
            )
            .await
    }

    /// An approved cardholder and an issued card with `funds` USDT on it: our card id
    /// and Lithic's card token.
    async fn card(&self, user: &str, funds: &str) -> (String, String) {
        let (s, v) = self.holder(user, "111-23-1412").await;
        assert_eq!(s, 200, "{v}");
        self.t
            .deposit(&self.t.creds.project_id, 1_000_000_000)
            .await;
        let (s, v) = self
            .t
            .call(
                "cards/create",
                json!({"external_user_id": user, "product_code": PRODUCT,
                       "idempotency_key": format!("card-{user}")}),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        let order = self
            .t
            .wait_order(v["order"]["order_id"].as_str().unwrap())
            .await;
        assert_eq!(order["status"], "completed", "{order}");
        let card_id = v["card_id"].as_str().unwrap().to_owned();
        let (s, v) = self
            .t
            .topup(&card_id, json!(funds), &format!("topup-{user}"))
            .await;
        assert_eq!(s, 200, "{v}");
        let order = self.t.wait_order(v["order_id"].as_str().unwrap()).await;
        assert_eq!(order["status"], "completed", "{order}");
        let token = self.token_of(&card_id);
        (card_id, token)
    }

    /// Lithic's token of our card: the fake's card whose memo is our card id.
    fn token_of(&self, card_id: &str) -> String {
        self.fake
            .cards()
            .into_iter()
            .find(|c| c["memo"] == card_id)
            .and_then(|c| c["token"].as_str().map(str::to_owned))
            .expect("Lithic has the card")
    }

    async fn balance(&self, user: &str, card_id: &str) -> (String, String) {
        let v = self
            .t
            .ok(
                "cards/balance",
                json!({"card_id": card_id, "external_user_id": user}),
            )
            .await;
        (
            v["available"].as_str().unwrap().to_owned(),
            v["pending"].as_str().unwrap().to_owned(),
        )
    }

    async fn metrics(&self) -> String {
        let addr = self.t.metrics_addr().expect("metrics listener");
        reqwest::get(format!("http://{addr}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    async fn txs(&self, user: &str, card_id: &str) -> Vec<Value> {
        let v = self
            .t
            .ok(
                "cards/txs",
                json!({"card_id": card_id, "external_user_id": user}),
            )
            .await;
        v["items"].as_array().unwrap().clone()
    }
}

lithic_case!(kyc_outcomes, |c: Case| async move {
    // Accepted at once: approved and active, one account holder at Lithic.
    let (s, v) = c.holder("accepted", "111-23-1412").await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (v["kyc_status"].as_str(), v["registration_status"].as_str()),
        (Some("approved"), Some("active"))
    );
    assert_eq!(v["kyc_level"], "basic");
    let holders = c.fake.holders();
    assert_eq!(holders.len(), 1);
    let external_id = holders[0]["external_id"].as_str().unwrap();
    assert_eq!(
        external_id.len(),
        36,
        "a UUID derived from the cardholder id: {external_id}"
    );

    // Rejected by Lithic's KYC.
    let (s, v) = c.holder("rejected", "000-00-0002").await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (v["kyc_status"].as_str(), v["registration_status"].as_str()),
        (Some("rejected"), Some("failed"))
    );

    // Pending, then approved by a signed account_holder.verification event.
    c.fake.next_holder_status("PENDING_DOCUMENT");
    let (s, v) = c.holder("pending", "111-23-1413").await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        (v["kyc_status"].as_str(), v["registration_status"].as_str()),
        (Some("pending"), Some("pending"))
    );
    let holder_id = v["cardholder_id"].as_str().unwrap().to_owned();
    let token = c
        .fake
        .holders()
        .into_iter()
        .find(|h| h["status"] == "PENDING_DOCUMENT")
        .unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        c.fake.verify_holder(&token, "ACCEPTED", &[]).await,
        vec![200]
    );
    let v =
        c.t.ok("cardholders/get", json!({"cardholder_id": holder_id}))
            .await;
    assert_eq!(
        (v["kyc_status"].as_str(), v["registration_status"].as_str()),
        (Some("approved"), Some("active"))
    );

    // What KYC_BASIC needs and kyc_data lacks: named, and nothing is created.
    let mut thin = kyc_us("111-23-1412");
    thin.as_object_mut().unwrap().remove("address");
    thin.as_object_mut().unwrap().remove("id_document");
    let v =
        c.t.expect_error(
            "cardholders/create",
            json!({"external_user_id": "thin", "subprovider_code": SUB, "kyc_data": thin}),
            400,
            "validation_error",
        )
        .await;
    let message = v["error"].as_str().unwrap();
    for field in [
        "address.line1",
        "address.city",
        "address.state",
        "address.postal_code",
        "id_document.number",
    ] {
        assert!(message.contains(field), "{message}");
    }
    c.t.expect_error(
        "cardholders/get",
        json!({"external_user_id": "thin", "subprovider_code": SUB}),
        404,
        "cardholder_not_found",
    )
    .await;

    // A create whose answer is lost (Lithic made the account holder, then a 500): the
    // retry looks it up by external_id and does not create a second one.
    let before = c.fake.holders().len();
    c.fake
        .fail("POST", "/v1/account_holders", Fault::DoneThenStatus(500), 1);
    let (s, v) = c.holder("lost", "111-23-1414").await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["kyc_status"], "approved");
    assert_eq!(
        c.fake.holders().len(),
        before + 1,
        "exactly one account holder"
    );
    assert_eq!(
        c.fake.calls("POST", "/v1/account_holders"),
        4,
        "one create per submission that reached Lithic, none repeated blindly"
    );
    assert!(
        c.fake.calls("GET", "/v1/account_holders") >= 1,
        "looked up by external_id"
    );
    c
});

lithic_case!(cards_issue_freeze_close_details, |c: Case| async move {
    let (card_id, token) = c.card("ada", "50").await;
    let lithic_card = c.fake.card(&token).unwrap();
    assert_eq!(
        (lithic_card["type"].as_str(), lithic_card["state"].as_str()),
        (Some("VIRTUAL"), Some("OPEN"))
    );
    let card =
        c.t.ok(
            "cards/get",
            json!({"card_id": card_id, "external_user_id": "ada"}),
        )
        .await;
    assert_eq!(card["status"], "active");
    assert_eq!(card["label"], lithic_card["last_four"]);
    // The card number is read from Lithic when asked, never stored.
    let stored = {
        let mut conn = c.t.store.conn().await.unwrap();
        issuing_store::cards::get(&mut conn, &c.t.creds.project_id, &card_id)
            .await
            .unwrap()
            .unwrap()
    };
    assert!(stored.secrets_enc.is_none(), "no card number stored");
    let d =
        c.t.ok(
            "cards/details",
            json!({"card_id": card_id, "external_user_id": "ada"}),
        )
        .await;
    assert_eq!(d["details"]["card_number"], lithic_card["pan"]);
    assert_eq!(d["details"]["cvv"], lithic_card["cvv"]);
    assert_eq!(d["details"]["expiry_month"], 6);
    assert_eq!(d["details"]["expiry_year"], 2031);
    c.fake.set_pan_access(false);
    c.t.expect_error(
        "cards/details",
        json!({"card_id": card_id, "external_user_id": "ada"}),
        422,
        "card_details_plaintext_unavailable",
    )
    .await;
    c.fake.set_pan_access(true);

    c.t.ok("cards/freeze", json!({"card_id": card_id})).await;
    assert_eq!(c.fake.card(&token).unwrap()["state"], "PAUSED");
    c.t.ok("cards/unfreeze", json!({"card_id": card_id})).await;
    assert_eq!(c.fake.card(&token).unwrap()["state"], "OPEN");

    // Closing: Lithic's card CLOSED, our funds back to the master balance.
    let before = c.t.ok("project/balance", json!({})).await["available"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, v) =
        c.t.call_with_headers(
            "cards/close",
            json!({"card_id": card_id}),
            &[("Idempotency-Key", "close-ada")],
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(c.fake.card(&token).unwrap()["state"], "CLOSED");
    let after = loop {
        let b = c.t.ok("project/balance", json!({})).await["available"]
            .as_str()
            .unwrap()
            .to_owned();
        if b != before {
            break b;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let gained = issuing_wire::Amount::parse_decimal(&after)
        .unwrap()
        .micros()
        - issuing_wire::Amount::parse_decimal(&before)
            .unwrap()
            .micros();
    assert_eq!(gained, 50_000_000, "the card's funds return");
    c
});

lithic_case!(asa_decisions, |c: Case| async move {
    let (card_id, token) = c.card("ada", "50").await;
    let coffee = Merchant::coffee();

    // Approved: the amount in cents is held.
    let asa = c.fake.authorize(&token, 1250, &coffee).await;
    assert_eq!(
        (asa.status, asa.result()),
        (200, "APPROVED"),
        "{:?}",
        asa.answer
    );
    assert_eq!(
        c.balance("ada", &card_id).await,
        (usdt("37.5"), usdt("12.5"))
    );
    let txs = c.txs("ada", &card_id).await;
    assert_eq!(txs.len(), 1);
    let data = &txs[0]["card_tx_data"];
    assert_eq!(data["status"], "pending");
    assert_eq!(
        data["merchant"]["country"], "US",
        "alpha-3 USA becomes alpha-2"
    );
    assert_eq!(data["merchant"]["mcc"], "5814");
    assert_eq!(data["merchant"]["name"], "COFFEE SHOP");

    // The same request again (Lithic retries once): the same answer, held once.
    let again = c
        .fake
        .asa(
            &token,
            "AUTHORIZATION",
            1250,
            &coffee,
            Sign::Good,
            Some(&asa.token),
        )
        .await;
    assert_eq!((again.status, again.result()), (200, "APPROVED"));
    assert_eq!(
        c.balance("ada", &card_id).await,
        (usdt("37.5"), usdt("12.5"))
    );
    assert_eq!(c.txs("ada", &card_id).await.len(), 1);

    // Above the available funds: INSUFFICIENT_FUNDS, nothing held.
    let poor = c.fake.authorize(&token, 4000, &coffee).await;
    assert_eq!(poor.result(), "INSUFFICIENT_FUNDS");
    assert_eq!(
        c.balance("ada", &card_id).await,
        (usdt("37.5"), usdt("12.5"))
    );

    // A frozen card: CARD_PAUSED.
    c.t.ok("cards/freeze", json!({"card_id": card_id})).await;
    let paused = c.fake.authorize(&token, 100, &coffee).await;
    assert_eq!(paused.result(), "CARD_PAUSED");
    c.t.ok("cards/unfreeze", json!({"card_id": card_id})).await;
    let declined: Vec<Value> = c
        .txs("ada", &card_id)
        .await
        .into_iter()
        .filter(|t| t["card_tx_data"]["status"] == "declined")
        .collect();
    assert_eq!(declined.len(), 2);

    // A balance inquiry answers the balance in cents and changes nothing.
    let inquiry = c
        .fake
        .asa(&token, "BALANCE_INQUIRY", 0, &coffee, Sign::Good, None)
        .await;
    assert_eq!(inquiry.result(), "APPROVED");
    assert_eq!(
        inquiry.answer["balance"],
        json!({"amount": 5000, "available": 3750})
    );
    assert_eq!(c.txs("ada", &card_id).await.len(), 3);

    // Unsigned, badly signed and stale requests: 401, nothing changes.
    for sign in [Sign::Unsigned, Sign::Bad, Sign::Stale] {
        let refused = c
            .fake
            .asa(&token, "AUTHORIZATION", 100, &coffee, sign, None)
            .await;
        assert_eq!(refused.status, 401, "{sign:?}");
    }
    assert_eq!(
        c.balance("ada", &card_id).await,
        (usdt("37.5"), usdt("12.5"))
    );
    assert_eq!(c.txs("ada", &card_id).await.len(), 3);

    let metrics = c.metrics().await;
    for line in [
        r#"issuing_provider_asa_answers_total{subprovider="lithic_us",status="authorization",result="APPROVED"} 2"#,
        r#"issuing_provider_asa_answers_total{subprovider="lithic_us",status="authorization",result="INSUFFICIENT_FUNDS"} 1"#,
        r#"issuing_provider_asa_answers_total{subprovider="lithic_us",status="authorization",result="CARD_PAUSED"} 1"#,
        r#"issuing_provider_asa_answers_total{subprovider="lithic_us",status="balance_inquiry",result="APPROVED"} 1"#,
        r#"issuing_provider_asa_duration_seconds_count{subprovider="lithic_us"} 5"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line} in\n{metrics}"
        );
    }

    // A single-message purchase is held at ASA and settles with its own event.
    let fin = c
        .fake
        .authorize_as(&token, "FINANCIAL_AUTHORIZATION", 500, &coffee)
        .await;
    assert_eq!(fin.result(), "APPROVED");
    assert_eq!(
        c.balance("ada", &card_id).await,
        (usdt("32.5"), usdt("12.5"))
    );
    c
});

lithic_case!(transaction_events, |c: Case| async move {
    let (card_id, token) = c.card("ada", "100").await;
    let m = Merchant {
        descriptor: "BOOK STORE".into(),
        mcc: "5942".into(),
        country: "GBR".into(),
    };
    let bal = |a: &str, p: &str| (usdt(a), usdt(p));

    // Clearing below the hold: the rest is released.
    let a = c.fake.authorize(&token, 2000, &m).await;
    assert_eq!(c.balance("ada", &card_id).await, bal("80", "20"));
    assert_eq!(c.fake.clear(&a.token, 1800).await, vec![200]);
    assert_eq!(c.balance("ada", &card_id).await, bal("82", "0"));
    // The same delivery again, and an older one arriving late: nothing twice.
    assert_eq!(c.fake.deliver(&a.token).await, vec![200]);
    assert_eq!(c.fake.deliver_first(&a.token, 1).await, vec![200]);
    assert_eq!(c.balance("ada", &card_id).await, bal("82", "0"));
    let cleared = c.txs("ada", &card_id).await;
    assert_eq!(cleared[0]["card_tx_data"]["status"], "approved");
    assert_eq!(cleared[0]["card_tx_data"]["merchant"]["country"], "GB");

    // A partial reversal, then a clearing of the rest.
    let b = c.fake.authorize(&token, 3000, &m).await;
    assert_eq!(c.fake.reverse(&b.token, 1000).await, vec![200]);
    assert_eq!(c.balance("ada", &card_id).await, bal("62", "20"));
    assert_eq!(c.fake.clear(&b.token, 2000).await, vec![200]);
    assert_eq!(c.balance("ada", &card_id).await, bal("62", "0"));

    // Expiry releases the hold.
    let e = c.fake.authorize(&token, 1500, &m).await;
    assert_eq!(c.balance("ada", &card_id).await, bal("47", "15"));
    assert_eq!(c.fake.expire(&e.token).await, vec![200]);
    assert_eq!(c.balance("ada", &card_id).await, bal("62", "0"));

    // A return credits the card (an unlinked refund).
    let (_, statuses) = c.fake.refund(&token, 700, &m).await;
    assert_eq!(statuses, vec![200]);
    assert_eq!(c.balance("ada", &card_id).await, bal("69", "0"));

    // A clearing we never authorized: a force post.
    let (forced, statuses) = c.fake.force_post(&token, 900, &m).await;
    assert_eq!(statuses, vec![200]);
    assert_eq!(c.balance("ada", &card_id).await, bal("60", "0"));
    assert_eq!(c.fake.deliver(&forced).await, vec![200]);
    assert_eq!(c.balance("ada", &card_id).await, bal("60", "0"));

    // Lithic declined what we approved: the hold is released.
    let late = c.fake.authorize_then_decline(&token, 1000, &m).await;
    assert_eq!(late.result(), "APPROVED", "we approved it");
    assert_eq!(c.balance("ada", &card_id).await, bal("60", "0"));

    // A badly signed delivery changes nothing (and is refused).
    let f = c.fake.authorize(&token, 500, &m).await;
    {
        // The clearing event exists at Lithic, but its delivery is forged.
        let statuses = c.fake.clear_signed(&f.token, 500, Sign::Bad).await;
        assert_eq!(statuses, vec![401]);
        assert_eq!(c.balance("ada", &card_id).await, bal("55", "5"));
        assert_eq!(
            c.fake.deliver_signed(&f.token, Sign::Stale).await,
            vec![401]
        );
        assert_eq!(c.balance("ada", &card_id).await, bal("55", "5"));
        // The genuine delivery then applies it.
        assert_eq!(c.fake.deliver(&f.token).await, vec![200]);
        assert_eq!(c.balance("ada", &card_id).await, bal("55", "0"));
    }

    // Every change was a card_transaction event of ours.
    let events = c.t.events(&c.t.creds.project_id).await;
    assert!(
        events
            .iter()
            .filter(|e| e.event_type == "card_transaction")
            .count()
            >= 12
    );
    c
});

/// The master balance as `project/balance` shows it.
async fn master(c: &Case) -> String {
    c.t.ok("project/balance", json!({})).await["available"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A signed amount of whole USDT as the API writes it.
fn signed(units: i64) -> String {
    issuing_wire::Amount::from_micros(units * 1_000_000).to_string()
}

// CONTRACT §14: a real network's clearings are never refused. Beyond the card's
// funds the card goes to zero and the master balance pays; beyond that the project
// owes the rest as a negative master balance, which refuses top-ups and card issues
// (changing nothing) until deposits cover it. The ledger verifies after every step.
lithic_case!(shortfalls_are_the_projects, |c: Case| async move {
    let (card_id, token) = c.card("ada", "100").await;
    let m = Merchant::coffee();
    let zero = (usdt("0"), usdt("0"));
    // 1000 deposited, 1.00 issue fee, 100 on the card.
    assert_eq!(master(&c).await, signed(899));

    // A clearing above its hold and above the card's funds: hold 20, card 80, bill
    // 150; the card goes to zero and the master balance pays the other 50.
    let a = c.fake.authorize(&token, 2000, &m).await;
    assert_eq!(a.result(), "APPROVED");
    assert_eq!(c.fake.clear(&a.token, 15000).await, vec![200]);
    assert_eq!(c.balance("ada", &card_id).await, zero);
    assert_eq!(master(&c).await, signed(849));
    let cleared = c.txs("ada", &card_id).await;
    assert_eq!(cleared[0]["card_tx_data"]["status"], "approved");
    c.t.verify_ledger().await;

    // A force post beyond the card and the master balance: 849 from the master
    // balance, 151 owed.
    let (forced, statuses) = c.fake.force_post(&token, 100_000, &m).await;
    assert_eq!(statuses, vec![200]);
    assert_eq!(master(&c).await, signed(-151));
    assert_eq!(c.balance("ada", &card_id).await, zero);
    // Delivered again: applied once.
    assert_eq!(c.fake.deliver(&forced).await, vec![200]);
    assert_eq!(master(&c).await, signed(-151));
    c.t.verify_ledger().await;

    // project/txs shows the shortfalls, and still adds up to the balance.
    let txs = c.t.ok("project/txs", json!({"limit": 100})).await;
    let items = txs["items"].as_array().unwrap();
    let shortfalls: Vec<(&str, &str)> = items
        .iter()
        .filter(|i| i["type"] == "card_shortfall")
        .map(|i| {
            (
                i["amount"].as_str().unwrap(),
                i["balance_after"].as_str().unwrap(),
            )
        })
        .collect();
    // Newest first: the debt, the master balance emptied, the first clearing's 50.
    let (m151, m849, m50) = (signed(-151), signed(-849), signed(-50));
    let (after_debt, after_empty, after_first) = (signed(-151), signed(0), signed(849));
    assert_eq!(
        shortfalls,
        vec![
            (m151.as_str(), after_debt.as_str()),
            (m849.as_str(), after_empty.as_str()),
            (m50.as_str(), after_first.as_str()),
        ]
    );
    assert!(items
        .iter()
        .all(|i| i["type"] != "card_shortfall" || i["card_id"] == card_id.as_str()));
    let sum: i64 = items
        .iter()
        .map(|i| {
            issuing_wire::Amount::parse_decimal(i["amount"].as_str().unwrap())
                .unwrap()
                .micros()
        })
        .sum();
    assert_eq!(
        issuing_wire::Amount::from_micros(sum).to_string(),
        signed(-151)
    );

    // In debt: a top-up and a card issue are refused, and nothing changes.
    let events_before = c.t.events(&c.t.creds.project_id).await.len();
    c.t.expect_error(
        "cards/topup",
        json!({"card_id": card_id, "amount": "10", "idempotency_key": "in-debt-topup"}),
        403,
        "insufficient_funds",
    )
    .await;
    c.t.expect_error(
        "cards/create",
        json!({"external_user_id": "ada", "product_code": PRODUCT,
               "idempotency_key": "in-debt-card"}),
        403,
        "insufficient_funds",
    )
    .await;
    assert_eq!(master(&c).await, signed(-151));
    assert_eq!(c.balance("ada", &card_id).await, zero);
    assert_eq!(c.t.events(&c.t.creds.project_id).await.len(), events_before);
    let cards = c.t.ok("cards/find", json!({})).await;
    assert_eq!(cards["total"], 1, "{cards}");
    c.t.verify_ledger().await;

    // A deposit repays the debt first: part of it leaves the project still in debt.
    c.t.deposit(&c.t.creds.project_id, 100_000_000).await;
    assert_eq!(master(&c).await, signed(-51));
    c.t.expect_error(
        "cards/topup",
        json!({"card_id": card_id, "amount": "10", "idempotency_key": "still-in-debt"}),
        403,
        "insufficient_funds",
    )
    .await;
    c.t.verify_ledger().await;
    c.t.deposit(&c.t.creds.project_id, 200_000_000).await;
    assert_eq!(master(&c).await, signed(149));
    c.t.verify_ledger().await;

    // Top-ups work again.
    let (s, v) = c.t.topup(&card_id, json!("10"), "after-debt").await;
    assert_eq!(s, 200, "{v}");
    let order = c.t.wait_order(v["order_id"].as_str().unwrap()).await;
    assert_eq!(order["status"], "completed", "{order}");
    assert_eq!(master(&c).await, signed(139));
    assert_eq!(c.balance("ada", &card_id).await, (usdt("10"), usdt("0")));
    c
});

lithic_case!(retries_and_failures, |c: Case| async move {
    // A 429 with retry-after, then success: the card is issued once, after waiting.
    c.fake.fail(
        "POST",
        "/v1/cards",
        Fault::RateLimited { retry_after: 1 },
        1,
    );
    let started = std::time::Instant::now();
    let (card_id, token) = c.card("ada", "20").await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retry-after honoured"
    );
    assert_eq!(c.fake.calls("POST", "/v1/cards"), 2);
    assert_eq!(c.fake.cards().len(), 1);

    // 5xx twice: freeze still succeeds, on the third attempt.
    c.fake
        .fail("PATCH", "/v1/cards/{card_token}", Fault::Status(503), 2);
    c.t.ok("cards/freeze", json!({"card_id": card_id})).await;
    assert_eq!(c.fake.card(&token).unwrap()["state"], "PAUSED");
    assert_eq!(c.fake.calls("PATCH", "/v1/cards/{card_token}"), 3);

    // The answer lost after Lithic issued the card: the retry carries the same
    // Idempotency-Key and gets the same card.
    c.fake
        .fail("POST", "/v1/cards", Fault::DoneThenStatus(500), 1);
    c.t.ok("cardholders/create", json!({"external_user_id": "bob", "subprovider_code": SUB, "kyc_data": kyc_us("111-23-1499")})).await;
    let (s, v) = c.t.call("cards/create", json!({"external_user_id": "bob", "product_code": PRODUCT, "idempotency_key": "card-bob"})).await;
    assert_eq!(s, 200, "{v}");
    let order =
        c.t.wait_order(v["order"]["order_id"].as_str().unwrap())
            .await;
    assert_eq!(order["status"], "completed", "{order}");
    assert_eq!(c.fake.cards().len(), 2, "one card for bob, not two");

    // A permanent failure: the order fails with provider_error, the fee goes back.
    let before = c.t.ok("project/balance", json!({})).await["available"].clone();
    c.fake.fail(
        "POST",
        "/v1/cards",
        Fault::Refuse(422, "account is not eligible for new cards"),
        1,
    );
    c.t.ok("cardholders/create", json!({"external_user_id": "eve", "subprovider_code": SUB, "kyc_data": kyc_us("111-23-1498")})).await;
    let (s, v) = c.t.call("cards/create", json!({"external_user_id": "eve", "product_code": PRODUCT, "idempotency_key": "card-eve"})).await;
    assert_eq!(s, 200, "{v}");
    let order =
        c.t.wait_order(v["order"]["order_id"].as_str().unwrap())
            .await;
    assert_eq!(
        (order["status"].as_str(), order["last_error_slug"].as_str()),
        (Some("failed"), Some("provider_error")),
        "{order}"
    );
    assert_eq!(
        c.t.ok("project/balance", json!({})).await["available"],
        before,
        "the fee is refunded"
    );
    assert_eq!(c.fake.cards().len(), 2);

    // Lithic down for longer than the retries: a synchronous call answers
    // provider_error and changes nothing.
    c.fake
        .fail("PATCH", "/v1/cards/{card_token}", Fault::Status(500), 10);
    c.t.expect_error(
        "cards/unfreeze",
        json!({"card_id": card_id}),
        500,
        "provider_error",
    )
    .await;
    let card =
        c.t.ok(
            "cards/get",
            json!({"card_id": card_id, "external_user_id": "ada"}),
        )
        .await;
    assert_eq!(card["status"], "frozen");
    c.fake.clear_faults();

    // What an operator watches: calls, retries by reason, by operation.
    let metrics = c.metrics().await;
    for line in [
        r#"issuing_provider_retries_total{subprovider="lithic_us",operation="create_card",reason="rate_limited"} 1"#,
        r#"issuing_provider_retries_total{subprovider="lithic_us",operation="pause_card",reason="server_error"} 2"#,
        r#"issuing_provider_calls_total{subprovider="lithic_us",operation="create_card",outcome="refused"} 1"#,
        r#"issuing_provider_calls_total{subprovider="lithic_us",operation="open_card",outcome="server_error"} 4"#,
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "missing {line} in\n{metrics}"
        );
    }
    c
});

// Production delivers our webhooks to the networks ISSUING_WEBHOOK_ALLOWED_NETWORKS
// names (127.0.0.0/8 here), and still refuses other private addresses.
lithic_case!(allowed_networks_in_production, |c: Case| async move {
    let receiver = common::receiver::Receiver::start(&c.t.creds.api_secret).await;
    let v = c.t.ok("wh/subscribe", json!({"url": receiver.url})).await;
    assert_eq!(v["active"], true);
    c.t.expect_error(
        "wh/subscribe",
        json!({"url": "http://10.1.2.3:9000/hook"}),
        400,
        "validation_error",
    )
    .await;
    c.t.expect_error(
        "wh/subscribe",
        json!({"url": "http://[::1]:9000/hook"}),
        400,
        "validation_error",
    )
    .await;
    let (_, token) = c.card("ada", "20").await;
    c.fake.authorize(&token, 500, &Merchant::coffee()).await;
    receiver
        .wait_until("a card_transaction webhook", Duration::from_secs(20), |r| {
            r.iter().any(|d| d.event["type"] == "card_transaction")
        })
        .await;
    c
});

/// The real binary in production with a lithic subprovider from its config file:
/// enrolled with `issuing admin provider enroll`, killed with SIGKILL after an ASA
/// approval and before its clearing; after the restart (and a re-enrolment at the new
/// address) the clearing applies once to the hold that survived, and the ledger
/// verifies.
mod sigkill_between_approval_and_clearing {
    use super::*;
    use common::process::{issuing, ServeProcess};
    use common::{Creds, TestDb};

    async fn case(backend: Backend) {
        let Some(db) = TestDb::create(backend).await else {
            return;
        };
        let fake = FakeLithic::start().await;
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("issuing.toml");
        std::fs::write(
            &cfg,
            format!(
                "mode = \"production\"\nwebhook_allowed_networks = \"127.0.0.0/8\"\n{}",
                catalog_toml(&fake.base)
            ),
        )
        .unwrap();
        let cfg = cfg.to_str().unwrap().to_owned();
        let data = dir.path().to_str().unwrap().to_owned();
        let env = [("ISSUING_LITHIC_API_KEY", fake.api_key.as_str())];
        let admin = |args: Vec<String>| {
            let mut cmd = issuing();
            cmd.envs(env)
                .args([
                    "--config",
                    &cfg,
                    "--data-dir",
                    &data,
                    "--database-url",
                    &db.url,
                ])
                .args(args);
            async move { cmd.output().await.unwrap() }
        };
        let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        let out = admin(words("admin project create --name crashco")).await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let created: Value = serde_json::from_slice(&out.stdout).unwrap();
        let creds = Creds {
            project_id: created["project_id"].as_str().unwrap().into(),
            api_key: created["api_key"].as_str().unwrap().into(),
            api_secret: created["api_secret"].as_str().unwrap().into(),
            deposit_address: String::new(),
        };
        let out = admin(words(&format!(
            "admin deposit --project {} --amount 100",
            creds.project_id
        )))
        .await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );

        let server =
            ServeProcess::start_with_env(dir.path(), &db.url, &["--config", &cfg], &env).await;
        let enroll = |base: String| {
            admin(words(&format!(
                "admin provider enroll --subprovider {SUB} --public-url {base}"
            )))
        };
        let out = enroll(server.base.clone()).await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let enrolled: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            enrolled["asa_url"],
            format!("{}/provider/lithic/{SUB}/asa", server.base)
        );
        assert_eq!(fake.asa_url().as_deref(), enrolled["asa_url"].as_str());
        let out = admin(words("admin provider status")).await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let status: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(status["enrolled"], true, "{status}");
        assert_eq!(status["secrets_readable"], true, "{status}");
        assert_eq!(status["lithic"]["asa_url_matches"], true, "{status}");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains(&fake.api_key),
            "no key printed"
        );

        // A client of the child server: the harness' sealing, on another base URL.
        let client = TestServer::start(backend).await.unwrap();
        let call = |base: String, path: &'static str, body: Value| {
            let (client, creds) = (&client, &creds);
            async move { client.call_on(&base, creds, path, body).await }
        };
        let (s, v) = call(server.base.clone(), "cardholders/create", json!({"external_user_id": "ada", "subprovider_code": SUB, "kyc_data": kyc_us("111-23-1412")})).await;
        assert_eq!(
            (s, v["kyc_status"].as_str()),
            (200, Some("approved")),
            "{v}"
        );
        let (s, v) = call(server.base.clone(), "cards/create", json!({"external_user_id": "ada", "product_code": PRODUCT, "idempotency_key": "card-1", "initial_topup": "50"})).await;
        assert_eq!(s, 200, "{v}");
        let card_id = v["card_id"].as_str().unwrap().to_owned();
        let order_id = v["order"]["order_id"].as_str().unwrap().to_owned();
        for _ in 0..400 {
            let (_, o) = call(
                server.base.clone(),
                "orders/check",
                json!({"order_id": order_id}),
            )
            .await;
            if o["status"] == "completed" {
                break;
            }
            assert_ne!(o["status"], "failed", "{o}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let token = fake.cards()[0]["token"].as_str().unwrap().to_owned();
        let asa = fake.authorize(&token, 2000, &Merchant::coffee()).await;
        assert_eq!(asa.result(), "APPROVED");
        server.kill().await;

        let server =
            ServeProcess::start_with_env(dir.path(), &db.url, &["--config", &cfg], &env).await;
        let out = enroll(server.base.clone()).await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let balance = || {
            call(
                server.base.clone(),
                "cards/balance",
                json!({"card_id": card_id, "external_user_id": "ada"}),
            )
        };
        let (_, b) = balance().await;
        assert_eq!(
            (b["available"].clone(), b["pending"].clone()),
            (json!(usdt("30")), json!(usdt("20"))),
            "the hold survived"
        );
        assert_eq!(fake.clear(&asa.token, 2000).await, vec![200]);
        assert_eq!(fake.deliver(&asa.token).await, vec![200]);
        let again = fake
            .asa(
                &token,
                "AUTHORIZATION",
                2000,
                &Merchant::coffee(),
                Sign::Good,
                Some(&asa.token),
            )
            .await;
        assert_eq!(again.result(), "APPROVED");
        let (_, b) = balance().await;
        assert_eq!(
            (b["available"].clone(), b["pending"].clone()),
            (json!(usdt("30")), json!(usdt("0")))
        );
        let (_, txs) = call(
            server.base.clone(),
            "cards/txs",
            json!({"card_id": card_id, "external_user_id": "ada"}),
        )
        .await;
        assert_eq!(txs["items"].as_array().unwrap().len(), 1, "{txs}");
        server.kill().await;

        let out = admin(words("admin verify-ledger")).await;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        fake.assert_clean();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        case(Backend::Sqlite).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        case(Backend::Postgres).await;
    }
}
