//! The scenarios, in the order they run. Each leaves behind what the next needs: users
//! for cardholders, cardholders for cards, active cards for top-ups and authorizations.

use crate::load::{self, Outcome};
use crate::receiver::{Decider, Receiver};
use issuing_client::Client;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const NAMES: &[&str] = &[
    "health",
    "system/health",
    "project/balance",
    "users/find",
    "users/create",
    "cardholders/create",
    "cards/create",
    "cards/topup",
    "simulate/cards/auth",
    "webhooks",
    // Below capacity: authorizations at half the rate `simulate/cards/auth` reached,
    // with a subscription; how far deliveries trail the events.
    "webhooks@half",
    "auth+limits+rules",
    "auth+decision",
    // Below capacity: one authorization at a time, plain then through the decision
    // webhook, so the webhook's added latency is not hidden by queueing.
    "auth@1",
    "auth+decision@1",
    // The operator console's pages over seeded cards and transactions (`console.rs`).
    "console",
];

/// Cards that top-ups and authorizations spread over.
pub const HOT_CARDS: usize = 64;
/// Authorizations of each one-at-a-time scenario: enough for a steady p50.
const LATENCY_AUTHS: usize = 2_000;
/// `webhooks@half`'s rate when `simulate/cards/auth` did not run first.
const DEFAULT_HALF_RATE: f64 = 500.0;
/// How long `webhooks@half` sends at full scale.
const HALF_RATE_SECONDS: f64 = 10.0;
/// Longest wait for orders to finish or webhooks to arrive after a scenario.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(300);

pub struct Ctx {
    pub client: Client,
    pub plain: reqwest::Client,
    pub base_url: String,
    pub concurrency: usize,
    pub scale: f64,
    /// Active cards, filled by `cards/create`.
    pub cards: Vec<String>,
    /// What `simulate/cards/auth` reached in this run (authorizations a second).
    pub auth_rate: Option<f64>,
}

pub struct Row {
    pub name: String,
    pub outcome: Outcome,
    pub note: String,
    /// The server's CPU time during the scenario (None where it was not measured).
    pub cpu_secs: Option<f64>,
}

impl Ctx {
    fn count(&self, base: usize) -> usize {
        ((base as f64 * self.scale).round() as usize).max(1)
    }

    pub async fn run(&mut self, name: &str) -> anyhow::Result<Row> {
        let (outcome, note) = match name {
            "health" => (self.health().await, String::new()),
            "system/health" => (
                self.read("system/health", 20_000, json!({})).await,
                String::new(),
            ),
            "project/balance" => (
                self.read("project/balance", 20_000, json!({})).await,
                String::new(),
            ),
            "users/find" => {
                call(
                    &self.client,
                    "users/create",
                    json!({"external_user_id": "bench-find"}),
                )
                .await
                .ok();
                let body = json!({"external_user_ids": ["bench-find"]});
                (self.read("users/find", 10_000, body).await, String::new())
            }
            "users/create" => (self.users_create().await, String::new()),
            "cardholders/create" => (self.cardholders_create().await, String::new()),
            "cards/create" => self.cards_create().await?,
            "cards/topup" => self.topup().await?,
            "simulate/cards/auth" => {
                let outcome = self.auth(20_000, None).await;
                self.auth_rate = Some(outcome.per_second());
                (outcome, String::new())
            }
            "auth@1" => (
                self.auth_at(LATENCY_AUTHS, 1).await,
                "one at a time; the baseline of auth+decision@1".into(),
            ),
            "auth+decision@1" => self.auth_with_decision(LATENCY_AUTHS, 1).await?,
            "webhooks" => self.webhooks().await?,
            "webhooks@half" => self.webhooks_at_half().await?,
            "auth+limits+rules" => self.auth_with_controls().await?,
            "auth+decision" => self.auth_with_decision(20_000, self.concurrency).await?,
            other => anyhow::bail!("unknown scenario {other}; known: {}", NAMES.join(", ")),
        };
        Ok(Row {
            name: name.to_owned(),
            outcome,
            note,
            cpu_secs: None,
        })
    }

    async fn health(&self) -> Outcome {
        let http = self.plain.clone();
        let url = format!("{}/health", self.base_url);
        load::run(self.count(100_000), self.concurrency, move |_| {
            let (http, url) = (http.clone(), url.clone());
            async move {
                let r = http.get(&url).send().await.map_err(|e| e.to_string())?;
                let ok = r.status().is_success();
                r.bytes().await.map_err(|e| e.to_string())?;
                ok.then_some(()).ok_or_else(|| "not 200".to_owned())
            }
        })
        .await
    }

    async fn read(&self, path: &'static str, n: usize, body: Value) -> Outcome {
        let client = self.client.clone();
        load::run(self.count(n), self.concurrency, move |_| {
            let (client, body) = (client.clone(), body.clone());
            async move { call(&client, path, body).await.map(drop) }
        })
        .await
    }

    fn users(&self) -> usize {
        self.count(10_000)
    }

    fn cardholders(&self) -> usize {
        self.count(3_000).min(self.users())
    }

    async fn users_create(&self) -> Outcome {
        let client = self.client.clone();
        load::run(self.users(), self.concurrency, move |i| {
            let client = client.clone();
            async move {
                let body = json!({"external_user_id": format!("bench-u-{i}")});
                call(&client, "users/create", body).await.map(drop)
            }
        })
        .await
    }

    async fn cardholders_create(&self) -> Outcome {
        let client = self.client.clone();
        load::run(self.cardholders(), self.concurrency, move |i| {
            let client = client.clone();
            async move {
                let body = json!({
                    "external_user_id": format!("bench-u-{i}"),
                    "subprovider_code": "sandbox",
                    "kyc_data": {
                        "first_name": "Ada", "last_name": "Lovelace", "birth_date": "1990-12-10",
                        "email": "ada@example.com", "phone_number_full": "+447700900123",
                        "country_iso": "GB"
                    }
                });
                call(&client, "cardholders/create", body).await.map(drop)
            }
        })
        .await
    }

    async fn cards_create(&mut self) -> anyhow::Result<(Outcome, String)> {
        let client = self.client.clone();
        let holders = self.cardholders();
        let orders = Arc::new(Mutex::new(Vec::new()));
        let sink = orders.clone();
        let outcome = load::run(self.count(2_000), self.concurrency, move |i| {
            let (client, sink) = (client.clone(), sink.clone());
            async move {
                let body = json!({
                    "external_user_id": format!("bench-u-{}", i % holders),
                    "product_code": "virtual_usd",
                    "idempotency_key": format!("bench-card-{i}"),
                });
                let v = call(&client, "cards/create", body).await?;
                let order = v["order"]["order_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let card = v["card_id"].as_str().unwrap_or_default().to_owned();
                lock(&sink).push((order, card));
                Ok(())
            }
        })
        .await;
        let created = std::mem::take(&mut *lock(&orders));
        let started = Instant::now();
        let done = self
            .drain_orders(created.iter().map(|(o, _)| o.clone()).collect())
            .await;
        self.cards = created
            .into_iter()
            .filter(|(o, _)| done.get(o).map(String::as_str) == Some("completed"))
            .map(|(_, c)| c)
            .take(HOT_CARDS)
            .collect();
        let note = drain_note(&outcome, &done, started.elapsed());
        Ok((outcome, note))
    }

    async fn topup(&self) -> anyhow::Result<(Outcome, String)> {
        anyhow::ensure!(
            !self.cards.is_empty(),
            "cards/topup needs the cards/create scenario"
        );
        let client = self.client.clone();
        let cards = Arc::new(self.cards.clone());
        let orders = Arc::new(Mutex::new(Vec::new()));
        let sink = orders.clone();
        let outcome = load::run(self.count(10_000), self.concurrency, move |i| {
            let (client, cards, sink) = (client.clone(), cards.clone(), sink.clone());
            async move {
                let body = json!({
                    "card_id": cards[i % cards.len()],
                    "amount": "10",
                    "idempotency_key": format!("bench-topup-{i}"),
                });
                let v = call(&client, "cards/topup", body).await?;
                lock(&sink).push(v["order_id"].as_str().unwrap_or_default().to_owned());
                Ok(())
            }
        })
        .await;
        let ids = std::mem::take(&mut *lock(&orders));
        let started = Instant::now();
        let done = self.drain_orders(ids).await;
        Ok((
            outcome.clone(),
            drain_note(&outcome, &done, started.elapsed()),
        ))
    }

    /// `n` authorizations of 0.01 spread over the hot cards; with `sent`, records when
    /// each approved transaction's answer arrived.
    async fn auth(&self, n: usize, sent: Option<Arc<Mutex<HashMap<String, Instant>>>>) -> Outcome {
        self.auth_sent(n, self.concurrency, sent).await
    }

    /// Authorizations like `auth`'s with `concurrency` in flight.
    async fn auth_at(&self, n: usize, concurrency: usize) -> Outcome {
        self.auth_sent(n, concurrency, None).await
    }

    async fn auth_sent(
        &self,
        n: usize,
        concurrency: usize,
        sent: Option<Arc<Mutex<HashMap<String, Instant>>>>,
    ) -> Outcome {
        let client = self.client.clone();
        let cards = Arc::new(self.cards.clone());
        load::run(self.count(n), concurrency, move |i| {
            let (client, cards, sent) = (client.clone(), cards.clone(), sent.clone());
            async move {
                if cards.is_empty() {
                    return Err("needs the cards/create scenario".to_owned());
                }
                let body = json!({
                    "card_id": cards[i % cards.len()],
                    "transactionAmount": "0.01",
                    "merchant": {"name": "Bench Shop", "mcc": "5814", "country": "US"},
                });
                let v = call(&client, "simulate/cards/auth", body).await?;
                if v["transaction"]["card_tx_data"]["status"] != "pending" {
                    return Err(format!(
                        "not approved: {}",
                        v["transaction"]["card_tx_data"]
                    ));
                }
                if let (Some(sent), Some(id)) = (sent, v["transactionId"].as_str()) {
                    lock(&sent).insert(id.to_owned(), Instant::now());
                }
                Ok(())
            }
        })
        .await
    }

    /// A local receiver, subscribed to `card_transaction` under `title`.
    async fn subscribed(&self, title: &str) -> anyhow::Result<(Receiver, Value)> {
        let receiver = Receiver::start(self.client.clone()).await?;
        let sub = call(
            &self.client,
            "wh/subscribe",
            json!({"url": receiver.url, "title": title, "event_types": ["card_transaction"]}),
        )
        .await
        .map_err(anyhow::Error::msg)?;
        Ok((receiver, sub))
    }

    /// Deliveries of `card_transaction` events to one local receiver, while the events
    /// are being produced: rate over first request → last arrival, latency = answer →
    /// arrival of each transaction's webhook.
    async fn webhooks(&self) -> anyhow::Result<(Outcome, String)> {
        let (receiver, sub) = self.subscribed("bench").await?;
        let sent = Arc::new(Mutex::new(HashMap::new()));
        let started = Instant::now();
        let produced = self.auth(5_000, Some(sent.clone())).await;
        let sent = std::mem::take(&mut *lock(&sent));
        let Arrived {
            lags,
            last,
            missing,
        } = arrived(&receiver, &sent).await;
        let last = last.unwrap_or(started).max(started);
        let _ = call(&self.client, "wh/unsubscribe", json!({"id": sub["id"]})).await;
        let (deliveries, unreadable) = receiver.counts();
        let outcome = Outcome {
            requests: lags.len(),
            errors: missing + unreadable,
            elapsed: last.saturating_duration_since(started),
            latencies: lags,
            first_error: (missing > 0).then(|| format!("{missing} events not delivered in time")),
        };
        let note = format!(
            "{deliveries} deliveries; producing the events alone: {:.0} auth/s; latency = auth answer → webhook arrival",
            produced.per_second()
        );
        Ok((outcome, note))
    }

    /// Deliveries below capacity: authorizations sent at a fixed rate, half of what
    /// `simulate/cards/auth` reached in this run (`DEFAULT_HALF_RATE` without it), for
    /// `HALF_RATE_SECONDS` (times the scale), to one local receiver. Each row's latency
    /// is the lag from the authorization's answer (its commit is durable by then) to
    /// its webhook's arrival; the rate is the authorizations'.
    async fn webhooks_at_half(&self) -> anyhow::Result<(Outcome, String)> {
        anyhow::ensure!(!self.cards.is_empty(), "needs the cards/create scenario");
        let rate = self
            .auth_rate
            .map_or(DEFAULT_HALF_RATE, |r| r / 2.0)
            .max(1.0);
        let (receiver, sub) = self.subscribed("bench-half").await?;
        let total = ((rate * HALF_RATE_SECONDS * self.scale).round() as usize).max(1);
        let sent = Arc::new(Mutex::new(HashMap::new()));
        let started = Instant::now();
        let mut tasks = Vec::with_capacity(total);
        for i in 0..total {
            let due = started + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
            let (client, card, sent) = (
                self.client.clone(),
                self.cards[i % self.cards.len()].clone(),
                sent.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let body = json!({
                    "card_id": card,
                    "transactionAmount": "0.01",
                    "merchant": {"name": "Bench Shop", "mcc": "5814", "country": "US"},
                });
                let v = call(&client, "simulate/cards/auth", body).await?;
                if let Some(id) = v["transactionId"].as_str() {
                    lock(&sent).insert(id.to_owned(), Instant::now());
                }
                Ok::<(), String>(())
            }));
        }
        let mut failed = 0usize;
        for t in tasks {
            if !matches!(t.await, Ok(Ok(()))) {
                failed += 1;
            }
        }
        let produced = started.elapsed();
        let sent = std::mem::take(&mut *lock(&sent));
        let Arrived { lags, missing, .. } = arrived(&receiver, &sent).await;
        let _ = call(&self.client, "wh/unsubscribe", json!({"id": sub["id"]})).await;
        let (_, unreadable) = receiver.counts();
        let outcome = Outcome {
            requests: lags.len(),
            errors: failed + missing + unreadable,
            elapsed: produced,
            latencies: lags,
            first_error: (failed + missing > 0).then(|| {
                format!("{failed} authorizations failed, {missing} events not delivered in time")
            }),
        };
        let note = format!(
            "authorizations at a fixed {rate:.0}/s (half of simulate/cards/auth's); latency = answer → webhook arrival"
        );
        Ok((outcome, note))
    }

    /// Authorizations like `simulate/cards/auth`'s on cards with 3 limits each (none of
    /// them reached: every authorization pays for the usage query) in a project with 50
    /// rules, 10 of them shadow, that the bench's purchases do not match (every rule is
    /// evaluated, no result is recorded). Limits and rules are removed afterwards.
    async fn auth_with_controls(&self) -> anyhow::Result<(Outcome, String)> {
        anyhow::ensure!(!self.cards.is_empty(), "needs the cards/create scenario");
        let limits = json!([
            {"interval": "daily", "amount": "1000000", "count": 1_000_000},
            {"interval": "monthly", "amount": "10000000", "mccs": ["5814", "5812"]},
            {"interval": "rolling", "window_seconds": 3600, "count": 1_000_000},
        ]);
        for card in &self.cards {
            let body = json!({"card_id": card, "limits": limits, "timezone": "America/New_York"});
            call(&self.client, "cards/limits/set", body)
                .await
                .map_err(anyhow::Error::msg)?;
        }
        let mut rules = Vec::with_capacity(50);
        for i in 0..50 {
            let condition = match i % 4 {
                0 => {
                    json!({"attribute": "mcc", "operator": "is_one_of", "value": [format!("{:04}", 7000 + i)]})
                }
                1 => {
                    json!({"attribute": "merchant_country", "operator": "is_one_of", "value": ["KP", "IR"]})
                }
                2 => {
                    json!({"attribute": "merchant_name", "operator": "contains", "value": format!("casino {i}")})
                }
                _ => {
                    json!({"attribute": "amount", "operator": "greater_than", "value": format!("{}", 1000 + i)})
                }
            };
            let mode = if i < 10 { "shadow" } else { "active" };
            let body =
                json!({"name": format!("bench rule {i}"), "conditions": [condition], "mode": mode});
            let rule = call(&self.client, "rules/create", body)
                .await
                .map_err(anyhow::Error::msg)?;
            rules.push(rule["rule_id"].clone());
        }
        let outcome = self.auth(20_000, None).await;
        for id in rules {
            let _ = call(&self.client, "rules/delete", json!({"rule_id": id})).await;
        }
        for card in &self.cards {
            let _ = call(
                &self.client,
                "cards/limits/set",
                json!({"card_id": card, "limits": []}),
            )
            .await;
        }
        Ok((
            outcome,
            format!(
                "{} cards × 3 limits, 50 rules (10 shadow); compare with simulate/cards/auth",
                self.cards.len()
            ),
        ))
    }

    /// Authorizations through the project's decision webhook: a local endpoint that
    /// approves at once, `concurrency` in flight. The endpoint is removed afterwards.
    async fn auth_with_decision(
        &self,
        n: usize,
        concurrency: usize,
    ) -> anyhow::Result<(Outcome, String)> {
        anyhow::ensure!(!self.cards.is_empty(), "needs the cards/create scenario");
        let decider = Decider::start(self.client.clone()).await?;
        call(
            &self.client,
            "wh/decision/set",
            json!({"url": decider.url, "timeout_ms": 2000}),
        )
        .await
        .map_err(anyhow::Error::msg)?;
        let outcome = self.auth_at(n, concurrency).await;
        call(&self.client, "wh/decision/delete", json!({}))
            .await
            .map_err(anyhow::Error::msg)?;
        let baseline = if concurrency == 1 {
            "auth@1"
        } else {
            "simulate/cards/auth"
        };
        Ok((
            outcome,
            format!("endpoint approves at once; added latency = p50 here − p50 of {baseline}"),
        ))
    }

    /// Polls every order until it is completed or failed; returns each one's final status.
    async fn drain_orders(&self, ids: Vec<String>) -> HashMap<String, String> {
        let client = self.client.clone();
        let ids = Arc::new(ids);
        let done = Arc::new(Mutex::new(HashMap::new()));
        let sink = done.clone();
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        let list = ids.clone();
        load::run(ids.len(), self.concurrency, move |i| {
            let (client, list, sink) = (client.clone(), list.clone(), sink.clone());
            async move {
                while Instant::now() < deadline {
                    let v = call(&client, "orders/check", json!({"order_id": list[i]})).await?;
                    let status = v["status"].as_str().unwrap_or_default();
                    if status == "completed" || status == "failed" {
                        lock(&sink).insert(list[i].clone(), status.to_owned());
                        return Ok(());
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err("order did not finish".to_owned())
            }
        })
        .await;
        let done = std::mem::take(&mut *lock(&done));
        done
    }
}

fn drain_note(outcome: &Outcome, done: &HashMap<String, String>, drain: Duration) -> String {
    let completed = done.values().filter(|s| *s == "completed").count();
    let total = outcome.elapsed + drain;
    format!(
        "{completed}/{} orders completed, the last {:.1} s after the last request ({:.0} orders/s end to end)",
        outcome.requests - outcome.errors,
        drain.as_secs_f64(),
        completed as f64 / total.as_secs_f64().max(1e-9)
    )
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One sealed call; an answer that is not a success is an error naming its slug.
pub async fn call(client: &Client, path: &str, body: Value) -> Result<Value, String> {
    let answer = client
        .request(path, body)
        .await
        .map_err(|e| e.to_string())?;
    if answer.is_success() {
        Ok(answer.body)
    } else {
        Err(format!(
            "{path}: {} {}",
            answer.status,
            answer
                .body
                .get("error_slug")
                .and_then(Value::as_str)
                .unwrap_or("?")
        ))
    }
}

/// What reached a receiver of the transactions `sent` (id → when its answer came).
struct Arrived {
    /// Answer → arrival, sorted.
    lags: Vec<Duration>,
    /// The last arrival.
    last: Option<Instant>,
    /// Sent but not delivered within `DRAIN_TIMEOUT`.
    missing: usize,
}

/// Waits (at most `DRAIN_TIMEOUT`) for every transaction of `sent` to reach `receiver`.
async fn arrived(receiver: &Receiver, sent: &HashMap<String, Instant>) -> Arrived {
    let deadline = Instant::now() + DRAIN_TIMEOUT;
    while receiver.counts().0 < sent.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut out = Arrived {
        lags: Vec::with_capacity(sent.len()),
        last: None,
        missing: 0,
    };
    for (id, answered) in sent {
        match receiver.arrival(id) {
            Some(at) => {
                out.lags.push(at.saturating_duration_since(*answered));
                out.last = Some(out.last.map_or(at, |l| l.max(at)));
            }
            None => out.missing += 1,
        }
    }
    out.lags.sort_unstable();
    out
}
