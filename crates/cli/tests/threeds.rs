//! 3-D Secure and OTP over HTTP (CONTRACT §10), with a real webhook receiver:
//! simulate/cards/3ds for an OOB card (`card_3ds`) and an OTP card (`card_otp`),
//! cards/3ds/confirm confirming and declining, every `securement_id_invalid` case
//! (unknown, another card, answered twice, an OTP card's securement, expired), request
//! errors, concurrent answers, provider failures, project isolation and production mode.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::receiver::Receiver;
use common::{now_micros, Creds, TestServer};
use issuing_server::provider::sandbox::SandboxConfig;
use issuing_server::ServerConfig;
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const MINUTE_MICROS: i64 = 60_000_000;

impl TestServer {
    /// A receiver subscribed to every event of the default project.
    async fn receiver(&self) -> Receiver {
        let rx = Receiver::start(&self.creds.api_secret).await;
        self.ok("wh/subscribe", json!({"url": rx.url})).await;
        rx
    }

    /// A funded project and an active card of `user`; `product` picks OOB
    /// (`virtual_usd`) or OTP (`virtual_usd_restricted`).
    async fn card(&self, user: &str, product: &str) -> String {
        self.deposit(&self.creds.project_id, 100_000_000).await;
        self.active_card(user, product).await
    }

    /// simulate/cards/3ds for an OOB card; returns the securement id.
    async fn challenge(&self, card: &str) -> String {
        let v = self
            .ok(
                "simulate/cards/3ds",
                json!({"card_id": card, "amount": "12.50"}),
            )
            .await;
        v["securement_id"].as_str().unwrap().to_owned()
    }

    async fn confirm(
        &self,
        user: &str,
        card: &str,
        securement: &str,
        confirm: bool,
    ) -> (u16, Value) {
        self.call(
            "cards/3ds/confirm",
            json!({"card_id": card, "external_user_id": user, "securement_id": securement, "confirm": confirm}),
        )
        .await
    }

    async fn expect_invalid(&self, user: &str, card: &str, securement: &str, why: &str) {
        let (s, v) = self.confirm(user, card, securement, true).await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (422, Some("securement_id_invalid")),
            "{why}: {v}"
        );
        assert_eq!(v["success"], false);
    }

    /// Moves a securement's creation and expiry by `minutes` (negative: into the past).
    async fn age_securement(&self, securement: &str, minutes: i64) {
        let created = now_micros() - minutes * MINUTE_MICROS;
        sqlx::query("UPDATE card_securements SET created_at = $1, expires_at = $2 WHERE id = $3")
            .bind(created)
            .bind(created + 10 * MINUTE_MICROS)
            .bind(securement)
            .execute(self.store.pool())
            .await
            .unwrap();
    }

    async fn securement_row(&self, card: &str) -> Vec<(String, String, String)> {
        use sqlx::Row;
        sqlx::query("SELECT id, method, state FROM card_securements WHERE card_id = $1")
            .bind(card)
            .fetch_all(self.store.pool())
            .await
            .unwrap()
            .iter()
            .map(|r| (r.get("id"), r.get("method"), r.get("state")))
            .collect()
    }

    /// `card_3ds` events in the outbox for one securement, oldest first.
    async fn three_ds_events(&self, project_id: &str, securement: &str) -> Vec<Value> {
        self.events(project_id)
            .await
            .into_iter()
            .filter(|e| e.event_type == "card_3ds" && e.payload["securement_id"] == securement)
            .map(|e| e.payload)
            .collect()
    }

    /// The default project's flow for another project: cardholder, funds, card.
    async fn active_card_as(&self, creds: &Creds, user: &str) -> String {
        self.deposit(&creds.project_id, 100_000_000).await;
        let (s, v) = self
            .call_as(
                creds,
                "cardholders/create",
                json!({"external_user_id": user, "subprovider_code": "sandbox", "kyc_data": common::cards::kyc()}),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        let (s, v) = self
            .call_as(
                creds,
                "cards/create",
                json!({"external_user_id": user, "product_code": "virtual_usd", "idempotency_key": format!("other-{user}")}),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        let card = v["card_id"].as_str().unwrap().to_owned();
        let order_id = v["order"]["order_id"].as_str().unwrap().to_owned();
        for _ in 0..400 {
            let (_, o) = self
                .call_as(creds, "orders/check", json!({"order_id": order_id}))
                .await;
            if o["status"] == "completed" {
                return card;
            }
            assert_ne!(o["status"], "failed", "{o}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the other project's card was not issued");
    }
}

/// The delivered events of `type` (typed form), in arrival order.
fn delivered(rx: &Receiver, kind: &str) -> Vec<Value> {
    rx.delivered()
        .into_iter()
        .filter(|e| e["type"] == kind)
        .collect()
}

async fn wait_for(rx: &Receiver, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
    rx.wait_until(what, WAIT, |got| {
        got.iter()
            .any(|r| r.answered == common::receiver::Behaviour::Succeed && pred(&r.event))
    })
    .await;
    rx.delivered().into_iter().find(|e| pred(e)).unwrap()
}

fn is_rfc3339(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| chrono_like(s) && s.ends_with('Z'))
}

/// `YYYY-MM-DDTHH:MM:SS…Z` without pulling in a date crate.
fn chrono_like(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20 && b[4] == b'-' && b[7] == b'-' && b[10] == b'T' && b[13] == b':'
}

both_backends!(
    oob_challenge_and_confirm_arrive_as_webhooks,
    |t: TestServer| async move {
        let rx = t.receiver().await;
        let card = t.card("ada", "virtual_usd").await;

        let v = t
            .ok(
                "simulate/cards/3ds",
                json!({"card_id": card, "amount": "12.50", "merchant": {"name": "Coffee Shop", "country": "de"}}),
            )
            .await;
        assert_eq!(v["method"], "OOB");
        assert_eq!(v["card_id"], json!(card));
        assert_eq!(v["status"], "challenge_sent");
        assert!(v.get("code").is_none(), "{v}");
        let sid = v["securement_id"].as_str().unwrap().to_owned();
        assert_eq!(sid.len(), 24, "{sid}");

        let challenge = wait_for(&rx, "card_3ds challenge", |e| {
            e["type"] == "card_3ds" && e["securement_id"] == sid.as_str()
        })
        .await;
        assert_eq!(challenge["card_id"], json!(card));
        assert_eq!(challenge["method"], "OOB");
        assert_eq!(challenge["confirm"], "pending");
        assert_eq!(challenge["status"], "challenge_sent");
        assert_eq!(challenge["currency"], "USD");
        assert_eq!(challenge["amount"], "12.50");
        assert!(is_rfc3339(&challenge["occurred_at"]), "{challenge}");
        assert_eq!(challenge["reason"], Value::Null);
        assert_eq!(challenge["remark"], Value::Null);
        assert!(challenge.as_object().unwrap().contains_key("reason"));
        assert!(challenge.as_object().unwrap().contains_key("remark"));
        assert_eq!(
            challenge["merchant"],
            json!({"name": "Coffee Shop", "country": "DE"})
        );
        assert!(challenge["delivery_id"]
            .as_str()
            .is_some_and(|d| !d.is_empty()));
        assert!(
            challenge.get("event_type").is_none(),
            "typed form: {challenge}"
        );

        let (s, v) = t.confirm("ada", &card, &sid, true).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(
            v,
            json!({"success": true, "securement_id": sid, "confirm": "confirmed"})
        );

        let done = wait_for(&rx, "card_3ds completion", |e| {
            e["type"] == "card_3ds"
                && e["securement_id"] == sid.as_str()
                && e["status"] == "completed"
        })
        .await;
        assert_eq!(done["confirm"], "confirmed");
        assert_eq!(done["method"], "OOB");
        assert_eq!(done["card_id"], json!(card));
        assert_eq!(done["amount"], "12.50");
        assert_eq!(done["currency"], "USD");
        assert_eq!(done["merchant"], challenge["merchant"]);
        assert_eq!(done["reason"], Value::Null);
        assert!(is_rfc3339(&done["occurred_at"]), "{done}");
        assert_ne!(done["delivery_id"], challenge["delivery_id"]);

        // Answered: a second answer either way is refused and emits nothing.
        t.expect_invalid("ada", &card, &sid, "answered twice").await;
        let (s, v) = t.confirm("ada", &card, &sid, false).await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (422, Some("securement_id_invalid"))
        );
        assert_eq!(t.three_ds_events(&t.creds.project_id, &sid).await.len(), 2);
        assert_eq!(
            t.securement_row(&card).await,
            vec![(sid.clone(), "OOB".to_owned(), "confirmed".to_owned())]
        );
        // Two webhooks for this securement, no more.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(delivered(&rx, "card_3ds").len(), 2);
        assert!(delivered(&rx, "card_otp").is_empty());
    }
);

both_backends!(oob_decline_and_defaults, |t: TestServer| async move {
    let rx = t.receiver().await;
    let card = t.card("ada", "virtual_usd").await;
    // No merchant: sandbox defaults; currency in any case; a JSON number amount.
    let v = t
        .ok(
            "simulate/cards/3ds",
            json!({"card_id": card, "amount": 7.5, "currency": "eur", "external_user_id": "ada"}),
        )
        .await;
    let sid = v["securement_id"].as_str().unwrap().to_owned();
    let challenge = wait_for(&rx, "challenge", |e| e["securement_id"] == sid.as_str()).await;
    assert_eq!(challenge["currency"], "EUR");
    assert_eq!(challenge["amount"], "7.50");
    assert_eq!(
        challenge["merchant"],
        json!({"name": "Sandbox Merchant", "country": "US"})
    );

    let (s, v) = t.confirm("ada", &card, &sid, false).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["confirm"], "declined");
    assert_eq!(v["securement_id"], json!(sid));
    let done = wait_for(&rx, "decline", |e| {
        e["securement_id"] == sid.as_str() && e["status"] == "completed"
    })
    .await;
    assert_eq!(done["confirm"], "declined");
    assert_eq!(done["currency"], "EUR");
    t.expect_invalid("ada", &card, &sid, "declined, then confirmed")
        .await;
    assert_eq!(t.securement_row(&card).await[0].2, "declined");

    // Without a currency the challenge is in USD.
    let sid2 = t.challenge(&card).await;
    let e = &t.three_ds_events(&t.creds.project_id, &sid2).await[0];
    assert_eq!(
        (e["currency"].as_str(), e["amount"].as_str()),
        (Some("USD"), Some("12.50"))
    );
});

both_backends!(
    every_invalid_securement_is_refused,
    |t: TestServer| async move {
        let ada = t.card("ada", "virtual_usd").await;
        let bob = t.active_card("bob", "virtual_usd").await;
        let sid = t.challenge(&ada).await;

        // Unknown: a well-formed id nobody issued, and junk.
        t.expect_invalid("ada", &ada, "0123456789abcdef01234567", "unknown")
            .await;
        t.expect_invalid("ada", &ada, "not-an-id", "junk").await;
        // Another card's (of the same project).
        t.expect_invalid("bob", &bob, &sid, "another card").await;

        // An OTP card's securement.
        let carol = t.active_card("carol", "virtual_usd_restricted").await;
        let v = t
            .ok(
                "simulate/cards/3ds",
                json!({"card_id": carol, "amount": "3"}),
            )
            .await;
        assert_eq!(v["method"], "OTP");
        let rows = t.securement_row(&carol).await;
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].1.as_str(), rows[0].2.as_str()), ("OTP", "pending"));
        t.expect_invalid("carol", &carol, &rows[0].0, "OTP card")
            .await;
        // ... also named with an OOB card.
        t.expect_invalid("ada", &ada, &rows[0].0, "OTP securement, other card")
            .await;

        // Expired: older than 10 minutes.
        let old = t.challenge(&ada).await;
        t.age_securement(&old, 11).await;
        t.expect_invalid("ada", &ada, &old, "expired").await;
        assert_eq!(t.three_ds_events(&t.creds.project_id, &old).await.len(), 1);

        // Nine minutes old is still in time.
        let recent = t.challenge(&ada).await;
        t.age_securement(&recent, 9).await;
        let (s, v) = t.confirm("ada", &ada, &recent, true).await;
        assert_eq!(s, 200, "{v}");

        // None of the refusals changed the first challenge: it can still be answered.
        let (s, v) = t.confirm("ada", &ada, &sid, true).await;
        assert_eq!((s, v["confirm"].as_str()), (200, Some("confirmed")), "{v}");
        t.expect_invalid("ada", &ada, &sid, "answered twice").await;
    }
);

both_backends!(otp_cards_get_a_code, |t: TestServer| async move {
    let rx = t.receiver().await;
    let card = t.card("carol", "virtual_usd_restricted").await;
    let v = t
        .ok(
            "simulate/cards/3ds",
            json!({"card_id": card, "amount": "20", "merchant": {"name": "Shop", "country": "FR"}}),
        )
        .await;
    assert_eq!(v["method"], "OTP");
    assert_eq!(v["card_id"], json!(card));
    let code = v["code"].as_str().unwrap().to_owned();
    assert!(
        code.len() == 6 && code.bytes().all(|b| b.is_ascii_digit()),
        "{code}"
    );
    assert!(v.get("securement_id").is_none(), "{v}");

    let otp = wait_for(&rx, "card_otp", |e| e["type"] == "card_otp").await;
    assert_eq!(otp["card_id"], json!(card));
    assert_eq!(otp["code"], json!(code));
    assert!(is_rfc3339(&otp["sent_at"]), "{otp}");
    assert!(otp["delivery_id"].as_str().is_some_and(|d| !d.is_empty()));
    let mut keys: Vec<&str> = otp
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["card_id", "code", "delivery_id", "sent_at", "type"]);

    // A second challenge sends a new code (6 digits, leading zeros kept).
    let v2 = t
        .ok(
            "simulate/cards/3ds",
            json!({"card_id": card, "amount": "20"}),
        )
        .await;
    let code2 = v2["code"].as_str().unwrap().to_owned();
    assert_eq!(code2.len(), 6);
    rx.wait_until("two codes", WAIT, |got| {
        got.iter().filter(|r| r.event["type"] == "card_otp").count() == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        delivered(&rx, "card_3ds").is_empty(),
        "OTP cards get no card_3ds"
    );
    assert_eq!(t.securement_row(&card).await.len(), 2);
});

both_backends!(request_errors, |t: TestServer| async move {
    let card = t.card("ada", "virtual_usd").await;
    t.active_card("bob", "virtual_usd").await;
    let sid = t.challenge(&card).await;
    let confirm = |extra: Value| {
        let mut body = json!({"card_id": card, "external_user_id": "ada", "securement_id": sid, "confirm": true});
        for (k, v) in extra.as_object().unwrap() {
            if v.is_null() {
                body.as_object_mut().unwrap().remove(k);
            } else {
                body[k] = v.clone();
            }
        }
        body
    };
    let path = "cards/3ds/confirm";
    t.expect_error(
        path,
        confirm(json!({"external_user_id": null})),
        400,
        "external_user_id_required",
    )
    .await;
    t.expect_error(
        path,
        confirm(json!({"external_user_id": " "})),
        400,
        "external_user_id_required",
    )
    .await;
    t.expect_error(
        path,
        confirm(json!({"external_user_id": "bob"})),
        422,
        "card_user_mismatch",
    )
    .await;
    t.expect_error(
        path,
        confirm(json!({"external_user_id": "nobody"})),
        404,
        "card_not_found",
    )
    .await;
    t.expect_error(
        path,
        confirm(json!({"card_id": "0123456789abcdef01234567"})),
        404,
        "card_not_found",
    )
    .await;
    t.expect_error(
        path,
        confirm(json!({"card_id": null})),
        400,
        "validation_error",
    )
    .await;
    t.expect_error(
        path,
        confirm(json!({"confirm": null})),
        400,
        "validation_error",
    )
    .await;
    t.expect_error(
        path,
        confirm(json!({"confirm": "true"})),
        400,
        "validation_error",
    )
    .await;
    t.expect_error(
        path,
        confirm(json!({"confirm": 1})),
        400,
        "validation_error",
    )
    .await;
    t.expect_error(
        path,
        confirm(json!({"securement_id": null})),
        400,
        "validation_error",
    )
    .await;
    // None of that answered the challenge.
    assert_eq!(t.securement_row(&card).await[0].2, "pending");

    let sim = "simulate/cards/3ds";
    for bad in [
        json!("0"),
        json!("-5"),
        json!("abc"),
        json!("1.0000001"),
        json!(0),
        json!(true),
    ] {
        t.expect_error(
            sim,
            json!({"card_id": card, "amount": bad}),
            400,
            "invalid_amount",
        )
        .await;
    }
    t.expect_error(sim, json!({"card_id": card}), 400, "invalid_amount")
        .await;
    t.expect_error(
        sim,
        json!({"card_id": card, "amount": "1", "currency": "dollars"}),
        400,
        "validation_error",
    )
    .await;
    t.expect_error(
        sim,
        json!({"card_id": card, "amount": "1", "merchant": "shop"}),
        400,
        "validation_error",
    )
    .await;
    t.expect_error(
        sim,
        json!({"card_id": card, "amount": "1", "merchant": {"country": "USA"}}),
        400,
        "validation_error",
    )
    .await;
    t.expect_error(
        sim,
        json!({"card_id": "0123456789abcdef01234567", "amount": "1"}),
        404,
        "card_not_found",
    )
    .await;
    t.expect_error(sim, json!({"amount": "1"}), 400, "validation_error")
        .await;
    t.expect_error(
        sim,
        json!({"card_id": card, "amount": "1", "external_user_id": "bob"}),
        422,
        "card_user_mismatch",
    )
    .await;
    t.expect_error(
        sim,
        json!({"card_id": card, "amount": "1", "external_user_id": "nobody"}),
        404,
        "card_not_found",
    )
    .await;

    // A frozen card gets no challenge.
    t.ok(
        "cards/freeze",
        json!({"card_id": card, "external_user_id": "ada"}),
    )
    .await;
    t.expect_error(
        sim,
        json!({"card_id": card, "amount": "1"}),
        422,
        "card_not_active",
    )
    .await;
    t.ok(
        "cards/unfreeze",
        json!({"card_id": card, "external_user_id": "ada"}),
    )
    .await;
    t.challenge(&card).await;
    assert_eq!(t.securement_row(&card).await.len(), 2);
});

both_backends!(
    concurrent_answers_only_one_wins,
    |t: TestServer| async move {
        let card = t.card("ada", "virtual_usd").await;
        for round in 0..3 {
            let sid = t.challenge(&card).await;
            let (a, b) = tokio::join!(
                t.confirm("ada", &card, &sid, true),
                t.confirm("ada", &card, &sid, false)
            );
            let answers = [a, b];
            let wins: Vec<&Value> = answers
                .iter()
                .filter(|(s, _)| *s == 200)
                .map(|(_, v)| v)
                .collect();
            assert_eq!(wins.len(), 1, "round {round}: {answers:?}");
            let lost = answers.iter().find(|(s, _)| *s != 200).unwrap();
            assert_eq!(
                (lost.0, lost.1["error_slug"].as_str()),
                (422, Some("securement_id_invalid")),
                "round {round}"
            );
            let events = t.three_ds_events(&t.creds.project_id, &sid).await;
            assert_eq!(events.len(), 2, "round {round}: {events:?}");
            assert_eq!(events[1]["confirm"], wins[0]["confirm"]);
            let row = t
                .securement_row(&card)
                .await
                .into_iter()
                .find(|r| r.0 == sid)
                .unwrap();
            assert_eq!(json!(row.2), wins[0]["confirm"]);
        }
    }
);

both_backends!(
    securements_are_isolated_between_projects,
    |t: TestServer| async move {
        let card = t.card("ada", "virtual_usd").await;
        let sid = t.challenge(&card).await;
        let other = t.new_project("other").await;
        let other_card = t.active_card_as(&other, "ada").await;

        // The other project cannot see this card ...
        let (s, v) = t
            .call_as(
                &other,
                "cards/3ds/confirm",
                json!({"card_id": card, "external_user_id": "ada", "securement_id": sid, "confirm": true}),
            )
            .await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (404, Some("card_not_found")),
            "{v}"
        );
        let (s, v) = t
            .call_as(
                &other,
                "simulate/cards/3ds",
                json!({"card_id": card, "amount": "1"}),
            )
            .await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (404, Some("card_not_found")),
            "{v}"
        );
        // ... nor use this project's securement with its own card.
        let (s, v) = t
            .call_as(
                &other,
                "cards/3ds/confirm",
                json!({"card_id": other_card, "external_user_id": "ada", "securement_id": sid, "confirm": true}),
            )
            .await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (422, Some("securement_id_invalid")),
            "{v}"
        );
        // And this project cannot use the other's securement.
        let (s, v) = t
            .call_as(
                &other,
                "simulate/cards/3ds",
                json!({"card_id": other_card, "amount": "1"}),
            )
            .await;
        assert_eq!(s, 200, "{v}");
        let other_sid = v["securement_id"].as_str().unwrap().to_owned();
        t.expect_invalid("ada", &card, &other_sid, "another project's securement")
            .await;
        t.expect_error(
            "cards/3ds/confirm",
            json!({"card_id": other_card, "external_user_id": "ada", "securement_id": other_sid, "confirm": true}),
            404,
            "card_not_found",
        )
        .await;
        // The events went to their own projects only.
        assert!(t
            .three_ds_events(&t.creds.project_id, &other_sid)
            .await
            .is_empty());
        assert_eq!(
            t.three_ds_events(&other.project_id, &other_sid).await.len(),
            1
        );

        // Both still answer normally for their owners.
        let (s, v) = t.confirm("ada", &card, &sid, true).await;
        assert_eq!(s, 200, "{v}");
        let (s, v) = t
            .call_as(
                &other,
                "cards/3ds/confirm",
                json!({"card_id": other_card, "external_user_id": "ada", "securement_id": other_sid, "confirm": false}),
            )
            .await;
        assert_eq!((s, v["confirm"].as_str()), (200, Some("declined")), "{v}");
    }
);

both_backends_with!(
    production_has_no_simulation,
    ServerConfig {
        mode: issuing_server::Mode::Production,
        ..Default::default()
    },
    |t: TestServer| async move {
        t.expect_error(
            "simulate/cards/3ds",
            json!({"card_id": "0123456789abcdef01234567", "amount": "1"}),
            404,
            "not_found",
        )
        .await;
        // cards/3ds/confirm is a real endpoint in both modes.
        t.expect_error(
            "cards/3ds/confirm",
            json!({"card_id": "0123456789abcdef01234567", "external_user_id": "ada", "securement_id": "x", "confirm": true}),
            404,
            "card_not_found",
        )
        .await;
    }
);

fn slow_provider() -> ServerConfig {
    ServerConfig {
        sandbox: SandboxConfig {
            latency: Duration::from_millis(300),
            ..Default::default()
        },
        ..Default::default()
    }
}

both_backends_with!(
    answers_racing_past_the_checks_only_one_wins,
    slow_provider(),
    |t: TestServer| async move {
        // The provider call takes 300 ms, so both answers pass every check before either
        // writes: only the conditional update can tell them apart.
        let card = t.card("ada", "virtual_usd").await;
        let sid = t.challenge(&card).await;
        let (a, b) = tokio::join!(
            t.confirm("ada", &card, &sid, true),
            t.confirm("ada", &card, &sid, true)
        );
        let mut statuses = [a.0, b.0];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 422], "{a:?} {b:?}");
        let lost = if a.0 == 422 { &a.1 } else { &b.1 };
        assert_eq!(lost["error_slug"], "securement_id_invalid");
        assert_eq!(t.three_ds_events(&t.creds.project_id, &sid).await.len(), 2);
    }
);

both_backends!(
    provider_failure_leaves_the_challenge_open,
    |t: TestServer| async move {
        let rx = t.receiver().await;
        let card = t.card("ada", "virtual_usd").await;
        let sid = t.challenge(&card).await;
        // A second server process whose provider fails its first call.
        let flaky = t
            .sibling_with(ServerConfig {
                sandbox: SandboxConfig {
                    transient_failures: 1,
                    ..Default::default()
                },
                ..Default::default()
            })
            .await;
        let base = format!("http://{}", flaky.addr);
        let body = json!({"card_id": card, "external_user_id": "ada", "securement_id": sid, "confirm": true});
        let (s, v) = t
            .call_on(&base, &t.creds, "cards/3ds/confirm", body.clone())
            .await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (500, Some("provider_error")),
            "{v}"
        );
        assert_eq!(t.securement_row(&card).await[0].2, "pending");
        assert_eq!(t.three_ds_events(&t.creds.project_id, &sid).await.len(), 1);
        // The retry goes through, and the webhook follows.
        let (s, v) = t.call_on(&base, &t.creds, "cards/3ds/confirm", body).await;
        assert_eq!((s, v["confirm"].as_str()), (200, Some("confirmed")), "{v}");
        wait_for(&rx, "completion", |e| {
            e["securement_id"] == sid.as_str() && e["confirm"] == "confirmed"
        })
        .await;
        flaky.shutdown().await;
    }
);
