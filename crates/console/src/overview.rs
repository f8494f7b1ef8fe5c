//! `/console/`: what needs attention now. Projects and their balances, cards by
//! status, authorizations per minute over 24 hours (SVG), deliveries failing now and
//! orders that failed or are being retried.

use super::cards::{order_row, OrderRow};
use super::chart::{self, Chart};
use super::view::{self, render, Ctx, PageResult};
use super::webhooks::{delivery_row, DeliveryRow};
use super::{Console, Op};
use askama::Template;
use axum::extract::State;
use axum::Extension;
use issuing_domain::time::now_micros;
use issuing_store::console as reads;

/// Rows of each list on the overview.
const SHOWN: i64 = 10;
const DAY: i64 = 24 * 3600 * 1_000_000;

struct ProjectRow {
    id: String,
    name: String,
    status: String,
    badge: &'static str,
    balance: String,
}

#[derive(Template)]
#[template(path = "console/overview.html")]
struct OverviewPage {
    ctx: Ctx,
    projects: Vec<ProjectRow>,
    more_projects: bool,
    card_counts: Vec<(String, i64)>,
    cards_total: i64,
    chart: Chart,
    deliveries: Vec<DeliveryRow>,
    orders: Vec<OrderRow>,
    here: String,
}

pub(crate) async fn page(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
) -> PageResult {
    let now = now_micros();
    let mut conn = console.app.store.reader().conn().await?;
    let mut projects = reads::projects_page(&mut conn, &op.scope, None, SHOWN + 1).await?;
    let more_projects = projects.len() > usize::try_from(SHOWN).unwrap_or(0);
    projects.truncate(usize::try_from(SHOWN).unwrap_or(0));
    let card_counts = console.card_counts.get(&mut conn, &op.scope).await?;
    let chart = chart::chart(&console.chart, &mut conn, &op.scope, now).await?;
    let deliveries = reads::failing_deliveries(&mut conn, &op.scope, SHOWN).await?;
    let orders = reads::orders_needing_attention(&mut conn, &op.scope, now - DAY, SHOWN).await?;
    render(&OverviewPage {
        ctx: op.ctx(&console, "overview"),
        projects: projects
            .into_iter()
            .map(|r| ProjectRow {
                badge: view::badge(&r.project.status),
                balance: view::money(r.balance),
                id: r.project.id,
                name: r.project.name,
                status: r.project.status,
            })
            .collect(),
        more_projects,
        cards_total: card_counts.iter().map(|(_, n)| n).sum(),
        card_counts,
        chart,
        deliveries: deliveries.into_iter().map(delivery_row).collect(),
        orders: orders.into_iter().map(order_row).collect(),
        here: "/console/".to_owned(),
    })
}
