//! Card issuing over HTTP: products, cardholders and KYC, issue orders through the
//! worker, card reads, freeze and unfreeze, and isolation between projects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::cards::kyc;
use common::TestServer;
use issuing_client::{CardRef, CardsCreate, CardsFind, CardsFreeze, ListQuery};
use issuing_server::ServerConfig;
use serde_json::{json, Value};

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
        let v = t.cardholder("ada", "sandbox").await;
        assert_eq!(
            (
                v["registration_status"].as_str(),
                v["kyc_status"].as_str(),
                v["kyc_level"].as_str()
            ),
            (Some("active"), Some("approved"), Some("full"))
        );
        assert_eq!(v["subprovider_code"], "sandbox");
        assert_eq!(v["subprovider_id"], "sandbox");
        assert!(v["registered_at"].is_string() && v["activated_at"].is_string());
        assert_eq!(v["project_id"], json!(t.creds.project_id));
        // The user was created with the cardholder.
        let u = t.ok("users/get", json!({"external_user_id": "ada"})).await;
        assert_eq!(u["user_id"], v["user_id"]);

        let mut rejected = kyc();
        rejected["last_name"] = json!("Reject");
        let v = t.ok("cardholders/create", json!({"external_user_id": "rex", "subprovider_id": "sandbox", "kyc_data": rejected})).await;
        assert_eq!(
            (v["registration_status"].as_str(), v["kyc_status"].as_str()),
            (Some("failed"), Some("rejected"))
        );

        let v = t
            .ok(
                "cardholders/create",
                json!({"external_user_id": "nokyc", "subprovider_code": "sandbox"}),
            )
            .await;
        assert_eq!(
            (
                v["registration_status"].as_str(),
                v["kyc_status"].as_str(),
                v["kyc_level"].as_str()
            ),
            (Some("pending"), Some("not_started"), Some("none"))
        );

        t.expect_error(
            "cardholders/create",
            json!({"external_user_id": "ada", "subprovider_code": "sandbox", "kyc_data": kyc()}),
            409,
            "cardholder_already_exists",
        )
        .await;
        t.expect_error(
            "cardholders/create",
            json!({"external_user_id": "x", "subprovider_code": "nope"}),
            404,
            "subprovider_not_found",
        )
        .await;
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
        t.expect_error("cardholders/create", json!({"external_user_id": "r", "subprovider_code": "sandbox_restricted", "kyc_data": kyc()}), 400, "validation_error").await;
        t.expect_error("cardholders/create", json!({"external_user_id": "r", "subprovider_code": "sandbox_restricted", "product_code": "virtual_usd", "kyc_data": kyc()}), 400, "validation_error").await;
        t.expect_error("cardholders/create", json!({"external_user_id": "r", "subprovider_code": "sandbox_restricted", "product_code": "nope", "kyc_data": kyc()}), 404, "product_not_found").await;
        let v = t.cardholder("r", "sandbox_restricted").await;
        assert_eq!(v["product_code"], "virtual_usd_restricted");
        // The same user may hold one cardholder per subprovider.
        t.cardholder("ada", "sandbox_restricted").await;

        // cardholders/get by id and by user + subprovider.
        let id = v["cardholder_id"].as_str().unwrap();
        let g = t.ok("cardholders/get", json!({"cardholder_id": id})).await;
        assert_eq!(g["external_user_id"], "r");
        for f in ["kyc_level", "activated_at", "project_id", "user_id"] {
            assert!(g.get(f).is_some(), "{f}");
        }
        let g = t
            .ok(
                "cardholders/get",
                json!({"external_user_id": "ada", "subprovider_id": "sandbox"}),
            )
            .await;
        assert_eq!(g["subprovider_code"], "sandbox");
        t.expect_error(
            "cardholders/get",
            json!({"external_user_id": "ada"}),
            400,
            "validation_error",
        )
        .await;
        t.expect_error(
            "cardholders/get",
            json!({"cardholder_id": "000000000000000000000000"}),
            404,
            "cardholder_not_found",
        )
        .await;
        t.expect_error(
            "cardholders/get",
            json!({"external_user_id": "nobody", "subprovider_code": "sandbox"}),
            404,
            "cardholder_not_found",
        )
        .await;

        // cardholders/find: filters in both forms and sort keys.
        let v = t.ok("cardholders/find", json!({})).await;
        assert_eq!(v["total"], 5);
        let v = t
            .ok("cardholders/find", json!({"kyc_status": "approved"}))
            .await;
        assert_eq!(v["total"], 3);
        let v = t
            .ok(
                "cardholders/find",
                json!({"kyc_statuses": ["rejected", "not_started"]}),
            )
            .await;
        assert_eq!(v["total"], 2);
        let v = t
            .ok(
                "cardholders/find",
                json!({"registration_statuses": ["failed"]}),
            )
            .await;
        assert_eq!(v["items"][0]["external_user_id"], "rex");
        let v = t
            .ok(
                "cardholders/find",
                json!({"subprovider_code": "sandbox_restricted"}),
            )
            .await;
        assert_eq!(v["total"], 2);
        let v = t
            .ok(
                "cardholders/find",
                json!({"product_codes": ["virtual_usd_restricted"]}),
            )
            .await;
        assert_eq!(v["total"], 2);
        let v = t.ok("cardholders/find", json!({"product_id": "virtual_usd_restricted", "subprovider_ids": ["sandbox_restricted"]})).await;
        assert_eq!(v["total"], 2, "legacy filter names");
        let v = t
            .ok(
                "cardholders/find",
                json!({"external_user_ids": ["ada", "rex"]}),
            )
            .await;
        assert_eq!(v["total"], 3);
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
            let v = t
                .ok(
                    "cardholders/find",
                    json!({"sort_by": key, "sort_dir": "asc"}),
                )
                .await;
            assert_eq!(v["total"], 5, "{key}");
        }
        let v = t
            .ok(
                "cardholders/find",
                json!({"sort_by": "activated_at", "sort_dir": "asc"}),
            )
            .await;
        let last = &v["items"][4];
        assert!(
            last["activated_at"].is_null(),
            "missing values sort last: {v}"
        );
    }
);

both_backends!(issue_flow_end_to_end, |t: TestServer| async move {
    t.deposit(&t.creds.project_id, 100_000_000).await;
    t.cardholder("ada", "sandbox").await;
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
    assert!(issuing_server::provider::sandbox::luhn_valid(pan), "{pan}");
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
    let txs = t.ok("project/txs", json!({"type": "card_issue"})).await;
    assert_eq!(txs["total"], 1);
    let fee = &txs["items"][0];
    assert_eq!(
        (fee["amount"].as_str(), fee["balance_after"].as_str()),
        (Some("-2.00"), Some("98.00"))
    );
    assert_eq!(
        (&fee["order_id"], &fee["card_id"]),
        (&json!(order_id), &json!(card_id))
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
    assert_eq!(
        slug(
            create(
                json!({"external_user_id": "ada", "product_code": "nope", "idempotency_key": "e2"})
            )
            .await
        ),
        (404, "product_not_found".into())
    );
    assert_eq!(slug(create(json!({"external_user_id": "ghost", "product_code": "virtual_usd", "idempotency_key": "e3"})).await), (404, "cardholder_not_found".into()));
    // A user without a cardholder under the product's subprovider.
    t.cardholder("ada", "sandbox_restricted").await;
    assert_eq!(slug(create(json!({"external_user_id": "ada", "product_code": "virtual_usd", "idempotency_key": "e4"})).await), (404, "cardholder_not_found".into()));
    // A cardholder whose KYC was never submitted.
    t.ok(
        "cardholders/create",
        json!({"external_user_id": "bob", "subprovider_code": "sandbox"}),
    )
    .await;
    assert_eq!(slug(create(json!({"external_user_id": "bob", "product_code": "virtual_usd", "idempotency_key": "e5"})).await), (400, "kyc_required".into()));
    t.cardholder("cy", "sandbox").await;
    assert_eq!(slug(create(json!({"external_user_id": "cy", "product_code": "virtual_usd_retired", "idempotency_key": "e6"})).await), (422, "product_not_active".into()));
    let mut rejected = kyc();
    rejected["last_name"] = json!("Reject");
    t.ok(
        "cardholders/create",
        json!({"external_user_id": "rex", "subprovider_code": "sandbox", "kyc_data": rejected}),
    )
    .await;
    assert_eq!(slug(create(json!({"external_user_id": "rex", "product_code": "virtual_usd", "idempotency_key": "e7"})).await), (422, "cardholder_not_ready".into()));
    // kyc_data on cards/create is submitted first: bob becomes ready and gets a card.
    let (s, v) = create(json!({"external_user_id": "bob", "product_code": "virtual_usd", "idempotency_key": "e8", "kyc_data": kyc()})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(t.balance().await, "1.00");
    // 1.00 left: below the 2.00 fee, and nothing is charged.
    assert_eq!(slug(create(json!({"external_user_id": "cy", "product_code": "virtual_usd", "idempotency_key": "e9"})).await), (403, "insufficient_funds".into()));
    assert_eq!(t.balance().await, "1.00");
    // A failed request releases its key: the same key works once funds arrive.
    t.deposit(&t.creds.project_id, 5_000_000).await;
    let (s, _) = create(
        json!({"external_user_id": "cy", "product_code": "virtual_usd", "idempotency_key": "e9"}),
    )
    .await;
    assert_eq!(s, 200);
    // Same key, different parameters.
    assert_eq!(slug(create(json!({"external_user_id": "ada", "product_code": "virtual_usd", "idempotency_key": "e9"})).await), (400, "idempotency_conflict".into()));
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
        t.cardholder("ada", "sandbox").await;
        let (s, v) = t.create_card("ada", "bad_pricing", "p1").await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (422, Some("invalid_pricing")),
            "{v}"
        );
        let (s, v) = t.create_card("ada", "bad_limits", "p2").await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (422, Some("card_product_limits_invalid")),
            "{v}"
        );
        let (s, v) = t.create_card("ada", "good", "p3").await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(t.balance().await, "9.00");
    }
}

fn toml_from<T: serde::de::DeserializeOwned>(s: &str) -> T {
    toml::from_str(s).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_failures_refund_or_retry() {
    use issuing_server::provider::sandbox::SandboxConfig;
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
        t.cardholder("ada", "sandbox").await;
        let (_, v) = t.create_card("ada", "virtual_usd", "f1").await;
        let order = t.wait_order(v["order"]["order_id"].as_str().unwrap()).await;
        assert_eq!(order["status"], "failed", "{order}");
        assert_eq!(order["issue_status"], "card_create_error");
        assert_eq!(order["last_error_slug"], "provider_error");
        assert!(order["last_error"].as_str().is_some_and(|m| !m.is_empty()));
        assert!(order["failed_at"].is_string());
        assert_eq!(order["balance_after"], "10.00");
        assert_eq!(t.balance().await, "10.00");
        let refunds = t.ok("project/txs", json!({"type": "refund"})).await;
        assert_eq!(refunds["items"][0]["amount"], "2.00");
        assert_eq!(refunds["items"][0]["order_id"], v["order"]["order_id"]);
        let card = t
            .ok(
                "cards/get",
                json!({"card_id": v["card_id"], "external_user_id": "ada"}),
            )
            .await;
        assert_eq!(card["status"], "failed");
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
        t.cardholder("ada", "sandbox").await;
        let (_, v) = t.create_card("ada", "virtual_usd", "r1").await;
        let order = t.wait_order(v["order"]["order_id"].as_str().unwrap()).await;
        assert_eq!(order["status"], "completed", "{order}");
        assert_eq!(t.balance().await, "8.00");
    }
}

both_backends!(parallel_issues_never_overdraw, |t: TestServer| async move {
    t.deposit(&t.creds.project_id, 4_000_000).await;
    for i in 0..10 {
        t.cardholder(&format!("u{i}"), "sandbox").await;
    }
    let calls = (0..10).map(|i| {
        let t = &t;
        async move {
            t.create_card(&format!("u{i}"), "virtual_usd", &format!("p{i}"))
                .await
        }
    });
    let results = futures::future::join_all(calls).await;
    let ok = results.iter().filter(|(s, _)| *s == 200).count();
    let refused = results
        .iter()
        .filter(|(s, v)| *s == 403 && v["error_slug"] == "insufficient_funds")
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
        let v = t.ok("cards/freeze", r(json!({}))).await;
        assert_eq!(
            v,
            json!({"success": true, "card_id": card_id, "status": "frozen"})
        );
        t.expect_error(
            "cards/freeze",
            r(json!({})),
            422,
            "invalid_status_transition",
        )
        .await;
        let sdk = t.sdk();
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
        t.expect_error(
            "cards/unfreeze",
            r(json!({})),
            422,
            "invalid_status_transition",
        )
        .await;

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
        t.ok(
            "cardholders/create",
            json!({"external_user_id": "bo", "subprovider_code": "sandbox", "kyc_data": kyc()}),
        )
        .await;
        let (_, pending) = t.create_card("bo", "virtual_usd", "b1").await;
        let (s, v) = t
            .call("cards/freeze", json!({"card_id": pending["card_id"]}))
            .await;
        // It may already have been issued by the worker; either way the rule holds.
        assert!(
            s == 200 || (s == 422 && v["error_slug"] == "invalid_status_transition"),
            "{v}"
        );
        t.expect_error(
            "cards/freeze",
            json!({"card_id": "000000000000000000000000"}),
            404,
            "card_not_found",
        )
        .await;
    }
);

both_backends!(
    card_user_rules_and_restricted_details,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 10_000_000).await;
        let card_id = t.active_card("ada", "virtual_usd").await;
        t.ok("users/create", json!({"external_user_id": "eve"}))
            .await;
        for path in ["cards/get", "cards/balance", "cards/details"] {
            t.expect_error(
                path,
                json!({"card_id": card_id}),
                400,
                "external_user_id_required",
            )
            .await;
            t.expect_error(
                path,
                json!({"card_id": card_id, "external_user_id": "eve"}),
                422,
                "card_user_mismatch",
            )
            .await;
            t.expect_error(
                path,
                json!({"card_id": card_id, "external_user_id": "nobody"}),
                404,
                "card_not_found",
            )
            .await;
            t.expect_error(
                path,
                json!({"card_id": "000000000000000000000000", "external_user_id": "ada"}),
                404,
                "card_not_found",
            )
            .await;
        }
        t.expect_error(
            "cards/freeze",
            json!({"card_id": card_id, "external_user_id": "eve"}),
            422,
            "card_user_mismatch",
        )
        .await;

        let restricted = t.active_card("rita", "virtual_usd_restricted").await;
        t.expect_error(
            "cards/details",
            json!({"card_id": restricted, "external_user_id": "rita"}),
            422,
            "card_details_plaintext_unavailable",
        )
        .await;
        let v = t
            .ok(
                "cards/get",
                json!({"card_id": restricted, "external_user_id": "rita"}),
            )
            .await;
        assert_eq!(v["status"], "active");
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
    t.expect_error(
        "cards/find",
        json!({"sort_by": "pan"}),
        400,
        "validation_error",
    )
    .await;
});

both_backends!(
    cards_are_isolated_between_projects,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 10_000_000).await;
        let card_id = t.active_card("ada", "virtual_usd").await;
        let other = t.new_project("other").await;
        // The other project has its own user with the same external id.
        let (s, _) = t
            .call_as(&other, "users/create", json!({"external_user_id": "ada"}))
            .await;
        assert_eq!(s, 200);
        for path in ["cards/get", "cards/balance", "cards/details"] {
            let (s, v) = t
                .call_as(
                    &other,
                    path,
                    json!({"card_id": card_id, "external_user_id": "ada"}),
                )
                .await;
            assert_eq!(
                (s, v["error_slug"].as_str()),
                (404, Some("card_not_found")),
                "{path}"
            );
        }
        for path in ["cards/freeze", "cards/unfreeze"] {
            let (s, v) = t.call_as(&other, path, json!({"card_id": card_id})).await;
            assert_eq!(
                (s, v["error_slug"].as_str()),
                (404, Some("card_not_found")),
                "{path}"
            );
        }
        let (_, v) = t
            .call_as(&other, "cards/find", json!({"card_id": card_id}))
            .await;
        assert_eq!(v["total"], 0);
        let (_, v) = t.call_as(&other, "cardholders/find", json!({})).await;
        assert_eq!(v["total"], 0);
        let order_id = t.events(&t.creds.project_id).await[0]
            .order_id
            .clone()
            .unwrap();
        let (s, v) = t
            .call_as(&other, "orders/check", json!({"order_id": order_id}))
            .await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (404, Some("order_not_found"))
        );
        // The card is untouched.
        let v = t
            .ok(
                "cards/get",
                json!({"card_id": card_id, "external_user_id": "ada"}),
            )
            .await;
        assert_eq!(v["status"], "active");
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
            t.cardholder(&format!("w{i}"), "sandbox").await;
        }
        let calls = (0..n).map(|i| {
            let t = &t;
            async move {
                t.create_card(&format!("w{i}"), "virtual_usd", &format!("w{i}"))
                    .await
            }
        });
        let created = futures::future::join_all(calls).await;
        let mut order_ids = Vec::new();
        for (s, v) in &created {
            assert_eq!(*s, 200, "{v}");
            order_ids.push(v["order"]["order_id"].as_str().unwrap().to_owned());
        }
        for id in &order_ids {
            let o = t.wait_order(id).await;
            assert_eq!(o["status"], "completed", "{o}");
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
    let v = t
        .ok(
            "cardholders/create",
            json!({"external_user_id": "ada", "subprovider_code": "sandbox", "kyc_data": kyc()}),
        )
        .await;
    assert_eq!(v["kyc_status"], "pending");
    sqlx::query("UPDATE cardholders SET registration_status = 'active', kyc_status = 'approved' WHERE id = $1")
        .bind(v["cardholder_id"].as_str().unwrap())
        .execute(t.store.pool())
        .await
        .unwrap();
    let (s, v) = t.create_card("ada", "virtual_usd", "prod-1").await;
    assert_eq!(s, 200, "{v}");
    let order = t.wait_order(v["order"]["order_id"].as_str().unwrap()).await;
    assert_eq!(
        (order["status"].as_str(), order["last_error_slug"].as_str()),
        (Some("failed"), Some("provider_error"))
    );
    assert_eq!(t.balance().await, "10.00", "the fee was refunded");
}

both_backends!(
    kyc_given_on_cards_create_stands_when_the_card_is_refused,
    |t: TestServer| async move {
        t.ok(
            "cardholders/create",
            json!({"external_user_id": "ada", "subprovider_code": "sandbox"}),
        )
        .await;
        // No funds: the card is refused, but the KYC submission happened first.
        let (s, v) = t.call("cards/create", json!({"external_user_id": "ada", "product_code": "virtual_usd", "idempotency_key": "k", "kyc_data": kyc()})).await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (403, Some("insufficient_funds")),
            "{v}"
        );
        let h = t
            .ok(
                "cardholders/get",
                json!({"external_user_id": "ada", "subprovider_code": "sandbox"}),
            )
            .await;
        assert_eq!(h["kyc_status"], "approved");
    }
);
