//! Settlement reconciliation (CONTRACT §17): the kept result of each (subprovider,
//! date), newest date first, with its breaks. Readable by every operator as the ledger
//! is; the results span projects, so an operator limited to some projects sees that
//! the results exist and their counts, never other projects' transactions.

use super::view::{self, render, Ctx, PageResult};
use super::{Console, Op};
use askama::Template;
use axum::extract::State;
use axum::Extension;
use issuing_store::console::Scope;
use issuing_store::reconciliation;

/// Results shown: a quarter's worth for a few subproviders.
const SHOWN: i64 = 200;

struct BreakRow {
    kind: String,
    transaction_id: String,
    event_token: String,
    here: String,
    there: String,
}

struct ResultRow {
    date: String,
    subprovider: String,
    status: String,
    matched: i64,
    matched_amount: String,
    missing_here: i64,
    missing_there: i64,
    amount_mismatch: i64,
    error: String,
    finished_at: String,
    breaks: Vec<BreakRow>,
}

#[derive(Template)]
#[template(path = "console/reconciliation.html")]
struct ReconciliationPage {
    ctx: Ctx,
    rows: Vec<ResultRow>,
    scoped: bool,
}

fn cents(v: &serde_json::Value) -> String {
    v.as_i64().map_or_else(
        || "—".to_owned(),
        |c| format!("{}.{:02}", c / 100, (c % 100).abs()),
    )
}

pub(crate) async fn page(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
) -> PageResult {
    let scoped = !matches!(op.scope, Scope::All);
    let kept = {
        let mut conn = console.app.store.reader().conn().await?;
        reconciliation::list(&mut conn, SHOWN).await?
    };
    let rows = kept
        .into_iter()
        .map(|r| ResultRow {
            breaks: if scoped {
                Vec::new()
            } else {
                r.breaks
                    .as_array()
                    .map(|all| {
                        all.iter()
                            .map(|b| BreakRow {
                                kind: b["kind"].as_str().unwrap_or_default().to_owned(),
                                transaction_id: view::opt(b["transaction_id"].as_str()),
                                event_token: b["event_token"]
                                    .as_str()
                                    .unwrap_or_default()
                                    .to_owned(),
                                here: cents(&b["here_cents"]),
                                there: cents(&b["there_cents"]),
                            })
                            .collect()
                    })
                    .unwrap_or_default()
            },
            date: r.report_date,
            subprovider: r.subprovider_code,
            status: r.status,
            matched: r.matched_count,
            matched_amount: cents(&serde_json::Value::from(r.matched_cents)),
            missing_here: r.missing_here,
            missing_there: r.missing_there,
            amount_mismatch: r.amount_mismatch,
            error: r.error.unwrap_or_default(),
            finished_at: r.finished_at.map(view::time).unwrap_or_default(),
        })
        .collect();
    render(&ReconciliationPage {
        ctx: op.ctx(&console, "reconciliation"),
        rows,
        scoped,
    })
}
