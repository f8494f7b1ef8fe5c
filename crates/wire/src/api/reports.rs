//! Reports: a project's card transactions, ledger entries, cards or disputes of a time
//! window as one CSV or JSONL file, built in the background and downloaded from
//! `GET /reports/{token}` on the API listener.

use super::or_default;
use serde::{Deserialize, Serialize};

/// `reports/create`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportsCreate {
    /// `card_transactions`, `ledger_entries`, `cards` or `disputes`.
    #[serde(rename = "type", default, deserialize_with = "or_default")]
    pub report_type: String,
    /// RFC 3339: the first instant of the window (by `created_at`), inclusive.
    #[serde(default, deserialize_with = "or_default")]
    pub from: String,
    /// RFC 3339: the last instant of the window, inclusive; at most 366 days after `from`.
    #[serde(default, deserialize_with = "or_default")]
    pub to: String,
    /// `csv` or `jsonl`.
    #[serde(default, deserialize_with = "or_default")]
    pub format: String,
}

/// The answer of `reports/create`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportCreated {
    pub report_id: String,
    /// Always `processing`.
    pub status: String,
}

/// `reports/get`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportRef {
    #[serde(default, deserialize_with = "or_default")]
    pub report_id: String,
}

/// A report. `row_count`, `size` and `sha256` are null until it is ready; `expires_at`
/// is when its file is deleted (7 days after it was ready). `download_url` (ready only)
/// is a credential: a fresh link on every `reports/get`, good for one hour and any
/// number of GETs. `Debug` hides it.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub report_id: String,
    #[serde(rename = "type")]
    pub report_type: String,
    pub format: String,
    pub from: String,
    pub to: String,
    /// `processing`, `ready` or `failed`.
    pub status: String,
    pub row_count: Option<u64>,
    /// Bytes of the file.
    pub size: Option<u64>,
    /// Hex SHA-256 of the file.
    pub sha256: Option<String>,
    pub created_at: String,
    pub ready_at: Option<String>,
    pub expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download_url: Option<String>,
    /// When `download_url` stops working.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub download_expires_at: Option<String>,
}

impl std::fmt::Debug for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Report")
            .field("report_id", &self.report_id)
            .field("report_type", &self.report_type)
            .field("format", &self.format)
            .field("status", &self.status)
            .field("row_count", &self.row_count)
            .field("size", &self.size)
            .field("expires_at", &self.expires_at)
            .field("download_url", &self.download_url.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}
