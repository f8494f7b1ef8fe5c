//! Reveal sessions on Lithic (CONTRACT §16) against the fake Lithic, which checks every
//! request and answer against Lithic's published document: a program without PAN
//! access gets Lithic's embed session (`POST /v1/cards/{card_token}/embed`) and Lithic's
//! own embed URLs, no card data passes through us, Lithic's `embed.viewed` lands in the
//! audit log (enrolment subscribes to it); a program with PAN access gets our page, the
//! number read from Lithic for that one answer. Both backends; each case ends with the
//! fake's check and the ledger verified.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::lithic::harness::Lithic;
use common::Backend;
use serde_json::{json, Value};
use sqlx::Row;
use std::time::Duration;

const ORIGIN: &str = "https://app.example.com";

/// The case `$name` (an `async fn(&Lithic)`) on both backends, the subprovider with the
/// settings `$extra`.
macro_rules! lithic_case {
    ($name:ident, $extra:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                if let Some(l) = Lithic::start(Backend::Sqlite, $extra).await {
                    super::$name(&l).await;
                    l.finish().await;
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(l) = Lithic::start(Backend::Postgres, $extra).await {
                    super::$name(&l).await;
                    l.finish().await;
                }
            }
        }
    };
}

async fn audit(l: &Lithic, action: &str) -> Vec<(String, Value, String)> {
    sqlx::query("SELECT actor, targets, result FROM audit_log WHERE action = $1 ORDER BY id")
        .bind(action)
        .fetch_all(l.t.store.pool())
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.get::<String, _>("actor"),
                serde_json::from_str(&r.get::<String, _>("targets")).unwrap(),
                r.get::<String, _>("result"),
            )
        })
        .collect()
}

lithic_case!(
    without_pan_access_the_embed_is_lithics,
    "plaintext_details = false"
);
async fn without_pan_access_the_embed_is_lithics(l: &Lithic) {
    let (card_id, token) = l.card("ada", "20").await;
    l.fake.set_pan_access(false);
    let card_reads = l.fake.calls("GET", "/v1/cards/{card_token}");
    // The project's server cannot have the number...
    l.t.expect_error(
        "cards/details",
        json!({"card_id": card_id, "external_user_id": "ada"}),
        422,
        "card_details_plaintext_unavailable",
    )
    .await;
    // ...but the cardholder's browser can see it, in Lithic's frames.
    let before = common::now_micros() / 1_000_000;
    let s =
        l.t.ok(
            "cards/reveal/create",
            json!({"card_id": card_id, "external_user_id": "ada", "target_origin": ORIGIN,
               "ttl_seconds": 120}),
        )
        .await;
    let embeds = l.fake.embeds();
    assert_eq!(embeds.len(), 1);
    let (embed_card, embed_origin, expiration) = embeds[0].clone();
    assert_eq!(
        (embed_card.as_str(), embed_origin.as_str()),
        (token.as_str(), ORIGIN)
    );
    assert!(
        (expiration - before - 120).abs() <= 5,
        "{expiration} {before}"
    );
    let url = s["url"].as_str().unwrap();
    let urls = &s["urls"];
    assert_eq!(s["url"], urls["pan"], "{s}");
    for (field, kind) in [
        ("pan", "PAN"),
        ("cvv", "CVV"),
        ("exp_month", "EXP_MONTH"),
        ("exp_year", "EXP_YEAR"),
    ] {
        let u = reqwest::Url::parse(urls[field].as_str().unwrap()).unwrap();
        assert!(
            u.as_str()
                .starts_with(&format!("{}/v1/embed?", l.fake.base)),
            "{u}"
        );
        let q: std::collections::HashMap<_, _> = u.query_pairs().into_owned().collect();
        assert_eq!(q["type"], kind);
        assert!(q["session"].starts_with("eyJ"), "{q:?}");
    }
    // Nothing of the card passed through us: no card read at Lithic, no page of ours.
    assert_eq!(l.fake.calls("GET", "/v1/cards/{card_token}"), card_reads);
    let stored = sqlx::query("SELECT kind, token_hash, target_origin FROM reveal_sessions")
        .fetch_one(l.t.store.pool())
        .await
        .unwrap();
    assert_eq!(stored.get::<String, _>("kind"), "lithic_embed");
    assert_eq!(stored.get::<Option<String>, _>("token_hash"), None);
    let session = reqwest::Url::parse(url)
        .unwrap()
        .query_pairs()
        .find(|(k, _)| k == "session")
        .unwrap()
        .1
        .into_owned();
    let row_text = format!("{:?}", audit(l, "card.reveal_session.create").await);
    assert!(
        !row_text.contains(&session),
        "the session is never kept: {row_text}"
    );

    // The browser loads Lithic's page: the number, once.
    let lithic_card = l.fake.card(&token).unwrap();
    let page = reqwest::get(url).await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(
        page.headers()["content-security-policy"],
        format!("frame-ancestors {ORIGIN}").as_str()
    );
    assert!(page
        .text()
        .await
        .unwrap()
        .contains(lithic_card["pan"].as_str().unwrap()));
    assert_eq!(reqwest::get(url).await.unwrap().status(), 401, "single use");

    // Lithic says so (embed.viewed, which enrolment subscribed to): in the audit log.
    let start = std::time::Instant::now();
    let viewed = loop {
        let rows = audit(l, "card.details_viewed").await;
        if !rows.is_empty() {
            break rows;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "no audit row");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(viewed.len(), 1, "{viewed:?}");
    assert_eq!(viewed[0].0, "lithic");
    assert_eq!(viewed[0].1["card_id"], card_id.as_str());
    assert_eq!(viewed[0].1["embed_type"], "PAN");
    // Our own webhook is not sent for Lithic's views.
    let ours = l.t.events(&l.t.creds.project_id).await;
    assert!(ours.iter().all(|e| e.event_type != "card.details_viewed"));

    // A card that is not active is refused before Lithic is asked.
    l.t.ok(
        "cards/close",
        json!({"card_id": card_id, "idempotency_key": "close-ada"}),
    )
    .await;
    l.t.expect_error(
        "cards/reveal/create",
        json!({"card_id": card_id, "target_origin": ORIGIN}),
        422,
        "card_not_active",
    )
    .await;
    assert_eq!(l.fake.embeds().len(), 1);
    l.fake.set_pan_access(true);
}

lithic_case!(enrolment_subscribes_to_embed_views, "");
async fn enrolment_subscribes_to_embed_views(l: &Lithic) {
    let enrolled = sqlx::query("SELECT subscription_token FROM lithic_enrolments")
        .fetch_one(l.t.store.pool())
        .await
        .unwrap()
        .get::<String, _>("subscription_token");
    assert!(!enrolled.is_empty());
    let types = l.fake.subscription_event_types();
    assert!(
        types.iter().any(|t| t == "embed.viewed")
            && types.iter().any(|t| t == "card_transaction.updated"),
        "{types:?}"
    );
}

lithic_case!(with_pan_access_the_page_is_ours, "");
async fn with_pan_access_the_page_is_ours(l: &Lithic) {
    let (card_id, token) = l.card("bea", "20").await;
    let s =
        l.t.ok(
            "cards/reveal/create",
            json!({"card_id": card_id, "target_origin": ORIGIN}),
        )
        .await;
    let url = s["url"].as_str().unwrap();
    assert!(url.starts_with(&format!("{}/reveal/", l.t.base)), "{url}");
    assert!(s.get("urls").is_none());
    assert!(l.fake.embeds().is_empty());
    let reads = l.fake.calls("GET", "/v1/cards/{card_token}");
    let page = reqwest::Client::new()
        .get(url)
        .header("referer", format!("{ORIGIN}/wallet"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let body = page.text().await.unwrap();
    let pan = l.fake.card(&token).unwrap()["pan"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        body.contains(&format!("{} {}", &pan[..4], &pan[4..8])),
        "{body}"
    );
    assert!(body.contains("id=\"exp\">06/31<"), "{body}");
    assert_eq!(
        l.fake.calls("GET", "/v1/cards/{card_token}"),
        reads + 1,
        "read once, for the page"
    );
    assert_eq!(reqwest::get(url).await.unwrap().status(), 410);
    let viewed = l.t.events(&l.t.creds.project_id).await;
    assert_eq!(
        viewed
            .iter()
            .filter(|e| e.event_type == "card.details_viewed")
            .count(),
        1
    );
}
