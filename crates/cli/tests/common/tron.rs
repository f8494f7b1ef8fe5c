//! A TronGrid-shaped test server on port 0, built from TronGrid's public API
//! documentation of `GET /v1/accounts/{address}/transactions/trc20`: it honours
//! `only_confirmed`, `contract_address`, `min_timestamp`, `order_by`, `limit` and
//! `fingerprint` paging, and answers `{"data": [...], "success": true, "meta": {"at",
//! "page_size", "fingerprint"?, "links"?}}`, with no fingerprint on the last page.
//!
//! The test scripts it: transfers (confirmed or not), error answers to give first (429
//! with `Retry-After`, 5xx), a page size below the asked `limit` (several pages), the
//! last transfer of a page repeated on the next, a delay, and a gate that holds every
//! answer until the test opens it. It records each request and counts answers in flight.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

pub const USDT: &str = "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t";
/// Another TRC20 token (USDC on Tron).
pub const OTHER_TOKEN: &str = "TEkxiTehnzSmSe2XqrBj4w32RUN966rdz8";

#[derive(Debug, Clone)]
pub struct FakeTransfer {
    pub transaction_id: String,
    pub token: String,
    pub from: String,
    pub to: String,
    /// Token units (USDT: micro-USDT).
    pub value: i64,
    pub block_timestamp: i64,
    pub confirmed: bool,
}

/// A confirmed USDT transfer with a transaction id made from `n`.
pub fn usdt(n: u64, from: &str, to: &str, value: i64, block_timestamp: i64) -> FakeTransfer {
    FakeTransfer {
        transaction_id: txid(n),
        token: USDT.to_owned(),
        from: from.to_owned(),
        to: to.to_owned(),
        value,
        block_timestamp,
        confirmed: true,
    }
}

/// A 64-hex-digit transaction id, distinct per `n`.
pub fn txid(n: u64) -> String {
    format!("{:016x}", n).repeat(4)
}

#[derive(Debug, Clone)]
pub struct Request {
    pub at: std::time::Instant,
    pub address: String,
    pub query: HashMap<String, String>,
    pub api_key: Option<String>,
}

#[derive(Default)]
struct Inner {
    transfers: Vec<FakeTransfer>,
    failures: VecDeque<u16>,
    requests: Vec<Request>,
    page_cap: Option<usize>,
    repeat_last: bool,
    ignore_contract_filter: bool,
    delay: Duration,
    in_flight: usize,
    max_in_flight: usize,
    pages_served: usize,
}

#[derive(Clone)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    /// False while answers are held.
    open: watch::Sender<bool>,
}

pub struct FakeTron {
    pub base: String,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeTron {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeTron {
    pub async fn start() -> FakeTron {
        let (open, _) = watch::channel(true);
        let shared = Shared {
            inner: Arc::default(),
            open,
        };
        let app = Router::new().fallback(answer).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeTron { base, shared, task }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        f(&mut self.shared.inner.lock().unwrap())
    }

    pub fn add(&self, t: FakeTransfer) {
        self.with(|i| i.transfers.push(t));
    }

    /// Adds them at once: no poll sees only some of them.
    pub fn add_all(&self, ts: Vec<FakeTransfer>) {
        self.with(|i| i.transfers.extend(ts));
    }

    /// The transfer becomes confirmed (`only_confirmed=true` lists it from now on).
    pub fn confirm(&self, transaction_id: &str) {
        self.with(|i| {
            for t in &mut i.transfers {
                if t.transaction_id == transaction_id {
                    t.confirmed = true;
                }
            }
        });
    }

    /// The next requests get these statuses (429 with `Retry-After: 1`), in order.
    pub fn fail_next(&self, statuses: &[u16]) {
        self.with(|i| i.failures.extend(statuses.iter().copied()));
    }

    /// Pages hold at most `n` transfers, whatever `limit` asks.
    pub fn set_page_cap(&self, n: usize) {
        self.with(|i| i.page_cap = Some(n));
    }

    /// Each next page starts with the last transfer of the page before.
    pub fn repeat_last_on_next_page(&self, on: bool) {
        self.with(|i| i.repeat_last = on);
    }

    /// Lists other tokens too, as an API that ignores `contract_address` would.
    pub fn ignore_contract_filter(&self, on: bool) {
        self.with(|i| i.ignore_contract_filter = on);
    }

    /// Every answer waits this long first.
    pub fn set_delay(&self, d: Duration) {
        self.with(|i| i.delay = d);
    }

    /// Holds every answer until `release`.
    pub fn hold(&self) {
        self.shared.open.send_replace(false);
    }

    pub fn release(&self) {
        self.shared.open.send_replace(true);
    }

    pub fn requests(&self) -> Vec<Request> {
        self.with(|i| i.requests.clone())
    }

    pub fn in_flight(&self) -> usize {
        self.with(|i| i.in_flight)
    }

    pub fn max_in_flight(&self) -> usize {
        self.with(|i| i.max_in_flight)
    }

    /// Successful answers sent so far.
    pub fn pages_served(&self) -> usize {
        self.with(|i| i.pages_served)
    }
}

fn parse_query(uri: &Uri) -> HashMap<String, String> {
    uri.query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (k.to_owned(), v.replace("%2C", ",").replace("%2c", ","))
        })
        .collect()
}

/// `/v1/accounts/{address}/transactions/trc20` → the address.
fn address_of(uri: &Uri) -> Option<String> {
    let rest = uri.path().strip_prefix("/v1/accounts/")?;
    let address = rest.strip_suffix("/transactions/trc20")?;
    (!address.is_empty() && !address.contains('/')).then(|| address.to_owned())
}

async fn answer(State(shared): State<Shared>, uri: Uri, headers: HeaderMap) -> Response {
    let Some(address) = address_of(&uri) else {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    };
    let query = parse_query(&uri);
    let api_key = headers
        .get("TRON-PRO-API-KEY")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (failure, delay) = {
        let mut i = shared.inner.lock().unwrap();
        i.requests.push(Request {
            at: std::time::Instant::now(),
            address: address.clone(),
            query: query.clone(),
            api_key,
        });
        i.in_flight += 1;
        i.max_in_flight = i.max_in_flight.max(i.in_flight);
        (i.failures.pop_front(), i.delay)
    };
    let mut open = shared.open.subscribe();
    let _ = open.wait_for(|o| *o).await;
    tokio::time::sleep(delay).await;
    let response = match failure {
        Some(429) => (
            StatusCode::TOO_MANY_REQUESTS,
            [("Retry-After", "1")],
            r#"{"success":false,"error":"rate limited"}"#,
        )
            .into_response(),
        Some(status) => (
            StatusCode::from_u16(status).unwrap(),
            r#"{"success":false,"error":"server error"}"#,
        )
            .into_response(),
        None => axum::Json(page(&shared, &address, &query)).into_response(),
    };
    let mut i = shared.inner.lock().unwrap();
    i.in_flight -= 1;
    if failure.is_none() {
        i.pages_served += 1;
    }
    response
}

fn page(shared: &Shared, address: &str, query: &HashMap<String, String>) -> Value {
    let i = shared.inner.lock().unwrap();
    let flag = |k: &str| query.get(k).is_some_and(|v| v == "true");
    let number = |k: &str| query.get(k).and_then(|v| v.parse::<i64>().ok());
    let contract = query
        .get("contract_address")
        .filter(|_| !i.ignore_contract_filter);
    let mut matching: Vec<&FakeTransfer> = i
        .transfers
        .iter()
        .filter(|t| t.from == address || t.to == address)
        .filter(|t| !flag("only_confirmed") || t.confirmed)
        .filter(|t| contract.is_none_or(|c| &t.token == c))
        .filter(|t| number("min_timestamp").is_none_or(|m| t.block_timestamp >= m))
        .collect();
    // TronGrid lists newest first unless asked otherwise.
    let ascending = query
        .get("order_by")
        .is_some_and(|o| o == "block_timestamp,asc");
    matching.sort_by_key(|t| (t.block_timestamp, t.transaction_id.clone()));
    if !ascending {
        matching.reverse();
    }
    let limit = number("limit").unwrap_or(20).clamp(1, 200) as usize;
    let size = i.page_cap.map_or(limit, |c| c.min(limit));
    let start = query
        .get("fingerprint")
        .and_then(|f| f.strip_prefix("fp-"))
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(0);
    let start = if start > 0 && i.repeat_last {
        start - 1
    } else {
        start
    };
    let end = (start + size).min(matching.len());
    let data: Vec<Value> = matching
        .get(start..end)
        .unwrap_or(&[])
        .iter()
        .map(|t| item(t))
        .collect();
    let mut meta = json!({"at": 1_700_000_000_000i64, "page_size": data.len()});
    if end < matching.len() {
        meta["fingerprint"] = json!(format!("fp-{end}"));
        meta["links"] = json!({"next": format!("/v1/accounts/{address}/transactions/trc20?fingerprint=fp-{end}")});
    }
    json!({"data": data, "success": true, "meta": meta})
}

fn item(t: &FakeTransfer) -> Value {
    let (symbol, name) = if t.token == USDT {
        ("USDT", "Tether USD")
    } else {
        ("USDC", "USD Coin")
    };
    json!({
        "transaction_id": t.transaction_id,
        "token_info": {"symbol": symbol, "address": t.token, "decimals": 6, "name": name},
        "block_timestamp": t.block_timestamp,
        "from": t.from,
        "to": t.to,
        "type": "Transfer",
        "value": t.value.to_string(),
    })
}
