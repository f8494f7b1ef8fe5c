//! A bounded load generator for a running server: sends `--requests` sealed calls with
//! `--concurrency` in flight and prints throughput and latency percentiles.
//!
//! ```sh
//! cargo run --release -p issuing --example load -- \
//!   --base-url http://127.0.0.1:8080 --api-key pk_... --api-secret sk_... \
//!   --scenario users-create --requests 2000 --concurrency 16
//! ```
//! Scenarios: `health` (envelope + replay guard), `users-create` (one insert each),
//! `balance` (one read), `cards-create` (issue orders; needs cardholders, made first).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use issuing_envelope::Key;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Hard ceilings so a typo cannot turn this into an unbounded flood.
const MAX_REQUESTS: usize = 200_000;
const MAX_CONCURRENCY: usize = 256;

struct Args {
    base: String,
    key: String,
    secret: String,
    scenario: String,
    requests: usize,
    concurrency: usize,
}

fn parse_args() -> Args {
    let mut a = Args {
        base: "http://127.0.0.1:8080".into(),
        key: std::env::var("ISSUING_API_KEY").unwrap_or_default(),
        secret: std::env::var("ISSUING_API_SECRET").unwrap_or_default(),
        scenario: "health".into(),
        requests: 1000,
        concurrency: 8,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        match flag.as_str() {
            "--base-url" => a.base = v,
            "--api-key" => a.key = v,
            "--api-secret" => a.secret = v,
            "--scenario" => a.scenario = v,
            "--requests" => a.requests = v.parse().expect("--requests"),
            "--concurrency" => a.concurrency = v.parse().expect("--concurrency"),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(
        !a.key.is_empty() && !a.secret.is_empty(),
        "--api-key and --api-secret are required"
    );
    a.requests = a.requests.clamp(1, MAX_REQUESTS);
    a.concurrency = a.concurrency.clamp(1, MAX_CONCURRENCY);
    a
}

fn timestamp(last: &AtomicI64) -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64;
    let prev = last.fetch_max(now, Ordering::SeqCst);
    if prev >= now {
        last.fetch_add(1, Ordering::SeqCst) + 1
    } else {
        now
    }
}

async fn call(
    http: &reqwest::Client,
    a: &Args,
    key: &Key,
    last: &AtomicI64,
    path: &str,
    mut body: Value,
) -> (u16, Value) {
    body["request_timestamp"] = json!(timestamp(last));
    let sealed = issuing_envelope::seal(key, body.to_string().as_bytes());
    let resp = http
        .post(format!("{}/api/v2/{path}", a.base))
        .header("API-KEY", &a.key)
        .header("Content-Type", "application/json")
        .body(json!({ "encrypted": sealed }).to_string())
        .send()
        .await
        .expect("request");
    let status = resp.status().as_u16();
    let outer: Value = resp.json().await.expect("json");
    let value = match outer["encrypted"].as_str() {
        Some(s) => {
            serde_json::from_slice(&issuing_envelope::open(key, s).expect("open")).expect("json")
        }
        None => outer,
    };
    (status, value)
}

fn request_for(scenario: &str, run: u128, i: usize) -> (&'static str, Value) {
    match scenario {
        "health" => ("system/health", json!({})),
        "balance" => ("project/balance", json!({})),
        "users-create" => (
            "users/create",
            json!({"external_user_id": format!("load-{run}-{i}")}),
        ),
        "cards-create" => (
            "cards/create",
            json!({"external_user_id": format!("load-{run}-{i}"), "product_code": "virtual_usd", "idempotency_key": format!("load-{run}-{i}")}),
        ),
        other => panic!("unknown scenario {other}"),
    }
}

#[tokio::main]
async fn main() {
    let a = Arc::new(parse_args());
    let key = Arc::new(Key::from_secret(&a.secret));
    let http = reqwest::Client::new();
    let last = Arc::new(AtomicI64::new(0));
    let run = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    if a.scenario == "cards-create" {
        println!("preparing {} cardholders…", a.requests);
        for i in 0..a.requests {
            let body = json!({"external_user_id": format!("load-{run}-{i}"), "subprovider_code": "sandbox", "kyc_data": {
                "first_name": "Load", "last_name": "Test", "birth_date": "1990-01-01", "email": "load@example.com",
                "phone_number_full": "+14155550123", "country_iso": "US"}});
            let (s, v) = call(&http, &a, &key, &last, "cardholders/create", body).await;
            assert_eq!(s, 200, "{v}");
        }
    }
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..a.concurrency {
        let (a, key, http, last, next) = (
            a.clone(),
            key.clone(),
            http.clone(),
            last.clone(),
            next.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0usize;
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= a.requests {
                    return (latencies, errors);
                }
                let (path, body) = request_for(&a.scenario, run, i);
                let t = Instant::now();
                let (s, _) = call(&http, &a, &key, &last, path, body).await;
                latencies.push(t.elapsed());
                if s != 200 {
                    errors += 1;
                }
            }
        }));
    }
    let mut all: Vec<Duration> = Vec::new();
    let mut errors = 0;
    for t in tasks {
        let (l, e) = t.await.unwrap();
        all.extend(l);
        errors += e;
    }
    let elapsed = started.elapsed();
    all.sort();
    let pct = |p: f64| all[((all.len() as f64 * p) as usize).min(all.len() - 1)];
    println!(
        "{}: {} requests, concurrency {}, {:.1} s, {:.0} req/s, errors {}, p50 {:?}, p95 {:?}, p99 {:?}",
        a.scenario,
        all.len(),
        a.concurrency,
        elapsed.as_secs_f64(),
        all.len() as f64 / elapsed.as_secs_f64(),
        errors,
        pct(0.50),
        pct(0.95),
        pct(0.99),
    );
}
