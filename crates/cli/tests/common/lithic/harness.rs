//! A server in production mode with one lithic subprovider on the fake, enrolled: what
//! the Lithic tests start from. `Lithic::start` takes the subprovider's extra settings
//! (say `asa_budget_ms = 600`) as config-file lines.

use super::FakeLithic;
use crate::common::{Backend, TestServer};
use issuing_app::config::ProviderKeys;
use issuing_domain::catalog::{Catalog, CatalogConfig};
use issuing_server::{Mode, ServerConfig};
use serde_json::{json, Value};

pub const SUB: &str = "lithic_us";
pub const PRODUCT: &str = "lithic_virtual";

/// The catalog as a config file writes it: one lithic subprovider at `base_url` (with
/// `extra` lines) and one product.
pub fn catalog_toml(base_url: &str, extra: &str) -> String {
    format!(
        r#"
[[catalog.subproviders]]
code = "{SUB}"
kind = "lithic"
base_url = "{base_url}"
api_key_env = "ISSUING_LITHIC_API_KEY"
{extra}

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

fn catalog(base_url: &str, extra: &str) -> Catalog {
    #[derive(serde::Deserialize)]
    struct File {
        catalog: CatalogConfig,
    }
    let file: File = toml::from_str(&catalog_toml(base_url, extra)).unwrap();
    Catalog::from_config(&file.catalog).unwrap()
}

pub struct Lithic {
    pub t: TestServer,
    pub fake: FakeLithic,
}

impl Lithic {
    /// None when the backend is off (PostgreSQL skipped).
    pub async fn start(backend: Backend, extra: &str) -> Option<Lithic> {
        Self::start_via(backend, extra, str::to_owned).await
    }

    /// Like `start`, the server reaching its database through the URL `via` makes of
    /// the test database's (a proxy, several hosts).
    pub async fn start_via(
        backend: Backend,
        extra: &str,
        via: impl FnOnce(&str) -> String,
    ) -> Option<Lithic> {
        let fake = FakeLithic::start().await;
        let catalog = catalog(&fake.base, extra);
        let mut keys = ProviderKeys::default();
        keys.insert(SUB, &fake.api_key);
        let config = ServerConfig {
            mode: Mode::Production,
            catalog: std::sync::Arc::new(catalog.clone()),
            provider_keys: keys.clone(),
            // Decision endpoints and receivers are local in tests (CONTRACT §6).
            webhook_allowed_networks: issuing_domain::webhooks::AllowedNetworks::parse(
                "127.0.0.0/8",
            )
            .unwrap(),
            ..ServerConfig::default()
        };
        let db = crate::common::TestDb::create(backend).await?;
        let url = via(&db.url);
        let t = TestServer::start_at(db, &url, None, config).await;
        issuing_app::provider::lithic::admin::enroll(
            &t.store, &t.master, &catalog, &keys, SUB, &t.base,
        )
        .await
        .expect("enroll with the fake Lithic");
        Some(Lithic { t, fake })
    }

    /// Settlement reconciliation of the subprovider's `date` against the fake, as the
    /// daily job and `issuing admin reconcile` run it: the kept result, as printed.
    pub async fn reconcile(&self, date: &str) -> Value {
        let catalog = catalog(&self.fake.base, "");
        let mut keys = ProviderKeys::default();
        keys.insert(SUB, &self.fake.api_key);
        let lithic = issuing_app::provider::lithic::admin::provider(
            &self.t.store,
            &self.t.master,
            &catalog,
            &keys,
            SUB,
        )
        .unwrap();
        let src = issuing_app::reconcile::Sources {
            store: &self.t.store,
            catalog: &catalog,
            lithic: Some(&lithic),
        };
        let r = issuing_app::reconcile::run(&src, SUB, date).await.unwrap();
        issuing_app::reconcile::to_json(&r)
    }

    /// The fake's check, then the ledger's.
    pub async fn finish(self) {
        self.fake.assert_clean();
        self.t.verify_ledger().await;
    }

    /// An approved cardholder and an issued card holding `funds` USDT: our card id and
    /// Lithic's card token.
    pub async fn card(&self, user: &str, funds: &str) -> (String, String) {
        let kyc = json!({
            "first_name": "Ada", "last_name": "Lovelace", "birth_date": "1990-12-10",
            "email": "ada@example.com", "phone_number_full": "+14155550123",
            "country_iso": "US",
            "address": {"line1": "1 Main Street", "city": "Omaha", "state": "NE",
                        "postal_code": "68022", "country_iso": "US"},
            "id_document": {"type": "ssn", "number": "111-23-1412", "country_iso": "US"},
        });
        self.t
            .ok(
                "cardholders/create",
                json!({"external_user_id": user, "subprovider_code": SUB, "kyc_data": kyc}),
            )
            .await;
        self.t
            .deposit(&self.t.creds.project_id, 1_000_000_000)
            .await;
        let v = self
            .t
            .ok(
                "cards/create",
                json!({"external_user_id": user, "product_code": PRODUCT,
                       "idempotency_key": format!("card-{user}"), "initial_topup": funds}),
            )
            .await;
        let order = self
            .t
            .wait_order(v["order"]["order_id"].as_str().unwrap())
            .await;
        assert_eq!(order["status"], "completed", "{order}");
        let card_id = v["card_id"].as_str().unwrap().to_owned();
        let token = self
            .fake
            .cards()
            .into_iter()
            .find(|c| c["memo"] == card_id)
            .and_then(|c| c["token"].as_str().map(str::to_owned))
            .expect("Lithic has the card");
        (card_id, token)
    }

    /// `user`'s card's (available, pending) as `cards/balance` answers them.
    pub async fn balance(&self, user: &str, card_id: &str) -> (String, String) {
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

    /// `user`'s card's transactions, newest first.
    pub async fn txs(&self, user: &str, card_id: &str) -> Vec<Value> {
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

/// Micro-units as a decimal string, the way the API answers amounts.
pub fn usdt(s: &str) -> String {
    issuing_wire::Amount::parse_decimal(s).unwrap().to_string()
}
