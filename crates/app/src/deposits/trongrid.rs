//! A client of the TronGrid v1 API (or any service answering the same way): one page of
//! an account's TRC20 transfers,
//! `GET {base}/v1/accounts/{address}/transactions/trc20?only_confirmed=true&…`.
//! Unconfirmed transfers are never asked for, so a transfer that a fork drops is never
//! seen. Answers are read up to a size bound and parsed item by item.

use issuing_domain::chain_deposit::Trc20Transfer;
use serde_json::Value;
use std::time::Duration;

/// Transfers per page. TronGrid allows up to 200; 100 keeps answers small.
pub const PAGE_LIMIT: u32 = 100;
/// One request's time limit, connection included.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer read: a full page is well under 100 KiB.
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;
/// The longest `Retry-After` honoured; a longer one is cut to this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

#[derive(Clone)]
pub struct TronGrid {
    http: reqwest::Client,
    base: String,
    api_key: Option<String>,
    contract: String,
}

/// One page: its transfers, and the fingerprint of the next page (None on the last).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub transfers: Vec<Trc20Transfer>,
    pub next: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    #[error("rate limited (HTTP 429)")]
    RateLimited { retry_after: Option<Duration> },
    #[error("server error (HTTP {0})")]
    Server(u16),
    #[error("unexpected answer (HTTP {0})")]
    Status(u16),
    #[error("request failed: {0}")]
    Transport(String),
    #[error("malformed answer: {0}")]
    Malformed(String),
}

impl FetchError {
    /// Errors that mean "slow down": the whole watcher backs off, not just this address.
    pub fn backs_off(&self) -> bool {
        matches!(
            self,
            FetchError::RateLimited { .. } | FetchError::Server(_) | FetchError::Transport(_)
        )
    }

    /// The metric label of the outcome.
    pub fn label(&self) -> &'static str {
        match self {
            FetchError::RateLimited { .. } => "rate_limited",
            FetchError::Server(_) => "server_error",
            FetchError::Status(_) | FetchError::Transport(_) | FetchError::Malformed(_) => "error",
        }
    }
}

impl TronGrid {
    pub fn new(base: &str, api_key: Option<String>, contract: &str) -> reqwest::Result<Self> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(HTTP_TIMEOUT)
            .connect_timeout(HTTP_TIMEOUT)
            .user_agent(concat!("issuing-chain-watcher/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(TronGrid {
            http,
            base: base.trim().trim_end_matches('/').to_owned(),
            api_key: api_key.filter(|k| !k.trim().is_empty()),
            contract: contract.to_owned(),
        })
    }

    /// Confirmed transfers of the USDT contract touching `address`, oldest first, from
    /// `min_timestamp_ms` on; `fingerprint` continues a previous page of the same query.
    pub async fn page(
        &self,
        address: &str,
        min_timestamp_ms: i64,
        fingerprint: Option<&str>,
    ) -> Result<Page, FetchError> {
        let url = format!("{}/v1/accounts/{address}/transactions/trc20", self.base);
        let mut query: Vec<(&str, String)> = vec![
            ("only_confirmed", "true".into()),
            ("contract_address", self.contract.clone()),
            ("limit", PAGE_LIMIT.to_string()),
            ("order_by", "block_timestamp,asc".into()),
            ("min_timestamp", min_timestamp_ms.to_string()),
        ];
        if let Some(f) = fingerprint {
            query.push(("fingerprint", f.to_owned()));
        }
        let mut req = self.http.get(&url).query(&query);
        if let Some(key) = &self.api_key {
            req = req.header("TRON-PRO-API-KEY", key);
        }
        let mut resp = req
            .send()
            .await
            .map_err(|e| FetchError::Transport(without_url(&e)))?;
        let status = resp.status().as_u16();
        match status {
            200 => {}
            429 => {
                return Err(FetchError::RateLimited {
                    retry_after: retry_after(resp.headers()),
                })
            }
            500..=599 => return Err(FetchError::Server(status)),
            _ => return Err(FetchError::Status(status)),
        }
        let mut body = Vec::new();
        while let Some(chunk) = resp
            .chunk()
            .await
            .map_err(|e| FetchError::Transport(without_url(&e)))?
        {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(FetchError::Malformed("answer too large".into()));
            }
            body.extend_from_slice(&chunk);
        }
        parse_page(&body)
    }
}

/// A reqwest error without the URL (it may hold the API's query string).
fn without_url(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_body() || e.is_decode() {
        "answer cut short"
    } else {
        "request error"
    };
    kind.to_owned()
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let secs: u64 = headers
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs).min(MAX_RETRY_AFTER))
}

/// Parses an answer. Any item that cannot be read fails the whole page: it might be a
/// deposit, so the watcher retries rather than moving past it.
pub fn parse_page(body: &[u8]) -> Result<Page, FetchError> {
    let v: Value =
        serde_json::from_slice(body).map_err(|_| FetchError::Malformed("not JSON".into()))?;
    if v.get("success").and_then(Value::as_bool) == Some(false) {
        return Err(FetchError::Malformed("success is false".into()));
    }
    let items = v
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| FetchError::Malformed("no data array".into()))?;
    let transfers = items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            transfer(item).ok_or_else(|| FetchError::Malformed(format!("item {i} is incomplete")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let next = v
        .pointer("/meta/fingerprint")
        .and_then(Value::as_str)
        .filter(|f| !f.is_empty())
        .map(str::to_owned);
    Ok(Page { transfers, next })
}

fn transfer(item: &Value) -> Option<Trc20Transfer> {
    let text = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_owned);
    // `value` is a string of token units; accept a JSON integer written as one too.
    let value = match item.get("value")? {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.as_str().to_owned(),
        _ => return None,
    };
    Some(Trc20Transfer {
        transaction_id: text("transaction_id")?.to_ascii_lowercase(),
        kind: text("type")?,
        token: item.pointer("/token_info/address")?.as_str()?.to_owned(),
        from: text("from")?,
        to: text("to")?,
        value,
        block_timestamp: item.get("block_timestamp")?.as_i64()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_shape() {
        let body = br#"{"data":[{"transaction_id":"AB12","token_info":{"symbol":"USDT","address":"TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t","decimals":6,"name":"Tether USD"},"block_timestamp":1700000000000,"from":"TA","to":"TB","type":"Transfer","value":"1500000"}],"success":true,"meta":{"at":1,"page_size":1,"fingerprint":"fp1","links":{"next":"x"}}}"#;
        let page = parse_page(body).unwrap();
        assert_eq!(page.next.as_deref(), Some("fp1"));
        let t = &page.transfers[0];
        assert_eq!(t.transaction_id, "ab12");
        assert_eq!(t.value, "1500000");
        assert_eq!(t.block_timestamp, 1_700_000_000_000);
        assert_eq!(t.token, "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t");
        let last = parse_page(br#"{"data":[],"success":true,"meta":{"page_size":0}}"#).unwrap();
        assert_eq!(
            last,
            Page {
                transfers: vec![],
                next: None
            }
        );
    }

    #[test]
    fn an_unreadable_item_fails_the_page() {
        assert!(parse_page(br#"{"data":[{"transaction_id":"x"}],"success":true}"#).is_err());
        assert!(parse_page(br#"{"success":false,"error":"bad"}"#).is_err());
        assert!(parse_page(b"<html>").is_err());
    }
}
