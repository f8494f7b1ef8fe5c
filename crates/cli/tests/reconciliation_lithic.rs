//! Settlement reconciliation (CONTRACT §17) against the fake Lithic: its settlement
//! details (checked against Lithic's document, read page by page) against the clearings
//! and refunds the service applied from Lithic's events, with no break and with each
//! kind of break.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::lithic::harness::Lithic;
use common::lithic::Merchant;
use common::Backend;
use serde_json::Value;

macro_rules! lithic_case {
    ($name:ident) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                if let Some(l) = Lithic::start(Backend::Sqlite, "").await {
                    super::$name(&l).await;
                    l.finish().await;
                }
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                if let Some(l) = Lithic::start(Backend::Postgres, "").await {
                    super::$name(&l).await;
                    l.finish().await;
                }
            }
        }
    };
}

fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
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

/// Two clearings, a force post and a return on one card: our transaction ids by
/// Lithic transaction token, and the tokens.
async fn settle(l: &Lithic) -> (String, Vec<String>) {
    let (_, token) = l.card("ada", "100").await;
    let m = Merchant::coffee();
    let a = l.fake.authorize(&token, 2000, &m).await;
    assert_eq!(l.fake.clear(&a.token, 1800).await, vec![200]);
    let b = l.fake.authorize(&token, 1000, &m).await;
    assert_eq!(l.fake.clear(&b.token, 1000).await, vec![200]);
    let (f, statuses) = l.fake.force_post(&token, 450, &m).await;
    assert_eq!(statuses, vec![200]);
    let (r, statuses) = l.fake.refund(&token, 700, &m).await;
    assert_eq!(statuses, vec![200]);
    (token, vec![a.token, b.token, f, r])
}

async fn without_breaks(l: &Lithic) {
    let date = today();
    let (card, _) = settle(l).await;
    if date != today() {
        return; // The settlements straddle midnight UTC.
    }
    // A fee settles too; it is no clearing or refund, and no break.
    l.fake.settlement_other(&card, "FEE", -25);
    // Two details a page: the five take three pages.
    l.fake.settlement_page_cap(2);
    let v = l.reconcile(&date).await;
    assert_eq!(v["status"], "done", "{v}");
    assert_eq!(v["breaks"], serde_json::json!([]), "{v}");
    assert_eq!(v["matched"]["count"], 4, "{v}");
    assert_eq!(v["matched"]["amount_cents"], 1800 + 1000 + 450 + 700, "{v}");
    // Read page by page (five details, two a page: three pages, the four matched and
    // the fee among them), every call checked against the document; the daily job may
    // have read yesterday's meanwhile.
    assert!(
        l.fake
            .calls("GET", "/v1/reports/settlement/details/{report_date}")
            >= 3
    );
    let other = l.reconcile("2001-01-01").await;
    assert_eq!(other["matched"]["count"], 0, "{other}");
}
lithic_case!(without_breaks);

async fn each_kind_of_break(l: &Lithic) {
    let date = today();
    let (card, txs) = settle(l).await;
    if date != today() {
        return;
    }
    // Lithic settled one we never heard of, dropped the force post, and reports the
    // first clearing at another amount.
    let unknown = l.fake.settlement_unannounced(&card, 999);
    let dropped = l.fake.event_tokens(&txs[2], "CLEARING")[0].clone();
    l.fake.settlement_hide(&dropped);
    let changed = l.fake.event_tokens(&txs[0], "CLEARING")[0].clone();
    l.fake.settlement_amount(&changed, 1750);

    let v = l.reconcile(&date).await;
    assert_eq!(v["breaks_count"]["missing_here"], 1, "{v}");
    assert_eq!(v["breaks_count"]["missing_there"], 1, "{v}");
    assert_eq!(v["breaks_count"]["amount_mismatch"], 1, "{v}");
    assert_eq!(v["matched"]["count"], 2, "{v}");
    let h = &breaks_of(&v, "missing_here")[0];
    assert_eq!(h["event_token"], unknown.as_str(), "{v}");
    assert_eq!(h["there_cents"], 999, "{v}");
    let m = &breaks_of(&v, "missing_there")[0];
    assert_eq!(m["event_token"], dropped.as_str(), "{v}");
    assert_eq!(m["here_cents"], 450, "{v}");
    assert!(
        m["transaction_id"].as_str().is_some_and(|t| !t.is_empty()),
        "{v}"
    );
    let x = &breaks_of(&v, "amount_mismatch")[0];
    assert_eq!(x["event_token"], changed.as_str(), "{v}");
    assert_eq!(
        (&x["here_cents"], &x["there_cents"]),
        (&Value::from(1800), &Value::from(1750)),
        "{v}"
    );
}
lithic_case!(each_kind_of_break);
