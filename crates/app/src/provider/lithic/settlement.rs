//! Lithic's settlement details (`GET /v1/reports/settlement/details/{report_date}`),
//! read page by page for settlement reconciliation (CONTRACT §17).

use super::client::CallError;
use super::LithicProvider;
use serde_json::Value;

/// One settlement detail: the events it settled and its gross amount in cents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettlementDetail {
    pub event_tokens: Vec<String>,
    pub amount_cents: i64,
    pub transaction_token: Option<String>,
}

/// Details per page: the most Lithic serves.
const PAGE_SIZE: u32 = 500;
/// A bound on pages read for one date, so a misbehaving `has_more` cannot loop forever.
const MAX_PAGES: usize = 10_000;

impl LithicProvider {
    /// Every settlement detail of `date` (`YYYY-MM-DD`), every page.
    pub async fn settlement_details(&self, date: &str) -> Result<Vec<SettlementDetail>, CallError> {
        let mut out = Vec::new();
        let mut after: Option<String> = None;
        for _ in 0..MAX_PAGES {
            // Built apart: the serializer is not `Send`, and this future crosses awaits.
            let query = {
                let mut q = url::form_urlencoded::Serializer::new(String::new());
                q.append_pair("page_size", &PAGE_SIZE.to_string());
                if let Some(a) = &after {
                    q.append_pair("starting_after", a);
                }
                q.finish()
            };
            let path = format!("/v1/reports/settlement/details/{date}?{query}");
            let page = self.client.get("settlement_details", &path).await?;
            let data = page["data"].as_array().ok_or_else(|| malformed("data"))?;
            for d in data {
                // Fees, disputes and adjustments settle too; only clearings and
                // financial (single-message) transactions are clearings and refunds.
                if matches!(d["type"].as_str(), Some("CLEARING" | "FINANCIAL")) {
                    out.push(detail(d)?);
                }
            }
            let more = page["has_more"]
                .as_bool()
                .ok_or_else(|| malformed("has_more"))?;
            let last = data.last().and_then(|d| d["token"].as_str());
            match (more, last) {
                (true, Some(token)) => after = Some(token.to_owned()),
                (true, None) => return Err(malformed("has_more with an empty page")),
                (false, _) => return Ok(out),
            }
        }
        Err(malformed("too many pages"))
    }
}

fn malformed(what: &str) -> CallError {
    CallError::Unavailable(format!("Lithic's settlement details are malformed: {what}"))
}

fn detail(d: &Value) -> Result<SettlementDetail, CallError> {
    let event_tokens = d["event_tokens"]
        .as_array()
        .ok_or_else(|| malformed("event_tokens"))?
        .iter()
        .map(|t| t.as_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| malformed("event_tokens"))?;
    Ok(SettlementDetail {
        event_tokens,
        amount_cents: d["transactions_gross_amount"]
            .as_i64()
            .ok_or_else(|| malformed("transactions_gross_amount"))?,
        transaction_token: d["transaction_token"].as_str().map(str::to_owned),
    })
}
