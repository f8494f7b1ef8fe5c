//! Deposits: every credit of a master balance (chain deposits, `admin deposit`, sandbox
//! credits), newest first: the ledger's `deposit` transfers.

use super::ledger::{transfers, Transfers};
use super::view::{render, Ctx, PageResult};
use super::{Console, Op};
use askama::Template;
use axum::extract::{Query, State};
use axum::Extension;
use serde::Deserialize;

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    project: Option<String>,
    before: Option<String>,
}

#[derive(Template)]
#[template(path = "console/deposits.html")]
struct DepositsPage {
    ctx: Ctx,
    list: Transfers,
}

pub(crate) async fn list(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Query(query): Query<ListQuery>,
) -> PageResult {
    let list = transfers(
        &console,
        &op,
        "/console/deposits",
        Some("deposit".to_owned()),
        &query.project,
        &query.before,
    )
    .await?;
    render(&DepositsPage {
        ctx: op.ctx(&console, "deposits"),
        list,
    })
}
