//! The operator console (CONTRACT §12) over HTTP, without a browser: login, sessions and
//! lockout, CSRF and cross-origin refusals, headers, roles and viewer scope, masking and
//! the audited reveal, every action through the API's code, the audit log (also of
//! `issuing admin` commands), keyset paging. The browser tests are in
//! `crates/cli/tests/browser/` (Python + Selenium, run by CI).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::console::{Console, Page};
use common::process::{issuing, ServeProcess};
use common::receiver::{Behaviour, Receiver};
use common::{TestDb, TestServer};
use issuing_app::config::{ConsoleListen, ConsoleSecurity};
use issuing_console::operators::{self, Role};
use issuing_server::ServerConfig;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use sqlx::Row;
use std::time::Duration;

fn config() -> ServerConfig {
    ServerConfig {
        console: Some(ConsoleListen {
            addr: "127.0.0.1:0".parse().unwrap(),
            optional: false,
        }),
        // The tests play clients at other addresses through a local "proxy".
        console_security: ConsoleSecurity {
            trusted_proxies: issuing_domain::webhooks::AllowedNetworks::parse("127.0.0.0/8")
                .unwrap(),
            ..ConsoleSecurity::default()
        },
        webhook_retry_interval: Duration::from_secs(1),
        webhook_max_age: Duration::from_secs(2),
        ..ServerConfig::default()
    }
}

impl TestServer {
    fn console(&self) -> std::net::SocketAddr {
        self.console_addr().expect("console listening")
    }

    /// A new operator; answers its password.
    async fn operator(&self, email: &str, role: Role, projects: &[String]) -> String {
        operators::create(&self.store, email, role, projects)
            .await
            .unwrap()
            .password
    }

    async fn login_as(&self, email: &str, role: Role) -> Console {
        let password = self.operator(email, role, &[]).await;
        Console::login(self.console(), email, &password).await
    }

    async fn audit_rows(&self) -> Vec<(String, String, Value, String)> {
        let rows = sqlx::query("SELECT actor, action, targets, result FROM audit_log ORDER BY id")
            .fetch_all(self.store.pool())
            .await
            .unwrap();
        rows.iter()
            .map(|r| {
                (
                    r.get::<String, _>("actor"),
                    r.get::<String, _>("action"),
                    serde_json::from_str(&r.get::<String, _>("targets")).unwrap(),
                    r.get::<String, _>("result"),
                )
            })
            .collect()
    }

    async fn card_status(&self, card_id: &str) -> String {
        let mut conn = self.store.conn().await.unwrap();
        issuing_store::cards::get(&mut conn, &self.creds.project_id, card_id)
            .await
            .unwrap()
            .unwrap()
            .status
    }
}

/// CONTRACT §12's headers, on any console answer.
fn assert_protected(p: &Page) {
    let csp = p.header("content-security-policy");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(p.header("x-content-type-options"), "nosniff");
    assert_eq!(p.header("referrer-policy"), "same-origin");
    assert_eq!(p.header("cache-control"), "no-store");
}

/// No inline script, handler or style anywhere in a page (the CSP would refuse them).
fn assert_no_inline_code(p: &Page) {
    let b = &p.body;
    let mut rest = b.as_str();
    while let Some(at) = rest.find("<script") {
        let tag = &rest[at..at + rest[at..].find('>').unwrap()];
        assert!(
            tag.contains(" src=\"/console/assets/"),
            "inline script: {tag}"
        );
        rest = &rest[at + 1..];
    }
    for bad in [
        " style=",
        "<style",
        " onclick=",
        " onload=",
        " onsubmit=",
        "javascript:",
    ] {
        assert!(!b.contains(bad), "{bad} in page");
    }
}

both_backends_with!(
    login_sessions_and_lockout,
    config(),
    |t: TestServer| async move {
        let addr = t.console();
        let anon = Console::new(addr);
        for path in [
            "/console/",
            "/console/cards",
            "/console/cards/nope",
            "/console/audit",
            "/console/no-such-page",
        ] {
            let p = anon.get(path).await;
            assert_eq!((p.status, p.location()), (303, "/console/login"), "{path}");
            assert_protected(&p);
        }
        let form = anon.get("/console/login").await;
        assert_eq!(form.status, 200);
        assert!(form.body.contains("name=\"email\"") && form.body.contains("name=\"password\""));
        assert_protected(&form);
        assert_no_inline_code(&form);

        let password = t.operator("Ops@Example.com", Role::Operator, &[]).await;
        let mut c = Console::new(addr);
        let wrong_password = c.try_login("ops@example.com", "nope").await;
        let wrong_email = c.try_login("nobody@example.com", &password).await;
        assert_eq!((wrong_password.status, wrong_email.status), (401, 401));
        let hint = |p: &Page| {
            p.body[p.body.find("login-error").unwrap()..]
                .split('<')
                .next()
                .unwrap()
                .to_owned()
        };
        assert_eq!(
            hint(&wrong_password),
            hint(&wrong_email),
            "no hint which part was wrong"
        );
        assert!(c.cookie.is_none());
        // Each failure is audited with the email and the client's address.
        let failed: Vec<_> = t
            .audit_rows()
            .await
            .into_iter()
            .filter(|r| r.1 == "console.login_failed")
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert_eq!(failed[0].0, "ops@example.com");
        assert_eq!(failed[0].2["address"], "127.0.0.1");
        assert_eq!(failed[1].2["email"], "nobody@example.com");

        let ok = c.try_login(" OPS@example.com", &password).await;
        assert_eq!((ok.status, ok.location()), (303, "/console/"));
        let set = ok.header("set-cookie");
        for part in ["HttpOnly", "SameSite=Strict", "Path=/"] {
            assert!(set.contains(part), "{set}");
        }
        assert!(
            !set.contains("Secure"),
            "the sandbox serves plain loopback: {set}"
        );
        // Stored hashed, ending 12 hours after login.
        let token = c.token();
        let row = sqlx::query("SELECT token_hash, created_at, expires_at FROM console_sessions")
            .fetch_one(t.store.pool())
            .await
            .unwrap();
        let hash: String = row.get("token_hash");
        let want: String = Sha256::digest(token.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(hash, want);
        assert_ne!(hash, token);
        let lifetime = row.get::<i64, _>("expires_at") - row.get::<i64, _>("created_at");
        assert_eq!(lifetime, 12 * 3600 * 1_000_000);

        let home = c.get("/console/").await;
        assert_eq!(home.status, 200);
        assert!(home.body.contains("ops@example.com"), "{}", home.body);
        assert_protected(&home);
        assert_no_inline_code(&home);
        assert_eq!(c.get("/console/no-such-page").await.status, 404);

        // Logout needs the token; then the cookie opens nothing.
        assert_eq!(c.post("/console/logout", &[]).await.status, 403);
        let csrf = home.csrf();
        let out = c.post("/console/logout", &[("csrf", &csrf)]).await;
        assert_eq!((out.status, out.location()), (303, "/console/login"));
        assert_eq!(c.get("/console/").await.status, 303);

        // A session ends when it expires and when its operator is disabled.
        let c = Console::login(addr, "ops@example.com", &password).await;
        sqlx::query("UPDATE console_sessions SET expires_at = 1")
            .execute(t.store.pool())
            .await
            .unwrap();
        assert_eq!(c.get("/console/").await.location(), "/console/login");
        let c = Console::login(addr, "ops@example.com", &password).await;
        assert_eq!(c.get("/console/").await.status, 200);
        operators::disable(&t.store, "ops@example.com")
            .await
            .unwrap();
        assert_eq!(c.get("/console/").await.location(), "/console/login");
        let mut again = Console::new(addr);
        assert_eq!(
            again.try_login("ops@example.com", &password).await.status,
            401
        );

        // 10 failures within 10 minutes lock the email, even for the right password
        // (from 10 addresses: one address alone is stopped after 5).
        let password = t.operator("lock@example.com", Role::Viewer, &[]).await;
        let mut c = Console::new(addr);
        for i in 1..=10 {
            let from = format!("198.51.100.{i}");
            let p = c
                .try_login_from("lock@example.com", "wrong", Some(&from))
                .await;
            let want = if i < 10 { 401 } else { 429 };
            assert_eq!(p.status, want, "attempt {i}");
        }
        let p = c
            .try_login_from("lock@example.com", &password, Some("198.51.100.77"))
            .await;
        assert_eq!(p.status, 429, "locked");
        assert!(c.cookie.is_none());
        let rows = t.audit_rows().await;
        assert!(
            rows.iter()
                .any(|r| r.1 == "console.lockout" && r.0 == "lock@example.com"),
            "{rows:?}"
        );
        // Unknown emails lock the same way (a lockout reveals nothing).
        for i in 0..10 {
            let from = format!("198.51.100.{}", 100 + i);
            c.try_login_from("ghost@example.com", "x", Some(&from))
                .await;
        }
        let p = c
            .try_login_from("ghost@example.com", "x", Some("198.51.100.200"))
            .await;
        assert_eq!(p.status, 429);
        // The lock lasts 30 minutes (PCI DSS 8.3.4): past it, the right password works.
        let lock = sqlx::query(
            "SELECT locked_until FROM console_login_failures WHERE email = 'lock@example.com'",
        )
        .fetch_one(t.store.pool())
        .await
        .unwrap()
        .get::<i64, _>("locked_until");
        let left = lock - common::now_micros();
        assert!(
            (29 * 60 * 1_000_000..=30 * 60 * 1_000_000).contains(&left),
            "{left}"
        );
        sqlx::query("UPDATE console_login_failures SET locked_until = 1")
            .execute(t.store.pool())
            .await
            .unwrap();
        let p = c
            .try_login_from("lock@example.com", &password, Some("198.51.100.78"))
            .await;
        assert_eq!(p.status, 303, "{}", p.body);
        let logins = t
            .audit_rows()
            .await
            .into_iter()
            .filter(|r| r.1 == "console.login")
            .count();
        assert_eq!(logins, 4);
    }
);

both_backends_with!(
    csrf_origin_roles_and_viewer_scope,
    config(),
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 1_000_000_000).await;
        let card = t.active_card("alice", "virtual_usd").await;
        let other = t.new_project("other").await;
        let c = t.login_as("ops@example.com", Role::Operator).await;
        let page = format!("/console/cards/{card}");
        let freeze = format!("/console/cards/{card}/freeze");
        let csrf = c.get(&page).await.csrf();

        // Every POST needs the session's token and the same origin.
        assert_eq!(c.post(&freeze, &[]).await.status, 403);
        assert_eq!(c.post(&freeze, &[("csrf", "forged")]).await.status, 403);
        let evil = c
            .post_with(
                &freeze,
                &[("csrf", &csrf)],
                &[("origin", "http://evil.example")],
            )
            .await;
        assert_eq!(evil.status, 403);
        assert_protected(&evil);
        let cross = c
            .post_with(
                &freeze,
                &[("csrf", &csrf)],
                &[("sec-fetch-site", "cross-site")],
            )
            .await;
        assert_eq!(cross.status, 403);
        assert_eq!(t.card_status(&card).await, "active", "nothing was frozen");
        let done = c.post(&freeze, &[("csrf", &csrf)]).await;
        assert_eq!((done.status, done.location()), (303, page.as_str()));
        assert_eq!(t.card_status(&card).await, "frozen");
        let shown = c.get(&page).await;
        assert!(
            shown.body.contains("is frozen"),
            "the outcome is shown once"
        );
        assert!(
            !c.get(&page).await.body.contains("id=\"flash\""),
            "and only once"
        );
        // The API sees it as a frozen card with its webhook event.
        let events = t.events(&t.creds.project_id).await;
        assert!(events.iter().any(|e| e.event_type == "card.freeze"));
        let done = c
            .act(&page, &format!("/console/cards/{card}/unfreeze"), &[])
            .await;
        assert_eq!(done.status, 303);
        assert_eq!(t.card_status(&card).await, "active");
        // A refused transition is shown, not applied, and audited as an error.
        let again = c
            .act(&page, &format!("/console/cards/{card}/unfreeze"), &[])
            .await;
        assert_eq!(again.status, 303);
        assert!(c.get(&page).await.body.contains("Cannot unfreeze"));
        let rows = t.audit_rows().await;
        let acts: Vec<_> = rows.iter().filter(|r| r.1.starts_with("card.")).collect();
        assert_eq!(acts.len(), 3, "{rows:?}");
        assert_eq!(
            (acts[0].0.as_str(), acts[0].1.as_str(), acts[0].3.as_str()),
            ("ops@example.com", "card.freeze", "ok")
        );
        assert_eq!(acts[0].2, json!({"card_id": card}));
        assert!(
            acts[2].3.starts_with("error: Cannot unfreeze"),
            "{:?}",
            acts[2]
        );

        // Operators do not see the operators page; admins do.
        assert_eq!(c.get("/console/operators").await.status, 403);
        let admin = t.login_as("root@example.com", Role::Admin).await;
        let ops = admin.get("/console/operators").await;
        assert_eq!(ops.status, 200);
        assert!(ops.body.contains("ops@example.com"));

        // A viewer reads its projects only, and changes nothing.
        let password = t
            .operator(
                "look@example.com",
                Role::Viewer,
                std::slice::from_ref(&other.project_id),
            )
            .await;
        let v = Console::login(t.console(), "look@example.com", &password).await;
        assert_eq!(v.get(&page).await.status, 404, "another project's card");
        assert_eq!(
            v.get(&format!("/console/projects/{}", t.creds.project_id))
                .await
                .status,
            404
        );
        assert_eq!(
            v.get(&format!("/console/projects/{}", other.project_id))
                .await
                .status,
            200
        );
        let cards = v.get(&format!("/console/cards?q={card}")).await;
        assert_eq!(cards.status, 200);
        assert!(
            !cards.body.contains(&format!("/console/cards/{card}\"")),
            "search stays in scope"
        );
        let projects = v.get("/console/projects").await;
        assert!(
            projects.body.contains(&other.project_id)
                && !projects.body.contains(&t.creds.project_id)
        );
        let audit = v.get("/console/audit").await;
        assert!(
            audit.status == 200 && !audit.body.contains("<code>card.freeze</code>"),
            "another project's audit rows"
        );
        let vcsrf = v.get("/console/").await.csrf();
        assert_eq!(v.post(&freeze, &[("csrf", &vcsrf)]).await.status, 403);
        let own = format!("/console/projects/{}/suspend", other.project_id);
        assert_eq!(v.post(&own, &[("csrf", &vcsrf)]).await.status, 403);
        assert_eq!(
            v.post("/console/ledger/verify", &[("csrf", &vcsrf)])
                .await
                .status,
            403
        );
        assert!(!v
            .get("/console/ledger")
            .await
            .body
            .contains("Verify ledger"));
        // Viewers may still sign out.
        assert_eq!(
            v.post("/console/logout", &[("csrf", &vcsrf)]).await.status,
            303
        );
        // A viewer naming no project reads all.
        let password = t.operator("all@example.com", Role::Viewer, &[]).await;
        let all = Console::login(t.console(), "all@example.com", &password).await;
        assert_eq!(all.get(&page).await.status, 200);
    }
);

both_backends_with!(
    masking_reveal_search_and_actions,
    config(),
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 1_000_000_000).await;
        let card = t.active_card("bob-ext", "virtual_usd").await;
        t.ok(
            "cards/topup",
            json!({"card_id": card, "amount": "20", "idempotency_key": "c-top"}),
        )
        .await;
        let details = t
            .ok(
                "cards/details",
                json!({"card_id": card, "external_user_id": "bob-ext"}),
            )
            .await;
        let pan = details["details"]["card_number"]
            .as_str()
            .unwrap()
            .to_owned();
        let cvv = details["details"]["cvv"].as_str().unwrap().to_owned();
        let last4 = &pan[pan.len() - 4..];
        let admin_password = t.operator("root@example.com", Role::Admin, &[]).await;
        let admin = Console::login(t.console(), "root@example.com", &admin_password).await;
        let page = format!("/console/cards/{card}");
        let shown = admin.get(&page).await;
        assert_eq!(shown.status, 200);
        assert!(shown.body.contains(&format!("•••• •••• •••• {last4}")));
        assert!(
            !shown.body.contains(&pan) && !shown.body.contains(&pan[..6]),
            "masked"
        );
        assert_no_inline_code(&shown);

        // Search by last 4, external_user_id and card id.
        for q in [last4, "bob-ext", card.as_str()] {
            let found = admin.get(&format!("/console/cards?q={q}")).await;
            assert!(
                found.body.contains(&format!("/console/cards/{card}\"")),
                "q={q}"
            );
        }
        assert!(
            !admin
                .get("/console/cards?q=0000")
                .await
                .body
                .contains(&card)
                || last4 == "0000"
        );

        // Reveal: admins only, audited, never cached, never in the audit row.
        let op = t.login_as("ops@example.com", Role::Operator).await;
        let reveal = format!("/console/cards/{card}/reveal");
        assert_eq!(op.act(&page, &reveal, &[]).await.status, 403);
        let r = admin
            .act(&page, &reveal, &[("password", &admin_password)])
            .await;
        assert_eq!(r.status, 200);
        assert!(r.body.contains(&pan) && r.body.contains(&cvv));
        assert_protected(&r);
        let rows = t.audit_rows().await;
        let reveal_row = rows.iter().find(|r| r.1 == "card.reveal").unwrap();
        assert_eq!(
            (reveal_row.0.as_str(), reveal_row.3.as_str()),
            ("root@example.com", "ok")
        );
        for row in &rows {
            // The CVV as a value: its 3 digits alone may well occur in a hex id.
            let text = format!("{row:?}");
            assert!(
                !text.contains(&pan) && !text.contains(&format!("\"{cvv}\"")),
                "{text}"
            );
        }

        // Simulate authorization (sandbox): network::apply, shown on the transaction page.
        let sim = op
            .act(
                &page,
                &format!("/console/cards/{card}/simulate"),
                &[("amount", "5.25"), ("merchant", "Kiosk"), ("mcc", "5814")],
            )
            .await;
        assert_eq!(sim.status, 303);
        let tx_page = sim.location().to_owned();
        assert!(tx_page.starts_with("/console/transactions/"), "{tx_page}");
        let tx = op.get(&tx_page).await;
        assert!(
            tx.body.contains("pending") && tx.body.contains("Kiosk") && tx.body.contains("5.25"),
            "{}",
            tx.body
        );
        let txs = t
            .ok(
                "cards/txs",
                json!({"card_id": card, "external_user_id": "bob-ext"}),
            )
            .await;
        assert_eq!(txs["total"], 1, "{txs}");
        let declined = op
            .act(
                &page,
                &format!("/console/cards/{card}/simulate"),
                &[("amount", "1000"), ("merchant", "Yacht"), ("mcc", "")],
            )
            .await;
        let tx = op.get(declined.location()).await;
        assert!(
            tx.body.contains("declined") && tx.body.contains("insufficient_funds"),
            "{}",
            tx.body
        );
        let card_page = op.get(&page).await;
        assert!(card_page.body.contains("insufficient_funds") && card_page.body.contains("Kiosk"));
        assert!(card_page.body.contains("14.75"), "available after the hold");

        // Verify ledger: the code `admin verify-ledger` runs, its result shown.
        let v = op
            .act("/console/ledger", "/console/ledger/verify", &[])
            .await;
        assert_eq!((v.status, v.location()), (303, "/console/ledger"));
        let ledger = op.get("/console/ledger").await;
        assert!(
            ledger.body.contains("id=\"verify-result\">ok"),
            "{}",
            ledger.body
        );
        assert!(ledger.body.contains("Ledger ok"));

        // Suspend and resume a project; rotate and revoke a key.
        let project = format!("/console/projects/{}", t.creds.project_id);
        assert_eq!(
            op.act(&project, &format!("{project}/suspend"), &[])
                .await
                .status,
            303
        );
        // Every process sees a suspension within its key cache's 2 s.
        let mut refused = false;
        for _ in 0..50 {
            refused = t.sdk().project_balance().await.is_err();
            if refused {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(refused, "suspended");
        assert_eq!(
            op.act(&project, &format!("{project}/resume"), &[])
                .await
                .status,
            303
        );
        let mut resumed = false;
        for _ in 0..50 {
            resumed = t.sdk().project_balance().await.is_ok();
            if resumed {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(resumed, "resumed");
        let rotated = op
            .act(
                &project,
                &format!("{project}/keys/rotate"),
                &[("grace", "0")],
            )
            .await;
        assert_eq!(rotated.status, 200);
        let new_key = rotated
            .body
            .split("id=\"new-api-key\">")
            .nth(1)
            .unwrap()
            .split('<')
            .next()
            .unwrap()
            .to_owned();
        let new_secret = rotated
            .body
            .split("id=\"new-api-secret\">")
            .nth(1)
            .unwrap()
            .split('<')
            .next()
            .unwrap()
            .to_owned();
        let creds = common::Creds {
            api_key: new_key.clone(),
            api_secret: new_secret,
            ..t.creds.clone()
        };
        t.sdk_as(&creds).project_balance().await.unwrap();
        // The last valid key is refused (as `admin key revoke` without --force).
        let revoke = op
            .act(
                &project,
                &format!("{project}/keys/revoke"),
                &[("api_key", &new_key)],
            )
            .await;
        assert_eq!(revoke.status, 303);
        assert!(op.get(&project).await.body.contains("last valid API key"));
        // Another project's key cannot be revoked through this project's page.
        let other = t.new_project("other").await;
        let cross = op
            .act(
                &project,
                &format!("{project}/keys/revoke"),
                &[("api_key", &other.api_key)],
            )
            .await;
        assert_eq!(cross.status, 404);
        let actions: Vec<String> = t.audit_rows().await.into_iter().map(|r| r.1).collect();
        for a in [
            "card.simulate_authorization",
            "ledger.verify",
            "project.suspend",
            "project.resume",
            "key.rotate",
            "key.revoke",
        ] {
            assert!(actions.iter().any(|x| x == a), "{a}: {actions:?}");
        }
        let rows = t.audit_rows().await;
        assert!(
            !format!("{rows:?}").contains(&creds.api_secret),
            "no secret in the audit log"
        );

        // Audit rows are never updated or deleted.
        assert!(sqlx::query("UPDATE audit_log SET result = 'x'")
            .execute(t.store.pool())
            .await
            .is_err());
        assert!(sqlx::query("DELETE FROM audit_log")
            .execute(t.store.pool())
            .await
            .is_err());
        let page = op.get("/console/audit").await;
        assert!(page.body.contains("card.reveal") && page.body.contains("key.rotate"));
    }
);

both_backends_with!(
    redeliver_a_failed_delivery,
    config(),
    |t: TestServer| async move {
        t.deposit(&t.creds.project_id, 1_000_000_000).await;
        let receiver = Receiver::start(&t.creds.api_secret).await;
        receiver.set(Behaviour::Status(500));
        t.ok(
            "wh/subscribe",
            json!({"url": receiver.url, "event_types": ["card.freeze"]}),
        )
        .await;
        let card = t.active_card("carol", "virtual_usd").await;
        t.ok("cards/freeze", json!({"card_id": card})).await;
        let op = t.login_as("ops@example.com", Role::Operator).await;
        // Retries every second for 2 s, then the delivery is failed.
        let failed_page = "/console/webhooks?state=failed";
        let mut page = op.get(failed_page).await;
        for _ in 0..100 {
            if page.body.contains("class=\"secondary redeliver\"") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            page = op.get(failed_page).await;
        }
        let id = page
            .body
            .split("/console/webhooks/")
            .nth(1)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .to_owned();
        receiver.set(Behaviour::Succeed);
        let csrf = page.csrf();
        let done = op
            .post(
                &format!("/console/webhooks/{id}/redeliver"),
                &[("csrf", &csrf), ("back", failed_page)],
            )
            .await;
        assert_eq!((done.status, done.location()), (303, failed_page));
        receiver
            .wait_until("the redelivery", Duration::from_secs(20), |r| {
                r.iter().any(|x| x.answered == Behaviour::Succeed)
            })
            .await;
        let mut state = String::new();
        for _ in 0..100 {
            let (_, v) = t.call("wh/deliveries", json!({"delivery_id": id})).await;
            state = v["items"]
                .as_array()
                .and_then(|i| i.iter().find(|d| d["delivery_id"] == id))
                .map(|d| d["state"].as_str().unwrap().to_owned())
                .unwrap_or_default();
            if state == "succeeded" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(state, "succeeded");
        let rows = t.audit_rows().await;
        assert!(rows
            .iter()
            .any(|r| r.1 == "webhook.redeliver" && r.2["delivery_id"] == id && r.3 == "ok"));
        // A redirect back is only ever into the console.
        let evil = op
            .post(
                &format!("/console/webhooks/{id}/redeliver"),
                &[("csrf", &csrf), ("back", "https://evil.example/")],
            )
            .await;
        assert_eq!(evil.location(), "/console/webhooks");
    }
);

/// The HTML from the element with `id="{id}"` to the first end of a table or a panel.
fn section<'a>(p: &'a Page, id: &str) -> &'a str {
    let at = p
        .body
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} on the page: {}", p.body));
    let rest = &p.body[at..];
    let end = ["</table>", "</div>"]
        .iter()
        .filter_map(|e| rest.find(e))
        .min()
        .unwrap();
    &rest[..end]
}

fn tx_id_of(item: &Value) -> String {
    item["transaction_id"].as_str().unwrap().to_owned()
}

both_backends_with!(
    spend_controls_on_card_and_transaction_pages,
    config(),
    |t: TestServer| async move {
        let card = t.card_holding("ada", 100).await;
        let other = t.card_holding("bob", 10).await;
        // A daily amount limit and a rolling count limit, through the public API.
        t.set_limits(
            &card,
            json!([{"interval": "daily", "amount": "20"},
                   {"interval": "rolling", "window_seconds": 3600, "count": 5}]),
            None,
        )
        .await;
        let casino = t
            .ok(
                "rules/create",
                json!({"name": "No casinos", "card_ids": [card], "priority": 10,
                       "conditions": [{"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}]}),
            )
            .await;
        let watch = t
            .ok(
                "rules/create",
                json!({"name": "Watch all spending", "mode": "shadow",
                       "conditions": [{"attribute": "amount", "operator": "greater_than", "value": "1"}]}),
            )
            .await;
        t.ok(
            "rules/create",
            json!({"name": "Switched off", "mode": "inactive",
                   "conditions": [{"attribute": "mcc", "operator": "is_one_of", "value": ["5411"]}]}),
        )
        .await;
        t.ok(
            "rules/create",
            json!({"name": "Only bob", "card_ids": [other],
                   "conditions": [{"attribute": "merchant_country", "operator": "is_one_of", "value": ["FR"]}]}),
        )
        .await;
        let casino_id = casino["rule_id"].as_str().unwrap().to_owned();
        let watch_id = watch["rule_id"].as_str().unwrap().to_owned();

        // Approved (15 of 20), declined by the daily limit (15 + 10 > 20), declined by
        // the card-scoped rule.
        let approved = t.authorize(&card, "15.00", "5411").await;
        let by_limit = t.authorize(&card, "10.00", "5411").await;
        let by_rule = t.authorize(&card, "2.00", "7995").await;
        assert_eq!(
            common::spend::outcome(&by_limit),
            ("declined".into(), Some("spending_limit_exceeded".into()))
        );
        assert_eq!(
            common::spend::outcome(&by_rule),
            ("declined".into(), Some("mcc_blocked".into()))
        );
        let (approved, by_limit, by_rule) =
            (tx_id_of(&approved), tx_id_of(&by_limit), tx_id_of(&by_rule));

        // A viewer reads it all, and acts on nothing.
        let password = t.operator("look@example.com", Role::Viewer, &[]).await;
        let v = Console::login(t.console(), "look@example.com", &password).await;
        let page = v.get(&format!("/console/cards/{card}")).await;
        assert_eq!(page.status, 200);
        assert_no_inline_code(&page);
        assert!(
            !page.body.contains("id=\"freeze\""),
            "a viewer has no actions"
        );

        // The limits with the usage cards/limits/get answers.
        let api = t.limits(&card).await;
        assert_eq!(api["limits"][0]["spent"], "15.00");
        let limits = section(&page, "limits");
        let rows: Vec<&str> = limits.split("<tr>").skip(2).collect();
        assert_eq!(rows.len(), 2, "{limits}");
        assert!(
            rows[0].contains("<td>daily</td>")
                && rows[0].contains("20.00 USD")
                && rows[0].contains("<td class=\"num\">15.00</td>")
                && rows[0].contains("<td class=\"num\">1</td>")
                && rows[0].contains("5.00 USD"),
            "daily: 15 spent, 1 counted, 5 left: {}",
            rows[0]
        );
        assert!(
            rows[1].contains("rolling 3600 s")
                && rows[1].contains("5 authorizations")
                && rows[1].contains("<td class=\"num\">1</td>")
                && rows[1].contains("4 authorizations"),
            "rolling: declines never count: {}",
            rows[1]
        );

        // The rules that apply: the card's own and the project-wide shadow one, never
        // an inactive one or another card's.
        let rules = section(&page, "rules");
        assert!(
            rules.contains("No casinos") && rules.contains(&casino_id),
            "{rules}"
        );
        assert!(rules.contains("mcc is one of 7995") && rules.contains("mcc_blocked"));
        assert!(rules.contains("this card only") && rules.contains("every card of the project"));
        assert!(rules.contains("Watch all spending") && rules.contains("never declines"));
        assert!(
            !rules.contains("Switched off") && !rules.contains("Only bob"),
            "{rules}"
        );

        // The rule matches of the page's transactions: the declining one and the shadow
        // ones, labelled.
        let matches = section(&page, "card-matches");
        let declining: Vec<&str> = matches
            .split("<tr>")
            .filter(|r| r.contains("declined the authorization"))
            .collect();
        assert_eq!(declining.len(), 1, "{matches}");
        assert!(declining[0].contains(&by_rule) && declining[0].contains("No casinos"));
        let shadow = matches
            .split("<tr>")
            .filter(|r| r.contains("recorded only (shadow rules never decline)"))
            .count();
        assert_eq!(shadow, 3, "the shadow rule matched all three: {matches}");
        for id in [&approved, &by_limit] {
            assert!(matches.contains(id.as_str()));
        }
        // Holds and orders stay on the page.
        assert!(page.body.contains("<h2>Open holds</h2>") && page.body.contains("<h2>Orders</h2>"));

        // A transaction declined by the limit says which limit, with its usage.
        let p = v.get(&format!("/console/transactions/{by_limit}")).await;
        assert_eq!(p.status, 200);
        let why = section(&p, "decline");
        assert!(why.contains("spending_limit_exceeded"), "{why}");
        assert!(
            why.contains(
                "The daily limit of 20.00 USD: its window had already counted 15.00 USD and 1 authorizations before this one."
            ),
            "{why}"
        );
        assert!(p.body.contains("id=\"decision-webhook\">Not asked."));

        // One declined by a rule names the rule.
        let p = v.get(&format!("/console/transactions/{by_rule}")).await;
        let why = section(&p, "decline");
        assert!(
            why.contains("mcc_blocked") && why.contains("merchant category"),
            "{why}"
        );
        let rules = section(&p, "decline-rules");
        assert!(
            rules.contains("No casinos") && rules.contains(&casino_id),
            "{rules}"
        );
        let matches = section(&p, "tx-matches");
        assert!(matches.contains("declined the authorization") && matches.contains(&watch_id));

        // An approved one has no decline, and shows its shadow match.
        let p = v.get(&format!("/console/transactions/{approved}")).await;
        assert!(!p.body.contains("id=\"decline\""));
        let matches = section(&p, "tx-matches");
        assert!(
            matches.contains("Watch all spending")
                && matches.contains("recorded only (shadow rules never decline)")
                && !matches.contains("declined the authorization"),
            "{matches}"
        );

        // The decision webhook's part, in words: a decline with its reason.
        let decider = common::spend::Decider::start(
            &t.creds.api_secret,
            common::spend::Answer::Decline(Some("velocity check".into())),
        )
        .await;
        t.ok("wh/decision/set", json!({"url": decider.url})).await;
        let by_webhook = t.authorize(&card, "1.50", "5411").await;
        assert_eq!(
            common::spend::outcome(&by_webhook),
            ("declined".into(), Some("webhook_declined".into()))
        );
        let p = v
            .get(&format!("/console/transactions/{}", tx_id_of(&by_webhook)))
            .await;
        assert!(
            p.body.contains(
                "id=\"decision-webhook\">Declined by the webhook, which said: velocity check"
            ),
            "{}",
            p.body
        );
        assert!(section(&p, "decline").contains("webhook_declined"));
        t.ok("wh/decision/delete", json!({})).await;

        // Thousands of results: the card page shows those of its page, bounded.
        let mut tx = t.store.begin().await.unwrap();
        let now = common::now_micros();
        for chunk in 0..3 {
            let rows: Vec<_> = (0..1000)
                .map(|i| issuing_store::controls::RuleResult {
                    id: format!("bulk{chunk}x{i:05}"),
                    project_id: t.creds.project_id.clone(),
                    rule_id: watch_id.clone(),
                    version: 1,
                    // Two thirds on a transaction the page lists, a third on one it
                    // does not.
                    transaction_id: if chunk < 2 {
                        approved.clone()
                    } else {
                        "elsewhere".into()
                    },
                    card_id: card.clone(),
                    mode: "shadow".into(),
                    decided: "none".into(),
                    evaluated_at: now + i,
                })
                .collect();
            issuing_store::controls::insert_results(&mut tx, &rows)
                .await
                .unwrap();
        }
        tx.commit().await.unwrap();
        let page = v.get(&format!("/console/cards/{card}")).await;
        assert_eq!(page.status, 200);
        let matches = section(&page, "card-matches");
        let shown = matches.split("<tr>").count() - 2;
        assert_eq!(shown, 100, "bounded");
        assert!(page.body.contains("only the newest are shown"));
        assert!(!matches.contains("elsewhere"));
        let p = v.get(&format!("/console/transactions/{approved}")).await;
        assert_eq!(section(&p, "tx-matches").split("<tr>").count() - 2, 100);
    }
);

both_backends_with!(lists_page_by_keyset, config(), |t: TestServer| async move {
    let now = common::now_micros();
    let mut tx = t.store.begin().await.unwrap();
    for i in 0..120 {
        issuing_store::audit::append(
            &mut tx,
            &issuing_store::audit::NewAudit {
                at: now + i,
                actor: "cli",
                action: "test.row",
                project_id: None,
                targets: &json!({ "n": i }),
                result: "ok",
            },
        )
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    let c = t.login_as("root@example.com", Role::Admin).await;
    let mut seen = Vec::new();
    let mut path = "/console/audit?action=test.row".to_owned();
    loop {
        let p = c.get(&path).await;
        assert_eq!(p.status, 200);
        assert!(seen.len() <= 120, "{path}");
        let ns: Vec<i64> = p
            .body
            .match_indices("class=\"mono\">n=")
            .map(|(at, _)| {
                p.body[at + "class=\"mono\">n=".len()..]
                    .split('<')
                    .next()
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap()
            })
            .collect();
        assert!(ns.len() <= 50);
        seen.extend(ns);
        match p.body.split("<a href=\"").find_map(|s| {
            s.strip_prefix("/console/audit?")
                .filter(|s| s.contains("before="))
        }) {
            Some(next) => {
                path = format!(
                    "/console/audit?{}",
                    next.split('"')
                        .next()
                        .unwrap()
                        .replace("&amp;", "&")
                        .replace("&#38;", "&")
                )
            }
            None => break,
        }
    }
    let want: Vec<i64> = (0..120).rev().collect();
    assert_eq!(seen, want, "newest first, every row once");
    assert_eq!(c.get("/console/cards?before=garbage").await.status, 400);
});

async fn run_admin(dir: &std::path::Path, url: &str, args: &[&str]) -> (i32, String, String) {
    let out = issuing()
        .arg("--data-dir")
        .arg(dir)
        .arg("--database-url")
        .arg(url)
        .arg("admin")
        .args(args)
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

both_backends!(
    operator_commands_first_run_and_cli_audit,
    |t: TestServer| async move {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::create(t.db.backend).await.unwrap();
        let url = db.url.as_str();
        // The first sandbox run prints the console's address and admin password.
        let server = ServeProcess::start_env(
            dir.path(),
            url,
            &[("ISSUING_CONSOLE_LISTEN", "127.0.0.1:0")],
        )
        .await;
        assert_eq!(
            server.banner_value("console_email").as_deref(),
            Some("admin@localhost")
        );
        let password = server
            .banner_value("console_password")
            .expect("password printed");
        let console = server
            .banner
            .iter()
            .find_map(|l| l.strip_prefix("issuing console on http://"))
            .expect("console address printed")
            .trim_end_matches("/console/")
            .parse()
            .unwrap();
        assert!(
            server.banner_value("api_key").is_some(),
            "beside the demo credentials"
        );
        let admin = Console::login(console, "admin@localhost", &password).await;
        assert_eq!(admin.get("/console/operators").await.status, 200);
        server.kill().await;
        let server = ServeProcess::start_env(
            dir.path(),
            url,
            &[("ISSUING_CONSOLE_LISTEN", "127.0.0.1:0")],
        )
        .await;
        assert_eq!(
            server.banner_value("console_password"),
            None,
            "{:?}",
            server.banner
        );
        server.kill().await;
        // Production: no console until one is set.
        let prod =
            ServeProcess::start_env(dir.path(), url, &[("ISSUING_MODE", "production")]).await;
        assert!(
            !prod.banner.iter().any(|l| l.contains("console")),
            "{:?}",
            prod.banner
        );
        prod.kill().await;

        let (code, out, err) = run_admin(
            dir.path(),
            url,
            &[
                "operator",
                "create",
                "--email",
                "Sam@Example.com",
                "--role",
                "operator",
            ],
        )
        .await;
        assert_eq!(code, 0, "{err}");
        let created: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(
            (created["email"].as_str(), created["role"].as_str()),
            (Some("sam@example.com"), Some("operator"))
        );
        let first = created["password"].as_str().unwrap().to_owned();
        assert!(first.len() >= 16);
        let (code, _, err) = run_admin(
            dir.path(),
            url,
            &[
                "operator",
                "create",
                "--email",
                "sam@example.com",
                "--role",
                "viewer",
            ],
        )
        .await;
        assert!(code != 0 && err.contains("exists already"), "{err}");
        let (code, _, err) = run_admin(
            dir.path(),
            url,
            &[
                "operator",
                "create",
                "--email",
                "v@example.com",
                "--role",
                "viewer",
                "--project",
                "nope",
            ],
        )
        .await;
        assert!(code != 0 && err.contains("not found"), "{err}");
        let (code, _, _) = run_admin(
            dir.path(),
            url,
            &[
                "operator",
                "create",
                "--email",
                "x@example.com",
                "--role",
                "root",
            ],
        )
        .await;
        assert_ne!(code, 0);
        let (code, out, _) = run_admin(dir.path(), url, &["operator", "list"]).await;
        assert_eq!(code, 0);
        let listed: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(listed.len(), 2, "{out}");
        assert!(
            !out.contains(&first) && !out.contains("argon2"),
            "never passwords or hashes"
        );
        let (code, out, _) = run_admin(
            dir.path(),
            url,
            &["operator", "reset-password", "--email", "sam@example.com"],
        )
        .await;
        assert_eq!(code, 0);
        let reset: Value = serde_json::from_str(out.trim()).unwrap();
        let second = reset["password"].as_str().unwrap().to_owned();
        assert_ne!(first, second);
        let hash: String = {
            let store = issuing_store::Store::connect(url).await.unwrap();
            let h = sqlx::query(
                "SELECT password_hash FROM console_operators WHERE email = 'sam@example.com'",
            )
            .fetch_one(store.pool())
            .await
            .unwrap()
            .get("password_hash");
            store.close().await;
            h
        };
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(
            operators::verify_password(&hash, &second)
                && !operators::verify_password(&hash, &first)
        );
        let (code, out, _) = run_admin(
            dir.path(),
            url,
            &["operator", "disable", "--email", "sam@example.com"],
        )
        .await;
        assert_eq!(
            (code, out.trim()),
            (0, r#"{"email":"sam@example.com","status":"disabled"}"#)
        );
        let (code, _, err) = run_admin(
            dir.path(),
            url,
            &["operator", "disable", "--email", "ghost@example.com"],
        )
        .await;
        assert!(code != 0 && err.contains("no operator"), "{err}");
        let (code, out, _) = run_admin(dir.path(), url, &["verify-ledger"]).await;
        assert_eq!((code, out.trim()), (0, "ledger ok"));

        // Every admin command left a row, as `cli`, with what it named and how it ended;
        // never a password.
        let store = issuing_store::Store::connect(url).await.unwrap();
        let rows = sqlx::query("SELECT actor, action, project_id, targets, result FROM audit_log WHERE actor = 'cli' ORDER BY id")
            .fetch_all(store.pool())
            .await
            .unwrap();
        let rows: Vec<(String, Value, String)> = rows
            .iter()
            .map(|r| {
                (
                    r.get("action"),
                    serde_json::from_str(&r.get::<String, _>("targets")).unwrap(),
                    r.get("result"),
                )
            })
            .collect();
        let actions: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(
            actions,
            [
                "admin operator create",
                "admin operator create",
                "admin operator create",
                "admin operator list",
                "admin operator reset-password",
                "admin operator disable",
                "admin operator disable",
                "admin verify-ledger",
            ],
            "{rows:?}"
        );
        assert_eq!(
            rows[0].1,
            json!({"email": "Sam@Example.com", "role": "operator"})
        );
        assert_eq!(rows[0].2, "ok");
        assert!(
            rows[1].2.starts_with("error: ") && rows[1].2.contains("exists already"),
            "{:?}",
            rows[1]
        );
        assert_eq!(rows[2].1["projects"], "nope");
        assert!(!format!("{rows:?}").contains(&first) && !format!("{rows:?}").contains(&second));
        let verified = sqlx::query("SELECT actor, problems FROM ledger_verifications")
            .fetch_all(store.pool())
            .await
            .unwrap();
        assert_eq!(verified.len(), 1);
        assert_eq!(
            (
                verified[0].get::<String, _>("actor"),
                verified[0].get::<i64, _>("problems")
            ),
            ("cli".to_owned(), 0)
        );
        store.close().await;
    }
);

both_backends_with!(
    production_cookie_is_secure_and_simulation_absent,
    ServerConfig {
        mode: issuing_server::Mode::Production,
        ..config()
    },
    |t: TestServer| async move {
        let c = {
            let password = t.operator("root@example.com", Role::Admin, &[]).await;
            let mut c = Console::new(t.console());
            let p = c.try_login("root@example.com", &password).await;
            assert_eq!(p.status, 303);
            let set = p.header("set-cookie");
            assert!(set.contains("Secure") && set.contains("HttpOnly"), "{set}");
            c
        };
        // The sandbox's network simulator is not a production route.
        let csrf = c.get("/console/").await.csrf();
        let p = c
            .post(
                "/console/cards/x/simulate",
                &[("csrf", &csrf), ("amount", "1")],
            )
            .await;
        assert_eq!(p.status, 404);
        let cards = c.get("/console/cards").await;
        assert!(!cards.body.contains("Simulate authorization"));
    }
);

fn pci_config() -> ServerConfig {
    let mut c = config();
    c.console_security.reveals_per_hour = 2;
    c
}

/// A GET as a browser on a page of `host` (DNS rebinding: another name, our address).
async fn get_as_host(addr: std::net::SocketAddr, path: &str, host: &str) -> u16 {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("http://{addr}{path}"))
        .header("host", host)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

both_backends_with!(
    pci_dss_controls_of_the_console,
    pci_config(),
    |t: TestServer| async move {
        let addr = t.console();
        let port = addr.port();
        // Only the console's own host names: a rebinding page's name is refused.
        assert_eq!(
            get_as_host(addr, "/console/login", &format!("127.0.0.1:{port}")).await,
            200
        );
        assert_eq!(
            get_as_host(addr, "/console/login", &format!("localhost:{port}")).await,
            200
        );
        for host in [
            format!("evil.example:{port}"),
            format!("127.0.0.1.evil.example:{port}"),
            "evil.example".to_owned(),
        ] {
            assert_eq!(
                get_as_host(addr, "/console/login", &host).await,
                421,
                "{host}"
            );
        }

        // One address is stopped after 5 failures (whatever the emails), before it can
        // lock anyone; another address signs in.
        let password = t.operator("ann@example.com", Role::Admin, &[]).await;
        let mut c = Console::new(addr);
        for i in 0..5 {
            let p = c
                .try_login_from(&format!("guess{i}@example.com"), "x", Some("203.0.113.5"))
                .await;
            assert_eq!(p.status, 401, "failure {i}");
        }
        let p = c
            .try_login_from("ann@example.com", &password, Some("203.0.113.5"))
            .await;
        assert_eq!(p.status, 429, "{}", p.body);
        assert!(p.body.contains("from your address"), "{}", p.body);
        let ann = {
            let mut c = Console::new(addr);
            let p = c
                .try_login_from("ann@example.com", &password, Some("203.0.113.6"))
                .await;
            assert_eq!(p.status, 303, "{}", p.body);
            c
        };

        // Idle sessions end; a live region's poll keeps none alive.
        let last_seen = || async {
            sqlx::query("SELECT last_seen_at FROM console_sessions")
                .fetch_one(t.store.pool())
                .await
                .unwrap()
                .get::<i64, _>("last_seen_at")
        };
        sqlx::query("UPDATE console_sessions SET last_seen_at = last_seen_at - 60000000")
            .execute(t.store.pool())
            .await
            .unwrap();
        let before = last_seen().await;
        let poll = ann
            .send_with(
                "/console/",
                &[("hx-request", "true"), ("hx-trigger", "live")],
            )
            .await;
        assert_eq!(poll.status, 200);
        assert_eq!(last_seen().await, before, "a poll is not activity");
        assert_eq!(ann.get("/console/").await.status, 200);
        assert!(last_seen().await > before, "a page view is");
        // ...noted at most every 9 s (a hundredth of the 15 minutes), not written per view.
        let touched = last_seen().await;
        assert_eq!(ann.get("/console/cards").await.status, 200);
        assert_eq!(
            last_seen().await,
            touched,
            "a view within 9 s of the last is not written"
        );
        sqlx::query("UPDATE console_sessions SET last_seen_at = $1")
            .bind(common::now_micros() - 15 * 60 * 1_000_000 - 1)
            .execute(t.store.pool())
            .await
            .unwrap();
        assert_eq!(ann.get("/console/").await.location(), "/console/login");
        let ann = {
            let mut c = Console::new(addr);
            let p = c
                .try_login_from("ann@example.com", &password, Some("203.0.113.6"))
                .await;
            assert_eq!(p.status, 303);
            c
        };

        // Reveal asks for the password again, and stops after 2 an hour here.
        t.deposit(&t.creds.project_id, 100_000_000).await;
        let card = t.active_card("pci-user", "virtual_usd").await;
        let page = format!("/console/cards/{card}");
        assert!(ann.get(&page).await.body.contains("name=\"password\""));
        let reveal = format!("{page}/reveal");
        for wrong in ["", "not-it"] {
            let r = ann.act(&page, &reveal, &[("password", wrong)]).await;
            assert_eq!((r.status, r.location()), (303, page.as_str()), "{}", r.body);
            let back = ann.get(&page).await;
            assert!(back.body.contains("Wrong password"), "{}", back.body);
        }
        for _ in 0..2 {
            let r = ann.act(&page, &reveal, &[("password", &password)]).await;
            assert_eq!(r.status, 200, "{}", r.body);
            assert!(r.body.contains("id=\"pan\""));
        }
        let r = ann.act(&page, &reveal, &[("password", &password)]).await;
        assert_eq!(r.status, 303);
        assert!(ann
            .get(&page)
            .await
            .body
            .contains("at most 2 reveals an hour"));
        let rows: Vec<_> = t
            .audit_rows()
            .await
            .into_iter()
            .filter(|r| r.1 == "card.reveal")
            .map(|r| r.3)
            .collect();
        assert_eq!(
            rows,
            [
                "error: wrong password",
                "error: wrong password",
                "ok",
                "ok",
                "error: refused: at most 2 reveals an hour (ISSUING_CONSOLE_REVEALS_PER_HOUR)"
            ]
        );
    }
);

both_backends!(
    failed_logins_are_logged_and_an_admin_unlocks,
    |t: TestServer| async move {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::create(t.db.backend).await.unwrap();
        let mut child = issuing()
            .env("ISSUING_LOG", "info")
            .env("ISSUING_CONSOLE_LISTEN", "127.0.0.1:0")
            .env("ISSUING_CONSOLE_TRUSTED_PROXIES", "127.0.0.0/8")
            .arg("--data-dir")
            .arg(dir.path())
            .arg("--database-url")
            .arg(&db.url)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
        let sink = stderr.clone();
        let mut err = BufReader::new(child.stderr.take().unwrap()).lines();
        tokio::spawn(async move {
            while let Ok(Some(l)) = err.next_line().await {
                sink.lock().unwrap().push(l);
            }
        });
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let (mut console, mut password) = (None, None);
        while let Some(line) = out.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("issuing console on http://") {
                console = Some(rest.trim_end_matches("/console/").to_owned());
            }
            if let Some(p) = line.trim().strip_prefix("console_password:") {
                password = Some(p.trim().to_owned());
            }
            if line.starts_with("issuing listening on ") {
                break;
            }
        }
        tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
        let console: std::net::SocketAddr = console.unwrap().parse().unwrap();
        let password = password.unwrap();

        // A failure below the lockout: a log line naming the email and the address.
        let mut c = Console::new(console);
        let p = c
            .try_login_from("admin@localhost", "wrong", Some("192.0.2.44"))
            .await;
        assert_eq!(p.status, 401);
        let start = std::time::Instant::now();
        loop {
            let found = stderr.lock().unwrap().iter().any(|l| {
                l.contains("failed authentication")
                    && l.contains("admin@localhost")
                    && l.contains("192.0.2.44")
            });
            if found {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{:#?}",
                stderr.lock().unwrap()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Locked (10 failures from 10 addresses), then unlocked by an admin at once.
        for i in 1..10 {
            let from = format!("192.0.2.{i}");
            c.try_login_from("admin@localhost", "wrong", Some(&from))
                .await;
        }
        let p = c.try_login_from("admin@localhost", &password, None).await;
        assert_eq!(p.status, 429, "{}", p.body);
        let url = db.url.clone();
        let (code, out, err) = run_admin(
            dir.path(),
            &url,
            &["operator", "unlock", "--email", "Admin@Localhost"],
        )
        .await;
        assert_eq!(code, 0, "{err}");
        let answer: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(
            answer,
            json!({"email": "admin@localhost", "was_locked": true})
        );
        let p = c.try_login_from("admin@localhost", &password, None).await;
        assert_eq!(p.status, 303, "{}", p.body);
        let _ = child.kill().await;
    }
);
