//! The least of Lithic that the ASA benchmark needs, on port 0: what enrolment asks
//! (responder endpoint, ASA secret, an event subscription and its secret), account
//! holders (always `ACCEPTED`) and cards, and ASA requests signed as Lithic signs them
//! (Standard Webhooks). The integration tests have the faithful fake, which checks every
//! request and answer against Lithic's OpenAPI document (crates/cli/tests/common/lithic);
//! this one checks nothing, so that the benchmark measures the server alone.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Books {
    asa_url: Option<String>,
    /// Our card id (the card's `memo`) → Lithic's card token.
    cards: HashMap<String, String>,
    subscription: Option<(String, String)>,
}

struct Inner {
    api_key: String,
    asa_secret: String,
    events_secret: String,
    books: Mutex<Books>,
    next: AtomicU64,
}

#[derive(Clone)]
pub struct FakeLithic {
    pub base: String,
    pub api_key: String,
    inner: Arc<Inner>,
}

fn secret() -> String {
    let key: [u8; 24] = rand::random();
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

/// A fresh random UUID (version 4), as Lithic's tokens are.
pub fn uuid() -> String {
    let mut b: [u8; 16] = rand::random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// `v1,<base64 HMAC-SHA256(key, id.timestamp.body)>`, the key being the base64 part of
/// the `whsec_` secret.
fn sign(secret: &str, id: &str, timestamp: i64, body: &str) -> anyhow::Result<String> {
    let key =
        base64::engine::general_purpose::STANDARD.decode(secret.trim_start_matches("whsec_"))?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key)?;
    mac.update(format!("{id}.{timestamp}.{body}").as_bytes());
    Ok(format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
    ))
}

impl FakeLithic {
    pub async fn start() -> anyhow::Result<FakeLithic> {
        let inner = Arc::new(Inner {
            api_key: format!("bench-lithic-key-{}", uuid()),
            asa_secret: secret(),
            events_secret: secret(),
            books: Mutex::new(Books::default()),
            next: AtomicU64::new(0),
        });
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeLithic {
            base: format!("http://{addr}"),
            api_key: inner.api_key.clone(),
            inner,
        })
    }

    /// Lithic's token of our card.
    pub fn card_token(&self, card_id: &str) -> Option<String> {
        lock(&self.inner.books).cards.get(card_id).cloned()
    }

    pub fn asa_url(&self) -> Option<String> {
        lock(&self.inner.books).asa_url.clone()
    }

    /// One signed `AUTHORIZATION` request of `cents` on a card, as Lithic posts it
    /// (the fields our server reads, and the ones every request carries).
    pub fn asa_request(
        &self,
        url: &str,
        http: &reqwest::Client,
        card_token: &str,
        cents: i64,
    ) -> anyhow::Result<reqwest::RequestBuilder> {
        let token = uuid();
        let body = json!({
            "event_type": "card_authorization.approval_request",
            "token": token,
            "status": "AUTHORIZATION",
            "amount": cents,
            "authorization_amount": cents,
            "acquirer_fee": 0,
            "cash_amount": 0,
            "settled_amount": 0,
            "merchant_amount": cents,
            "merchant_currency": "USD",
            "cardholder_currency": "USD",
            "amounts": {
                "cardholder": {"amount": cents, "conversion_rate": "1.000000", "currency": "USD"},
                "hold": {"amount": cents, "currency": "USD"},
                "merchant": {"amount": cents, "currency": "USD"},
                "settlement": null,
            },
            "created": "2026-01-01T00:00:00Z",
            "merchant": {
                "acceptor_id": "333301802529120", "acquiring_institution_id": "191231",
                "city": "NEW YORK", "country": "USA", "descriptor": "BENCH SHOP",
                "mcc": "5814", "state": "NY", "postal_code": "10001",
                "street_address": null, "phone_number": null,
            },
            "card": {"token": card_token, "last_four": "0000", "memo": "", "spend_limit": 0,
                     "spend_limit_duration": "TRANSACTION", "state": "OPEN", "type": "VIRTUAL"},
        })
        .to_string();
        let id = uuid();
        let ts = chrono::Utc::now().timestamp();
        let signature = sign(&self.inner.asa_secret, &id, ts, &body)?;
        Ok(http
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", ts.to_string())
            .header("webhook-signature", signature)
            .body(body))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = uri.path();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let mut b = lock(&inner.books);
    let (status, answer) = match (method.as_str(), segments.as_slice()) {
        ("GET", ["v1", "responder_endpoints"]) => (
            200,
            json!({"enrolled": b.asa_url.is_some(), "url": b.asa_url}),
        ),
        ("POST", ["v1", "responder_endpoints"]) => {
            b.asa_url = body["url"].as_str().map(str::to_owned);
            (200, json!({"enrolled": true}))
        }
        ("DELETE", ["v1", "responder_endpoints"]) => {
            b.asa_url = None;
            (200, json!({}))
        }
        ("GET", ["v1", "auth_stream", "secret"]) => (200, json!({"secret": inner.asa_secret})),
        ("GET", ["v1", "event_subscriptions"]) => {
            let data: Vec<Value> = b
                .subscription
                .iter()
                .map(|(token, url)| json!({"token": token, "url": url}))
                .collect();
            (200, json!({"data": data, "has_more": false}))
        }
        ("POST", ["v1", "event_subscriptions"]) | ("PATCH", ["v1", "event_subscriptions", _]) => {
            let token = b
                .subscription
                .as_ref()
                .map(|(t, _)| t.clone())
                .unwrap_or_else(|| format!("ep_{}", uuid().replace('-', "")));
            let url = body["url"].as_str().unwrap_or_default().to_owned();
            b.subscription = Some((token.clone(), url.clone()));
            (201, json!({"token": token, "url": url, "disabled": false}))
        }
        ("GET", ["v1", "event_subscriptions", _, "secret"]) => {
            (200, json!({"secret": inner.events_secret}))
        }
        ("GET", ["v1", "account_holders"]) => (200, json!({"data": [], "has_more": false})),
        ("POST", ["v1", "account_holders"]) => (
            200,
            json!({"token": uuid(), "account_token": uuid(), "status": "ACCEPTED",
                   "status_reasons": [], "created": "2026-01-01T00:00:00Z"}),
        ),
        ("POST", ["v1", "cards"]) => {
            let token = uuid();
            let n = inner.next.fetch_add(1, Ordering::Relaxed);
            if let Some(memo) = body["memo"].as_str() {
                b.cards.insert(memo.to_owned(), token.clone());
            }
            (
                200,
                json!({"token": token, "last_four": format!("{:04}", n % 10_000),
                       "exp_month": "01", "exp_year": "2031", "state": "OPEN", "type": "VIRTUAL"}),
            )
        }
        ("PATCH", ["v1", "cards", token]) => (
            200,
            json!({"token": token, "last_four": "0000", "exp_month": "01",
                   "exp_year": "2031", "state": body["state"]}),
        ),
        _ => (
            404,
            json!({"debugging_request_id": uuid(), "message": format!("{method} {path}: not in the bench's fake")}),
        ),
    };
    drop(b);
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, Json(answer)).into_response()
}
