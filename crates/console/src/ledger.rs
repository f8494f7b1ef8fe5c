//! The ledger: transfers newest first, the last verification, and `Verify ledger` (the
//! code `issuing admin verify-ledger` runs).

use super::audit::finish;
use super::session::{Act, NoFields};
use super::view::{self, render, Ctx, PageResult};
use super::{Console, ConsoleError, Op, PAGE_SIZE};
use askama::Template;
use axum::extract::{Query, State};
use axum::Extension;
use issuing_store::console::{self as reads, TransferQuery};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    kind: Option<String>,
    project: Option<String>,
    before: Option<String>,
}

pub(crate) struct TransferRow {
    pub id: String,
    pub project_id: String,
    pub kind: String,
    pub amount: String,
    pub order_id: String,
    pub card_id: String,
    pub reference: String,
    pub created_at: String,
}

/// A page of transfers as both the ledger and the deposits page show them.
pub(crate) struct Transfers {
    pub kind: String,
    pub project: String,
    pub rows: Vec<TransferRow>,
    pub next: Option<String>,
    pub here: String,
}

pub(crate) async fn transfers(
    console: &Console,
    op: &Op,
    path: &str,
    kind: Option<String>,
    project: &Option<String>,
    before: &Option<String>,
) -> Result<Transfers, ConsoleError> {
    let project = view::filter(project)?;
    let cursor = view::cursor(before)?;
    let mut conn = console.app.store.reader().conn().await?;
    let rows = reads::transfers_page(
        &mut conn,
        &op.scope,
        &TransferQuery {
            kind: kind.clone(),
            project_id: project.clone(),
        },
        cursor.as_ref(),
        PAGE_SIZE + 1,
    )
    .await?;
    let (rows, next) = view::split_page(rows, PAGE_SIZE, |t| (t.created_at, &t.id));
    let link = |before: Option<&str>| {
        view::link(
            path,
            &[
                ("kind", kind.as_deref()),
                ("project", project.as_deref()),
                ("before", before),
            ],
        )
    };
    Ok(Transfers {
        here: link(before.as_deref()),
        next: next.map(|n| link(Some(&n))),
        rows: rows
            .into_iter()
            .map(|t| TransferRow {
                amount: view::money(t.amount),
                order_id: t.order_id.unwrap_or_default(),
                card_id: t.card_id.unwrap_or_default(),
                reference: view::opt(t.reference.as_deref()),
                created_at: view::time(t.created_at),
                id: t.id,
                project_id: t.project_id,
                kind: t.kind,
            })
            .collect(),
        kind: kind.unwrap_or_default(),
        project: project.unwrap_or_default(),
    })
}

struct LastCheck {
    at: String,
    actor: String,
    ok: bool,
    problems: i64,
    details: String,
}

#[derive(Template)]
#[template(path = "console/ledger.html")]
struct LedgerPage {
    ctx: Ctx,
    last: Option<LastCheck>,
    list: Transfers,
}

pub(crate) async fn page(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Query(query): Query<ListQuery>,
) -> PageResult {
    let kind = view::filter(&query.kind)?;
    let list = transfers(
        &console,
        &op,
        "/console/ledger",
        kind,
        &query.project,
        &query.before,
    )
    .await?;
    let last = {
        let mut conn = console.app.store.reader().conn().await?;
        issuing_store::audit::last_verification(&mut conn).await?
    };
    render(&LedgerPage {
        ctx: op.ctx(&console, "ledger"),
        last: last.map(|v| LastCheck {
            at: view::time(v.finished_at),
            actor: v.actor,
            ok: v.problems == 0,
            problems: v.problems,
            details: v.details,
        }),
        list,
    })
}

pub(crate) async fn verify(
    State(console): State<Console>,
    Act(op, NoFields {}): Act<NoFields>,
) -> PageResult {
    let result = {
        let _one_at_a_time = console.verifying.lock().await;
        issuing_app::ledger_check::verify(&console.app.store, &op.email).await?
    };
    let outcome = if result.is_empty() {
        Ok("Ledger ok: every transfer balances and every balance matches its entries.".to_owned())
    } else {
        Err(format!(
            "The ledger has {} problem(s); see below.",
            result.len()
        ))
    };
    finish(
        &console,
        &op,
        "ledger.verify",
        None,
        json!({}),
        outcome,
        "/console/ledger",
    )
    .await
}
