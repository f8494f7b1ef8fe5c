//! The operator console's disputes (CONTRACT §12, §15) over HTTP, on both backends: the
//! list with its filters, scope and paging, a dispute's page (timeline, evidence names
//! never their content, ledger transfers), the links from card and transaction pages,
//! and the sandbox's Advance: the dispute and its money move as through
//! `simulate/disputes/advance`, audited; viewers, forms without the CSRF token and
//! production are refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::console::{Console, Page};
use common::TestServer;
use issuing_app::config::ConsoleListen;
use issuing_console::operators::{self, Role};
use issuing_server::ServerConfig;
use issuing_store::disputes::{self, DisputeRecord};
use serde_json::{json, Value};
use sqlx::Row;

fn config() -> ServerConfig {
    ServerConfig {
        console: Some(ConsoleListen {
            addr: "127.0.0.1:0".parse().unwrap(),
            optional: false,
        }),
        ..ServerConfig::default()
    }
}

impl TestServer {
    async fn login_as(&self, email: &str, role: Role, projects: &[String]) -> Console {
        let password = operators::create(&self.store, email, role, projects)
            .await
            .unwrap()
            .password;
        Console::login(self.console_addr().unwrap(), email, &password).await
    }

    /// The audit rows of `action`: (actor, targets, result), oldest first.
    async fn audited(&self, action: &str) -> Vec<(String, Value, String)> {
        let rows = sqlx::query(
            "SELECT actor, targets, result FROM audit_log WHERE action = $1 ORDER BY id",
        )
        .bind(action)
        .fetch_all(self.store.pool())
        .await
        .unwrap();
        rows.iter()
            .map(|r| {
                (
                    r.get::<String, _>("actor"),
                    serde_json::from_str(&r.get::<String, _>("targets")).unwrap(),
                    r.get::<String, _>("result"),
                )
            })
            .collect()
    }

    /// A transaction of `amount` on `card`, authorized and cleared.
    async fn settled(&self, card: &str, amount: &str) -> String {
        let a = self
            .ok(
                "simulate/cards/auth",
                json!({"card_id": card, "transactionAmount": amount,
                       "merchant": {"name": "Shop", "mcc": "5999", "country": "US"}}),
            )
            .await;
        let id = a["transactionId"].as_str().unwrap().to_owned();
        self.ok("simulate/cards/clear", json!({"transactionId": id}))
            .await;
        id
    }

    async fn open_dispute(&self, tx: &str, provisional: bool, key: &str) -> String {
        let (s, v) = self
            .call_with_headers(
                "disputes/create",
                json!({"transaction_id": tx, "reason": "goods_services_not_received",
                       "provisional_credit": provisional}),
                &[("Idempotency-Key", key)],
            )
            .await;
        assert_eq!(s, 200, "{v}");
        v["dispute_id"].as_str().unwrap().to_owned()
    }

    async fn dispute_status(&self, id: &str) -> String {
        let d = self.ok("disputes/get", json!({"dispute_id": id})).await;
        d["status"].as_str().unwrap().to_owned()
    }
}

fn link_to(id: &str) -> String {
    format!("/console/disputes/{id}\"")
}

/// The HTML from the element with `id="{id}"` to the end of its table or panel.
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

both_backends_with!(
    disputes_list_page_links_and_advance,
    config(),
    |t: TestServer| async move {
        use base64::Engine as _;
        let card = t.card_holding("ada", 100).await;
        let tx1 = t.settled(&card, "40").await;
        let tx2 = t.settled(&card, "10").await;
        let d1 = t.open_dispute(&tx1, true, "d-1").await;
        let d2 = t.open_dispute(&tx2, false, "d-2").await;
        assert_eq!(t.card_balance("ada", &card).await, "90.00");
        let secret = b"%PDF-1.7\nTHE-SEALED-CONTENT-OF-THE-RECEIPT";
        let content = base64::engine::general_purpose::STANDARD.encode(secret);
        t.ok(
            "disputes/evidence/add",
            json!({"dispute_id": d1, "filename": "receipt.pdf",
                   "content_type": "application/pdf", "content": content}),
        )
        .await;
        let project = t.creds.project_id.clone();
        let other = t.new_project("other").await;

        let op = t.login_as("ops@example.com", Role::Operator, &[]).await;

        // The list: both, newest first, in the navigation; filters by status and project.
        let list = op.get("/console/disputes").await;
        assert_eq!(list.status, 200);
        assert!(list
            .body
            .contains("href=\"/console/disputes\" class=\"here\""));
        let rows = section(&list, "dispute-list");
        let (at1, at2) = (rows.find(&link_to(&d1)), rows.find(&link_to(&d2)));
        assert!(at2.unwrap() < at1.unwrap(), "newest first: {rows}");
        let p = op
            .get(&format!("/console/disputes?project={project}"))
            .await;
        assert!(p.body.contains(&link_to(&d1)) && p.body.contains(&link_to(&d2)));
        let p = op
            .get(&format!("/console/disputes?project={}", other.project_id))
            .await;
        assert!(!p.body.contains(&link_to(&d1)) && !p.body.contains(&link_to(&d2)));
        assert!(section(&p, "dispute-list").contains("None."));

        // The page: the object, the timeline, the evidence by name (never its content)
        // and the provisional credit's transfer with its amount.
        let page_path = format!("/console/disputes/{d1}");
        let page = op.get(&page_path).await;
        assert_eq!(page.status, 200, "{}", page.body);
        assert!(page.body.contains("id=\"dispute-status\">submitted<"));
        assert!(page.body.contains("40.00 USD"));
        assert!(page
            .body
            .contains(&format!("/console/transactions/{tx1}\"")));
        assert!(section(&page, "timeline").contains("submitted"));
        let evidence = section(&page, "evidence");
        assert!(
            evidence.contains("receipt.pdf")
                && evidence.contains("application/pdf")
                && evidence.contains(&format!(">{}<", secret.len())),
            "{evidence}"
        );
        assert!(!page.body.contains("THE-SEALED-CONTENT") && !page.body.contains(&content));
        let transfers = section(&page, "dispute-transfers");
        assert!(
            transfers.contains(&format!("{d1}:credit"))
                && transfers.contains("dispute_credit")
                && transfers.contains("40.00"),
            "{transfers}"
        );
        assert!(page.body.contains("id=\"advance\""), "sandbox, operator");
        let none = op.get(&format!("/console/disputes/{d2}")).await;
        assert!(section(&none, "dispute-transfers").contains("None."));

        // Links from the card page, the disputed transaction and the credit's movement.
        let card_page = op.get(&format!("/console/cards/{card}")).await;
        let on_card = section(&card_page, "card-disputes");
        assert!(on_card.contains(&link_to(&d1)) && on_card.contains(&link_to(&d2)));
        let tx_page = op.get(&format!("/console/transactions/{tx1}")).await;
        let on_tx = section(&tx_page, "tx-disputes");
        assert!(on_tx.contains(&link_to(&d1)) && !on_tx.contains(&link_to(&d2)));
        let txs = t
            .ok(
                "cards/txs",
                json!({"card_id": card, "external_user_id": "ada", "limit": 100}),
            )
            .await;
        let credit = txs["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["card_tx_data"]["type"] == "other")
            .unwrap()["transaction_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let movement = op.get(&format!("/console/transactions/{credit}")).await;
        assert!(movement.body.contains(&format!(
            "href=\"/console/disputes/{d1}\" class=\"mono\" id=\"tx-dispute\""
        )));

        // Refusals: a viewer, and a form without the session's token. Nothing moves.
        let advance = format!("/console/disputes/{d1}/advance");
        let viewer = t.login_as("look@example.com", Role::Viewer, &[]).await;
        let seen = viewer.get(&page_path).await;
        assert_eq!(seen.status, 200);
        assert!(!seen.body.contains("id=\"advance\""), "viewers see no form");
        let refused = viewer.act(&page_path, &advance, &[("to", "lost")]).await;
        assert_eq!(refused.status, 403);
        let no_csrf = op.post(&advance, &[("to", "lost")]).await;
        assert_eq!(no_csrf.status, 403);
        let wrong_csrf = op.post(&advance, &[("csrf", "nope"), ("to", "lost")]).await;
        assert_eq!(wrong_csrf.status, 403);
        assert_eq!(t.dispute_status(&d1).await, "submitted");
        assert!(t.audited("dispute.advance").await.is_empty());
        // A viewer of another project does not see it at all.
        let outsider = t
            .login_as(
                "outsider@example.com",
                Role::Viewer,
                std::slice::from_ref(&other.project_id),
            )
            .await;
        assert_eq!(outsider.get(&page_path).await.status, 404);
        assert!(!outsider
            .get("/console/disputes")
            .await
            .body
            .contains(&link_to(&d1)));

        // Advance to lost: the provisional credit is taken back from the card.
        let moved = op.act(&page_path, &advance, &[("to", "lost")]).await;
        assert_eq!((moved.status, moved.location()), (303, page_path.as_str()));
        let after = op.get(&page_path).await;
        assert!(
            after.body.contains("id=\"flash\">Dispute ")
                && after.body.contains("is lost (case_lost)."),
            "{}",
            after.body
        );
        assert!(after.body.contains("id=\"dispute-status\">lost<"));
        let timeline = section(&after, "timeline");
        assert!(
            timeline.contains("advanced from the console by ops@example.com"),
            "{timeline}"
        );
        let transfers = section(&after, "dispute-transfers");
        assert!(
            transfers.contains(&format!("{d1}:debit")) && transfers.contains("dispute_debit"),
            "{transfers}"
        );
        assert!(
            !after.body.contains("id=\"advance\""),
            "final: no more moves"
        );
        assert_eq!(t.dispute_status(&d1).await, "lost");
        assert_eq!(t.card_balance("ada", &card).await, "50.00");
        let rows = t.audited("dispute.advance").await;
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0].0, "ops@example.com");
        assert_eq!(
            rows[0].1,
            json!({"dispute_id": d1, "from": "submitted", "to": "lost"})
        );
        assert_eq!(rows[0].2, "ok");

        // An invalid move is refused on the page and audited as an error.
        let again = op.act(&page_path, &advance, &[("to", "won")]).await;
        assert_eq!(again.status, 303);
        let refused_page = op.get(&page_path).await;
        assert!(
            refused_page.body.contains("class=\"flash error\"")
                && refused_page.body.contains("Cannot move the dispute"),
            "{}",
            refused_page.body
        );
        let rows = t.audited("dispute.advance").await;
        assert_eq!(rows.len(), 2);
        assert!(rows[1].2.starts_with("error: "), "{rows:?}");
        assert_eq!(t.dispute_status(&d1).await, "lost");

        // Won without a provisional credit: the card is credited now (`:credit`), with the
        // reason given in the form.
        let d2_path = format!("/console/disputes/{d2}");
        let won = op
            .act(
                &d2_path,
                &format!("/console/disputes/{d2}/advance"),
                &[("to", "won"), ("resolution_reason", "won_first_chargeback")],
            )
            .await;
        assert_eq!(won.status, 303);
        assert_eq!(t.dispute_status(&d2).await, "won");
        assert_eq!(t.card_balance("ada", &card).await, "60.00");
        assert!(
            section(&op.get(&d2_path).await, "dispute-transfers").contains(&format!("{d2}:credit"))
        );

        // Filters by status.
        let lost = op.get("/console/disputes?status=lost").await;
        assert!(lost.body.contains(&link_to(&d1)) && !lost.body.contains(&link_to(&d2)));
        assert!(lost.body.contains("<option value=\"lost\" selected>"));
        let won = op.get("/console/disputes?status=won").await;
        assert!(!won.body.contains(&link_to(&d1)) && won.body.contains(&link_to(&d2)));
        t.verify_ledger().await;
    }
);

/// A dispute row as a provider's would arrive in production (no money, no card here).
fn record(project_id: &str, n: i64) -> DisputeRecord {
    DisputeRecord {
        id: format!("dispute{n:04}"),
        project_id: project_id.to_owned(),
        transaction_id: format!("tx{n:04}"),
        card_id: "card0001".to_owned(),
        external_user_id: "ada".to_owned(),
        amount: 1_000_000 * (n + 1),
        reason: "fraud_card_not_present".to_owned(),
        customer_note: None,
        status: "submitted".to_owned(),
        resolution_reason: None,
        provisional_credit: false,
        provider_dispute_id: None,
        created_at: 1_700_000_000_000_000 + n,
        updated_at: 1_700_000_000_000_000 + n,
        resolved_at: None,
    }
}

both_backends_with!(
    production_lists_and_pages_without_advance,
    ServerConfig {
        mode: issuing_server::Mode::Production,
        ..config()
    },
    |t: TestServer| async move {
        {
            let mut tx = t.store.begin().await.unwrap();
            for n in 0..51 {
                disputes::insert(&mut tx, &record(&t.creds.project_id, n), None)
                    .await
                    .unwrap();
            }
            tx.commit().await.unwrap();
        }
        let op = t.login_as("ops@example.com", Role::Operator, &[]).await;
        // Paged by keyset: 50, then the oldest one.
        let first = op.get("/console/disputes").await;
        assert_eq!(first.status, 200);
        assert!(first.body.contains(&link_to("dispute0050")));
        assert!(!first.body.contains(&link_to("dispute0000")));
        let at = first.body.find("<p class=\"pager\"><a href=\"").unwrap();
        let rest = &first.body[at + "<p class=\"pager\"><a href=\"".len()..];
        let next = rest[..rest.find('"').unwrap()].replace("&amp;", "&");
        assert!(next.starts_with("/console/disputes?before="), "{next}");
        let second = op.get(&next).await;
        assert!(second.body.contains(&link_to("dispute0000")));
        assert!(!second.body.contains(&link_to("dispute0001")));
        assert!(!second.body.contains("class=\"pager\""));

        // The page has no Advance, and the action is not a route.
        let page_path = "/console/disputes/dispute0007";
        let page = op.get(page_path).await;
        assert_eq!(page.status, 200);
        assert!(page.body.contains("8.00 USD") && page.body.contains("fraud_card_not_present"));
        assert!(!page.body.contains("id=\"advance\""));
        let p = op
            .act(
                page_path,
                "/console/disputes/dispute0007/advance",
                &[("to", "won")],
            )
            .await;
        assert_eq!(p.status, 404);
        assert_eq!(op.get("/console/disputes/nope").await.status, 404);
        let mut conn = t.store.conn().await.unwrap();
        let d = disputes::by_id(&mut conn, "dispute0007")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d.status, "submitted");
    }
);
