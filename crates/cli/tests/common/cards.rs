//! Helpers for card tests: KYC data, cardholders, issuing and waiting for orders.

use super::TestServer;
use issuing_client::{CardRef, CardholdersCreate, CardsCreate};
use serde_json::{json, Value};
use std::time::Duration;

pub fn kyc() -> Value {
    json!({
        "first_name": "Ada",
        "last_name": "Lovelace",
        "birth_date": "1990-12-10",
        "email": "ada@example.com",
        "phone_number_full": "+447700900123",
        "country_iso": "GB",
        "address": {"line1": "1 Analytical Way", "city": "London", "postal_code": "N1 1AA", "country_iso": "GB"}
    })
}

impl TestServer {
    pub async fn cardholder(&self, external_user_id: &str, subprovider: &str) -> Value {
        let mut body = json!({"external_user_id": external_user_id, "subprovider_code": subprovider, "kyc_data": kyc()});
        if subprovider == "sandbox_restricted" {
            body["product_code"] = json!("virtual_usd_restricted");
        }
        self.ok("cardholders/create", body).await
    }

    /// Creates a card order; returns the whole response.
    pub async fn create_card(
        &self,
        external_user_id: &str,
        product: &str,
        key: &str,
    ) -> (u16, Value) {
        self.call(
            "cards/create",
            json!({"external_user_id": external_user_id, "product_code": product, "idempotency_key": key}),
        )
        .await
    }

    /// Polls orders/check until the order is completed or failed.
    pub async fn wait_order(&self, order_id: &str) -> Value {
        for _ in 0..400 {
            let v = self.ok("orders/check", json!({"order_id": order_id})).await;
            if v["status"] == "completed" || v["status"] == "failed" {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("order {order_id} did not finish");
    }

    /// A user with an approved cardholder and an issued, active card; returns card id.
    /// Well-formed calls only, so through the typed SDK.
    pub async fn active_card(&self, external_user_id: &str, product: &str) -> String {
        let restricted = product == "virtual_usd_restricted";
        let sdk = self.sdk();
        sdk.cardholders_create(&CardholdersCreate {
            external_user_id: external_user_id.into(),
            subprovider_code: if restricted {
                "sandbox_restricted"
            } else {
                "sandbox"
            }
            .into(),
            product_code: restricted.then(|| product.to_owned()),
            kyc_data: Some(serde_json::from_value(kyc()).unwrap()),
        })
        .await
        .unwrap();
        let created = sdk
            .cards_create(
                &CardsCreate {
                    external_user_id: external_user_id.into(),
                    product_code: product.into(),
                    ..CardsCreate::default()
                },
                &format!("issue-{external_user_id}"),
            )
            .await
            .unwrap();
        let order = sdk
            .wait_order(&created.order.order_id, Duration::from_secs(20))
            .await
            .unwrap();
        assert_eq!(order.status, "completed", "{order:?}");
        created.card_id
    }

    /// The master balance (project/balance) as its decimal string.
    pub async fn balance(&self) -> String {
        let balance = self.sdk().project_balance().await.unwrap();
        balance.available.as_str().to_owned()
    }

    pub async fn events(&self, project_id: &str) -> Vec<issuing_store::events::EventRecord> {
        let mut conn = self.store.conn().await.unwrap();
        issuing_store::events::list_for_project(&mut conn, project_id, 1000)
            .await
            .unwrap()
    }

    pub async fn verify_ledger(&self) {
        let mut conn = self.store.conn().await.unwrap();
        let problems = issuing_store::ledger::verify(&mut conn).await.unwrap();
        assert!(problems.is_empty(), "{problems:?}");
    }
}

impl TestServer {
    /// Like `call`, with extra HTTP headers (e.g. `Idempotency-Key`) on the request.
    pub async fn call_with_headers(
        &self,
        path: &str,
        mut body: Value,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        if body.get("request_timestamp").is_none() {
            body["request_timestamp"] = json!(super::fresh_timestamp());
        }
        let key = issuing_envelope::Key::from_secret(&self.creds.api_secret);
        let sealed = issuing_envelope::seal(&key, body.to_string().as_bytes());
        let mut req = self
            .http
            .post(format!("{}/api/v2/{path}", self.base))
            .header("Content-Type", "application/json")
            .header("API-KEY", &self.creds.api_key)
            .body(json!({ "encrypted": sealed }).to_string());
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let outer: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("non-JSON response: {text}"));
        let value = match outer.get("encrypted").and_then(Value::as_str) {
            Some(sealed) => {
                let plain = issuing_envelope::open(&key, sealed).expect("open response");
                serde_json::from_slice(&plain).unwrap()
            }
            None => outer,
        };
        (status, value)
    }

    /// cards/topup with the idempotency key in the body.
    pub async fn topup(&self, card_id: &str, amount: Value, key: &str) -> (u16, Value) {
        self.call(
            "cards/topup",
            json!({"card_id": card_id, "amount": amount, "idempotency_key": key}),
        )
        .await
    }

    /// cards/withdraw with the idempotency key in the body.
    pub async fn withdraw(&self, card_id: &str, amount: Value, key: &str) -> (u16, Value) {
        self.call(
            "cards/withdraw",
            json!({"card_id": card_id, "amount": amount, "idempotency_key": key}),
        )
        .await
    }

    /// The card's available balance (cards/balance) as its decimal string.
    pub async fn card_balance(&self, external_user_id: &str, card_id: &str) -> String {
        let balance = self
            .sdk()
            .cards_balance(&CardRef::new(card_id, external_user_id))
            .await
            .unwrap();
        balance.available.as_str().to_owned()
    }
}
