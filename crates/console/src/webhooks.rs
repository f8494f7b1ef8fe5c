//! Webhook deliveries, newest first, filtered by `state` (and project), with the
//! `Redeliver` action: the same code as wh/redeliver.

use super::audit::finish;
use super::session::Act;
use super::view::{self, render, Ctx, PageResult};
use super::{Console, ConsoleError, Op, PAGE_SIZE};
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::Extension;
use issuing_app::webhooks::redeliver;
use issuing_store::console::{self as reads, DeliveryQuery};
use issuing_store::deliveries::{DeliveryRecord, STATES};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    state: Option<String>,
    project: Option<String>,
    before: Option<String>,
}

pub(crate) struct DeliveryRow {
    pub id: String,
    pub project_id: String,
    pub event_type: String,
    pub state: String,
    pub badge: &'static str,
    pub attempts: i64,
    pub last_status: String,
    pub last_error: String,
    pub next_attempt_at: String,
    pub created_at: String,
}

pub(crate) fn delivery_row(d: DeliveryRecord) -> DeliveryRow {
    DeliveryRow {
        badge: view::badge(&d.state),
        last_status: d
            .last_status
            .map(|s| s.to_string())
            .unwrap_or_else(|| "—".to_owned()),
        last_error: view::opt(d.last_error.as_deref()),
        next_attempt_at: view::opt_time(d.next_attempt_at),
        created_at: view::time(d.created_at),
        attempts: d.attempts,
        id: d.id,
        project_id: d.project_id,
        event_type: d.event_type,
        state: d.state,
    }
}

#[derive(Template)]
#[template(path = "console/webhooks.html")]
struct WebhooksPage {
    ctx: Ctx,
    project: String,
    states: Vec<(&'static str, bool)>,
    deliveries: Vec<DeliveryRow>,
    next: Option<String>,
    here: String,
}

pub(crate) async fn list(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Query(query): Query<ListQuery>,
) -> PageResult {
    let state = view::filter(&query.state)?;
    if let Some(s) = &state {
        if !STATES.contains(&s.as_str()) {
            return Err(ConsoleError::BadRequest(format!(
                "state must be one of: {}",
                STATES.join(", ")
            )));
        }
    }
    let project = view::filter(&query.project)?;
    let before = view::cursor(&query.before)?;
    let mut conn = console.app.store.reader().conn().await?;
    let rows = reads::deliveries_page(
        &mut conn,
        &op.scope,
        &DeliveryQuery {
            state: state.clone(),
            project_id: project.clone(),
        },
        before.as_ref(),
        PAGE_SIZE + 1,
    )
    .await?;
    let (rows, next) = view::split_page(rows, PAGE_SIZE, |d| (d.created_at, &d.id));
    let link = |before: Option<&str>| {
        view::link(
            "/console/webhooks",
            &[
                ("state", state.as_deref()),
                ("project", project.as_deref()),
                ("before", before),
            ],
        )
    };
    render(&WebhooksPage {
        ctx: op.ctx(&console, "webhooks"),
        here: link(query.before.as_deref()),
        next: next.map(|n| link(Some(&n))),
        states: view::options(STATES, state.as_deref()),
        deliveries: rows.into_iter().map(delivery_row).collect(),
        project: project.unwrap_or_default(),
    })
}

#[derive(Deserialize)]
pub(crate) struct RedeliverForm {
    /// The list page to go back to (its filters), a console path.
    #[serde(default)]
    back: String,
}

pub(crate) async fn redeliver(
    State(console): State<Console>,
    Path(delivery_id): Path<String>,
    Act(op, form): Act<RedeliverForm>,
) -> PageResult {
    let delivery = {
        let mut conn = console.app.store.conn().await?;
        reads::delivery(&mut conn, &delivery_id)
            .await?
            .ok_or(ConsoleError::NotFound)?
    };
    op.may_see(&delivery.project_id)?;
    let result = redeliver::one(&console.app, &delivery.project_id, &delivery.id)
        .await
        .map(|d| format!("Delivery {} is queued again ({}).", d.id, d.state))
        .map_err(|e| e.message);
    finish(
        &console,
        &op,
        "webhook.redeliver",
        Some(&delivery.project_id),
        json!({ "delivery_id": delivery.id, "event_id": delivery.event_id }),
        result,
        &console_path(&form.back, "/console/webhooks"),
    )
    .await
}

/// `back` when it is a path of this console (never another site), else `default`.
pub(crate) fn console_path(back: &str, default: &str) -> String {
    let ok = back.starts_with("/console/")
        && !back.contains("//")
        && !back.contains('\\')
        && !back.chars().any(char::is_control);
    if ok {
        back.to_owned()
    } else {
        default.to_owned()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn goes_back_only_within_the_console() {
        use super::console_path;
        assert_eq!(
            console_path("/console/webhooks?state=failed", "/x"),
            "/console/webhooks?state=failed"
        );
        for bad in [
            "https://evil.example/",
            "//evil.example",
            "/console//evil",
            "/other",
            "",
            "/console/\\x",
        ] {
            assert_eq!(
                console_path(bad, "/console/webhooks"),
                "/console/webhooks",
                "{bad}"
            );
        }
    }
}
