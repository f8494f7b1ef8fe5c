//! 3-D Secure and OTP over HTTP (CONTRACT §10), with a real webhook receiver:
//! simulate/cards/3ds for an OOB card (`card_3ds`) and an OTP card (`card_otp`),
//! cards/3ds/confirm confirming and declining, every `securement_id_invalid` case
//! (unknown, another card, answered twice, an OTP card's securement, expired), request
//! errors, concurrent answers, provider failures, project isolation and production mode.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::receiver::Receiver;
use common::{api_error, now_micros, Creds, TestServer};
use issuing_app::provider::sandbox::SandboxConfig;
use issuing_client::{
    CardholdersCreate, Cards3dsConfirm, CardsCreate, CardsFreeze, ClientError, Merchant,
    Simulate3ds, ThreeDsConfirmResponse, WhSubscribe,
};
use issuing_server::ServerConfig;
use serde_json::{json, Value};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);
const MINUTE_MICROS: i64 = 60_000_000;

impl TestServer {
    /// A receiver subscribed to every event of the default project.
    async fn receiver(&self) -> Receiver {
        let rx = Receiver::start(&self.creds.api_secret).await;
        self.sdk()
            .wh_subscribe(&WhSubscribe {
                url: rx.url.clone(),
                ..WhSubscribe::default()
            })
            .await
            .unwrap();
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
            .sdk()
            .simulate_cards_3ds(&three_ds(card, "12.50"))
            .await
            .unwrap();
        v.securement_id.unwrap()
    }

    async fn confirm(
        &self,
        user: &str,
        card: &str,
        securement: &str,
        confirm: bool,
    ) -> Result<ThreeDsConfirmResponse, ClientError> {
        self.sdk()
            .cards_3ds_confirm(&confirm_of(user, card, securement, confirm))
            .await
    }

    async fn expect_invalid(&self, user: &str, card: &str, securement: &str, why: &str) {
        let res = self.confirm(user, card, securement, true).await;
        let e = res.unwrap_err();
        assert_eq!(
            (e.status(), e.slug()),
            (Some(422), Some("securement_id_invalid")),
            "{why}: {e}"
        );
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
        let sdk = self.sdk_as(creds);
        sdk.cardholders_create(&CardholdersCreate {
            external_user_id: user.into(),
            subprovider_code: "sandbox".into(),
            kyc_data: Some(serde_json::from_value(common::cards::kyc()).unwrap()),
            ..CardholdersCreate::default()
        })
        .await
        .unwrap();
        let v = sdk
            .cards_create(
                &CardsCreate {
                    external_user_id: user.into(),
                    product_code: "virtual_usd".into(),
                    ..CardsCreate::default()
                },
                &format!("other-{user}"),
            )
            .await
            .unwrap();
        let o = sdk.wait_order(&v.order.order_id, WAIT).await.unwrap();
        assert_eq!(o.status, "completed", "the other project's card: {o:?}");
        v.card_id
    }
}

fn three_ds(card: &str, amount: &str) -> Simulate3ds {
    Simulate3ds {
        card_id: card.into(),
        amount: amount.into(),
        ..Simulate3ds::default()
    }
}

fn confirm_of(user: &str, card: &str, securement: &str, confirm: bool) -> Cards3dsConfirm {
    Cards3dsConfirm {
        card_id: card.into(),
        external_user_id: user.into(),
        securement_id: securement.into(),
        confirm,
    }
}

fn of_user(card: &str, user: &str) -> CardsFreeze {
    CardsFreeze {
        card_id: card.into(),
        external_user_id: Some(user.into()),
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

        // Raw: checks that `code` is left out of an OOB answer, not written as null.
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

        // Raw: the whole answer, compared exactly.
        let (s, v) = t
            .call(
                "cards/3ds/confirm",
                json!({"card_id": card, "external_user_id": "ada", "securement_id": sid, "confirm": true}),
            )
            .await;
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
        api_error(
            t.confirm("ada", &card, &sid, false).await,
            422,
            "securement_id_invalid",
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
    // Raw: the JSON number amount is the point.
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

    let v = t.confirm("ada", &card, &sid, false).await.unwrap();
    assert_eq!(v.confirm, "declined");
    assert_eq!(v.securement_id, sid);
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
            .sdk()
            .simulate_cards_3ds(&three_ds(&carol, "3"))
            .await
            .unwrap();
        assert_eq!(v.method, "OTP");
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
        t.confirm("ada", &ada, &recent, true).await.unwrap();

        // None of the refusals changed the first challenge: it can still be answered.
        let v = t.confirm("ada", &ada, &sid, true).await.unwrap();
        assert_eq!(v.confirm, "confirmed");
        t.expect_invalid("ada", &ada, &sid, "answered twice").await;
    }
);

both_backends!(otp_cards_get_a_code, |t: TestServer| async move {
    let rx = t.receiver().await;
    let card = t.card("carol", "virtual_usd_restricted").await;
    // Raw: checks that `securement_id` is left out of an OTP answer, not written as null.
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
        .sdk()
        .simulate_cards_3ds(&three_ds(&card, "20"))
        .await
        .unwrap();
    let code2 = v2.code.unwrap();
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
    let sdk = t.sdk();
    let card = t.card("ada", "virtual_usd").await;
    t.active_card("bob", "virtual_usd").await;
    let sid = t.challenge(&card).await;
    // Raw (below): requests with a field left out, null or of the wrong JSON type.
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
    api_error(
        t.confirm(" ", &card, &sid, true).await,
        400,
        "external_user_id_required",
    );
    api_error(
        t.confirm("bob", &card, &sid, true).await,
        422,
        "card_user_mismatch",
    );
    api_error(
        t.confirm("nobody", &card, &sid, true).await,
        404,
        "card_not_found",
    );
    api_error(
        t.confirm("ada", "0123456789abcdef01234567", &sid, true)
            .await,
        404,
        "card_not_found",
    );
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
    for bad in ["0", "-5", "abc", "1.0000001"] {
        api_error(
            sdk.simulate_cards_3ds(&three_ds(&card, bad)).await,
            400,
            "invalid_amount",
        );
    }
    // Raw: amounts of the wrong JSON type, and none at all.
    for bad in [json!(0), json!(true)] {
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
    api_error(
        sdk.simulate_cards_3ds(&Simulate3ds {
            currency: Some("dollars".into()),
            ..three_ds(&card, "1")
        })
        .await,
        400,
        "validation_error",
    );
    // Raw: a merchant that is not an object.
    t.expect_error(
        sim,
        json!({"card_id": card, "amount": "1", "merchant": "shop"}),
        400,
        "validation_error",
    )
    .await;
    api_error(
        sdk.simulate_cards_3ds(&Simulate3ds {
            merchant: Some(Merchant {
                country: Some("USA".into()),
                ..Merchant::default()
            }),
            ..three_ds(&card, "1")
        })
        .await,
        400,
        "validation_error",
    );
    api_error(
        sdk.simulate_cards_3ds(&three_ds("0123456789abcdef01234567", "1"))
            .await,
        404,
        "card_not_found",
    );
    // Raw: no card_id.
    t.expect_error(sim, json!({"amount": "1"}), 400, "validation_error")
        .await;
    let of = |user: &str| Simulate3ds {
        external_user_id: Some(user.into()),
        ..three_ds(&card, "1")
    };
    api_error(
        sdk.simulate_cards_3ds(&of("bob")).await,
        422,
        "card_user_mismatch",
    );
    api_error(
        sdk.simulate_cards_3ds(&of("nobody")).await,
        404,
        "card_not_found",
    );

    // A frozen card gets no challenge.
    sdk.cards_freeze(&of_user(&card, "ada")).await.unwrap();
    api_error(
        sdk.simulate_cards_3ds(&three_ds(&card, "1")).await,
        422,
        "card_not_active",
    );
    sdk.cards_unfreeze(&of_user(&card, "ada")).await.unwrap();
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
            let wins: Vec<&ThreeDsConfirmResponse> =
                answers.iter().filter_map(|r| r.as_ref().ok()).collect();
            assert_eq!(wins.len(), 1, "round {round}: {answers:?}");
            let lost = answers.iter().find_map(|r| r.as_ref().err()).unwrap();
            assert_eq!(
                (lost.status(), lost.slug()),
                (Some(422), Some("securement_id_invalid")),
                "round {round}"
            );
            let events = t.three_ds_events(&t.creds.project_id, &sid).await;
            assert_eq!(events.len(), 2, "round {round}: {events:?}");
            assert_eq!(events[1]["confirm"], wins[0].confirm.as_str());
            let row = t
                .securement_row(&card)
                .await
                .into_iter()
                .find(|r| r.0 == sid)
                .unwrap();
            assert_eq!(row.2, wins[0].confirm);
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
        let their_sdk = t.sdk_as(&other);

        // The other project cannot see this card ...
        let e = their_sdk
            .cards_3ds_confirm(&confirm_of("ada", &card, &sid, true))
            .await
            .unwrap_err();
        assert_eq!(
            (e.status(), e.slug()),
            (Some(404), Some("card_not_found")),
            "{e}"
        );
        let e = their_sdk
            .simulate_cards_3ds(&three_ds(&card, "1"))
            .await
            .unwrap_err();
        assert_eq!(
            (e.status(), e.slug()),
            (Some(404), Some("card_not_found")),
            "{e}"
        );
        // ... nor use this project's securement with its own card.
        let e = their_sdk
            .cards_3ds_confirm(&confirm_of("ada", &other_card, &sid, true))
            .await
            .unwrap_err();
        assert_eq!(
            (e.status(), e.slug()),
            (Some(422), Some("securement_id_invalid")),
            "{e}"
        );
        // And this project cannot use the other's securement.
        let v = their_sdk
            .simulate_cards_3ds(&three_ds(&other_card, "1"))
            .await
            .unwrap();
        let other_sid = v.securement_id.unwrap();
        t.expect_invalid("ada", &card, &other_sid, "another project's securement")
            .await;
        api_error(
            t.confirm("ada", &other_card, &other_sid, true).await,
            404,
            "card_not_found",
        );
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
        t.confirm("ada", &card, &sid, true).await.unwrap();
        let v = their_sdk
            .cards_3ds_confirm(&confirm_of("ada", &other_card, &other_sid, false))
            .await
            .unwrap();
        assert_eq!(v.confirm, "declined");
    }
);

both_backends_with!(
    production_has_no_simulation,
    ServerConfig {
        mode: issuing_server::Mode::Production,
        ..Default::default()
    },
    |t: TestServer| async move {
        api_error(
            t.sdk()
                .simulate_cards_3ds(&three_ds("0123456789abcdef01234567", "1"))
                .await,
            404,
            "not_found",
        );
        // cards/3ds/confirm is a real endpoint in both modes.
        api_error(
            t.confirm("ada", "0123456789abcdef01234567", "x", true)
                .await,
            404,
            "card_not_found",
        );
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
        let status = |r: &Result<ThreeDsConfirmResponse, ClientError>| match r {
            Ok(_) => Some(200),
            Err(e) => e.status(),
        };
        let mut statuses = [status(&a), status(&b)];
        statuses.sort_unstable();
        assert_eq!(statuses, [Some(200), Some(422)], "{a:?} {b:?}");
        let lost = a.as_ref().err().or(b.as_ref().err()).unwrap();
        assert_eq!(lost.slug(), Some("securement_id_invalid"));
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
        let flaky_sdk = t.sdk_on(&base, &t.creds);
        let body = confirm_of("ada", &card, &sid, true);
        api_error(
            flaky_sdk.cards_3ds_confirm(&body).await,
            500,
            "provider_error",
        );
        assert_eq!(t.securement_row(&card).await[0].2, "pending");
        assert_eq!(t.three_ds_events(&t.creds.project_id, &sid).await.len(), 1);
        // The retry goes through, and the webhook follows.
        let v = flaky_sdk.cards_3ds_confirm(&body).await.unwrap();
        assert_eq!(v.confirm, "confirmed");
        wait_for(&rx, "completion", |e| {
            e["securement_id"] == sid.as_str() && e["confirm"] == "confirmed"
        })
        .await;
        flaky.shutdown().await;
    }
);
