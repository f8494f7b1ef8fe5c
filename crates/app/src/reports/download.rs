//! `GET /reports/{token}`: a ready report's file, read chunk by chunk as the answer is
//! sent, so a download holds one chunk at a time.

use crate::App;
use futures::Stream;
use issuing_domain::reveal::{plausible_token, token_hash};
use issuing_domain::time::now_micros;
use issuing_store::reports::{self as store, ReportRecord};
use issuing_store::{Store, StoreError};
use issuing_wire::ApiError;

/// What a GET of a download link comes to.
pub enum Download {
    /// No link has this token, or its report is gone (404).
    NotFound,
    /// The link is over its hour (410).
    Expired,
    /// The file (200).
    File(Box<ReportRecord>),
}

impl std::fmt::Debug for Download {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Download::NotFound => f.write_str("NotFound"),
            Download::Expired => f.write_str("Expired"),
            Download::File(r) => write!(f, "File({})", r.id),
        }
    }
}

pub async fn open(state: &App, token: &str) -> Result<Download, ApiError> {
    if !plausible_token(token) {
        return Ok(Download::NotFound);
    }
    let mut conn = state.store.conn().await?;
    let Some(link) = store::by_token(&mut conn, &token_hash(token)).await? else {
        return Ok(Download::NotFound);
    };
    if link.expires_at <= now_micros() {
        return Ok(Download::Expired);
    }
    let report = store::get(&mut conn, &link.project_id, &link.report_id).await?;
    Ok(match report {
        Some(r) if r.status == store::READY => Download::File(Box::new(r)),
        _ => Download::NotFound,
    })
}

/// The file's name in `Content-Disposition`.
pub fn filename(r: &ReportRecord) -> String {
    format!("{}-{}.{}", r.report_type, r.id, r.format)
}

pub fn content_type(r: &ReportRecord) -> &'static str {
    if r.format == "csv" {
        "text/csv; charset=utf-8"
    } else {
        "application/jsonl; charset=utf-8"
    }
}

/// The file's chunks in order, each read when the answer needs it.
pub fn chunks(store: Store, report_id: String) -> impl Stream<Item = Result<String, StoreError>> {
    futures::stream::try_unfold(0i64, move |seq| {
        let store = store.clone();
        let report_id = report_id.clone();
        async move {
            let mut conn = store.conn().await?;
            let chunk = store::chunk(&mut conn, &report_id, seq).await?;
            Ok(chunk.map(|c| (c, seq + 1)))
        }
    })
}
