//! The foundation over HTTP: system, project and users endpoints, every envelope and
//! authentication error, replay protection across processes, and project isolation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{fresh_timestamp, now_micros, TestServer};
use issuing_client::{ListQuery, ProjectTxs, User, UsersCreate, UsersFind, UsersGet};
use issuing_envelope::Key;
use serde_json::{json, Value};

async fn plain(t: &TestServer, api_key: Option<&str>, body: String) -> (u16, Value) {
    let (s, v) = t
        .post_raw(&t.base, "system/health", api_key, body, &t.creds.api_secret)
        .await;
    (s, v)
}

fn sealed_with(secret: &str, body: &Value) -> String {
    json!({ "encrypted": issuing_envelope::seal(&Key::from_secret(secret), body.to_string().as_bytes()) }).to_string()
}

fn assert_plain_error(status: u16, v: &Value, want_status: u16, slug: &str) {
    assert_eq!(status, want_status, "{v}");
    assert!(v.get("encrypted").is_none(), "must be plain: {v}");
    assert_eq!(v["success"], json!(false), "{v}");
    assert_eq!(v["error_slug"], json!(slug), "{v}");
}

/// Sort and paging of a find request, as the SDK sends them.
fn sorted(sort_by: &str, sort_dir: &str) -> ListQuery {
    ListQuery {
        sort_by: Some(sort_by.into()),
        sort_dir: Some(sort_dir.into()),
        ..ListQuery::default()
    }
}

fn names(users: &[User]) -> Vec<&str> {
    users.iter().map(|u| u.external_user_id.as_str()).collect()
}

both_backends!(system_endpoints, |t: TestServer| async move {
    assert_eq!(t.sdk().system_health().await.unwrap().status, "ok");
    // system/time needs no request_timestamp, and may be called repeatedly.
    for _ in 0..2 {
        let sealed = sealed_with(&t.creds.api_secret, &json!({}));
        let (s, v) = t
            .post_raw(
                &t.base,
                "system/time",
                Some(&t.creds.api_key),
                sealed,
                &t.creds.api_secret,
            )
            .await;
        assert_eq!(s, 200, "{v}");
        let ts = v["timestamp"].as_i64().unwrap();
        assert!((ts - now_micros()).abs() < 5_000_000, "{ts}");
    }
    // The plain liveness probe needs no credentials.
    let r = reqwest::get(format!("{}/health", t.base)).await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
});

both_backends!(authentication_errors, |t: TestServer| async move {
    let good = |body: &Value| sealed_with(&t.creds.api_secret, body);
    let ts = || json!({ "request_timestamp": fresh_timestamp() });

    let (s, v) = plain(&t, None, good(&ts())).await;
    assert_plain_error(s, &v, 401, "api_key_not_found");
    let (s, v) = plain(&t, Some("pk_unknown"), good(&ts())).await;
    assert_plain_error(s, &v, 401, "api_key_not_found");

    let (s, v) = plain(&t, Some(&t.creds.api_key), "{}".into()).await;
    assert_plain_error(s, &v, 400, "encrypted_payload_missing");
    let (s, v) = plain(&t, Some(&t.creds.api_key), "not json".into()).await;
    assert_plain_error(s, &v, 400, "encrypted_payload_missing");
    let (s, v) = plain(
        &t,
        Some(&t.creds.api_key),
        json!({"encrypted": 5}).to_string(),
    )
    .await;
    assert_plain_error(s, &v, 400, "decryption_failed");
    let (s, v) = plain(
        &t,
        Some(&t.creds.api_key),
        json!({"encrypted": "!!notbase64"}).to_string(),
    )
    .await;
    assert_plain_error(s, &v, 400, "decryption_failed");
    // Sealed with another project's secret.
    let (s, v) = plain(
        &t,
        Some(&t.creds.api_key),
        sealed_with("some other secret", &ts()),
    )
    .await;
    assert_plain_error(s, &v, 400, "decryption_failed");
    // The message tells a wrong secret apart from a malformed envelope.
    assert!(v["error"].as_str().unwrap().contains("secret"), "{v}");
    let (_, bad64) = plain(
        &t,
        Some(&t.creds.api_key),
        json!({"encrypted": "!!notbase64"}).to_string(),
    )
    .await;
    assert!(
        !bad64["error"].as_str().unwrap().contains("secret"),
        "{bad64}"
    );
    // A version byte other than 0x02.
    let enc = issuing_envelope::seal(
        &Key::from_secret(&t.creds.api_secret),
        ts().to_string().as_bytes(),
    );
    let mut raw = issuing_envelope::decode_base64(&enc).unwrap();
    raw[0] = 0x01;
    use base64::Engine as _;
    let tampered = base64::engine::general_purpose::STANDARD.encode(&raw);
    let (s, v) = plain(
        &t,
        Some(&t.creds.api_key),
        json!({"encrypted": tampered}).to_string(),
    )
    .await;
    assert_plain_error(s, &v, 400, "decryption_failed");
    // Plaintext that is not a JSON object.
    let enc = issuing_envelope::seal(&Key::from_secret(&t.creds.api_secret), b"[1,2]");
    let (s, v) = plain(
        &t,
        Some(&t.creds.api_key),
        json!({"encrypted": enc}).to_string(),
    )
    .await;
    assert_plain_error(s, &v, 400, "decryption_failed");

    let (s, v) = plain(&t, Some(&t.creds.api_key), good(&json!({}))).await;
    assert_plain_error(s, &v, 400, "request_timestamp_missing");
    for bad in [json!("abc"), json!(1.5), json!(true), json!("")] {
        let (s, v) = plain(
            &t,
            Some(&t.creds.api_key),
            good(&json!({ "request_timestamp": bad })),
        )
        .await;
        assert_plain_error(s, &v, 400, "request_timestamp_invalid");
    }
    for offset in [-31_000_000i64, 31_000_000] {
        let (s, v) = plain(
            &t,
            Some(&t.creds.api_key),
            good(&json!({ "request_timestamp": now_micros() + offset })),
        )
        .await;
        assert_plain_error(s, &v, 400, "request_timestamp_out_of_window");
        assert!(
            v["error"].as_str().unwrap().contains("server time is"),
            "{v}"
        );
    }
    // Milliseconds instead of microseconds: the message names the mistake.
    let (s, v) = plain(
        &t,
        Some(&t.creds.api_key),
        good(&json!({ "request_timestamp": now_micros() / 1000 })),
    )
    .await;
    assert_plain_error(s, &v, 400, "request_timestamp_out_of_window");
    assert!(v["error"].as_str().unwrap().contains("milliseconds"), "{v}");
    // A timestamp given as a string of digits is accepted.
    let (s, v) = plain(
        &t,
        Some(&t.creds.api_key),
        good(&json!({ "request_timestamp": fresh_timestamp().to_string() })),
    )
    .await;
    assert_eq!(s, 200, "{v}");

    // Oversized bodies are refused before any decryption work.
    let big = "x".repeat(300 * 1024);
    let (s, v) = plain(
        &t,
        Some(&t.creds.api_key),
        json!({ "encrypted": big }).to_string(),
    )
    .await;
    assert_plain_error(s, &v, 413, "payload_too_large");

    // A project that is no longer active: 403.
    let other = t.new_project("suspended").await;
    sqlx::query("UPDATE projects SET status = 'suspended' WHERE id = $1")
        .bind(&other.project_id)
        .execute(t.store.pool())
        .await
        .unwrap();
    let (s, v) = t
        .post_raw(
            &t.base,
            "system/health",
            Some(&other.api_key),
            sealed_with(&other.api_secret, &ts()),
            &other.api_secret,
        )
        .await;
    assert_plain_error(s, &v, 403, "api_key_invalid");
    // A secret that no longer opens under the master key: 403 as well.
    let broken = t.new_project("broken secret").await;
    sqlx::query("UPDATE api_keys SET secret_enc = 'AAAA' WHERE project_id = $1")
        .bind(&broken.project_id)
        .execute(t.store.pool())
        .await
        .unwrap();
    let (s, v) = t
        .post_raw(
            &t.base,
            "system/health",
            Some(&broken.api_key),
            sealed_with(&broken.api_secret, &ts()),
            &broken.api_secret,
        )
        .await;
    assert_plain_error(s, &v, 403, "api_key_invalid");

    // Errors after authentication are sealed.
    let (s, v) = t.call("no/such/endpoint", json!({})).await;
    assert_eq!((s, v["error_slug"].as_str()), (404, Some("not_found")));
});

both_backends!(
    replay_is_refused_across_processes,
    |t: TestServer| async move {
        let body = json!({ "request_timestamp": fresh_timestamp() });
        let sealed = sealed_with(&t.creds.api_secret, &body);
        let (s, _) = t
            .post_raw(
                &t.base,
                "system/health",
                Some(&t.creds.api_key),
                sealed.clone(),
                &t.creds.api_secret,
            )
            .await;
        assert_eq!(s, 200);
        let (s, v) = t
            .post_raw(
                &t.base,
                "system/health",
                Some(&t.creds.api_key),
                sealed.clone(),
                &t.creds.api_secret,
            )
            .await;
        assert_plain_error(s, &v, 400, "duplicate_request");
        // The same timestamp on another path is a different request.
        let (s, v) = t
            .post_raw(
                &t.base,
                "project/balance",
                Some(&t.creds.api_key),
                sealed.clone(),
                &t.creds.api_secret,
            )
            .await;
        assert_eq!(s, 200, "{v}");
        // Several servers share a database only on PostgreSQL (on SQLite the guard is in
        // memory and `issuing serve` refuses a second server: see crash.rs). A second
        // server process on the same PostgreSQL database refuses the copy too.
        if t.db.backend != common::Backend::Postgres {
            return;
        }
        let sibling = t.sibling().await;
        let base2 = format!("http://{}", sibling.addr);
        let (s, v) = t
            .post_raw(
                &base2,
                "system/health",
                Some(&t.creds.api_key),
                sealed,
                &t.creds.api_secret,
            )
            .await;
        assert_plain_error(s, &v, 400, "duplicate_request");
        let (s, _) = t
            .post_raw(
                &base2,
                "system/health",
                Some(&t.creds.api_key),
                sealed_with(
                    &t.creds.api_secret,
                    &json!({"request_timestamp": fresh_timestamp()}),
                ),
                &t.creds.api_secret,
            )
            .await;
        assert_eq!(s, 200);
        sibling.shutdown().await;
    }
);

both_backends!(project_balance_wallet_and_txs, |t: TestServer| async move {
    let sdk = t.sdk();
    let b = sdk.project_balance().await.unwrap();
    assert_eq!(
        (b.available.as_str(), b.currency.as_str()),
        ("0.00", "usdt")
    );

    let wallet = sdk.project_wallet_trc20().await.unwrap();
    let address = wallet.usdt_trc20.as_str();
    assert_eq!(address, t.creds.deposit_address);
    assert!(issuing_domain::trc20::is_valid(address), "{address}");

    t.deposit(&t.creds.project_id, 150_500_000).await;
    t.deposit(&t.creds.project_id, 2_000_000).await;
    assert_eq!(
        sdk.project_balance().await.unwrap().available.as_str(),
        "152.50"
    );

    let page = sdk.project_txs(&ProjectTxs::default()).await.unwrap();
    assert_eq!(page.total, 2);
    let items = &page.items;
    // Newest first by default.
    assert_eq!(items[0].kind, "deposit");
    assert_eq!(items[0].amount.as_str(), "2.00");
    assert_eq!(items[0].balance_after.as_str(), "152.50");
    assert_eq!(items[1].amount.as_str(), "150.50");
    assert_eq!(items[1].balance_after.as_str(), "150.50");
    assert!(items[0].created_at.ends_with('Z'));
    let page = sdk
        .project_txs(&ProjectTxs {
            page: ListQuery {
                sort_dir: Some("asc".into()),
                limit: Some(1),
                ..ListQuery::default()
            },
            ..ProjectTxs::default()
        })
        .await
        .unwrap();
    assert_eq!((page.items[0].amount.as_str(), page.limit), ("150.50", 1));
    // The singular filter name (beside the SDK's plural `types`).
    let v = t.ok("project/txs", json!({"type": "card_topup"})).await;
    assert_eq!(v["total"], 0);
    t.expect_error(
        "project/txs",
        json!({"limit": 101}),
        400,
        "validation_error",
    )
    .await;

    // Each project has its own distinct, valid deposit address.
    let other = t.new_project("other").await;
    assert_ne!(other.deposit_address, t.creds.deposit_address);
    let theirs = t.sdk_as(&other).project_balance().await.unwrap();
    assert_eq!(theirs.available.as_str(), "0.00");
});

both_backends!(users_create_get_and_errors, |t: TestServer| async move {
    let v = t
        .ok("users/create", json!({"external_user_id": "alice"}))
        .await;
    assert_eq!(v["external_user_id"], "alice");
    assert_eq!(v["project_id"], json!(t.creds.project_id));
    assert_eq!(v["usdt_balance"], "0.00");
    assert_eq!(v["deposit_addresses"], json!([]));
    let user_id = v["user_id"].as_str().unwrap().to_owned();
    assert_eq!(user_id.len(), 24);
    for f in ["created_at", "updated_at"] {
        assert!(v[f].as_str().unwrap().ends_with('Z'), "{f}");
    }

    t.expect_error(
        "users/create",
        json!({"external_user_id": "alice"}),
        409,
        "user_already_exists",
    )
    .await;
    t.expect_error(
        "users/create",
        json!({"external_user_id": ""}),
        400,
        "validation_error",
    )
    .await;
    t.expect_error("users/create", json!({}), 400, "validation_error")
        .await;
    t.expect_error(
        "users/create",
        json!({"external_user_id": 5}),
        400,
        "validation_error",
    )
    .await;

    let got = t
        .sdk()
        .users_get(&UsersGet {
            external_user_id: "alice".into(),
        })
        .await
        .unwrap();
    assert_eq!(got.user_id, user_id);
    t.expect_error(
        "users/get",
        json!({"external_user_id": "bob"}),
        404,
        "user_not_found",
    )
    .await;
    t.expect_error(
        "users/get",
        json!({"external_user_id": ""}),
        400,
        "validation_error",
    )
    .await;
});

// Users are created in batches (one statement per batch): copies of one external id
// asked for at once must still make one user, every other copy answering the conflict,
// and a batch's distinct users must all be made.
both_backends!(
    users_created_at_once_are_each_made_once,
    |t: TestServer| async move {
        t.ok("users/create", json!({"external_user_id": "dup-0"}))
            .await;
        let t = std::sync::Arc::new(t);
        let mut asks = Vec::new();
        for _ in 0..5 {
            asks.extend((0..8).map(|i| format!("dup-{i}")));
        }
        asks.extend((0..16).map(|i| format!("one-{i}")));
        let mut calls = Vec::new();
        for ext in asks {
            let t = t.clone();
            calls.push(tokio::spawn(async move {
                let (status, v) = t
                    .call("users/create", json!({"external_user_id": ext}))
                    .await;
                (ext, status, v)
            }));
        }
        let mut made: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        let mut refused = 0;
        for call in calls {
            let (ext, status, v) = call.await.unwrap();
            match status {
                200 => made
                    .entry(ext)
                    .or_default()
                    .push(v["user_id"].as_str().unwrap().to_owned()),
                409 => {
                    assert_eq!(v["error_slug"], "user_already_exists", "{ext}: {v}");
                    refused += 1;
                }
                other => panic!("{ext}: {other} {v}"),
            }
        }
        // dup-0 existed before: all five copies refused; dup-1..7 made once each.
        assert_eq!(made.len(), 7 + 16, "{made:?}");
        assert!(!made.contains_key("dup-0"), "{made:?}");
        assert!(made.values().all(|ids| ids.len() == 1), "{made:?}");
        assert_eq!(refused, 5 + 7 * 4);
        for (ext, ids) in &made {
            let got = t.ok("users/get", json!({"external_user_id": ext})).await;
            assert_eq!(got["user_id"], json!(ids[0]), "{ext}");
        }
    }
);

both_backends!(
    users_find_filters_sorting_and_paging,
    |t: TestServer| async move {
        let sdk = t.sdk();
        let mut ids = Vec::new();
        for name in ["carol", "alice", "bob", "dave"] {
            let u = sdk
                .users_create(&UsersCreate {
                    external_user_id: name.into(),
                })
                .await
                .unwrap();
            ids.push((name, u.user_id, u.created_at));
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        let find = |request: UsersFind| {
            let sdk = &sdk;
            async move { sdk.users_find(&request).await.unwrap() }
        };
        let by = |sort_by: &str, sort_dir: &str| UsersFind {
            page: sorted(sort_by, sort_dir),
            ..UsersFind::default()
        };

        let page = find(UsersFind::default()).await;
        assert_eq!((page.total, page.skip, page.limit), (4, 0, 20));
        assert_eq!(
            names(&page.items),
            ["dave", "bob", "alice", "carol"],
            "default: created_at desc"
        );

        let page = find(by("external_user_id", "asc")).await;
        assert_eq!(names(&page.items), ["alice", "bob", "carol", "dave"]);
        let page = find(UsersFind {
            page: ListQuery {
                skip: Some(1),
                limit: Some(2),
                ..sorted("external_user_id", "desc")
            },
            ..UsersFind::default()
        })
        .await;
        assert_eq!(names(&page.items), ["carol", "bob"]);
        assert_eq!(page.total, 4);
        for key in ["user_id", "created_at", "updated_at"] {
            assert_eq!(find(by(key, "asc")).await.total, 4, "{key}");
        }
        let page = find(by("created_at", "asc")).await;
        assert_eq!(names(&page.items), ["carol", "alice", "bob", "dave"]);

        // The singular filter names (beside the SDK's plural lists).
        let v = t.ok("users/find", json!({"external_user_id": "bob"})).await;
        let single: Vec<&str> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["external_user_id"].as_str().unwrap())
            .collect();
        assert_eq!(single, ["bob"]);
        let page = find(UsersFind {
            external_user_ids: vec!["bob".into(), "alice".into()],
            ..by("external_user_id", "asc")
        })
        .await;
        assert_eq!(names(&page.items), ["alice", "bob"]);
        let v = t.ok("users/find", json!({"user_id": ids[0].1})).await;
        assert_eq!(v["total"], 1);
        assert_eq!(v["items"][0]["external_user_id"], "carol");
        let page = find(UsersFind {
            user_ids: vec![ids[0].1.clone(), ids[3].1.clone()],
            page: ListQuery {
                sort_dir: Some("asc".into()),
                ..ListQuery::default()
            },
            ..UsersFind::default()
        })
        .await;
        assert_eq!(names(&page.items), ["carol", "dave"]);
        // Singular and plural together are combined.
        let v = t
            .ok(
                "users/find",
                json!({"user_id": ids[0].1, "user_ids": [ids[3].1]}),
            )
            .await;
        assert_eq!(v["total"], 2);

        let since = |from: Option<&str>, to: Option<&str>, dir: Option<&str>| UsersFind {
            created_from: from.map(str::to_owned),
            created_to: to.map(str::to_owned),
            page: ListQuery {
                sort_dir: dir.map(str::to_owned),
                ..ListQuery::default()
            },
            ..UsersFind::default()
        };
        let page = find(since(Some(&ids[2].2), None, Some("asc"))).await;
        assert_eq!(names(&page.items), ["bob", "dave"]);
        let page = find(since(None, Some(&ids[1].2), Some("asc"))).await;
        assert_eq!(names(&page.items), ["carol", "alice"]);
        let page = find(since(Some(&ids[1].2), Some(&ids[2].2), None)).await;
        assert_eq!(page.total, 2);

        t.expect_error("users/find", json!({"limit": 101}), 400, "validation_error")
            .await;
        t.expect_error("users/find", json!({"skip": -1}), 400, "validation_error")
            .await;
        t.expect_error(
            "users/find",
            json!({"sort_by": "password"}),
            400,
            "validation_error",
        )
        .await;
        t.expect_error(
            "users/find",
            json!({"sort_dir": "sideways"}),
            400,
            "validation_error",
        )
        .await;
        t.expect_error(
            "users/find",
            json!({"created_from": "not a time"}),
            400,
            "validation_error",
        )
        .await;
        t.expect_error(
            "users/find",
            json!({"user_ids": [1, 2]}),
            400,
            "validation_error",
        )
        .await;
    }
);

both_backends!(projects_are_isolated, |t: TestServer| async move {
    let other = t.new_project("other").await;
    let (mine_sdk, their_sdk) = (t.sdk(), t.sdk_as(&other));
    let user = |id: &str| UsersCreate {
        external_user_id: id.into(),
    };
    mine_sdk.users_create(&user("shared-id")).await.unwrap();
    let mine = mine_sdk.users_create(&user("only-mine")).await.unwrap();

    // External ids are per project: the other project may use the same one.
    let theirs = their_sdk.users_create(&user("shared-id")).await.unwrap();
    assert_eq!(theirs.project_id, other.project_id);

    // The other project cannot read my user, by external id or by user id.
    let e = their_sdk
        .users_get(&UsersGet {
            external_user_id: "only-mine".into(),
        })
        .await
        .unwrap_err();
    assert_eq!((e.status(), e.slug()), (Some(404), Some("user_not_found")));
    let page = their_sdk
        .users_find(&UsersFind {
            user_ids: vec![mine.user_id.clone()],
            ..UsersFind::default()
        })
        .await
        .unwrap();
    assert_eq!(page.total, 0);
    let page = their_sdk.users_find(&UsersFind::default()).await.unwrap();
    assert_eq!(page.total, 1);
    assert_eq!(page.items[0].project_id, other.project_id);

    // Balances and histories are separate.
    t.deposit(&t.creds.project_id, 5_000_000).await;
    let balance = their_sdk.project_balance().await.unwrap();
    assert_eq!(balance.available.as_str(), "0.00");
    let txs = their_sdk.project_txs(&ProjectTxs::default()).await.unwrap();
    assert_eq!(txs.total, 0);

    // A request sealed with my secret but sent with the other key does not open.
    let sealed = sealed_with(
        &t.creds.api_secret,
        &json!({"request_timestamp": fresh_timestamp()}),
    );
    let (s, v) = t
        .post_raw(
            &t.base,
            "users/find",
            Some(&other.api_key),
            sealed,
            &other.api_secret,
        )
        .await;
    assert_plain_error(s, &v, 400, "decryption_failed");
});

both_backends!(wrong_method_and_date_bounds, |t: TestServer| async move {
    // A GET with a valid envelope is refused with the standard error object.
    let sealed = sealed_with(
        &t.creds.api_secret,
        &json!({"request_timestamp": fresh_timestamp()}),
    );
    let resp = t
        .http
        .get(format!("{}/api/v2/system/health", t.base))
        .header("API-KEY", &t.creds.api_key)
        .header("Content-Type", "application/json")
        .body(sealed)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    assert_eq!(status, 405, "{text}");
    let outer: Value = serde_json::from_str(&text).unwrap();
    let plain = issuing_envelope::open(
        &Key::from_secret(&t.creds.api_secret),
        outer["encrypted"].as_str().unwrap(),
    )
    .unwrap();
    let v: Value = serde_json::from_slice(&plain).unwrap();
    assert_eq!(v["error_slug"], "method_not_allowed");

    // A bare date as the upper bound includes that whole day.
    t.ok("users/create", json!({"external_user_id": "today"}))
        .await;
    let today = chrono_today();
    let v = t
        .ok(
            "users/find",
            json!({"created_to": today, "created_from": today}),
        )
        .await;
    assert_eq!(v["total"], 1, "{v}");
});

fn chrono_today() -> String {
    issuing_domain::time::to_rfc3339(now_micros())[..10].to_owned()
}
