//! Reports: a project's card transactions, ledger entries, cards or disputes created in
//! a time window, as one CSV (RFC 4180) or JSONL file.
//!
//! - `create` (`reports/create`, and the console's exports): a job in the database,
//!   `processing`, that survives restarts.
//! - `build` (a worker): claims a job by a lease, reads the rows in keyset pages and
//!   writes the file as chunks of whole rows, each in a short transaction fenced on the
//!   lease; memory holds one page and one chunk, never the file. A build cut short (a
//!   restart, a crash) is done again from scratch by whoever claims the job next. The
//!   job turns `ready` (or `failed`) in the transaction that writes `report.ready`.
//! - `get` (`reports/get`): the report, and while it is ready a fresh download link of
//!   32 random bytes, of which the database keeps the hash, good for one hour.
//! - `download` (`GET /reports/{token}`): the file, streamed chunk by chunk.
//!
//! Files (and their reports) are deleted 7 days after they are ready (the cleanup
//! worker).

pub mod build;
pub mod create;
pub mod download;
pub mod rows;

use crate::App;
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_store::audit::{self, NewAudit};
use issuing_store::reports::{self as store, ReportRecord};
use issuing_wire::api::Report;
use issuing_wire::{ApiError, ErrorSlug};

pub use create::create;

/// The webhook event of a finished build.
pub const READY_EVENT: &str = "report.ready";
/// The report types, in the order the documentation lists them.
pub const TYPES: &[&str] = &["card_transactions", "ledger_entries", "cards", "disputes"];
pub const FORMATS: &[&str] = &["csv", "jsonl"];
/// The longest window a report covers.
pub const MAX_WINDOW_DAYS: i64 = 366;
/// How long a file is kept once ready (or a failed report once it failed).
pub const KEPT_MICROS: i64 = 7 * 24 * 3600 * 1_000_000;
/// How long a download link works.
pub const LINK_MICROS: i64 = 3600 * 1_000_000;
/// The audit log's actor for a report a project asks for through the API.
pub const API_ACTOR: &str = "api";

fn not_found() -> ApiError {
    ApiError::new(ErrorSlug::ReportNotFound, "Report not found")
}

/// A report as the API answers it, without a link.
pub fn view(r: &ReportRecord) -> Report {
    Report {
        report_id: r.id.clone(),
        report_type: r.report_type.clone(),
        format: r.format.clone(),
        from: to_rfc3339(r.from_at),
        to: to_rfc3339(r.to_at),
        status: r.status.clone(),
        row_count: r.row_count.and_then(|n| u64::try_from(n).ok()),
        size: r.size.and_then(|n| u64::try_from(n).ok()),
        sha256: r.sha256.clone(),
        created_at: to_rfc3339(r.created_at),
        ready_at: r.ready_at.map(to_rfc3339),
        expires_at: r.expires_at.map(to_rfc3339),
        download_url: None,
        download_expires_at: None,
    }
}

/// `reports/get` for the caller's project: a ready report comes with a new download
/// link, good for one hour.
pub async fn get(state: &App, project_id: &str, report_id: &str) -> Result<Report, ApiError> {
    let report_id = report_id.trim();
    if report_id.is_empty() {
        return Err(ApiError::validation("report_id is required"));
    }
    let report = {
        let mut conn = state.store.conn().await?;
        store::get(&mut conn, project_id, report_id).await?
    };
    let report = report.ok_or_else(not_found)?;
    let mut answer = view(&report);
    if report.status == store::READY {
        let (url, expires_at) = link(state, &report).await?;
        answer.download_url = Some(url);
        answer.download_expires_at = Some(to_rfc3339(expires_at));
    }
    Ok(answer)
}

/// A new download link of a ready report: its URL and when it stops working.
pub async fn link(state: &App, report: &ReportRecord) -> Result<(String, i64), ApiError> {
    let now = now_micros();
    let expires_at = now + LINK_MICROS;
    let (token, hash) = issuing_domain::reveal::new_token();
    let mut tx = state.store.begin().await?;
    store::insert_token(&mut tx, &hash, report, now, expires_at).await?;
    tx.commit().await.map_err(issuing_store::StoreError::from)?;
    let base = state
        .config
        .public_url
        .as_deref()
        .unwrap_or("")
        .trim_end_matches('/');
    Ok((format!("{base}/reports/{token}"), expires_at))
}

/// Writes the audit row of a report asked for by `actor`.
pub(crate) async fn audit_created(
    conn: &mut issuing_store::Conn,
    actor: &str,
    report: &ReportRecord,
) -> Result<(), ApiError> {
    audit::append(
        conn,
        &NewAudit {
            at: report.created_at,
            actor,
            action: "report.create",
            project_id: Some(&report.project_id),
            targets: &serde_json::json!({
                "report_id": report.id, "type": report.report_type, "format": report.format,
                "from": to_rfc3339(report.from_at), "to": to_rfc3339(report.to_at),
            }),
            result: "created",
        },
    )
    .await?;
    Ok(())
}
