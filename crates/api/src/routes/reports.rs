//! Reports: `reports/create` and `reports/get` in the envelope, and the file a ready
//! report's `download_url` names, `GET /reports/{token}`, served plain beside `/api/v2`
//! (a credential in the URL, as a browser or `curl` can fetch it). What a report is and
//! how it is built are the core's (`issuing_app::reports`).

use crate::pipeline::{reply, ApiResult, Caller, Payload};
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, MethodRouter};
use issuing_app::reports::{self, download, download::Download};
use issuing_app::App;
use issuing_wire::api::{Report, ReportCreated, ReportRef, ReportsCreate};

pub(crate) async fn create(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<ReportsCreate>,
) -> ApiResult<ReportCreated> {
    Ok(reply(
        reports::create(&state, &caller.project_id, reports::API_ACTOR, &r).await?,
    ))
}

pub(crate) async fn get_report(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<ReportRef>,
) -> ApiResult<Report> {
    Ok(reply(
        reports::get(&state, &caller.project_id, &r.report_id).await?,
    ))
}

/// `/reports/{token}`: GET only; HEAD and every other method are 405.
pub(crate) fn file_route() -> MethodRouter<App> {
    get(file).head(only_get).fallback(only_get)
}

async fn only_get() -> Response {
    let mut res = (
        StatusCode::METHOD_NOT_ALLOWED,
        "Only GET downloads a report.\n",
    )
        .into_response();
    res.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("GET"));
    res
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    let mut res = (status, text).into_response();
    res.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

async fn file(State(app): State<App>, Path(token): Path<String>) -> Response {
    let report = match download::open(&app, &token).await {
        Ok(Download::File(r)) => r,
        Ok(Download::NotFound) => {
            return plain(StatusCode::NOT_FOUND, "There is no such report.\n");
        }
        Ok(Download::Expired) => {
            return plain(
                StatusCode::GONE,
                "This link has expired. Ask reports/get for a new one.\n",
            );
        }
        Err(e) => {
            if e.slug == issuing_wire::ErrorSlug::InternalError {
                tracing::error!("report download: {}", e.message);
            }
            let status =
                StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            return plain(status, "The report cannot be downloaded now. Try again.\n");
        }
    };
    let body = Body::from_stream(download::chunks(app.store.clone(), report.id.clone()));
    let mut res = Response::new(body);
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(download::content_type(&report)),
    );
    if let Ok(v) = HeaderValue::from_str(&format!(
        "attachment; filename=\"{}\"",
        download::filename(&report)
    )) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    if let Some(size) = report.size {
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(size));
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    res
}
