//! A fake Lithic on port 0, faithful to Lithic's published API document: it answers
//! the REST calls our server makes (account holders, cards, card embed sessions,
//! responder endpoints, event subscriptions), serves the embed pages a cardholder's
//! browser loads (`GET /v1/embed`, single use per detail, then `embed.viewed`), plays
//! the card network (ASA requests, then `card_transaction.updated`
//! deliveries with every event so far), files disputes (`/v1/disputes`, their
//! evidences, whose upload target it serves on a port of its own) and plays their
//! `dispute.updated` events, signs what it sends exactly as Lithic does
//! (Standard Webhooks), and checks every request it receives, every answer it gives,
//! every webhook it sends and every answer our server gives against the document.
//! `assert_clean` fails the test on any mismatch. Faults (429 with `retry-after`, 5xx,
//! an answer lost after the work was done, a final refusal) are injected per operation.

pub mod bodies;
pub mod harness;
pub mod spec;

pub use bodies::Merchant;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bodies::{error, uuid};
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use spec::Spec;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A fault injected into the fake's answers to one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// 429 with `retry-after: <secs>`; nothing is done.
    RateLimited { retry_after: u64 },
    /// This status (5xx) before anything is done.
    Status(u16),
    /// The work is done, then the answer is lost as this status (5xx): the caller
    /// cannot tell whether it happened.
    DoneThenStatus(u16),
    /// A final refusal (4xx) with this message.
    Refuse(u16, &'static str),
}

/// How a message the fake sends is signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sign {
    Good,
    /// Signed with another secret.
    Bad,
    /// Signed correctly, 10 minutes ago.
    Stale,
    /// No signature headers at all.
    Unsigned,
}

struct Sub {
    token: String,
    url: String,
    secret: String,
    event_types: Vec<String>,
    description: String,
}

struct Tx {
    token: String,
    card_token: String,
    merchant: Merchant,
    status: String,
    result: String,
    events: Vec<Value>,
}

/// A card embed session (`POST /v1/cards/{card_token}/embed`).
struct Embed {
    card_token: String,
    target_origin: String,
    /// Unix seconds.
    expiration: i64,
    /// The details already shown (each once).
    used: Vec<String>,
    /// What `embed.*` events name the session by.
    session_id: String,
}

#[derive(Default)]
struct Books {
    embeds: BTreeMap<String, Embed>,
    holders: BTreeMap<String, Value>,
    cards: BTreeMap<String, Value>,
    /// Idempotency-Key → (request body, status, answer).
    idempotency: BTreeMap<String, (Value, u16, Value)>,
    asa_url: Option<String>,
    subs: Vec<Sub>,
    txs: BTreeMap<String, Tx>,
    faults: Vec<(String, String, Fault)>,
    next_holder_status: Option<String>,
    /// (method, template, status) of every request received.
    log: Vec<(String, String, u16)>,
    disputes: BTreeMap<String, Value>,
    evidences: BTreeMap<String, Value>,
    /// What arrived at the upload target: (evidence token, content type, bytes).
    uploads: Vec<(String, String, Vec<u8>)>,
    /// Settled events left out of the settlement details (a break planted by a test).
    settlement_hidden: Vec<String>,
    /// Settled events whose detail reports another amount (cents).
    settlement_amounts: BTreeMap<String, i64>,
    /// Details of settlements the card network made that no event delivered.
    settlement_extra: Vec<Value>,
    /// At most this many details per page, whatever `page_size` asks.
    settlement_page_cap: Option<usize>,
}

struct Inner {
    api_key: String,
    asa_secret: String,
    books: Mutex<Books>,
    violations: Mutex<Vec<String>>,
    pan_access: AtomicBool,
    pans: AtomicU64,
    http: reqwest::Client,
    /// Where evidence files are uploaded (the fake's second port): a pre-signed URL
    /// elsewhere than Lithic's API, as Lithic answers.
    upload_base: String,
}

pub struct FakeLithic {
    pub base: String,
    pub api_key: String,
    inner: Arc<Inner>,
}

/// What an ASA exchange came to.
#[derive(Debug, Clone)]
pub struct Asa {
    pub token: String,
    pub status: u16,
    pub answer: Value,
}

impl Asa {
    pub fn result(&self) -> &str {
        self.answer["result"].as_str().unwrap_or("")
    }
}

fn secret() -> String {
    let key: [u8; 24] = rand::random();
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

/// `v1,<base64 HMAC-SHA256(key, id.timestamp.body)>`, the key being the base64 part of
/// the `whsec_` secret: Standard Webhooks, as Lithic signs.
pub fn sign(secret: &str, id: &str, timestamp: i64, body: &str) -> String {
    let key = base64::engine::general_purpose::STANDARD
        .decode(secret.trim_start_matches("whsec_"))
        .unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    )
}

/// Our results as the transaction's `result` (`decline_result` has no
/// `VELOCITY_EXCEEDED`; Lithic reports a program's velocity decline as a user limit).
fn tx_result(asa_result: &str) -> &'static str {
    match asa_result {
        "APPROVED" => "APPROVED",
        "INSUFFICIENT_FUNDS" => "INSUFFICIENT_FUNDS",
        "CARD_PAUSED" => "CARD_PAUSED",
        "UNAUTHORIZED_MERCHANT" => "UNAUTHORIZED_MERCHANT",
        "VELOCITY_EXCEEDED" => "USER_TRANSACTION_LIMIT",
        _ => "DECLINED",
    }
}

impl FakeLithic {
    pub async fn start() -> FakeLithic {
        let uploads = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upload_base = format!("http://{}", uploads.local_addr().unwrap());
        let inner = Arc::new(Inner {
            upload_base,
            api_key: format!("test-lithic-key-{}", uuid()),
            asa_secret: secret(),
            books: Mutex::new(Books::default()),
            violations: Mutex::new(Vec::new()),
            pan_access: AtomicBool::new(true),
            pans: AtomicU64::new(0),
            http: reqwest::Client::new(),
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(inner.clone());
        let upload_app = axum::Router::new()
            .fallback(upload)
            .with_state(inner.clone());
        tokio::spawn(async move {
            let _ = axum::serve(uploads, upload_app).await;
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        // Compile the document once before the first request needs it.
        let _ = Spec::get();
        FakeLithic {
            base: format!("http://{addr}"),
            api_key: inner.api_key.clone(),
            inner,
        }
    }

    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.inner.books.lock().unwrap()
    }

    fn violation(&self, v: impl Into<String>) {
        self.inner.violations.lock().unwrap().push(v.into());
    }

    /// Fails the test if anything sent or answered did not match Lithic's document.
    pub fn assert_clean(&self) {
        let v = self.inner.violations.lock().unwrap();
        assert!(v.is_empty(), "Lithic API mismatches:\n{}", v.join("\n"));
    }

    /// The next `times` requests of `method template` get `fault`.
    pub fn fail(&self, method: &str, template: &str, fault: Fault, times: usize) {
        let mut b = self.books();
        for _ in 0..times {
            b.faults
                .push((method.to_owned(), template.to_owned(), fault.clone()));
        }
    }

    /// Drops the faults not used yet.
    pub fn clear_faults(&self) {
        self.books().faults.clear();
    }

    /// Requests received for `method template` (whatever they were answered).
    pub fn calls(&self, method: &str, template: &str) -> usize {
        self.books()
            .log
            .iter()
            .filter(|(m, t, _)| m == method && t == template)
            .count()
    }

    /// Whether the program may read card numbers (PCI); on by default.
    pub fn set_pan_access(&self, on: bool) {
        self.inner.pan_access.store(on, Ordering::SeqCst);
    }

    /// The next account holder created gets this status (what KYC_BASIC answers with no
    /// government-id trigger).
    pub fn next_holder_status(&self, status: &str) {
        self.books().next_holder_status = Some(status.to_owned());
    }

    pub fn holders(&self) -> Vec<Value> {
        self.books().holders.values().cloned().collect()
    }

    pub fn card(&self, token: &str) -> Option<Value> {
        self.books().cards.get(token).cloned()
    }

    pub fn cards(&self) -> Vec<Value> {
        self.books().cards.values().cloned().collect()
    }

    /// The embed sessions made so far: (card token, target origin, expiration).
    pub fn embeds(&self) -> Vec<(String, String, i64)> {
        self.books()
            .embeds
            .values()
            .map(|e| (e.card_token.clone(), e.target_origin.clone(), e.expiration))
            .collect()
    }

    /// The event types of every subscription, together.
    pub fn subscription_event_types(&self) -> Vec<String> {
        self.books()
            .subs
            .iter()
            .flat_map(|s| s.event_types.clone())
            .collect()
    }

    pub fn disputes(&self) -> Vec<Value> {
        self.books().disputes.values().cloned().collect()
    }

    /// The tokens of a transaction's events of `kind` (`CLEARING`, `RETURN`, …).
    pub fn event_tokens(&self, tx: &str, kind: &str) -> Vec<String> {
        self.books().txs[tx]
            .events
            .iter()
            .filter(|e| e["type"] == kind)
            .filter_map(|e| e["token"].as_str().map(str::to_owned))
            .collect()
    }

    /// Serves at most `n` settlement details per page, so a reader must page.
    pub fn settlement_page_cap(&self, n: usize) {
        self.books().settlement_page_cap = Some(n);
    }

    /// Leaves a settled event out of the settlement details.
    pub fn settlement_hide(&self, event_token: &str) {
        self.books().settlement_hidden.push(event_token.to_owned());
    }

    /// Reports a settled event at `cents` in the settlement details.
    pub fn settlement_amount(&self, event_token: &str, cents: i64) {
        self.books()
            .settlement_amounts
            .insert(event_token.to_owned(), cents);
    }

    /// A settlement today on `card_token` that no event delivered: its event token.
    pub fn settlement_unannounced(&self, card_token: &str, cents: i64) -> String {
        self.settlement_other(card_token, "CLEARING", cents)
    }

    /// A settlement detail of `kind` (`FEE`, `CHARGEBACK`, `CLEARING`, …) today on
    /// `card_token` that no transaction event delivered: its event token.
    pub fn settlement_other(&self, card_token: &str, kind: &str, cents: i64) -> String {
        let mut b = self.books();
        let account = b.cards.get(card_token).map(|c| c["account_token"].clone());
        let event = uuid();
        let detail = bodies::settlement_detail(
            &event,
            &uuid(),
            card_token,
            account.unwrap_or(Value::Null),
            kind,
            cents,
            &bodies::now(),
        );
        b.settlement_extra.push(detail);
        event
    }

    pub fn dispute(&self, token: &str) -> Option<Value> {
        self.books().disputes.get(token).cloned()
    }

    /// A dispute of the transaction `tx` Lithic holds as if filed by our server (an
    /// attempt whose every answer after the filing was lost): its token.
    pub fn add_dispute(&self, tx: &str, cents: i64, reason: &str) -> String {
        let token = uuid();
        let request = json!({"transaction_token": tx, "amount": cents, "reason": reason,
                             "customer_filed_date": bodies::now()});
        self.books()
            .disputes
            .insert(token.clone(), bodies::dispute(&token, &request));
        token
    }

    pub fn evidences(&self) -> Vec<Value> {
        self.books().evidences.values().cloned().collect()
    }

    /// What arrived at the upload target: (evidence token, content type, bytes).
    pub fn uploads(&self) -> Vec<(String, String, Vec<u8>)> {
        self.books().uploads.clone()
    }

    /// The dispute `token` takes `status` (and `resolution_reason`), and Lithic says so
    /// with `dispute.updated` to the subscriptions: our statuses and answers, each
    /// checked against the document.
    pub async fn update_dispute(
        &self,
        token: &str,
        status: &str,
        resolution_reason: Option<&str>,
    ) -> Vec<(u16, Option<Value>)> {
        let mut body = {
            let mut b = self.books();
            let d = b.disputes.get_mut(token).expect("a dispute of the fake");
            d["status"] = json!(status);
            d["resolution_reason"] = json!(resolution_reason);
            if ["CASE_WON", "CASE_CLOSED"].contains(&status) {
                d["resolution_date"] = json!(bodies::now());
            }
            d.clone()
        };
        body["event_type"] = json!("dispute.updated");
        self.dispute_event(&body).await
    }

    /// A `dispute.updated` body as it is (for a dispute the fake may not hold), checked
    /// against the document and delivered: our statuses and answers.
    pub async fn dispute_event(&self, body: &Value) -> Vec<(u16, Option<Value>)> {
        for p in Spec::get().check_webhook("dispute.updated", body) {
            self.violation(format!("the fake's own dispute.updated: {p}"));
        }
        let answers = self.event_raw("dispute.updated", &body.to_string()).await;
        for (status, answer) in &answers {
            for p in Spec::get().check_webhook_response("dispute.updated", *status, answer.as_ref())
            {
                self.violation(p);
            }
        }
        answers
    }

    pub fn asa_url(&self) -> Option<String> {
        self.books().asa_url.clone()
    }

    // ---- the network side: what Lithic sends us ----

    /// Posts `body` to `url` signed with `secret` as `sign` says; answers our status
    /// and body.
    async fn post_signed(
        &self,
        url: &str,
        secret: &str,
        body: &str,
        sign: Sign,
    ) -> (u16, Option<Value>) {
        let id = uuid();
        let mut ts = super::now_micros() / 1_000_000;
        let secret = match sign {
            Sign::Bad => self::secret(),
            Sign::Stale => {
                ts -= 600;
                secret.to_owned()
            }
            _ => secret.to_owned(),
        };
        let mut req = self
            .inner
            .http
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_owned());
        if sign != Sign::Unsigned {
            req = req
                .header("webhook-id", &id)
                .header("webhook-timestamp", ts.to_string())
                .header("webhook-signature", self::sign(&secret, &id, ts, body));
        }
        // A server that is down is a failed delivery (status 0), as Lithic sees it.
        let Ok(resp) = req.send().await else {
            return (0, None);
        };
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).ok())
    }

    /// One ASA request as Lithic sends it, signed as `sign` says; nothing else happens
    /// (no transaction). `token` is the transaction token (a fresh one when None).
    pub async fn asa(
        &self,
        card_token: &str,
        status: &str,
        cents: i64,
        m: &Merchant,
        sign: Sign,
        token: Option<&str>,
    ) -> Asa {
        let card = self.card(card_token).expect("a card of the fake");
        let token = token.map_or_else(uuid, str::to_owned);
        let body = bodies::asa_request(&token, status, &card, cents, m);
        for p in Spec::get().check_webhook("card_authorization.approval_request", &body) {
            self.violation(format!("the fake's own ASA request: {p}"));
        }
        let url = self.asa_url().expect("an ASA responder is enrolled");
        let (code, answer) = self
            .post_signed(&url, &self.inner.asa_secret, &body.to_string(), sign)
            .await;
        if sign == Sign::Good && code != 0 {
            for p in Spec::get().check_webhook_response(
                "card_authorization.approval_request",
                code,
                answer.as_ref(),
            ) {
                self.violation(p);
            }
            if code == 200 && answer.as_ref().map(|a| &a["token"]) != Some(&json!(token)) {
                self.violation(format!("our ASA answer names another token: {answer:?}"));
            }
        }
        Asa {
            token,
            status: code,
            answer: answer.unwrap_or(Value::Null),
        }
    }

    /// A card authorization as Lithic runs it: ASA (retried once after a 5xx, as
    /// Lithic does), then the transaction with its `AUTHORIZATION` event, delivered.
    pub async fn authorize(&self, card_token: &str, cents: i64, m: &Merchant) -> Asa {
        self.authorize_as(card_token, "AUTHORIZATION", cents, m)
            .await
    }

    pub async fn authorize_as(
        &self,
        card_token: &str,
        status: &str,
        cents: i64,
        m: &Merchant,
    ) -> Asa {
        let mut asa = self
            .asa(card_token, status, cents, m, Sign::Good, None)
            .await;
        if asa.status >= 500 {
            asa = self
                .asa(card_token, status, cents, m, Sign::Good, Some(&asa.token))
                .await;
        }
        let result = if asa.status == 200 {
            asa.result().to_owned()
        } else {
            "DECLINED".into()
        };
        let approved = result == "APPROVED";
        let kind = if status == "FINANCIAL_AUTHORIZATION" {
            "FINANCIAL_AUTHORIZATION"
        } else {
            "AUTHORIZATION"
        };
        let tx_status = match (approved, kind) {
            (true, "FINANCIAL_AUTHORIZATION") => "SETTLED",
            (true, _) => "PENDING",
            _ => "DECLINED",
        };
        let r = tx_result(&result);
        self.new_tx(
            &asa.token,
            card_token,
            m,
            tx_status,
            r,
            bodies::event(kind, cents, r, "DEBIT"),
        );
        self.deliver(&asa.token).await;
        asa
    }

    /// We approve, but Lithic declines anyway (say our answer came too late): the
    /// transaction is declined with an `AUTHORIZATION` event whose result is not
    /// `APPROVED`.
    pub async fn authorize_then_decline(&self, card_token: &str, cents: i64, m: &Merchant) -> Asa {
        let asa = self
            .asa(card_token, "AUTHORIZATION", cents, m, Sign::Good, None)
            .await;
        let r = "UNKNOWN_HOST_TIMEOUT";
        self.new_tx(
            &asa.token,
            card_token,
            m,
            "DECLINED",
            r,
            bodies::event("AUTHORIZATION", cents, r, "DEBIT"),
        );
        self.deliver(&asa.token).await;
        asa
    }

    fn new_tx(
        &self,
        token: &str,
        card_token: &str,
        m: &Merchant,
        status: &str,
        result: &str,
        first: Value,
    ) {
        self.books().txs.insert(
            token.to_owned(),
            Tx {
                token: token.to_owned(),
                card_token: card_token.to_owned(),
                merchant: m.clone(),
                status: status.into(),
                result: result.into(),
                events: vec![first],
            },
        );
    }

    /// Adds an event to a transaction (and sets its status), then delivers it.
    async fn add_event(&self, tx: &str, event: Value, status: &str) -> Vec<u16> {
        {
            let mut b = self.books();
            let t = b.txs.get_mut(tx).expect("a transaction of the fake");
            t.events.push(event);
            t.status = status.into();
        }
        self.deliver(tx).await
    }

    /// A clearing whose delivery is signed as `sign` says (the event stays at Lithic).
    pub async fn clear_signed(&self, tx: &str, cents: i64, sign: Sign) -> Vec<u16> {
        {
            let mut b = self.books();
            let t = b.txs.get_mut(tx).expect("a transaction of the fake");
            t.events
                .push(bodies::event("CLEARING", cents, "APPROVED", "DEBIT"));
            t.status = "SETTLED".into();
        }
        self.deliver_signed(tx, sign).await
    }

    pub async fn clear(&self, tx: &str, cents: i64) -> Vec<u16> {
        self.add_event(
            tx,
            bodies::event("CLEARING", cents, "APPROVED", "DEBIT"),
            "SETTLED",
        )
        .await
    }

    /// A partial (or whole) reversal of the authorization.
    pub async fn reverse(&self, tx: &str, cents: i64) -> Vec<u16> {
        self.add_event(
            tx,
            bodies::event("AUTHORIZATION_REVERSAL", cents, "APPROVED", "CREDIT"),
            "PENDING",
        )
        .await
    }

    pub async fn expire(&self, tx: &str) -> Vec<u16> {
        let held: i64 = {
            let b = self.books();
            b.txs[tx]
                .events
                .iter()
                .map(|e| {
                    let cents = e["amount"].as_i64().unwrap_or(0);
                    match e["type"].as_str() {
                        Some("AUTHORIZATION") => cents,
                        Some("AUTHORIZATION_REVERSAL" | "CLEARING") => -cents,
                        _ => 0,
                    }
                })
                .sum()
        };
        self.add_event(
            tx,
            bodies::event("AUTHORIZATION_EXPIRY", held.max(0), "APPROVED", "CREDIT"),
            "EXPIRED",
        )
        .await
    }

    /// A return (refund) to the card: its own transaction, settled.
    pub async fn refund(&self, card_token: &str, cents: i64, m: &Merchant) -> (String, Vec<u16>) {
        let token = uuid();
        self.new_tx(
            &token,
            card_token,
            m,
            "SETTLED",
            "APPROVED",
            bodies::event("RETURN", cents, "APPROVED", "CREDIT"),
        );
        let statuses = self.deliver(&token).await;
        (token, statuses)
    }

    /// A clearing with no authorization (a force post): its own transaction.
    pub async fn force_post(
        &self,
        card_token: &str,
        cents: i64,
        m: &Merchant,
    ) -> (String, Vec<u16>) {
        let token = uuid();
        self.new_tx(
            &token,
            card_token,
            m,
            "SETTLED",
            "APPROVED",
            bodies::event("CLEARING", cents, "APPROVED", "DEBIT"),
        );
        let statuses = self.deliver(&token).await;
        (token, statuses)
    }

    /// The transaction as it is now, as `card_transaction.updated`.
    fn tx_body(&self, tx: &str, events: Option<usize>) -> Value {
        let b = self.books();
        let t = &b.txs[tx];
        let card = b.cards.get(&t.card_token).cloned().expect("the card");
        let events: Vec<Value> = match events {
            Some(n) => t.events[..n].to_vec(),
            None => t.events.clone(),
        };
        let mut body =
            bodies::transaction(&t.token, &card, &t.merchant, &t.status, &t.result, &events);
        body["event_type"] = json!("card_transaction.updated");
        body
    }

    /// Delivers the transaction (every event so far) to each subscription; answers our
    /// statuses. A delivery may be made again at any time (Lithic retries).
    pub async fn deliver(&self, tx: &str) -> Vec<u16> {
        let body = self.tx_body(tx, None);
        self.send_event("card_transaction.updated", &body, Sign::Good)
            .await
    }

    /// An older version of the transaction: only its first `events` events (a delivery
    /// overtaken by a later one).
    pub async fn deliver_first(&self, tx: &str, events: usize) -> Vec<u16> {
        let mut body = self.tx_body(tx, Some(events));
        body["status"] = json!("PENDING");
        self.send_event("card_transaction.updated", &body, Sign::Good)
            .await
    }

    /// The transaction, signed as `sign` says (bad and stale signatures).
    pub async fn deliver_signed(&self, tx: &str, sign: Sign) -> Vec<u16> {
        let body = self.tx_body(tx, None);
        self.send_event("card_transaction.updated", &body, sign)
            .await
    }

    /// An `account_holder.verification` event: the holder's status changed.
    pub async fn verify_holder(&self, token: &str, status: &str, reasons: &[&str]) -> Vec<u16> {
        let account_token = {
            let mut b = self.books();
            let h = b.holders.get_mut(token).expect("a holder of the fake");
            h["status"] = json!(status);
            h["status_reasons"] = json!(reasons);
            h["verification_application"]["status"] = json!(status);
            h["verification_application"]["status_reasons"] = json!(reasons);
            h["account_token"].clone()
        };
        let body = json!({
            "event_type": "account_holder.verification",
            "token": token,
            "account_token": account_token,
            "status": status,
            "status_reasons": reasons,
            "created": bodies::now(),
        });
        self.send_event("account_holder.verification", &body, Sign::Good)
            .await
    }

    async fn send_event(&self, event_type: &str, body: &Value, sign: Sign) -> Vec<u16> {
        for p in Spec::get().check_webhook(event_type, body) {
            self.violation(format!("the fake's own {event_type}: {p}"));
        }
        let subs: Vec<(String, String)> = self
            .books()
            .subs
            .iter()
            .filter(|s| s.event_types.is_empty() || s.event_types.iter().any(|t| t == event_type))
            .map(|s| (s.url.clone(), s.secret.clone()))
            .collect();
        let mut statuses = Vec::new();
        for (url, secret) in subs {
            let (status, answer) = self
                .post_signed(&url, &secret, &body.to_string(), sign)
                .await;
            // 200 acknowledges; anything else is a failed delivery Lithic retries.
            if sign == Sign::Good && status != 200 && status < 500 && status != 0 {
                self.violation(format!("our answer {status} to {event_type}: {answer:?}"));
            }
            statuses.push(status);
        }
        statuses
    }

    /// Any body, correctly signed with the ASA secret, as Lithic would send it (the
    /// body is not checked against the document: bad bodies are the point). Our answer
    /// is checked like any other: a declared status with a declared body, and the
    /// request's token when it names one.
    pub async fn asa_raw(&self, body: &str) -> (u16, Option<Value>) {
        let url = self.asa_url().expect("an ASA responder is enrolled");
        let (code, answer) = self
            .post_signed(&url, &self.inner.asa_secret, body, Sign::Good)
            .await;
        for p in Spec::get().check_webhook_response(
            "card_authorization.approval_request",
            code,
            answer.as_ref(),
        ) {
            self.violation(format!("{p} (to {body:.200})"));
        }
        if let (200, Some(a)) = (code, &answer) {
            let sent = serde_json::from_str::<Value>(body)
                .ok()
                .and_then(|b| b.get("token").cloned());
            if a.get("token").is_some() && a.get("token") != sent.as_ref() {
                self.violation(format!("our ASA answer names another token: {a}"));
            }
        }
        (code, answer)
    }

    /// Any body, correctly signed, delivered to the subscriptions of `event_type`:
    /// our statuses and answers.
    pub async fn event_raw(&self, event_type: &str, body: &str) -> Vec<(u16, Option<Value>)> {
        let subs: Vec<(String, String)> = self
            .books()
            .subs
            .iter()
            .filter(|s| s.event_types.is_empty() || s.event_types.iter().any(|t| t == event_type))
            .map(|s| (s.url.clone(), s.secret.clone()))
            .collect();
        let mut answers = Vec::new();
        for (url, secret) in subs {
            answers.push(self.post_signed(&url, &secret, body, Sign::Good).await);
        }
        answers
    }

    // ---- the REST side: what our server asks Lithic ----

    fn dispatch(
        &self,
        method: &str,
        template: &str,
        path: &str,
        query: &[(String, String)],
        headers: &HeaderMap,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let last = path.rsplit('/').next().unwrap_or_default().to_owned();
        let q = |name: &str| {
            query
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let body = body.cloned().unwrap_or(Value::Null);
        let mut b = self.books();
        match (method, template) {
            ("POST", "/v1/account_holders") => {
                let ind = &body["individual"];
                let reasons = match ind["government_id"].as_str().unwrap_or_default() {
                    "000-00-0001" => Some("ADDRESS_VERIFICATION_FAILURE"),
                    "000-00-0002" => Some("NAME_VERIFICATION_FAILURE"),
                    "000-00-0003" => Some("DOB_VERIFICATION_FAILURE"),
                    "000-00-0004" => Some("ID_VERIFICATION_FAILURE"),
                    "000-00-0005" => Some("OTHER_VERIFICATION_FAILURE"),
                    _ => None,
                };
                let status = match reasons {
                    Some(_) => "REJECTED".to_owned(),
                    None => b
                        .next_holder_status
                        .take()
                        .unwrap_or_else(|| "ACCEPTED".into()),
                };
                let reasons: Vec<&str> = reasons.into_iter().collect();
                let (token, account) = (uuid(), uuid());
                let external_id = body["external_id"].as_str().unwrap_or_default();
                b.holders.insert(
                    token.clone(),
                    bodies::holder(&token, &account, external_id, &status, &reasons, ind),
                );
                (
                    200,
                    bodies::holder_created(&token, &account, &status, &reasons),
                )
            }
            ("GET", "/v1/account_holders") => {
                let ext = q("external_id");
                let data: Vec<Value> = b
                    .holders
                    .values()
                    .filter(|h| ext.as_deref().is_none_or(|e| h["external_id"] == e))
                    .cloned()
                    .collect();
                (200, json!({"data": data, "has_more": false}))
            }
            ("GET", "/v1/account_holders/{account_holder_token}") => match b.holders.get(&last) {
                Some(h) => (200, h.clone()),
                None => (404, error("Account holder not found")),
            },
            ("POST", "/v1/cards") => {
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                if let Some(k) = &key {
                    if let Some((prev, status, answer)) = b.idempotency.get(k) {
                        if *prev == body {
                            return (*status, answer.clone());
                        }
                        return (
                            422,
                            error("Idempotency-Key reused with different parameters"),
                        );
                    }
                }
                let account = body["account_token"].as_str().unwrap_or_default();
                if !b.holders.values().any(|h| h["account_token"] == account) {
                    return (422, error("account_token does not belong to this program"));
                }
                let n = self.inner.pans.fetch_add(1, Ordering::SeqCst);
                let pan = format!("4111110000{:06}", n % 1_000_000);
                let token = uuid();
                let card = bodies::card(
                    &token,
                    account,
                    body["state"].as_str().unwrap_or("OPEN"),
                    body["memo"].as_str().unwrap_or(""),
                    &pan,
                );
                b.cards.insert(token, card.clone());
                let answer = self.visible(card);
                if let Some(k) = key {
                    b.idempotency.insert(k, (body.clone(), 200, answer.clone()));
                }
                (200, answer)
            }
            ("GET", "/v1/disputes") => {
                let wanted: Vec<String> = q("transaction_tokens")
                    .map(|t| t.split(',').map(str::to_owned).collect())
                    .unwrap_or_default();
                let data: Vec<Value> = b
                    .disputes
                    .values()
                    .filter(|d| {
                        wanted.is_empty()
                            || wanted.iter().any(|w| d["transaction_token"] == w.as_str())
                    })
                    .cloned()
                    .collect();
                (200, json!({"data": data, "has_more": false}))
            }
            ("POST", "/v1/disputes") => {
                let tx = body["transaction_token"].as_str().unwrap_or_default();
                if !b.txs.contains_key(tx) {
                    return (
                        422,
                        error("transaction_token is not a transaction of this program"),
                    );
                }
                if body["amount"].as_i64().is_none_or(|a| a <= 0) {
                    return (400, error("amount must be a positive number of cents"));
                }
                let open = b.disputes.values().any(|d| {
                    d["transaction_token"] == tx
                        && !["CASE_WON", "CASE_CLOSED"]
                            .contains(&d["status"].as_str().unwrap_or(""))
                });
                if open {
                    return (422, error("The transaction already has an open dispute"));
                }
                let token = uuid();
                let dispute = bodies::dispute(&token, &body);
                b.disputes.insert(token, dispute.clone());
                (201, dispute)
            }
            ("GET", "/v1/disputes/{dispute_token}") => match b.disputes.get(&last) {
                Some(d) => (200, d.clone()),
                None => (404, error("Dispute not found")),
            },
            ("DELETE", "/v1/disputes/{dispute_token}") => {
                let Some(d) = b.disputes.get_mut(&last) else {
                    return (404, error("Dispute not found"));
                };
                match d["status"].as_str() {
                    Some("CASE_CLOSED") if d["resolution_reason"] == "WITHDRAWN" => {}
                    Some("CASE_WON" | "CASE_CLOSED") => {
                        return (400, error("The dispute is closed"));
                    }
                    _ => {
                        d["status"] = json!("CASE_CLOSED");
                        d["resolution_reason"] = json!("WITHDRAWN");
                        d["resolution_date"] = json!(bodies::now());
                    }
                }
                (200, d.clone())
            }
            ("POST", "/v1/disputes/{dispute_token}/evidences") => {
                let dispute = path.split('/').nth(3).unwrap_or_default().to_owned();
                if !b.disputes.contains_key(&dispute) {
                    return (404, error("Dispute not found"));
                }
                let token = uuid();
                let url = format!(
                    "{}/uploads/{token}?signature={}",
                    self.inner.upload_base,
                    uuid()
                );
                let e = bodies::evidence(
                    &token,
                    &dispute,
                    body["filename"].as_str().unwrap_or_default(),
                    &url,
                );
                b.evidences.insert(token, e.clone());
                (201, e)
            }
            ("GET", "/v1/cards/{card_token}") => match b.cards.get(&last) {
                Some(c) => (200, self.visible(c.clone())),
                None => (404, error("Card not found")),
            },
            ("PATCH", "/v1/cards/{card_token}") => {
                let Some(card) = b.cards.get_mut(&last) else {
                    return (404, error("Card not found"));
                };
                if card["state"] == "CLOSED" {
                    return (422, error("Card is closed and cannot be modified"));
                }
                if let Some(s) = body.get("state") {
                    card["state"] = s.clone();
                }
                let c = card.clone();
                (200, self.visible(c))
            }
            ("POST", "/v1/cards/{card_token}/embed") => {
                let token = path.split('/').nth(3).unwrap_or_default().to_owned();
                if !b.cards.contains_key(&token) {
                    return (404, error("Card not found"));
                }
                if body["type"] != "CARD_EMBED" {
                    return (400, error("the fake serves CARD_EMBED sessions only"));
                }
                let now = super::now_micros() / 1_000_000;
                let expiration = body["expiration"].as_i64().unwrap_or(now + 600);
                if expiration <= now || expiration > now + 600 {
                    return (
                        400,
                        error("expiration must be in the future and at most 10 minutes away"),
                    );
                }
                let session = format!("eyJ{}", uuid().replace('-', ""));
                b.embeds.insert(
                    session.clone(),
                    Embed {
                        card_token: token,
                        target_origin: body["target_origin"].as_str().unwrap_or_default().into(),
                        expiration,
                        used: Vec::new(),
                        session_id: uuid(),
                    },
                );
                (200, json!({ "session": session }))
            }
            ("POST", "/v1/responder_endpoints") => {
                b.asa_url = body["url"].as_str().map(str::to_owned);
                (200, json!({"enrolled": true}))
            }
            ("DELETE", "/v1/responder_endpoints") => {
                b.asa_url = None;
                (200, Value::Null)
            }
            ("GET", "/v1/responder_endpoints") => (
                200,
                json!({"enrolled": b.asa_url.is_some(), "url": b.asa_url}),
            ),
            ("GET", "/v1/auth_stream/secret") => (200, json!({"secret": self.inner.asa_secret})),
            ("GET", "/v1/event_subscriptions") => {
                let data: Vec<Value> = b.subs.iter().map(sub_json).collect();
                (200, json!({"data": data, "has_more": false}))
            }
            ("POST", "/v1/event_subscriptions") => {
                let sub = Sub {
                    token: format!("ep_{}", uuid().replace('-', "")),
                    url: body["url"].as_str().unwrap_or_default().to_owned(),
                    secret: secret(),
                    event_types: body["event_types"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect(),
                    description: body["description"].as_str().unwrap_or_default().to_owned(),
                };
                let answer = sub_json(&sub);
                b.subs.push(sub);
                (201, answer)
            }
            ("PATCH", "/v1/event_subscriptions/{event_subscription_token}") => {
                let Some(sub) = b.subs.iter_mut().find(|s| s.token == last) else {
                    return (404, error("Event subscription not found"));
                };
                if let Some(u) = body["url"].as_str() {
                    sub.url = u.to_owned();
                }
                if let Some(t) = body["event_types"].as_array() {
                    sub.event_types = t
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect();
                }
                (200, sub_json(sub))
            }
            ("GET", "/v1/event_subscriptions/{event_subscription_token}/secret") => {
                let token = path.split('/').nth(3).unwrap_or_default();
                match b.subs.iter().find(|s| s.token == token) {
                    Some(s) => (200, json!({"secret": s.secret})),
                    None => (404, error("Event subscription not found")),
                }
            }
            ("GET", "/v1/reports/settlement/details/{report_date}") => {
                let date = last.as_str();
                let mut all: Vec<Value> = b.settlement_extra.clone();
                for t in b.txs.values() {
                    let account = b
                        .cards
                        .get(&t.card_token)
                        .map(|c| c["account_token"].clone());
                    for e in &t.events {
                        let kind = e["type"].as_str().unwrap_or_default();
                        let token = e["token"].as_str().unwrap_or_default();
                        if !matches!(kind, "CLEARING" | "RETURN")
                            || e["result"] != "APPROVED"
                            || b.settlement_hidden.iter().any(|h| h == token)
                        {
                            continue;
                        }
                        let cents = e["amount"].as_i64().unwrap_or(0);
                        let cents = b.settlement_amounts.get(token).copied().unwrap_or(cents);
                        // A return credits the card: a negative gross amount.
                        let gross = if kind == "RETURN" { -cents } else { cents };
                        all.push(bodies::settlement_detail(
                            token,
                            &t.token,
                            &t.card_token,
                            account.clone().unwrap_or(Value::Null),
                            "CLEARING",
                            gross,
                            e["created"].as_str().unwrap_or_default(),
                        ));
                    }
                }
                all.retain(|d| d["report_date"] == date);
                all.sort_by(|a, b| a["token"].as_str().cmp(&b["token"].as_str()));
                if let Some(after) = q("starting_after") {
                    all.retain(|d| d["token"].as_str().is_some_and(|t| t > after.as_str()));
                }
                let size = q("page_size")
                    .and_then(|s| s.parse::<usize>().ok())
                    .unwrap_or(50)
                    .min(b.settlement_page_cap.unwrap_or(usize::MAX));
                let has_more = all.len() > size;
                all.truncate(size);
                (200, json!({"data": all, "has_more": has_more}))
            }
            _ => {
                drop(b);
                self.violation(format!("{method} {path}: an operation the fake does not serve (our server should not call it)"));
                (404, error("Not found"))
            }
        }
    }

    /// `GET /v1/embed`, as the cardholder's browser loads it (no API key: the session is
    /// the credential): the detail's page, once per detail, framed only by the
    /// session's origin; then `embed.viewed` to the subscriptions. 401 for a session
    /// that is unknown, expired or used for this detail.
    fn embed_page(&self, query: &[(String, String)], headers: &HeaderMap) -> Response {
        let spec = Spec::get();
        for p in spec.check_request("GET", "/v1/embed", query, headers, None) {
            self.violation(p);
        }
        let q = |name: &str| {
            query
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        let (session, kind) = (q("session"), q("type"));
        let now = super::now_micros() / 1_000_000;
        let shown = {
            let mut b = self.books();
            let found = match b.embeds.get_mut(&session) {
                Some(e)
                    if e.expiration > now
                        && ["PAN", "CVV", "EXP_MONTH", "EXP_YEAR"].contains(&kind.as_str())
                        && !e.used.contains(&kind) =>
                {
                    e.used.push(kind.clone());
                    Some((
                        e.card_token.clone(),
                        e.target_origin.clone(),
                        e.session_id.clone(),
                    ))
                }
                _ => None,
            };
            found.map(|(card_token, origin, session_id)| {
                let card = b.cards.get(&card_token).cloned().unwrap_or(Value::Null);
                (card, origin, session_id)
            })
        };
        let status = if shown.is_some() { 200 } else { 401 };
        b_log(&self.inner, "GET", "/v1/embed", status);
        let Some((card, origin, session_id)) = shown else {
            let body = error("The embed session is missing, invalid, expired, or already used");
            for p in spec.check_response("GET", "/v1/embed", 401, Some(&body)) {
                self.violation(format!("the fake's own {p}"));
            }
            return (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response();
        };
        let value = match kind.as_str() {
            "PAN" => card["pan"].clone(),
            "CVV" => card["cvv"].clone(),
            "EXP_MONTH" => card["exp_month"].clone(),
            _ => card["exp_year"].clone(),
        };
        let html = format!(
            "<!doctype html><html><body><div id=\"app\">{}</div></body></html>",
            value.as_str().unwrap_or_default()
        );
        let event = json!({
            "event_type": "embed.viewed",
            "session_id": session_id,
            "card_token": card["token"],
            "account_token": card["account_token"],
            "embed_type": kind,
            "device_details": {"ip_address": "127.0.0.1"},
        });
        let sender = FakeLithic {
            base: String::new(),
            api_key: self.api_key.clone(),
            inner: self.inner.clone(),
        };
        tokio::spawn(async move {
            sender.send_event("embed.viewed", &event, Sign::Good).await;
        });
        let mut resp = (StatusCode::OK, html).into_response();
        let h = resp.headers_mut();
        h.insert("content-type", "text/html; charset=utf-8".parse().unwrap());
        if let Ok(v) = format!("frame-ancestors {origin}").parse() {
            h.insert("content-security-policy", v);
        }
        resp
    }

    /// A card as this program may see it: no number without PAN access.
    fn visible(&self, mut card: Value) -> Value {
        if !self.inner.pan_access.load(Ordering::SeqCst) {
            if let Some(o) = card.as_object_mut() {
                o.remove("pan");
                o.remove("cvv");
            }
        }
        card
    }
}

/// The upload target of evidence files (`upload_url`, the fake's second port): a PUT of
/// the file to `/uploads/{evidence_token}`, without Lithic's API key (the URL is the
/// credential). The bytes are kept as they arrived.
async fn upload(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let fake = FakeLithic {
        base: String::new(),
        api_key: inner.api_key.clone(),
        inner: inner.clone(),
    };
    let token = uri
        .path()
        .strip_prefix("/uploads/")
        .unwrap_or_default()
        .to_owned();
    if method != Method::PUT {
        fake.violation(format!("{method} {uri}: the upload target takes a PUT"));
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    if headers.contains_key("authorization") {
        fake.violation(format!(
            "PUT {uri}: our API key was sent to the upload target"
        ));
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut b = inner.books.lock().unwrap();
    let Some(e) = b.evidences.get_mut(&token) else {
        return StatusCode::FORBIDDEN.into_response();
    };
    e["upload_status"] = json!("UPLOADED");
    b.uploads.push((token, content_type, body.to_vec()));
    b.log.push(("PUT".into(), "upload_url".into(), 200));
    StatusCode::OK.into_response()
}

/// Notes a request received, with the status it was answered.
fn b_log(inner: &Inner, method: &str, template: &str, status: u16) {
    inner
        .books
        .lock()
        .unwrap()
        .log
        .push((method.to_owned(), template.to_owned(), status));
}

fn sub_json(s: &Sub) -> Value {
    json!({
        "token": s.token,
        "url": s.url,
        "description": s.description,
        "disabled": false,
        "event_types": s.event_types,
    })
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let fake = FakeLithic {
        base: String::new(),
        api_key: inner.api_key.clone(),
        inner: inner.clone(),
    };
    let path = uri.path().to_owned();
    let method = method.as_str().to_owned();
    let query: Vec<(String, String)> = reqwest::Url::parse(&format!("http://fake{uri}"))
        .map(|u| {
            u.query_pairs()
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect()
        })
        .unwrap_or_default();
    let spec = Spec::get();
    let template = spec.template(&path).unwrap_or_else(|| path.clone());
    let json_body: Option<Value> = if body.is_empty() {
        None
    } else {
        match serde_json::from_slice(&body) {
            Ok(v) => Some(v),
            Err(_) => {
                fake.violation(format!("{method} {path}: the body is not JSON"));
                None
            }
        }
    };
    let answer = |status: u16, v: Value, extra: Option<(&'static str, String)>| {
        let code = StatusCode::from_u16(status).unwrap();
        // `content: {}` answers carry no body.
        let mut resp = if v.is_null() {
            code.into_response()
        } else {
            (code, axum::Json(v)).into_response()
        };
        if let Some((name, value)) = extra {
            resp.headers_mut().insert(name, value.parse().unwrap());
        }
        resp
    };
    let record = |status: u16| b_log(&inner, &method, &template, status);
    // The embed page is for the cardholder's browser: no API key (`security: []`).
    if method == "GET" && path == "/v1/embed" {
        return fake.embed_page(&query, &headers);
    }
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(inner.api_key.as_str()) {
        fake.violation(format!("{method} {path}: no valid Authorization header"));
        record(401);
        return answer(
            401,
            error("Please provide API key in the form Authorization: [api-key]"),
            None,
        );
    }
    for p in spec.check_request(&method, &template, &query, &headers, json_body.as_ref()) {
        fake.violation(p);
    }
    let fault = {
        let mut b = inner.books.lock().unwrap();
        b.faults
            .iter()
            .position(|(m, t, _)| *m == method && *t == template)
            .map(|i| b.faults.remove(i).2)
    };
    let (status, value, extra) = match fault {
        Some(Fault::RateLimited { retry_after }) => (
            429,
            error("Rate limited, too many requests per second"),
            Some(("retry-after", retry_after.to_string())),
        ),
        Some(Fault::Status(s)) => (s, error("Internal server error"), None),
        Some(Fault::Refuse(s, m)) => (s, error(m), None),
        Some(Fault::DoneThenStatus(s)) => {
            let _ = fake.dispatch(
                &method,
                &template,
                &path,
                &query,
                &headers,
                json_body.as_ref(),
            );
            (s, error("Internal server error"), None)
        }
        None => {
            let (s, v) = fake.dispatch(
                &method,
                &template,
                &path,
                &query,
                &headers,
                json_body.as_ref(),
            );
            (s, v, None)
        }
    };
    let body = (!value.is_null()).then_some(&value);
    for p in spec.check_response(&method, &template, status, body) {
        fake.violation(format!("the fake's own {p}"));
    }
    record(status);
    answer(status, value, extra)
}
