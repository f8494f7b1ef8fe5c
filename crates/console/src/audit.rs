//! The audit log: every console action appends a row here (through `finish` or
//! `record`), as every `issuing admin` command does from the CLI; `/console/audit`
//! lists them newest first.

use super::view::{self, render, Ctx, PageResult};
use super::{see_other, Console, ConsoleError, Op, PAGE_SIZE};
use askama::Template;
use axum::extract::{Query, State};
use axum::response::Response;
use axum::Extension;
use issuing_domain::time::now_micros;
use issuing_store::audit::{self, NewAudit};
use issuing_store::StoreError;
use serde::Deserialize;
use serde_json::Value;

/// Appends the audit row of an action: `ok`, or `error: <why>`.
pub(crate) async fn record(
    console: &Console,
    op: &Op,
    action: &str,
    project_id: Option<&str>,
    targets: &Value,
    result: &Result<String, String>,
) -> Result<(), StoreError> {
    let result = match result {
        Ok(_) => "ok".to_owned(),
        Err(why) => format!("error: {why}"),
    };
    let mut tx = console.app.store.begin().await?;
    audit::append(
        &mut tx,
        &NewAudit {
            at: now_micros(),
            actor: &op.email,
            action,
            project_id,
            targets,
            result: &result,
        },
    )
    .await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(())
}

/// Ends an action: its audit row, its outcome shown once on the next page, and a 303
/// to `back`.
pub(crate) async fn finish(
    console: &Console,
    op: &Op,
    action: &str,
    project_id: Option<&str>,
    targets: Value,
    result: Result<String, String>,
    back: &str,
) -> Result<Response, ConsoleError> {
    record(console, op, action, project_id, &targets, &result).await?;
    op.flash(console, &result).await?;
    Ok(see_other(back))
}

#[derive(Deserialize)]
pub(crate) struct AuditQuery {
    actor: Option<String>,
    action: Option<String>,
    before: Option<String>,
}

struct Row {
    at: String,
    actor: String,
    action: String,
    project_id: String,
    targets: String,
    result: String,
    ok: bool,
}

#[derive(Template)]
#[template(path = "console/audit.html")]
struct AuditPage {
    ctx: Ctx,
    actor: String,
    action: String,
    rows: Vec<Row>,
    next: Option<String>,
    here: String,
}

pub(crate) async fn list(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Query(q): Query<AuditQuery>,
) -> PageResult {
    let actor = view::filter(&q.actor)?;
    let action = view::filter(&q.action)?;
    let before = match view::filter(&q.before)? {
        None => None,
        Some(b) => Some(
            b.parse::<i64>()
                .map_err(|_| ConsoleError::BadRequest("The page cursor is not valid.".into()))?,
        ),
    };
    let mut conn = console.app.store.reader().conn().await?;
    let mut entries = audit::page(
        &mut conn,
        &op.scope,
        actor.as_deref(),
        action.as_deref(),
        before,
        PAGE_SIZE + 1,
    )
    .await?;
    let more = entries.len() > usize::try_from(PAGE_SIZE).unwrap_or(0);
    entries.truncate(usize::try_from(PAGE_SIZE).unwrap_or(0));
    let params = |before: Option<&str>| {
        view::link(
            "/console/audit",
            &[
                ("actor", actor.as_deref()),
                ("action", action.as_deref()),
                ("before", before),
            ],
        )
    };
    let next = more
        .then(|| entries.last().map(|e| e.id.to_string()))
        .flatten()
        .map(|b| params(Some(&b)));
    let rows = entries
        .into_iter()
        .map(|e| Row {
            at: view::time(e.at),
            ok: e.result == "ok",
            actor: e.actor,
            action: e.action,
            project_id: e.project_id.unwrap_or_default(),
            targets: targets_text(&e.targets),
            result: e.result,
        })
        .collect();
    render(&AuditPage {
        ctx: op.ctx(&console, "audit"),
        here: params(q.before.as_deref()),
        actor: actor.unwrap_or_default(),
        action: action.unwrap_or_default(),
        rows,
        next,
    })
}

/// `key=value` pairs of the targets object, for reading at a glance.
fn targets_text(targets: &Value) -> String {
    match targets {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}={s}"),
                other => format!("{k}={other}"),
            })
            .collect::<Vec<_>>()
            .join(" "),
        other => other.to_string(),
    }
}
