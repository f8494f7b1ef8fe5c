//! `reports/create`: checks the request and writes the job the build worker claims.

use super::{audit_created, FORMATS, MAX_WINDOW_DAYS, TYPES};
use crate::App;
use chrono::DateTime;
use issuing_domain::ids::new_id;
use issuing_domain::time::now_micros;
use issuing_store::reports::{self as store, ReportRecord};
use issuing_wire::api::{ReportCreated, ReportsCreate};
use issuing_wire::ApiError;

fn instant(name: &str, raw: &str) -> Result<i64, ApiError> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(ApiError::validation(format!("{name} is required")));
    }
    DateTime::parse_from_rfc3339(raw)
        .map(|t| t.timestamp_micros())
        .map_err(|_| {
            ApiError::validation(format!(
                "{name} must be an RFC 3339 time such as 2026-01-31T00:00:00Z"
            ))
        })
}

/// The checked request: (type, format, from, to).
pub fn check(r: &ReportsCreate) -> Result<(String, String, i64, i64), ApiError> {
    let report_type = r.report_type.trim();
    if !TYPES.contains(&report_type) {
        return Err(ApiError::validation(format!(
            "type must be one of: {}",
            TYPES.join(", ")
        )));
    }
    let format = r.format.trim();
    if !FORMATS.contains(&format) {
        return Err(ApiError::validation(format!(
            "format must be one of: {}",
            FORMATS.join(", ")
        )));
    }
    let from = instant("from", &r.from)?;
    let to = instant("to", &r.to)?;
    if to < from {
        return Err(ApiError::validation("to must not be before from"));
    }
    if to - from > MAX_WINDOW_DAYS * 24 * 3600 * 1_000_000 {
        return Err(ApiError::validation(format!(
            "from and to must be at most {MAX_WINDOW_DAYS} days apart"
        )));
    }
    Ok((report_type.to_owned(), format.to_owned(), from, to))
}

/// Creates a report of `project_id` asked for by `actor` (`api`, or an operator),
/// audited; the build worker picks it up at once.
pub async fn create(
    state: &App,
    project_id: &str,
    actor: &str,
    r: &ReportsCreate,
) -> Result<ReportCreated, ApiError> {
    let (report_type, format, from_at, to_at) = check(r)?;
    let now = now_micros();
    let report = ReportRecord {
        id: new_id(),
        project_id: project_id.to_owned(),
        report_type,
        format,
        from_at,
        to_at,
        status: store::PROCESSING.to_owned(),
        row_count: None,
        size: None,
        sha256: None,
        last_error: None,
        created_by: actor.to_owned(),
        attempts: 0,
        created_at: now,
        updated_at: now,
        ready_at: None,
        expires_at: None,
    };
    let mut tx = state.store.begin().await?;
    store::insert(&mut tx, &report).await?;
    audit_created(&mut tx, actor, &report).await?;
    tx.commit().await.map_err(issuing_store::StoreError::from)?;
    state.reports_wakeup.notify_one();
    Ok(ReportCreated {
        report_id: report.id,
        status: report.status,
    })
}
