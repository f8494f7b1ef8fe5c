//! Exports: the project, card and ledger pages ask for a report of a project (as
//! `reports/create` does, in the operator's name, audited), and a report's page shows
//! its status and, once ready, serves its file from the console itself (audited too),
//! streamed chunk by chunk as the API's download is.

use super::audit::{finish, record};
use super::session::Act;
use super::view::{render, Ctx, PageResult};
use super::{Console, ConsoleError, Op};
use askama::Template;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue};
use axum::response::Response;
use axum::Extension;
use issuing_app::reports::{self as core, download};
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_store::reports as store;
use issuing_wire::api::ReportsCreate;
use serde::Deserialize;
use serde_json::json;

/// The window an export covers unless the form says otherwise.
const DEFAULT_DAYS: i64 = 30;

#[derive(Deserialize)]
pub(crate) struct ExportForm {
    #[serde(default, rename = "type")]
    report_type: String,
    #[serde(default)]
    format: String,
    #[serde(default)]
    days: String,
}

/// `POST /console/projects/{project_id}/export`: a report of the project's rows of the
/// last `days` days (30 unless given, at most 366).
pub(crate) async fn export(
    State(console): State<Console>,
    Path(project_id): Path<String>,
    Act(op, form): Act<ExportForm>,
) -> PageResult {
    op.may_see(&project_id)?;
    let days = match form.days.trim() {
        "" => DEFAULT_DAYS,
        d => d
            .parse::<i64>()
            .ok()
            .filter(|d| (1..=core::MAX_WINDOW_DAYS).contains(d))
            .ok_or_else(|| ConsoleError::BadRequest("days must be 1 to 366".into()))?,
    };
    let format = match form.format.trim() {
        "" => "csv",
        f => f,
    };
    let now = now_micros();
    let request = ReportsCreate {
        report_type: form.report_type.trim().to_owned(),
        from: to_rfc3339(now - days * 24 * 3600 * 1_000_000),
        to: to_rfc3339(now),
        format: format.to_owned(),
    };
    let actor = op.email.clone();
    let back = format!("/console/projects/{project_id}");
    let targets = json!({ "type": request.report_type, "format": request.format, "days": days });
    match core::create(&console.app, &project_id, &actor, &request).await {
        Ok(created) => {
            let page = format!("/console/reports/{}", created.report_id);
            finish(
                &console,
                &op,
                "report.export",
                Some(&project_id),
                json!({ "report_id": created.report_id, "request": targets }),
                Ok(format!(
                    "Report {} is being built; this page shows it when it is ready.",
                    created.report_id
                )),
                &page,
            )
            .await
        }
        Err(e) => {
            finish(
                &console,
                &op,
                "report.export",
                Some(&project_id),
                targets,
                Err(e.message),
                &back,
            )
            .await
        }
    }
}

#[derive(Template)]
#[template(path = "console/report.html")]
struct ReportPage {
    ctx: Ctx,
    id: String,
    project_id: String,
    report_type: String,
    format: String,
    from: String,
    to: String,
    status: String,
    ready: bool,
    row_count: String,
    size: String,
    sha256: String,
    created_by: String,
    created_at: String,
    expires_at: String,
}

async fn visible_report(
    console: &Console,
    op: &Op,
    id: &str,
) -> Result<store::ReportRecord, ConsoleError> {
    let mut conn = console.app.store.conn().await?;
    let report = store::by_id(&mut conn, id)
        .await?
        .ok_or(ConsoleError::NotFound)?;
    op.may_see(&report.project_id)?;
    Ok(report)
}

/// `GET /console/reports/{report_id}`.
pub(crate) async fn show(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Path(report_id): Path<String>,
) -> PageResult {
    let r = visible_report(&console, &op, &report_id).await?;
    let opt = |v: Option<i64>| v.map(|n| n.to_string()).unwrap_or_default();
    render(&ReportPage {
        ctx: op.ctx(&console, "projects"),
        ready: r.status == store::READY,
        row_count: opt(r.row_count),
        size: opt(r.size),
        sha256: r.sha256.clone().unwrap_or_default(),
        from: to_rfc3339(r.from_at),
        to: to_rfc3339(r.to_at),
        created_at: to_rfc3339(r.created_at),
        expires_at: r.expires_at.map(to_rfc3339).unwrap_or_default(),
        id: r.id,
        project_id: r.project_id,
        report_type: r.report_type,
        format: r.format,
        status: r.status,
        created_by: r.created_by,
    })
}

/// `GET /console/reports/{report_id}/file`: the ready file, audited.
pub(crate) async fn file(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Path(report_id): Path<String>,
) -> PageResult {
    let r = visible_report(&console, &op, &report_id).await?;
    if r.status != store::READY {
        return Err(ConsoleError::NotFound);
    }
    record(
        &console,
        &op,
        "report.download",
        Some(&r.project_id),
        &json!({ "report_id": r.id }),
        &Ok("downloaded".to_owned()),
    )
    .await?;
    let body = Body::from_stream(download::chunks(console.app.store.clone(), r.id.clone()));
    let mut res = Response::new(body);
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(download::content_type(&r)),
    );
    if let Ok(v) = HeaderValue::from_str(&format!(
        "attachment; filename=\"{}\"",
        download::filename(&r)
    )) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    if let Some(size) = r.size {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}
