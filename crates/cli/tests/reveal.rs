//! Reveal sessions (CONTRACT §16) through the public HTTP API, on both backends:
//! `cards/reveal/create` and its checks, the page at `/reveal/{token}` (its headers,
//! single use, also when GETs race across two server processes, expiry, the origin
//! check that leaves a session unused, only GET), the `card.details_viewed` webhook and
//! the audit rows, and logs that never hold a token or card data. The Lithic path is in
//! `reveal_lithic.rs`; framing in a real browser in `browser/test_reveal.py`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::receiver::Receiver;
use common::TestServer;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use sqlx::Row;
use std::time::Duration;

const ORIGIN: &str = "http://127.0.0.1:3000";
const EVENT_TIMEOUT: Duration = Duration::from_secs(20);

/// A GET of a reveal page as a browser framing it from `referer` would send it.
async fn get(url: &str, referer: Option<&str>) -> (u16, reqwest::header::HeaderMap, String) {
    let mut req = reqwest::Client::new().get(url);
    if let Some(r) = referer {
        req = req.header("referer", r);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    let headers = res.headers().clone();
    (status, headers, res.text().await.unwrap())
}

fn header<'a>(h: &'a reqwest::header::HeaderMap, name: &str) -> &'a str {
    h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// The text of the element with this id.
fn element(body: &str, id: &str) -> Option<String> {
    let at = body.find(&format!("id=\"{id}\">"))?;
    let rest = &body[at + id.len() + 6..];
    Some(rest[..rest.find('<')?].to_owned())
}

impl TestServer {
    async fn reveal(&self, card_id: &str, user: &str, extra: Value) -> Value {
        let mut body =
            json!({"card_id": card_id, "external_user_id": user, "target_origin": ORIGIN});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        self.ok("cards/reveal/create", body).await
    }

    async fn used_at(&self, reveal_id: &str) -> Option<i64> {
        sqlx::query("SELECT used_at FROM reveal_sessions WHERE id = $1")
            .bind(reveal_id)
            .fetch_one(self.store.pool())
            .await
            .unwrap()
            .get::<Option<i64>, _>("used_at")
    }

    async fn details(&self, card_id: &str, user: &str) -> (String, String, i64, i64) {
        let d = self
            .ok(
                "cards/details",
                json!({"card_id": card_id, "external_user_id": user}),
            )
            .await;
        let text = |f: &str| d["details"][f].as_str().unwrap().to_owned();
        let num = |f: &str| d["details"][f].as_i64().unwrap();
        (
            text("card_number"),
            text("cvv"),
            num("expiry_month"),
            num("expiry_year"),
        )
    }

    async fn viewed_events(&self) -> Vec<issuing_store::events::EventRecord> {
        self.events(&self.creds.project_id)
            .await
            .into_iter()
            .filter(|e| e.event_type == "card.details_viewed")
            .collect()
    }
}

both_backends!(
    a_page_shown_once_to_its_origin,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 100_000_000).await;
        let rx = Receiver::start(&t.creds.api_secret).await;
        t.ok("wh/subscribe", json!({"url": rx.url})).await;
        let card = t.active_card("alice", "virtual_usd").await;
        let (pan, cvv, month, year) = t.details(&card, "alice").await;

        let before = common::now_micros();
        let s = t.reveal(&card, "alice", json!({})).await;
        let reveal_id = s["reveal_id"].as_str().unwrap().to_owned();
        let url = s["url"].as_str().unwrap().to_owned();
        let token = url
            .strip_prefix(&format!("{}/reveal/", t.base))
            .unwrap_or_else(|| panic!("{url}"))
            .to_owned();
        assert_eq!(token.len(), 43, "32 random bytes, base64url");
        assert!(s.get("urls").is_none(), "{s}");
        let expires = chrono::DateTime::parse_from_rfc3339(s["expires_at"].as_str().unwrap())
            .unwrap()
            .timestamp_micros();
        assert!(
            (expires - before - 60_000_000).abs() < 5_000_000,
            "default 60 s"
        );

        // The database holds the token's hash only.
        let row = sqlx::query("SELECT * FROM reveal_sessions WHERE id = $1")
            .bind(&reveal_id)
            .fetch_one(t.store.pool())
            .await
            .unwrap();
        let hash: String = row.get("token_hash");
        let want: String = Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hash, want);
        assert_eq!(row.get::<String, _>("target_origin"), ORIGIN);

        // Another origin asking (a browser fetches a frame before refusing to show it):
        // 403, no card data, the session left unused. So are methods other than GET.
        for referer in ["http://127.0.0.1:3001/", "http://localhost:3000/", "null"] {
            let (status, h, body) = get(&url, Some(referer)).await;
            assert_eq!(status, 403, "{referer}");
            assert!(header(&h, "content-security-policy").contains("frame-ancestors 'none'"));
            assert!(
                element(&body, "pan").is_none() && !body.contains(&pan),
                "{body}"
            );
        }
        let origin_null = reqwest::Client::new()
            .get(&url)
            .header("origin", "null")
            .send()
            .await
            .unwrap();
        assert_eq!(origin_null.status(), 403);
        let http = reqwest::Client::new();
        for method in ["HEAD", "POST", "PUT", "DELETE", "OPTIONS"] {
            let r = http
                .request(method.parse().unwrap(), &url)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 405, "{method}");
            assert_eq!(header(r.headers(), "allow"), "GET", "{method}");
        }
        assert_eq!(t.used_at(&reveal_id).await, None, "still unused");

        // The first GET from the session's origin shows the details, with §16's headers.
        let (status, h, body) = get(&url, Some("http://127.0.0.1:3000/checkout?step=2")).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            header(&h, "content-security-policy"),
            format!("default-src 'none'; style-src 'unsafe-inline'; frame-ancestors {ORIGIN}")
        );
        assert_eq!(header(&h, "cache-control"), "no-store");
        assert_eq!(header(&h, "referrer-policy"), "no-referrer");
        assert_eq!(header(&h, "x-content-type-options"), "nosniff");
        assert!(header(&h, "content-type").starts_with("text/html"));
        assert!(h.get("x-frame-options").is_none(), "framing is the CSP's");
        let grouped: Vec<String> = pan
            .as_bytes()
            .chunks(4)
            .map(|c| String::from_utf8(c.to_vec()).unwrap())
            .collect();
        assert_eq!(element(&body, "pan").unwrap(), grouped.join(" "));
        assert_eq!(
            element(&body, "exp").unwrap(),
            format!("{month:02}/{:02}", year % 100)
        );
        assert_eq!(element(&body, "cvv").unwrap(), cvv);
        assert!(!body.to_ascii_lowercase().contains("<script"), "{body}");
        assert!(t.used_at(&reveal_id).await.is_some());

        // Every later GET: 410, nothing of the card.
        for referer in [Some(ORIGIN), None] {
            let (status, h, body) = get(&url, referer).await;
            assert_eq!(status, 410);
            assert!(element(&body, "pan").is_none() && element(&body, "cvv").is_none());
            assert!(!body.contains(&pan), "{body}");
            assert_eq!(header(&h, "cache-control"), "no-store");
            assert!(header(&h, "content-security-policy")
                .contains(&format!("frame-ancestors {ORIGIN}")));
        }
        // Unknown tokens: 404.
        let unknown = format!("{}/reveal/{}", t.base, "A".repeat(43));
        assert_eq!(get(&unknown, None).await.0, 404);
        assert_eq!(get(&format!("{}/reveal/nope", t.base), None).await.0, 404);

        // One card.details_viewed event, delivered; audit rows for create and view.
        let events = t.viewed_events().await;
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].payload["reveal_id"], reveal_id.as_str());
        rx.wait_until("card.details_viewed", EVENT_TIMEOUT, |got| {
            got.iter()
                .any(|r| r.event["event_type"] == "card.details_viewed")
        })
        .await;
        let delivered = rx
            .received()
            .into_iter()
            .find(|r| r.event["event_type"] == "card.details_viewed")
            .unwrap()
            .event;
        assert_eq!(delivered["project_id"], t.creds.project_id.as_str());
        assert_eq!(delivered["data"]["card_id"], card.as_str());
        assert_eq!(delivered["data"]["reveal_id"], reveal_id.as_str());
        let viewed_at =
            chrono::DateTime::parse_from_rfc3339(delivered["data"]["viewed_at"].as_str().unwrap());
        assert!(viewed_at.is_ok(), "{delivered}");
        assert!(!delivered.to_string().contains(&pan));

        let rows = sqlx::query(
            "SELECT actor, action, project_id, targets, result FROM audit_log ORDER BY id",
        )
        .fetch_all(t.store.pool())
        .await
        .unwrap();
        let rows: Vec<(String, String, Option<String>, String)> = rows
            .iter()
            .map(|r| {
                (
                    r.get("actor"),
                    r.get("action"),
                    r.get("project_id"),
                    r.get("targets"),
                )
            })
            .collect();
        let created = rows
            .iter()
            .find(|r| r.1 == "card.reveal_session.create")
            .unwrap_or_else(|| panic!("{rows:?}"));
        assert_eq!(created.0, "api");
        assert_eq!(created.2.as_deref(), Some(t.creds.project_id.as_str()));
        assert!(created.3.contains(&reveal_id) && created.3.contains(ORIGIN));
        let viewed: Vec<_> = rows
            .iter()
            .filter(|r| r.1 == "card.details_viewed")
            .collect();
        assert_eq!(viewed.len(), 1, "{rows:?}");
        assert_eq!(viewed[0].0, "cardholder");
        for r in &rows {
            // As stored (targets is JSON text). The CVV as a value: its 3 digits alone
            // may occur in an id or a port.
            let text = format!("{} {} {}", r.0, r.1, r.3);
            assert!(!text.contains(&token) && !text.contains(&pan), "{text}");
            assert!(!text.contains(&format!("\"{cvv}\"")), "{text}");
        }
    }
);

both_backends!(create_checks_its_request, |t: TestServer| async move {
    t.deposit(&t.creds.project_id, 100_000_000).await;
    let card = t.active_card("bob", "virtual_usd").await;
    let call = |body: Value| {
        let t = &t;
        async move { t.call("cards/reveal/create", body).await }
    };
    let refused = |status: u16, slug: &'static str| {
        move |(s, v): (u16, Value)| {
            assert_eq!((s, v["error_slug"].as_str()), (status, Some(slug)), "{v}");
        }
    };
    refused(400, "validation_error")(call(json!({"target_origin": ORIGIN})).await);
    for origin in [
        "",
        "example.com",
        "https://example.com/path",
        "https://example.com/?a=1",
        "https://user:pw@example.com",
        "http://example.com",
        "http://10.0.0.1:3000",
        "ftp://example.com",
        "https://example.com; frame-ancestors *",
    ] {
        refused(400, "validation_error")(
            call(json!({"card_id": card, "target_origin": origin})).await,
        );
    }
    for ttl in [json!(9), json!(301), json!(-1), json!("sixty")] {
        refused(400, "validation_error")(
            call(json!({"card_id": card, "target_origin": ORIGIN, "ttl_seconds": ttl})).await,
        );
    }
    // https anywhere, loopback http in the sandbox, 10 to 300 seconds.
    for (origin, ttl) in [
        ("https://app.example.com", 10),
        ("http://localhost:8080", 300),
        ("https://shop.example.com:8443/", 30),
    ] {
        let (s, v) =
            call(json!({"card_id": card, "target_origin": origin, "ttl_seconds": ttl})).await;
        assert_eq!(s, 200, "{origin}: {v}");
    }
    let stored: Vec<String> =
        sqlx::query("SELECT target_origin FROM reveal_sessions ORDER BY created_at")
            .fetch_all(t.store.pool())
            .await
            .unwrap()
            .iter()
            .map(|r| r.get("target_origin"))
            .collect();
    assert!(
        stored.contains(&"https://shop.example.com:8443".to_owned()),
        "{stored:?}"
    );

    // Whose card: unknown 404, another user's 422, another project's 404.
    refused(404, "card_not_found")(call(json!({"card_id": "nope", "target_origin": ORIGIN})).await);
    t.active_card("carol", "virtual_usd").await;
    refused(422, "card_user_mismatch")(
        call(json!({"card_id": card, "external_user_id": "carol", "target_origin": ORIGIN})).await,
    );
    let other = t.new_project("other").await;
    let (s, v) = t
        .call_as(
            &other,
            "cards/reveal/create",
            json!({"card_id": card, "target_origin": ORIGIN}),
        )
        .await;
    assert_eq!((s, v["error_slug"].as_str()), (404, Some("card_not_found")));

    // A frozen card may be shown; a closed one not; nor one whose provider shows nothing.
    t.ok("cards/freeze", json!({"card_id": card})).await;
    let frozen = t.reveal(&card, "bob", json!({})).await;
    assert_eq!(get(frozen["url"].as_str().unwrap(), None).await.0, 200);
    t.ok("cards/unfreeze", json!({"card_id": card})).await;
    let before_close = t.reveal(&card, "bob", json!({})).await;
    t.ok(
        "cards/close",
        json!({"card_id": card, "idempotency_key": "close-bob"}),
    )
    .await;
    refused(422, "card_not_active")(call(json!({"card_id": card, "target_origin": ORIGIN})).await);
    // A session made before the card closed shows nothing either (and stays unused).
    assert_eq!(
        get(before_close["url"].as_str().unwrap(), None).await.0,
        410
    );
    let restricted = t.active_card("dan", "virtual_usd_restricted").await;
    refused(422, "card_details_plaintext_unavailable")(
        call(json!({"card_id": restricted, "target_origin": ORIGIN})).await,
    );
    assert_eq!(
        t.viewed_events().await.len(),
        1,
        "only the frozen card's view"
    );
});

both_backends!(
    single_use_when_gets_race_across_processes,
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 100_000_000).await;
        let card = t.active_card("erin", "virtual_usd").await;
        let sibling = t.sibling().await;
        let sibling_base = format!("http://{}", sibling.addr);
        for round in 0..3 {
            let s = t.reveal(&card, "erin", json!({})).await;
            let url = s["url"].as_str().unwrap().to_owned();
            let token = url.rsplit('/').next().unwrap().to_owned();
            // Half the GETs go to the other process on the same database.
            let urls: Vec<String> = (0..16)
                .map(|i| {
                    let base = if i % 2 == 0 { &t.base } else { &sibling_base };
                    format!("{base}/reveal/{token}")
                })
                .collect();
            let answers = futures::future::join_all(urls.iter().map(|u| get(u, None))).await;
            let mut statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
            statuses.sort_unstable();
            let mut want = vec![200];
            want.extend([410; 15]);
            assert_eq!(statuses, want, "round {round}");
            assert_eq!(t.viewed_events().await.len(), round + 1);
        }
        sibling.shutdown().await;
    }
);

both_backends!(sessions_expire, |t: TestServer| async move {
    t.deposit(&t.creds.project_id, 100_000_000).await;
    let card = t.active_card("fay", "virtual_usd").await;
    let short = t.reveal(&card, "fay", json!({"ttl_seconds": 10})).await;
    let reveal_id = short["reveal_id"].as_str().unwrap();
    let row = sqlx::query("SELECT created_at, expires_at FROM reveal_sessions WHERE id = $1")
        .bind(reveal_id)
        .fetch_one(t.store.pool())
        .await
        .unwrap();
    assert_eq!(
        row.get::<i64, _>("expires_at") - row.get::<i64, _>("created_at"),
        10_000_000
    );
    // Past its end (moved there rather than waited for): 410, unused, no event.
    sqlx::query("UPDATE reveal_sessions SET expires_at = $1 WHERE id = $2")
        .bind(common::now_micros() - 1)
        .bind(reveal_id)
        .execute(t.store.pool())
        .await
        .unwrap();
    let (status, _, body) = get(short["url"].as_str().unwrap(), None).await;
    assert_eq!(status, 410, "{body}");
    assert_eq!(t.used_at(reveal_id).await, None);
    assert!(t.viewed_events().await.is_empty());
    // And one that really runs out: 10 s.
    let real = t.reveal(&card, "fay", json!({"ttl_seconds": 10})).await;
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    assert_eq!(get(real["url"].as_str().unwrap(), None).await.0, 410);
});

both_backends!(the_sdk_creates_sessions, |t: TestServer| async move {
    t.deposit(&t.creds.project_id, 100_000_000).await;
    let card = t.active_card("gus", "virtual_usd").await;
    let s = t
        .sdk()
        .cards_reveal_create(&issuing_client::CardsRevealCreate {
            card_id: card.clone(),
            external_user_id: Some("gus".into()),
            target_origin: "https://app.example.com".into(),
            ttl_seconds: Some(120),
        })
        .await
        .unwrap();
    assert!(s.url.starts_with(&format!("{}/reveal/", t.base)));
    let debug = format!("{s:?}");
    assert!(
        !debug.contains(&s.url) && debug.contains(&s.reveal_id),
        "{debug}"
    );
    let e = common::api_error(
        t.sdk()
            .cards_reveal_create(&issuing_client::CardsRevealCreate {
                card_id: card,
                target_origin: "http://example.com".into(),
                ..Default::default()
            })
            .await,
        400,
        "validation_error",
    );
    assert!(e.to_string().contains("target_origin"), "{e}");
});

/// `issuing serve` on this backend with every log line on stderr collected (debug, the
/// access log too), and the lines printed on stdout before it listened.
struct Logged {
    child: tokio::process::Child,
    base: String,
    banner: Vec<String>,
    stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

async fn serve_logged(db: &common::TestDb) -> Logged {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let mut child = common::process::issuing()
        .env("ISSUING_LOG", "debug,issuing::access=debug")
        .env_remove("ISSUING_LOG_FORMAT")
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--database-url")
        .arg(&db.url)
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--console-listen",
            "off",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = stderr.clone();
    let mut err_lines = BufReader::new(child.stderr.take().unwrap()).lines();
    tokio::spawn(async move {
        while let Ok(Some(l)) = err_lines.next_line().await {
            sink.lock().unwrap().push(l);
        }
    });
    let mut out_lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut banner = Vec::new();
    let base = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = out_lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("issuing listening on ") {
                return rest.trim_end_matches("/api/v2").to_owned();
            }
            banner.push(line);
        }
        panic!("issuing serve exited before listening");
    })
    .await
    .unwrap();
    tokio::spawn(async move { while let Ok(Some(_)) = out_lines.next_line().await {} });
    Logged {
        child,
        base,
        banner,
        stderr,
        _dir: dir,
    }
}

both_backends!(
    logs_hold_no_token_and_no_card_data,
    |t: TestServer| async move {
        // A database of its own: the binary binds the master key of its data directory.
        let db = common::TestDb::create(t.db.backend).await.unwrap();
        let mut server = serve_logged(&db).await;
        let value = |name: &str| {
            server
                .banner
                .iter()
                .find_map(|l| {
                    l.trim()
                        .strip_prefix(&format!("{name}:"))
                        .map(|v| v.trim().to_owned())
                })
                .unwrap_or_else(|| panic!("no {name} in {:?}", server.banner))
        };
        let creds = common::Creds {
            project_id: value("project_id"),
            api_key: value("api_key"),
            api_secret: value("api_secret"),
            deposit_address: String::new(),
        };
        let sdk = t.sdk_on(&server.base, &creds);
        sdk.cardholders_create(&issuing_client::CardholdersCreate {
            external_user_id: "hal".into(),
            subprovider_code: "sandbox".into(),
            product_code: None,
            kyc_data: Some(serde_json::from_value(common::cards::kyc()).unwrap()),
        })
        .await
        .unwrap();
        let created = sdk
            .cards_create(
                &issuing_client::CardsCreate {
                    external_user_id: "hal".into(),
                    product_code: "virtual_usd".into(),
                    ..Default::default()
                },
                "issue-hal",
            )
            .await
            .unwrap();
        sdk.wait_order(&created.order.order_id, Duration::from_secs(20))
            .await
            .unwrap();
        let details = sdk
            .cards_details(&issuing_client::CardRef::new(&created.card_id, "hal"))
            .await
            .unwrap()
            .details;
        let mut tokens = Vec::new();
        for referer in [Some("https://evil.example/"), Some(ORIGIN), None] {
            let s = sdk
                .cards_reveal_create(&issuing_client::CardsRevealCreate {
                    card_id: created.card_id.clone(),
                    external_user_id: Some("hal".into()),
                    target_origin: ORIGIN.into(),
                    ttl_seconds: None,
                })
                .await
                .unwrap();
            let (first, _, body) = get(&s.url, referer).await;
            let (second, _, _) = get(&s.url, referer).await;
            if referer == Some(ORIGIN) {
                assert_eq!((first, second), (200, 410));
                assert!(body.contains(&details.cvv));
            }
            tokens.push(s.url.rsplit('/').next().unwrap().to_owned());
        }
        // Some lines were written about these requests (so the check below reads logs).
        let start = std::time::Instant::now();
        while !server
            .stderr
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("/reveal/{token}"))
        {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no access log line"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = server.child.kill().await;
        let lines = server.stderr.lock().unwrap().clone();
        let pan = details.card_number.clone();
        let grouped: Vec<String> = pan
            .as_bytes()
            .chunks(4)
            .map(|c| String::from_utf8(c.to_vec()).unwrap())
            .collect();
        let grouped = grouped.join(" ");
        for line in &lines {
            for token in &tokens {
                assert!(
                    !line.contains(token.as_str()),
                    "token in a log line: {line}"
                );
            }
            assert!(
                !line.contains(&pan) && !line.contains(&grouped),
                "PAN in a log line: {line}"
            );
            assert!(
                !line.contains(&format!("\"{}\"", details.cvv))
                    && !line.contains(&format!("cvv={}", details.cvv)),
                "CVV in a log line: {line}"
            );
        }
    }
);
