//! Settlement reconciliation (CONTRACT §17) on the sandbox: the sandbox provider's own
//! settlement records against what the service applied, with no break and with each
//! kind of break planted by `simulate/settlement/break`; the result kept per date and
//! printed by `issuing admin reconcile`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::process::issuing;
use common::TestServer;
use issuing_client::{
    CardsTopup, SimulateAuth, SimulateClear, SimulateRefund, SimulateSettlementBreak,
};
use issuing_server::ServerConfig;
use serde_json::Value;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}

impl TestServer {
    /// An active sandbox card holding `units` USD.
    async fn funded_card(&self, user: &str, units: u32) -> String {
        self.deposit(&self.creds.project_id, 10_000_000_000).await;
        let card = self.active_card(user, "virtual_usd").await;
        let sdk = self.sdk();
        let topup = CardsTopup {
            card_id: card.clone(),
            amount: units.to_string().into(),
            ..CardsTopup::default()
        };
        let order = sdk
            .cards_topup(&topup, &format!("fund-{user}"))
            .await
            .unwrap();
        let o = sdk.wait_order(&order.order_id, WAIT).await.unwrap();
        assert_eq!(o.status, "completed", "{o:?}");
        card
    }

    /// An authorization of `amount` on `card`, cleared at `bill` (default: the hold);
    /// answers the transaction id.
    async fn cleared(&self, card: &str, amount: &str, bill: Option<&str>) -> String {
        let sdk = self.sdk();
        let auth = sdk
            .simulate_cards_auth(&SimulateAuth {
                card_id: card.into(),
                transaction_amount: amount.into(),
                ..SimulateAuth::default()
            })
            .await
            .unwrap();
        sdk.simulate_cards_clear(&SimulateClear {
            transaction_id: Some(auth.transaction_id.clone()),
            bill_amount: bill.map(Into::into),
            ..SimulateClear::default()
        })
        .await
        .unwrap();
        auth.transaction_id
    }

    /// Three settlements: two clearings and a refund of part of the first.
    async fn settle_some(&self, user: &str) -> (String, String, String) {
        let card = self.funded_card(user, 100).await;
        let a = self.cleared(&card, "10", Some("12.34")).await;
        let b = self.cleared(&card, "5", None).await;
        let refund = self
            .sdk()
            .simulate_cards_refund(&SimulateRefund {
                transaction_id: Some(a.clone()),
                amount: Some("2.5".into()),
                ..SimulateRefund::default()
            })
            .await
            .unwrap();
        (a, b, refund.transaction_id)
    }

    async fn reconcile_here(&self, date: &str) -> Value {
        let config = ServerConfig::default();
        let src = issuing_app::reconcile::Sources {
            store: &self.store,
            catalog: &config.catalog,
            lithic: None,
        };
        let r = issuing_app::reconcile::run(&src, "sandbox", date)
            .await
            .unwrap();
        issuing_app::reconcile::to_json(&r)
    }

    /// `issuing admin reconcile` against this server's database: exit code and JSON.
    async fn reconcile_cli(&self, date: &str) -> (i32, Value) {
        let dir = tempfile::tempdir().unwrap();
        let out = issuing()
            .arg("--data-dir")
            .arg(dir.path())
            .arg("--database-url")
            .arg(&self.db.url)
            .env("ISSUING_MASTER_KEY", self.master.to_base64())
            .args([
                "admin",
                "reconcile",
                "--subprovider",
                "sandbox",
                "--date",
                date,
            ])
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8(out.stderr).unwrap();
        let json = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{e}: stdout {stdout:?} stderr {stderr:?}"));
        (out.status.code().unwrap_or(-1), json)
    }

    async fn plant(&self, transaction_id: &str, kind: &str) -> issuing_client::SettlementBreak {
        self.sdk()
            .simulate_settlement_break(&SimulateSettlementBreak {
                transaction_id: transaction_id.into(),
                kind: kind.into(),
            })
            .await
            .unwrap()
    }
}

fn breaks_of(v: &Value, kind: &str) -> Vec<Value> {
    v["breaks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["kind"] == kind)
        .cloned()
        .collect()
}

both_backends!(sandbox_without_breaks, |t: TestServer| async move {
    let date = today();
    t.settle_some("ada").await;
    if date != today() {
        return; // The settlements straddle midnight UTC.
    }
    let (code, v) = t.reconcile_cli(&date).await;
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(v["matched"]["count"], 3, "{v}");
    // 12.34 and 5 cleared, 2.50 refunded: compared by absolute value.
    assert_eq!(v["matched"]["amount_cents"], 1234 + 500 + 250, "{v}");
    assert_eq!(v["breaks"], serde_json::json!([]), "{v}");
    // Kept per date: the console's and the metric's source.
    let mut conn = t.store.conn().await.unwrap();
    let kept = issuing_store::reconciliation::list(&mut conn, 10)
        .await
        .unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        (kept[0].report_date.as_str(), kept[0].matched_count),
        (date.as_str(), 3)
    );
    drop(conn);
    // Another date has nothing to match.
    let (code, v) = t.reconcile_cli("2001-01-01").await;
    assert_eq!((code, &v["matched"]["count"]), (0, &Value::from(0)), "{v}");
    t.verify_ledger().await;
});

both_backends!(sandbox_each_kind_of_break, |t: TestServer| async move {
    let (a, b, refund) = t.settle_some("bob").await;
    let here = t.plant(&b, "missing_here").await;
    let there = t.plant(&refund, "missing_there").await;
    let mismatch = t.plant(&a, "amount_mismatch").await;
    let date = here.date.clone();
    assert_eq!(there.date, date);
    let v = t.reconcile_here(&date).await;
    assert_eq!(v["breaks_count"]["missing_here"], 1, "{v}");
    assert_eq!(v["breaks_count"]["missing_there"], 1, "{v}");
    assert_eq!(v["breaks_count"]["amount_mismatch"], 1, "{v}");
    assert_eq!(v["matched"]["count"], 1, "{v}");
    assert_eq!(v["matched"]["amount_cents"], 500, "{v}");

    let h = &breaks_of(&v, "missing_here")[0];
    assert_eq!(h["event_token"], here.event_token.as_str(), "{v}");
    assert_eq!(h["transaction_id"], b.as_str(), "{v}");
    let m = &breaks_of(&v, "missing_there")[0];
    assert_eq!(m["event_token"], there.event_token.as_str(), "{v}");
    assert_eq!(m["transaction_id"], there.transaction_id.as_str(), "{v}");
    assert_eq!(m["here_cents"], 250, "{v}");
    let x = &breaks_of(&v, "amount_mismatch")[0];
    assert_eq!(x["event_token"], mismatch.event_token.as_str(), "{v}");
    assert_eq!(x["transaction_id"], a.as_str(), "{v}");
    assert_eq!(
        (&x["here_cents"], &x["there_cents"]),
        (&Value::from(1234), &Value::from(1235)),
        "{v}"
    );

    // The command prints the same and exits 1 on breaks.
    let (code, printed) = t.reconcile_cli(&date).await;
    assert_eq!(code, 1, "{printed}");
    assert_eq!(printed["breaks"], v["breaks"]);
    t.verify_ledger().await;
});

both_backends!(sandbox_break_refusals, |t: TestServer| async move {
    let card = t.funded_card("cy", 20).await;
    let auth = t
        .sdk()
        .simulate_cards_auth(&SimulateAuth {
            card_id: card.clone(),
            transaction_amount: "1".into(),
            ..SimulateAuth::default()
        })
        .await
        .unwrap();
    // An open authorization has settled nothing.
    t.expect_error(
        "simulate/settlement/break",
        serde_json::json!({"transaction_id": auth.transaction_id, "kind": "missing_there"}),
        404,
        "transaction_not_found",
    )
    .await;
    let a = t.cleared(&card, "1", None).await;
    t.expect_error(
        "simulate/settlement/break",
        serde_json::json!({"transaction_id": a, "kind": "lost"}),
        400,
        "validation_error",
    )
    .await;
    t.verify_ledger().await;
});

fn console_and_metrics() -> ServerConfig {
    ServerConfig {
        console: Some(issuing_app::config::ConsoleListen {
            addr: "127.0.0.1:0".parse().unwrap(),
            optional: false,
        }),
        metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::default()
    }
}

both_backends_with!(
    console_metric_and_daily_job,
    console_and_metrics(),
    |t: TestServer| async move {
        let (a, _, _) = t.settle_some("dee").await;
        let planted = t.plant(&a, "amount_mismatch").await;
        t.reconcile_here(&planted.date).await;

        // The metric: the latest finished result per subprovider, by kind.
        let addr = t.metrics_addr().unwrap();
        let text = t
            .http
            .get(format!("http://{addr}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        for (kind, n) in [
            ("missing_here", 0),
            ("missing_there", 0),
            ("amount_mismatch", 1),
        ] {
            let line = format!(
                "issuing_reconciliation_breaks{{subprovider=\"sandbox\",kind=\"{kind}\"}} {n}"
            );
            assert!(text.contains(&line), "{line} in:\n{text}");
        }

        // The console page, for a viewer too (as the ledger), with the break named.
        let password = issuing_console::operators::create(
            &t.store,
            "viewer@example.com",
            issuing_console::operators::Role::Viewer,
            &[],
        )
        .await
        .unwrap()
        .password;
        let console = common::console::Console::login(
            t.console_addr().unwrap(),
            "viewer@example.com",
            &password,
        )
        .await;
        let page = console.get("/console/reconciliation").await;
        assert_eq!(page.status, 200);
        assert!(page.body.contains(&planted.date), "{}", page.body);
        assert!(page.body.contains("amount_mismatch"), "{}", page.body);
        assert!(page.body.contains(&planted.event_token), "{}", page.body);
        assert!(page.body.contains(&a), "{}", page.body);

        // The daily job: the server's worker reconciles yesterday of each sandbox
        // subprovider once (its first pass comes seconds after start); the kept row is
        // its claim, so another claim of that date is refused.
        let yesterday = (chrono::Utc::now() - chrono::Duration::days(1))
            .format("%Y-%m-%d")
            .to_string();
        let mut done = false;
        for _ in 0..100 {
            let mut conn = t.store.conn().await.unwrap();
            let kept = issuing_store::reconciliation::list(&mut conn, 50)
                .await
                .unwrap();
            done = kept.iter().any(|r| {
                r.report_date == yesterday && r.subprovider_code == "sandbox" && r.status == "done"
            });
            if done {
                break;
            }
            drop(conn);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(done, "the daily job reconciled {yesterday}");
        let mut conn = t.store.conn().await.unwrap();
        let now = issuing_domain::time::now_micros();
        let again = issuing_store::reconciliation::claim(&mut conn, "sandbox", &yesterday, now, 0)
            .await
            .unwrap();
        assert!(!again, "a date is claimed once");
        drop(conn);
        t.verify_ledger().await;
    }
);
