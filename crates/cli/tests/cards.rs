//! Card issuing over HTTP: products, cardholders and KYC, issue orders through the
//! worker, card reads, freeze and unfreeze, and isolation between projects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::cards::kyc;
use common::{api_error, TestServer};
use issuing_client::{
    CardRef, Cardholder, CardholdersCreate, CardholdersFind, CardholdersGet, CardsCreate,
    CardsFind, CardsFreeze, ClientError, CreateCardResponse, KycData, ListQuery, ProjectTxs,
    UsersCreate, UsersGet,
};
use issuing_server::ServerConfig;
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

/// The harness's KYC data with another last name (`Reject`, `Decline` drive the sandbox).
fn kyc_named(last_name: &str) -> KycData {
    let mut k = kyc();
    k["last_name"] = json!(last_name);
    serde_json::from_value(k).unwrap()
}

/// A cardholder request with KYC data; the restricted subprovider gets its product.
fn holder(user: &str, subprovider: &str) -> CardholdersCreate {
    CardholdersCreate {
        external_user_id: user.into(),
        subprovider_code: subprovider.into(),
        product_code: (subprovider == "sandbox_restricted")
            .then(|| "virtual_usd_restricted".to_owned()),
        kyc_data: Some(kyc_named("Lovelace")),
    }
}

/// A cardholder request without KYC data.
fn holder_without_kyc(user: &str) -> CardholdersCreate {
    CardholdersCreate {
        external_user_id: user.into(),
        subprovider_code: "sandbox".into(),
        ..CardholdersCreate::default()
    }
}

impl TestServer {
    /// An approved cardholder (typed).
    async fn holder(&self, user: &str, subprovider: &str) -> Cardholder {
        self.sdk()
            .cardholders_create(&holder(user, subprovider))
            .await
            .unwrap()
    }

    /// cards/create of `product` for `user` with idempotency key `key` (typed).
    async fn issue(
        &self,
        user: &str,
        product: &str,
        key: &str,
    ) -> Result<CreateCardResponse, ClientError> {
        let request = CardsCreate {
            external_user_id: user.into(),
            product_code: product.into(),
            ..CardsCreate::default()
        };
        self.sdk().cards_create(&request, key).await
    }
}

both_backends!(
    products_list_the_sandbox_catalog,
    |t: TestServer| async move {
        let list = t.sdk().cards_products().await.unwrap();
        let items = &list.items;
        assert_eq!(list.total, 3);
        let codes: Vec<&str> = items.iter().map(|p| p.product_code.as_str()).collect();
        assert_eq!(
            codes,
            [
                "virtual_usd",
                "virtual_usd_restricted",
                "virtual_usd_retired"
            ]
        );
        let usd = &items[0];
        assert_eq!(usd.product_id, "virtual_usd");
        assert_eq!(usd.subprovider_code, "sandbox");
        assert!(usd.active);
        assert_eq!(usd.pricing.issue_fee.as_str(), "2.00");
        assert_eq!(usd.pricing.topup_fee_percent.as_str(), "1.00");
        assert_eq!(usd.pricing.topup_fee_fixed.as_str(), "0.50");
        assert_eq!(usd.limits.topup_min.as_str(), "10.00");
        assert_eq!(usd.limits.topup_max.as_str(), "5000.00");
        assert!(!items[2].active);
    }
);

both_backends!(
    cardholders_kyc_outcomes_and_errors,
    |t: TestServer| async move {
        let sdk = t.sdk();
        let v = t.holder("ada", "sandbox").await;
        assert_eq!(
            (
                v.registration_status.as_str(),
                v.kyc_status.as_str(),
                v.kyc_level.as_str()
            ),
            ("active", "approved", "full")
        );
        assert_eq!(v.subprovider_code, "sandbox");
        assert_eq!(v.subprovider_id, "sandbox");
        assert!(v.registered_at.is_some() && v.activated_at.is_some());
        assert_eq!(v.project_id, t.creds.project_id);
        // The user was created with the cardholder.
        let u = sdk
            .users_get(&UsersGet {
                external_user_id: "ada".into(),
            })
            .await
            .unwrap();
        assert_eq!(u.user_id, v.user_id);

        let mut rejected = kyc();
        rejected["last_name"] = json!("Reject");
        // Raw: the legacy `subprovider_id` field name.
        let v = t.ok("cardholders/create", json!({"external_user_id": "rex", "subprovider_id": "sandbox", "kyc_data": rejected})).await;
        assert_eq!(
            (v["registration_status"].as_str(), v["kyc_status"].as_str()),
            (Some("failed"), Some("rejected"))
        );

        let v = sdk
            .cardholders_create(&holder_without_kyc("nokyc"))
            .await
            .unwrap();
        assert_eq!(
            (
                v.registration_status.as_str(),
                v.kyc_status.as_str(),
                v.kyc_level.as_str()
            ),
            ("pending", "not_started", "none")
        );

        api_error(
            sdk.cardholders_create(&holder("ada", "sandbox")).await,
            409,
            "cardholder_already_exists",
        );
        api_error(
            sdk.cardholders_create(&CardholdersCreate {
                subprovider_code: "nope".into(),
                ..holder_without_kyc("x")
            })
            .await,
            404,
            "subprovider_not_found",
        );
        // Raw: a field left out, unknown KYC fields, KYC data with a field left out.
        t.expect_error(
            "cardholders/create",
            json!({"external_user_id": "x"}),
            400,
            "validation_error",
        )
        .await;
        t.expect_error(
            "cardholders/create",
            json!({"subprovider_code": "sandbox"}),
            400,
            "validation_error",
        )
        .await;
        let mut extra = kyc();
        extra["shoe_size"] = json!(44);
        extra["address"]["planet"] = json!("Earth");
        let e = t
            .expect_error(
                "cardholders/create",
                json!({"external_user_id": "x", "subprovider_code": "sandbox", "kyc_data": extra}),
                400,
                "kyc_unexpected_fields",
            )
            .await;
        let msg = e["error"].as_str().unwrap();
        assert!(msg.contains("shoe_size") && msg.contains("planet"), "{msg}");
        let mut missing = kyc();
        missing.as_object_mut().unwrap().remove("email");
        missing["birth_date"] = json!("10/12/1990");
        let e = t.expect_error("cardholders/create", json!({"external_user_id": "x", "subprovider_code": "sandbox", "kyc_data": missing}), 400, "validation_error").await;
        let msg = e["error"].as_str().unwrap();
        assert!(msg.contains("email") && msg.contains("birth_date"), "{msg}");
        // The restricted subprovider needs a product code of its own.
        let restricted = |product: Option<&str>| CardholdersCreate {
            product_code: product.map(str::to_owned),
            ..holder("r", "sandbox_restricted")
        };
        api_error(
            sdk.cardholders_create(&restricted(None)).await,
            400,
            "validation_error",
        );
        api_error(
            sdk.cardholders_create(&restricted(Some("virtual_usd")))
                .await,
            400,
            "validation_error",
        );
        api_error(
            sdk.cardholders_create(&restricted(Some("nope"))).await,
            404,
            "product_not_found",
        );
        let v = t.holder("r", "sandbox_restricted").await;
        assert_eq!(v.product_code.as_deref(), Some("virtual_usd_restricted"));
        // The same user may hold one cardholder per subprovider.
        t.holder("ada", "sandbox_restricted").await;

        // cardholders/get by id and by user + subprovider.
        let id = v.cardholder_id.as_str();
        // Raw: checks that the fields are present (activated_at even when null).
        let g = t.ok("cardholders/get", json!({"cardholder_id": id})).await;
        assert_eq!(g["external_user_id"], "r");
        for f in ["kyc_level", "activated_at", "project_id", "user_id"] {
            assert!(g.get(f).is_some(), "{f}");
        }
        // Raw: the legacy `subprovider_id` field name.
        let g = t
            .ok(
                "cardholders/get",
                json!({"external_user_id": "ada", "subprovider_id": "sandbox"}),
            )
            .await;
        assert_eq!(g["subprovider_code"], "sandbox");
        api_error(
            sdk.cardholders_get(&CardholdersGet {
                external_user_id: Some("ada".into()),
                ..CardholdersGet::default()
            })
            .await,
            400,
            "validation_error",
        );
        api_error(
            sdk.cardholders_get(&CardholdersGet::by_id("000000000000000000000000"))
                .await,
            404,
            "cardholder_not_found",
        );
        api_error(
            sdk.cardholders_get(&CardholdersGet::by_user("nobody", "sandbox"))
                .await,
            404,
            "cardholder_not_found",
        );

        // cardholders/find: filters in both forms and sort keys. Raw where the singular
        // or legacy filter names are the point.
        let find = |request: CardholdersFind| {
            let sdk = &sdk;
            async move { sdk.cardholders_find(&request).await.unwrap() }
        };
        let v = find(CardholdersFind::default()).await;
        assert_eq!(v.total, 5);
        let v = t
            .ok("cardholders/find", json!({"kyc_status": "approved"}))
            .await;
        assert_eq!(v["total"], 3);
        let v = find(CardholdersFind {
            kyc_statuses: vec!["rejected".into(), "not_started".into()],
            ..CardholdersFind::default()
        })
        .await;
        assert_eq!(v.total, 2);
        let v = find(CardholdersFind {
            registration_statuses: vec!["failed".into()],
            ..CardholdersFind::default()
        })
        .await;
        assert_eq!(v.items[0].external_user_id, "rex");
        let v = t
            .ok(
                "cardholders/find",
                json!({"subprovider_code": "sandbox_restricted"}),
            )
            .await;
        assert_eq!(v["total"], 2);
        let v = find(CardholdersFind {
            product_codes: vec!["virtual_usd_restricted".into()],
            ..CardholdersFind::default()
        })
        .await;
        assert_eq!(v.total, 2);
        let v = t.ok("cardholders/find", json!({"product_id": "virtual_usd_restricted", "subprovider_ids": ["sandbox_restricted"]})).await;
        assert_eq!(v["total"], 2, "legacy filter names");
        let v = find(CardholdersFind {
            external_user_ids: vec!["ada".into(), "rex".into()],
            ..CardholdersFind::default()
        })
        .await;
        assert_eq!(v.total, 3);
        let v = t.ok("cardholders/find", json!({"cardholder_id": id})).await;
        assert_eq!(v["total"], 1);
        let v = t
            .ok("cardholders/find", json!({"user_id": g["user_id"]}))
            .await;
        assert_eq!(v["total"], 2);
        for key in [
            "cardholder_id",
            "user_id",
            "subprovider_code",
            "product_code",
            "registration_status",
            "kyc_status",
            "created_at",
            "updated_at",
            "registered_at",
            "activated_at",
        ] {
            let v = find(CardholdersFind {
                page: sorted(key, "asc"),
                ..CardholdersFind::default()
            })
            .await;
            assert_eq!(v.total, 5, "{key}");
        }
        let v = find(CardholdersFind {
            page: sorted("activated_at", "asc"),
            ..CardholdersFind::default()
        })
        .await;
        let last = &v.items[4];
        assert!(
            last.activated_at.is_none(),
            "missing values sort last: {v:?}"
        );
    }
);

both_backends!(issue_flow_end_to_end, |t: TestServer| async move {
    t.deposit(&t.creds.project_id, 100_000_000).await;
    t.holder("ada", "sandbox").await;
    let sdk = t.sdk();
    let issue = CardsCreate {
        external_user_id: "ada".into(),
        product_code: "virtual_usd".into(),
        ..CardsCreate::default()
    };
    let v = sdk.cards_create(&issue, "k1").await.unwrap();
    let card_id = v.card_id.clone();
    assert_eq!(v.status, "pending");
    let order = &v.order;
    assert_eq!(order.order_type, "card_issue");
    assert_eq!(order.card_id.as_deref(), Some(card_id.as_str()));
    let amount = |d: &Option<issuing_client::Decimal>| d.as_ref().map(|d| d.as_str().to_owned());
    assert_eq!(amount(&order.balance_before).as_deref(), Some("100.00"));
    assert_eq!(amount(&order.balance_after).as_deref(), Some("98.00"));
    let order_id = order.order_id.clone();
    // Visible at once, not after 30 seconds.
    let seen = sdk.orders_check(&order_id).await.unwrap();
    assert_eq!(seen.order_id, order_id);

    // Raw: checks that failed_at is left out, not written as null.
    let done = t.wait_order(&order_id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["issue_status"], "completed");
    assert_eq!(done["is_issued"], true);
    assert_eq!(done["provider_card_status"], "ACTIVE");
    assert!(done["completed_at"].is_string());
    assert!(done.get("failed_at").is_none());

    let by_ada = CardRef::new(&card_id, "ada");
    let card = sdk.cards_get(&by_ada).await.unwrap();
    assert_eq!(card.status, "active");
    assert_eq!(card.product_code, "virtual_usd");
    assert_eq!(card.external_user_id, "ada");
    assert_eq!(card.project_id, t.creds.project_id);
    assert_eq!(card.balance.available.as_str(), "0.00");
    assert!(card.issued_at.is_some() && card.activated_at.is_some() && card.frozen_at.is_none());
    let details = sdk.cards_details(&by_ada).await.unwrap();
    let pan = details.details.card_number.as_str();
    assert!(issuing_app::provider::sandbox::luhn_valid(pan), "{pan}");
    assert_eq!(card.label.as_deref().unwrap(), &pan[pan.len() - 4..]);
    assert_eq!(details.details.cvv.len(), 3);
    assert!(details.details.expiry_year >= 2026);
    // serde would read a short array into the address struct too: check the raw shape.
    let raw = t
        .ok(
            "cards/details",
            json!({"card_id": card_id, "external_user_id": "ada"}),
        )
        .await;
    assert!(raw["details"]["billing_address"].is_object());
    assert_eq!(details.holder.as_ref().unwrap().last_name, "Lovelace");
    assert_eq!(details.status, "active");
    let b = sdk.cards_balance(&by_ada).await.unwrap();
    assert_eq!(
        (
            b.available.as_str(),
            b.pending.as_str(),
            b.currency.as_str()
        ),
        ("0.00", "0.00", "usd")
    );

    // The fee is in the master history with its order and card.
    let txs = sdk
        .project_txs(&ProjectTxs {
            types: vec!["card_issue".into()],
            ..ProjectTxs::default()
        })
        .await
        .unwrap();
    assert_eq!(txs.total, 1);
    let fee = &txs.items[0];
    assert_eq!(
        (fee.amount.as_str(), fee.balance_after.as_str()),
        ("-2.00", "98.00")
    );
    assert_eq!(
        (fee.order_id.as_deref(), fee.card_id.as_deref()),
        (Some(order_id.as_str()), Some(card_id.as_str()))
    );
    assert_eq!(t.balance().await, "98.00");

    // The card.created event was written with the order.
    let events = t.events(&t.creds.project_id).await;
    let created: Vec<_> = events
        .iter()
        .filter(|e| e.event_type == "card.created")
        .collect();
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].payload["card_id"], json!(card_id));
    assert_eq!(created[0].payload["order_id"], json!(order_id));
    assert_eq!(created[0].payload["product_code"], "virtual_usd");
    assert_eq!(created[0].payload["status"], "new");

    // The PAN and CVV are not stored in plaintext.
    let row: (Option<String>,) = sqlx::query_as("SELECT secrets_enc FROM cards WHERE id = $1")
        .bind(&card_id)
        .fetch_one(t.store.pool())
        .await
        .unwrap();
    let sealed = row.0.unwrap();
    assert!(!sealed.contains(pan), "PAN stored in plaintext");

    // The same key returns the same order and charges nothing more.
    let again = sdk.cards_create(&issue, "k1").await.unwrap();
    assert_eq!(again.order.order_id, order_id);
    assert_eq!(t.balance().await, "98.00");
    t.verify_ledger().await;
});

both_backends!(issue_errors_in_spec_order, |t: TestServer| async move {
    t.deposit(&t.creds.project_id, 3_000_000).await;
    let sdk = t.sdk();
    // Raw: requests without the idempotency key or the external_user_id.
    let create = |body: Value| async { t.call("cards/create", body).await };
    let slug = |r: (u16, Value)| {
        (
            r.0,
            r.1["error_slug"].as_str().unwrap_or_default().to_owned(),
        )
    };
    assert_eq!(
        slug(create(json!({"external_user_id": "ada", "product_code": "virtual_usd"})).await),
        (400, "idempotency_key_required".into())
    );
    assert_eq!(
        slug(create(json!({"product_code": "virtual_usd", "idempotency_key": "e1"})).await),
        (400, "external_user_id_required".into())
    );
    api_error(t.issue("ada", "nope", "e2").await, 404, "product_not_found");
    api_error(
        t.issue("ghost", "virtual_usd", "e3").await,
        404,
        "cardholder_not_found",
    );
    // A user without a cardholder under the product's subprovider.
    t.holder("ada", "sandbox_restricted").await;
    api_error(
        t.issue("ada", "virtual_usd", "e4").await,
        404,
        "cardholder_not_found",
    );
    // A cardholder whose KYC was never submitted.
    sdk.cardholders_create(&holder_without_kyc("bob"))
        .await
        .unwrap();
    api_error(
        t.issue("bob", "virtual_usd", "e5").await,
        400,
        "kyc_required",
    );
    t.holder("cy", "sandbox").await;
    api_error(
        t.issue("cy", "virtual_usd_retired", "e6").await,
        422,
        "product_not_active",
    );
    sdk.cardholders_create(&CardholdersCreate {
        kyc_data: Some(kyc_named("Reject")),
        ..holder_without_kyc("rex")
    })
    .await
    .unwrap();
    api_error(
        t.issue("rex", "virtual_usd", "e7").await,
        422,
        "cardholder_not_ready",
    );
    // kyc_data on cards/create is submitted first: bob becomes ready and gets a card.
    sdk.cards_create(
        &CardsCreate {
            external_user_id: "bob".into(),
            product_code: "virtual_usd".into(),
            kyc_data: Some(kyc_named("Lovelace")),
            ..CardsCreate::default()
        },
        "e8",
    )
    .await
    .unwrap();
    assert_eq!(t.balance().await, "1.00");
    // 1.00 left: below the 2.00 fee, and nothing is charged.
    api_error(
        t.issue("cy", "virtual_usd", "e9").await,
        403,
        "insufficient_funds",
    );
    assert_eq!(t.balance().await, "1.00");
    // A failed request releases its key: the same key works once funds arrive.
    t.deposit(&t.creds.project_id, 5_000_000).await;
    t.issue("cy", "virtual_usd", "e9").await.unwrap();
    // Same key, different parameters.
    api_error(
        t.issue("ada", "virtual_usd", "e9").await,
        400,
        "idempotency_conflict",
    );
    t.verify_ledger().await;
});

const BAD_CATALOG: &str = r#"
[[subproviders]]
code = "sandbox"

[[products]]
code = "good"
subprovider = "sandbox"
issue_fee = "1.00"
topup_fee_percent = "1"
topup_fee_fixed = "0.10"
topup_min = "1.00"
topup_max = "100.00"

[[products]]
code = "bad_pricing"
subprovider = "sandbox"
issue_fee = "-1.00"
topup_fee_percent = "1"
topup_fee_fixed = "0.10"
topup_min = "1.00"
topup_max = "100.00"

[[products]]
code = "bad_limits"
subprovider = "sandbox"
issue_fee = "1.00"
topup_fee_percent = "1"
topup_fee_fixed = "0.10"
topup_min = "100.00"
topup_max = "1.00"
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_products_answer_pricing_and_limit_errors() {
    for backend in [common::Backend::Sqlite, common::Backend::Postgres] {
        let cfg: issuing_domain::catalog::CatalogConfig = toml_from(BAD_CATALOG);
        let catalog = issuing_domain::catalog::Catalog::from_config(&cfg).unwrap();
        let config = ServerConfig {
            catalog: std::sync::Arc::new(catalog),
            ..Default::default()
        };
        let Some(t) = TestServer::start_with(backend, config).await else {
            continue;
        };
        t.deposit(&t.creds.project_id, 10_000_000).await;
        t.holder("ada", "sandbox").await;
        api_error(
            t.issue("ada", "bad_pricing", "p1").await,
            422,
            "invalid_pricing",
        );
        api_error(
            t.issue("ada", "bad_limits", "p2").await,
            422,
            "card_product_limits_invalid",
        );
        t.issue("ada", "good", "p3").await.unwrap();
        assert_eq!(t.balance().await, "9.00");
    }
}

fn sorted(sort_by: &str, sort_dir: &str) -> ListQuery {
    ListQuery {
        sort_by: Some(sort_by.into()),
        sort_dir: Some(sort_dir.into()),
        ..ListQuery::default()
    }
}

fn toml_from<T: serde::de::DeserializeOwned>(s: &str) -> T {
    toml::from_str(s).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failures_refund_or_retry() {
    use issuing_app::provider::sandbox::SandboxConfig;
    for backend in [common::Backend::Sqlite, common::Backend::Postgres] {
        let config = ServerConfig {
            sandbox: SandboxConfig {
                reject_card_create: true,
                ..Default::default()
            },
            ..Default::default()
        };
        let Some(t) = TestServer::start_with(backend, config).await else {
            continue;
        };
        t.deposit(&t.creds.project_id, 10_000_000).await;
        let sdk = t.sdk();
        t.holder("ada", "sandbox").await;
        let v = t.issue("ada", "virtual_usd", "f1").await.unwrap();
        let order = sdk.wait_order(&v.order.order_id, WAIT).await.unwrap();
        assert_eq!(order.status, "failed", "{order:?}");
        assert_eq!(order.issue_status.as_deref(), Some("card_create_error"));
        assert_eq!(order.last_error_slug.as_deref(), Some("provider_error"));
        assert!(order.last_error.as_ref().is_some_and(|m| !m.is_empty()));
        assert!(order.failed_at.is_some());
        assert_eq!(
            order.balance_after.as_ref().map(|d| d.as_str()),
            Some("10.00")
        );
        assert_eq!(t.balance().await, "10.00");
        let refunds = sdk
            .project_txs(&ProjectTxs {
                types: vec!["refund".into()],
                ..ProjectTxs::default()
            })
            .await
            .unwrap();
        assert_eq!(refunds.items[0].amount.as_str(), "2.00");
        assert_eq!(
            refunds.items[0].order_id.as_deref(),
            Some(v.order.order_id.as_str())
        );
        let card = sdk
            .cards_get(&CardRef::new(&v.card_id, "ada"))
            .await
            .unwrap();
        assert_eq!(card.status, "failed");
        t.verify_ledger().await;

        // Transient failures are retried until the provider answers.
        let config = ServerConfig {
            sandbox: SandboxConfig {
                transient_failures: 2,
                ..Default::default()
            },
            ..Default::default()
        };
        let t = TestServer::start_with(backend, config).await.unwrap();
        t.deposit(&t.creds.project_id, 10_000_000).await;
        t.holder("ada", "sandbox").await;
        let v = t.issue("ada", "virtual_usd", "r1").await.unwrap();
        let order = t.sdk().wait_order(&v.order.order_id, WAIT).await.unwrap();
        assert_eq!(order.status, "completed", "{order:?}");
        assert_eq!(t.balance().await, "8.00");
    }
}

both_backends!(parallel_issues_never_overdraw, |t: TestServer| async move {
    t.deposit(&t.creds.project_id, 4_000_000).await;
    for i in 0..10 {
        t.holder(&format!("u{i}"), "sandbox").await;
    }
    let calls = (0..10).map(|i| {
        let t = &t;
        async move {
            t.issue(&format!("u{i}"), "virtual_usd", &format!("p{i}"))
                .await
        }
    });
    let results = futures::future::join_all(calls).await;
    let ok = results.iter().filter(|r| r.is_ok()).count();
    let refused = results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .filter(|e| e.status() == Some(403) && e.slug() == Some("insufficient_funds"))
        .count();
    assert_eq!((ok, refused), (2, 8), "{results:?}");
    assert_eq!(t.balance().await, "0.00");
    t.verify_ledger().await;
});

both_backends!(
    freeze_and_unfreeze_follow_the_transition_table,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 10_000_000).await;
        let card_id = t.active_card("ada", "virtual_usd").await;
        let r = |extra: Value| {
            let mut b = json!({"card_id": card_id});
            b.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            b
        };
        // Raw: the whole answer, compared exactly.
        let v = t.ok("cards/freeze", r(json!({}))).await;
        assert_eq!(
            v,
            json!({"success": true, "card_id": card_id, "status": "frozen"})
        );
        let sdk = t.sdk();
        api_error(
            sdk.cards_freeze(&CardsFreeze::new(&card_id)).await,
            422,
            "invalid_status_transition",
        );
        let card = sdk.cards_get(&CardRef::new(&card_id, "ada")).await.unwrap();
        assert_eq!(card.status, "frozen");
        assert!(card.frozen_at.is_some());
        let v = sdk
            .cards_unfreeze(&CardsFreeze {
                external_user_id: Some("ada".into()),
                ..CardsFreeze::new(&card_id)
            })
            .await
            .unwrap();
        assert_eq!(v.status, "active");
        api_error(
            sdk.cards_unfreeze(&CardsFreeze::new(&card_id)).await,
            422,
            "invalid_status_transition",
        );

        // Each change wrote a status-change order and its event.
        let events = t.events(&t.creds.project_id).await;
        let kinds: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
        assert_eq!(kinds, ["card.created", "card.freeze", "card.unfreeze"]);
        assert_eq!(events[1].payload["status"], "frozen");
        assert_eq!(events[2].payload["status"], "active");
        let order = sdk
            .orders_check(events[1].payload["order_id"].as_str().unwrap())
            .await
            .unwrap();
        assert_eq!(order.order_type, "card_status_change");
        assert_eq!(order.status, "completed");
        assert_eq!(order.data, json!({"from": "active", "to": "frozen"}));

        // A card still being issued cannot be frozen.
        t.holder("bo", "sandbox").await;
        let pending = t.issue("bo", "virtual_usd", "b1").await.unwrap();
        let res = sdk.cards_freeze(&CardsFreeze::new(&pending.card_id)).await;
        // It may already have been issued by the worker; either way the rule holds.
        if let Err(e) = &res {
            assert_eq!(
                (e.status(), e.slug()),
                (Some(422), Some("invalid_status_transition")),
                "{e}"
            );
        }
        api_error(
            sdk.cards_freeze(&CardsFreeze::new("000000000000000000000000"))
                .await,
            404,
            "card_not_found",
        );
    }
);

both_backends!(
    card_user_rules_and_restricted_details,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 10_000_000).await;
        let card_id = t.active_card("ada", "virtual_usd").await;
        let sdk = t.sdk();
        sdk.users_create(&UsersCreate {
            external_user_id: "eve".into(),
        })
        .await
        .unwrap();
        // Raw: requests without external_user_id.
        for path in ["cards/get", "cards/balance", "cards/details"] {
            t.expect_error(
                path,
                json!({"card_id": card_id}),
                400,
                "external_user_id_required",
            )
            .await;
        }
        for (card, user, status, slug) in [
            (card_id.as_str(), "eve", 422, "card_user_mismatch"),
            (card_id.as_str(), "nobody", 404, "card_not_found"),
            ("000000000000000000000000", "ada", 404, "card_not_found"),
        ] {
            let r = CardRef::new(card, user);
            api_error(sdk.cards_get(&r).await, status, slug);
            api_error(sdk.cards_balance(&r).await, status, slug);
            api_error(sdk.cards_details(&r).await, status, slug);
        }
        api_error(
            sdk.cards_freeze(&CardsFreeze {
                external_user_id: Some("eve".into()),
                ..CardsFreeze::new(&card_id)
            })
            .await,
            422,
            "card_user_mismatch",
        );

        let restricted = t.active_card("rita", "virtual_usd_restricted").await;
        let by_rita = CardRef::new(&restricted, "rita");
        api_error(
            sdk.cards_details(&by_rita).await,
            422,
            "card_details_plaintext_unavailable",
        );
        let v = sdk.cards_get(&by_rita).await.unwrap();
        assert_eq!(v.status, "active");
    }
);

both_backends!(cards_find_filters_and_sorting, |t: TestServer| async move {
    t.deposit(&t.creds.project_id, 20_000_000).await;
    let a = t.active_card("ada", "virtual_usd").await;
    let b = t.active_card("bob", "virtual_usd").await;
    let r = t.active_card("rita", "virtual_usd_restricted").await;
    let sdk = t.sdk();
    sdk.cards_freeze(&CardsFreeze::new(&b)).await.unwrap();
    let find = |request: CardsFind| {
        let sdk = &sdk;
        async move { sdk.cards_find(&request).await.unwrap() }
    };
    let sorted = |sort_by: Option<&str>, sort_dir: Option<&str>| ListQuery {
        sort_by: sort_by.map(str::to_owned),
        sort_dir: sort_dir.map(str::to_owned),
        ..ListQuery::default()
    };
    let card_ids = |page: &issuing_client::Page<issuing_client::Card>| -> Vec<String> {
        page.items.iter().map(|c| c.card_id.clone()).collect()
    };
    let ids = |v: &Value| -> Vec<String> {
        v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["card_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let page = find(CardsFind {
        page: sorted(Some("created_at"), Some("asc")),
        ..CardsFind::default()
    })
    .await;
    assert_eq!(card_ids(&page), [a.clone(), b.clone(), r.clone()]);
    assert_eq!(page.total, 3);
    // The singular filter names (beside the SDK's plural lists) and the legacy ones.
    let v = t.ok("cards/find", json!({"status": "frozen"})).await;
    assert_eq!(ids(&v), std::slice::from_ref(&b));
    let page = find(CardsFind {
        statuses: vec!["active".into()],
        page: sorted(None, Some("asc")),
        ..CardsFind::default()
    })
    .await;
    assert_eq!(card_ids(&page), [a.clone(), r.clone()]);
    let v = t
        .ok(
            "cards/find",
            json!({"product_code": "virtual_usd_restricted"}),
        )
        .await;
    assert_eq!(ids(&v), std::slice::from_ref(&r));
    let v = t
        .ok(
            "cards/find",
            json!({"product_ids": ["virtual_usd_restricted"]}),
        )
        .await;
    assert_eq!(
        ids(&v),
        std::slice::from_ref(&r),
        "legacy product_id filter"
    );
    let page = find(CardsFind {
        external_user_ids: vec!["ada".into(), "rita".into()],
        page: sorted(None, Some("asc")),
        ..CardsFind::default()
    })
    .await;
    assert_eq!(card_ids(&page), [a.clone(), r.clone()]);
    let page = find(CardsFind {
        card_ids: vec![a, b.clone()],
        ..CardsFind::default()
    })
    .await;
    assert_eq!(page.total, 2);
    let v = t
        .ok("cards/find", json!({"user_id": page.items[0].user_id}))
        .await;
    assert_eq!(v["total"], 1);
    for key in [
        "card_id",
        "user_id",
        "status",
        "product_code",
        "created_at",
        "updated_at",
        "issued_at",
        "activated_at",
        "frozen_at",
        "closed_at",
    ] {
        let page = find(CardsFind {
            page: sorted(Some(key), None),
            ..CardsFind::default()
        })
        .await;
        assert_eq!(page.total, 3, "{key}");
    }
    let page = find(CardsFind {
        page: sorted(Some("frozen_at"), Some("desc")),
        ..CardsFind::default()
    })
    .await;
    assert_eq!(
        page.items[0].card_id, b,
        "frozen card first, unfrozen (null) last"
    );
    api_error(
        sdk.cards_find(&CardsFind {
            page: sorted(Some("pan"), None),
            ..CardsFind::default()
        })
        .await,
        400,
        "validation_error",
    );
});

both_backends!(
    cards_are_isolated_between_projects,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 10_000_000).await;
        let card_id = t.active_card("ada", "virtual_usd").await;
        let other_creds = t.new_project("other").await;
        let other = t.sdk_as(&other_creds);
        // The other project has its own user with the same external id.
        other
            .users_create(&UsersCreate {
                external_user_id: "ada".into(),
            })
            .await
            .unwrap();
        let by_ada = CardRef::new(&card_id, "ada");
        api_error(other.cards_get(&by_ada).await, 404, "card_not_found");
        api_error(other.cards_balance(&by_ada).await, 404, "card_not_found");
        api_error(other.cards_details(&by_ada).await, 404, "card_not_found");
        let r = CardsFreeze::new(&card_id);
        api_error(other.cards_freeze(&r).await, 404, "card_not_found");
        api_error(other.cards_unfreeze(&r).await, 404, "card_not_found");
        // Raw: the singular `card_id` filter name.
        let (_, v) = t
            .call_as(&other_creds, "cards/find", json!({"card_id": card_id}))
            .await;
        assert_eq!(v["total"], 0);
        let v = other
            .cardholders_find(&CardholdersFind::default())
            .await
            .unwrap();
        assert_eq!(v.total, 0);
        let order_id = t.events(&t.creds.project_id).await[0]
            .order_id
            .clone()
            .unwrap();
        api_error(other.orders_check(&order_id).await, 404, "order_not_found");
        // The card is untouched.
        let v = t.sdk().cards_get(&by_ada).await.unwrap();
        assert_eq!(v.status, "active");
    }
);

both_backends!(
    workers_of_two_processes_share_orders_without_overlap,
    |t: TestServer| async move {
        // A second server on the same database runs its own workers.
        let sibling = t.sibling().await;
        t.deposit(&t.creds.project_id, 100_000_000).await;
        let n = 16;
        for i in 0..n {
            t.holder(&format!("w{i}"), "sandbox").await;
        }
        let calls = (0..n).map(|i| {
            let t = &t;
            async move {
                t.issue(&format!("w{i}"), "virtual_usd", &format!("w{i}"))
                    .await
            }
        });
        let created = futures::future::join_all(calls).await;
        let mut order_ids = Vec::new();
        for v in created {
            order_ids.push(v.unwrap().order.order_id);
        }
        let sdk = t.sdk();
        for id in &order_ids {
            let o = sdk.wait_order(id, WAIT).await.unwrap();
            assert_eq!(o.status, "completed", "{o:?}");
        }
        let mut conn = t.store.conn().await.unwrap();
        for id in &order_ids {
            let n = issuing_store::sandbox::count_ops(&mut conn, id, "create_card")
                .await
                .unwrap();
            assert_eq!(n, 1, "order {id} reached the provider {n} times");
        }
        drop(conn);
        assert_eq!(t.balance().await, format!("{}.00", 100 - 2 * n));
        t.verify_ledger().await;
        sibling.shutdown().await;
    }
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn production_mode_never_issues_sandbox_cards() {
    let config = ServerConfig {
        mode: issuing_server::Mode::Production,
        ..Default::default()
    };
    let t = TestServer::start_with(common::Backend::Sqlite, config)
        .await
        .unwrap();
    t.deposit(&t.creds.project_id, 10_000_000).await;
    // Production KYC is reviewed asynchronously; mark this cardholder approved directly.
    let v = t.holder("ada", "sandbox").await;
    assert_eq!(v.kyc_status, "pending");
    sqlx::query("UPDATE cardholders SET registration_status = 'active', kyc_status = 'approved' WHERE id = $1")
        .bind(&v.cardholder_id)
        .execute(t.store.pool())
        .await
        .unwrap();
    let v = t.issue("ada", "virtual_usd", "prod-1").await.unwrap();
    let order = t.sdk().wait_order(&v.order.order_id, WAIT).await.unwrap();
    assert_eq!(
        (order.status.as_str(), order.last_error_slug.as_deref()),
        ("failed", Some("provider_error"))
    );
    assert_eq!(t.balance().await, "10.00", "the fee was refunded");
}

both_backends!(
    kyc_given_on_cards_create_stands_when_the_card_is_refused,
    |t: TestServer| async move {
        let sdk = t.sdk();
        sdk.cardholders_create(&holder_without_kyc("ada"))
            .await
            .unwrap();
        // No funds: the card is refused, but the KYC submission happened first.
        api_error(
            sdk.cards_create(
                &CardsCreate {
                    external_user_id: "ada".into(),
                    product_code: "virtual_usd".into(),
                    kyc_data: Some(kyc_named("Lovelace")),
                    ..CardsCreate::default()
                },
                "k",
            )
            .await,
            403,
            "insufficient_funds",
        );
        let h = sdk
            .cardholders_get(&CardholdersGet::by_user("ada", "sandbox"))
            .await
            .unwrap();
        assert_eq!(h.kyc_status, "approved");
    }
);
