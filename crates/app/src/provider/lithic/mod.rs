//! Lithic as a card provider (CONTRACT §14): a Lithic program issues the cards of a
//! `lithic` subprovider, and our ledger stays the only place that holds card funds.
//!
//! - `client.rs`: the REST API with bounded retries.
//! - `kyc.rs`: account holders (KYC_BASIC) for our cardholders, and their events.
//! - this file: cards (issue, freeze, unfreeze, close, details) behind `Provider`.
//! - `signature.rs`: Standard Webhooks signatures of what Lithic sends us.
//! - `inbound.rs`: what Lithic sends us, parsed (a bad message is never a 5xx).
//! - `asa.rs`: Authorization Stream Access, Lithic asking us to decide.
//! - `events.rs`: event deliveries (transactions, account holders).
//! - `disputes.rs`: disputes filed with Lithic, and its `dispute.updated` events.
//! - `admin.rs`: enrolment of the ASA responder and the event subscription.
//!
//! Topups and withdrawals move money in our ledger only: Lithic keeps no balance for a
//! card, it asks us (ASA) before every authorization.

pub mod admin;
pub mod asa;
mod client;
pub mod disputes;
pub mod events;
mod inbound;
pub mod kyc;
pub mod settlement;
pub mod signature;

pub use signature::Signed;

/// What we answer a message from Lithic: a status and a JSON body, as Lithic documents
/// them. The API turns it into its HTTP answer (`issuing-api`'s `routes/lithic.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

impl Reply {
    pub fn ok(body: Value) -> Reply {
        Reply { status: 200, body }
    }

    /// A refusal: `{"error": message}`.
    pub fn error(status: u16, message: &str) -> Reply {
        Reply {
            status,
            body: json!({ "error": message }),
        }
    }
}

use super::{CardSecrets, CreateCard, IssuedCard, Provider, ProviderError};
use crate::metrics::Metrics;
use crate::MasterKey;
use client::{CallError, Client, Retry};
use futures::future::BoxFuture;
use futures::FutureExt;
use issuing_domain::catalog::LithicSettings;
use issuing_store::{lithic as records, Store};
use issuing_wire::Amount;
use reqwest::Method;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What a Lithic provider needs from the server.
#[derive(Clone)]
pub struct Deps {
    pub store: Store,
    pub master: MasterKey,
    pub metrics: Arc<Metrics>,
}

/// Enrolment secrets are read from the database at most this often, so a new
/// enrolment (a rotated secret) reaches every process within this time.
const SECRETS_TTL: Duration = Duration::from_secs(5);

/// The two signing secrets of an enrolment, opened. Debug never prints them.
pub struct Secrets {
    asa: String,
    events: String,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(***)")
    }
}

type CachedSecrets = Option<(Instant, Option<Arc<Secrets>>)>;

pub struct LithicProvider {
    code: String,
    client: Client,
    deps: Deps,
    asa_budget: Duration,
    secrets: Mutex<CachedSecrets>,
}

impl LithicProvider {
    pub fn new(
        code: &str,
        settings: &LithicSettings,
        api_key: &str,
        deps: &Deps,
    ) -> anyhow::Result<LithicProvider> {
        Ok(LithicProvider {
            code: code.to_owned(),
            client: Client::new(code, &settings.base_url, api_key, deps.metrics.clone())?,
            deps: deps.clone(),
            asa_budget: Duration::from_millis(settings.asa_budget_ms),
            secrets: Mutex::new(None),
        })
    }

    pub fn code(&self) -> &str {
        &self.code
    }

    /// The enrolment's signing secrets; None when the subprovider is not enrolled (then
    /// nothing Lithic sends can be verified, and all of it is refused).
    async fn secrets(&self) -> Result<Option<Arc<Secrets>>, issuing_store::StoreError> {
        {
            let cached = self.secrets.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some((at, secrets)) = cached.as_ref() {
                if at.elapsed() < SECRETS_TTL {
                    return Ok(secrets.clone());
                }
            }
        }
        let read = async {
            let mut conn = self.deps.store.conn().await?;
            records::enrolment(&mut conn, &self.code).await
        };
        let enrolment = match read.await {
            Ok(enrolment) => enrolment,
            // While the database is unavailable the last secrets read still verify
            // Lithic's messages, so an ASA request is declined within its budget
            // rather than refused unverified.
            Err(e) if e.is_unavailable() => {
                let cached = self.secrets.lock().unwrap_or_else(PoisonError::into_inner);
                match cached.as_ref() {
                    Some((_, secrets)) => return Ok(secrets.clone()),
                    None => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        let open = |sealed: &str| {
            self.deps
                .master
                .open(sealed)
                .and_then(|b| String::from_utf8(b).ok())
        };
        let secrets = match enrolment {
            None => None,
            Some(e) => match (open(&e.asa_secret_enc), open(&e.events_secret_enc)) {
                (Some(asa), Some(events)) => Some(Arc::new(Secrets { asa, events })),
                _ => {
                    tracing::error!(subprovider = %self.code, "the Lithic enrolment's secrets cannot be opened with the master key");
                    None
                }
            },
        };
        *self.secrets.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((Instant::now(), secrets.clone()));
        Ok(secrets)
    }

    /// A card-details embed session (CONTRACT §16): `POST /v1/cards/{token}/embed` for
    /// `target_origin`, ending at `expiration` (Unix seconds, at most 10 minutes away),
    /// and Lithic's own pages of it (`GET /v1/embed`, one per detail). The session is a
    /// credential for the cardholder's browser: it is neither stored nor logged.
    pub async fn embed_session(
        &self,
        card_token: &str,
        target_origin: &str,
        expiration: i64,
    ) -> Result<issuing_wire::api::RevealUrls, ProviderError> {
        let answer = self
            .client
            .call(
                "create_embed_session",
                Method::POST,
                &format!("/v1/cards/{}/embed", path_segment(card_token)),
                Some(&json!({
                    "type": "CARD_EMBED",
                    "target_origin": target_origin,
                    "expiration": expiration,
                })),
                None,
                // A repeat makes another session; the first is never handed out.
                Retry::Transient,
            )
            .await?;
        let session = answer
            .get("session")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| {
                ProviderError::Transient("Lithic's embed answer has no session".into())
            })?;
        let page = |kind: &str| self.client.embed_url(session, kind);
        Ok(issuing_wire::api::RevealUrls {
            pan: page("PAN"),
            cvv: page("CVV"),
            exp_month: page("EXP_MONTH"),
            exp_year: page("EXP_YEAR"),
        })
    }

    async fn set_state(&self, card_token: &str, state: &str) -> Result<Value, CallError> {
        let op = match state {
            "PAUSED" => "pause_card",
            "OPEN" => "open_card",
            _ => "close_card",
        };
        self.client
            .call(
                op,
                Method::PATCH,
                &format!("/v1/cards/{}", path_segment(card_token)),
                Some(&json!({ "state": state })),
                None,
                Retry::Transient,
            )
            .await
    }
}

/// Which signing secret a message is checked with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// The ASA secret (`GET /v1/auth_stream/secret`).
    Asa,
    /// The event subscription's secret.
    Events,
}

/// A signed message from Lithic for `code`, checked: the subprovider's provider, or the
/// refusal to answer. Nothing is changed before this passes; the body is read after it
/// (`inbound::body`), so nothing unsigned is parsed.
pub async fn verified(
    state: &crate::App,
    code: &str,
    signed: &Signed<'_>,
    body: &[u8],
    which: Which,
) -> Result<Arc<LithicProvider>, Reply> {
    let Some(lithic) = state.providers.lithic(code).cloned() else {
        return Err(Reply::error(404, "no lithic subprovider has this code"));
    };
    let secrets = lithic.secrets().await.map_err(|e| {
        tracing::error!(subprovider = %code, error = %e, "cannot read the Lithic enrolment");
        if e.is_unavailable() {
            Reply::error(503, "the database is unavailable")
        } else {
            Reply::error(500, "internal error")
        }
    })?;
    let Some(secrets) = secrets else {
        tracing::warn!(subprovider = %code, "a message from Lithic before `issuing admin provider enroll`: refused");
        return Err(Reply::error(401, "not enrolled: nothing can be verified"));
    };
    let secret = match which {
        Which::Asa => &secrets.asa,
        Which::Events => &secrets.events,
    };
    let now_secs = issuing_domain::time::now_micros() / 1_000_000;
    if let Err(e) = signature::verify(secret, signed, body, now_secs) {
        tracing::warn!(subprovider = %code, reason = %e, "unsigned or badly signed message refused");
        return Err(Reply::error(401, "invalid signature"));
    }
    Ok(lithic)
}

/// A token from Lithic or our records as one path segment: Lithic's tokens are UUIDs,
/// and anything else is refused before it can change the path.
fn path_segment(token: &str) -> &str {
    if !token.is_empty()
        && token.len() <= 64
        && token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        token
    } else {
        "invalid-token"
    }
}

/// `"07"` / `"2031"` (Lithic's strings) as numbers.
fn number_field(card: &Value, field: &str) -> Option<i64> {
    card.get(field)?.as_str()?.trim().parse().ok()
}

/// The card of a `pci_card_response` as issued: token, last four, expiry.
fn issued_card(card: &Value) -> Result<IssuedCard, ProviderError> {
    let malformed =
        |what: &str| ProviderError::Transient(format!("Lithic's card answer has no {what}"));
    let token = card
        .get("token")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("token"))?;
    let label = card
        .get("last_four")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("last_four"))?;
    Ok(IssuedCard {
        provider_card_id: token.to_owned(),
        label: label.to_owned(),
        expiry_month: number_field(card, "exp_month").ok_or_else(|| malformed("exp_month"))?,
        expiry_year: number_field(card, "exp_year").ok_or_else(|| malformed("exp_year"))?,
        // The card number stays with Lithic: cards/details reads it when asked.
        secrets: None,
        provider_status: card
            .get("state")
            .and_then(Value::as_str)
            .unwrap_or("OPEN")
            .to_owned(),
    })
}

impl Provider for LithicProvider {
    fn create_card<'a>(
        &'a self,
        req: CreateCard<'a>,
    ) -> BoxFuture<'a, Result<IssuedCard, ProviderError>> {
        async move {
            let holder = {
                let mut conn = self
                    .deps
                    .store
                    .conn()
                    .await
                    .map_err(|e| ProviderError::Transient(e.to_string()))?;
                records::holder_of_cardholder(&mut conn, req.project_id, req.cardholder_id)
                    .await
                    .map_err(|e| ProviderError::Transient(e.to_string()))?
            };
            let account_token = holder.and_then(|h| h.account_token).ok_or_else(|| {
                ProviderError::Rejected("the cardholder has no Lithic account holder".into())
            })?;
            // Our ledger holds the funds and ASA decides every authorization: no spend
            // limit at Lithic (0 = none), which would only decline what we approve.
            let body = json!({
                "type": "VIRTUAL",
                "state": "OPEN",
                "account_token": account_token,
                "memo": req.card_id,
                "spend_limit": 0,
            });
            let key = issuing_domain::lithic::card_idempotency_key(req.card_id);
            let card = self
                .client
                .call(
                    "create_card",
                    Method::POST,
                    "/v1/cards",
                    Some(&body),
                    Some(&key),
                    Retry::Transient,
                )
                .await?;
            issued_card(&card)
        }
        .boxed()
    }

    fn card_details<'a>(
        &'a self,
        provider_card_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CardSecrets>, ProviderError>> {
        async move {
            let card = self
                .client
                .get(
                    "get_card",
                    &format!("/v1/cards/{}", path_segment(provider_card_id)),
                )
                .await?;
            let text = |f: &str| card.get(f).and_then(Value::as_str).map(str::to_owned);
            // Lithic answers the number only to programs with PAN access (PCI).
            let (Some(pan), Some(cvv)) = (text("pan"), text("cvv")) else {
                return Ok(None);
            };
            Ok(Some(CardSecrets {
                pan,
                cvv,
                expiry_month: number_field(&card, "exp_month").unwrap_or_default(),
                expiry_year: number_field(&card, "exp_year").unwrap_or_default(),
            }))
        }
        .boxed()
    }

    fn set_frozen<'a>(
        &'a self,
        _idempotency_key: &'a str,
        provider_card_id: &'a str,
        frozen: bool,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        async move {
            // Setting a state is idempotent by itself.
            let state = if frozen { "PAUSED" } else { "OPEN" };
            self.set_state(provider_card_id, state).await?;
            Ok(())
        }
        .boxed()
    }

    fn close_card<'a>(
        &'a self,
        _idempotency_key: &'a str,
        provider_card_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        async move {
            match self.set_state(provider_card_id, "CLOSED").await {
                Ok(_) => Ok(()),
                // CLOSED is final: a retried close of a card closed by the first
                // attempt may be refused, and is done all the same.
                Err(e @ CallError::Refused { .. }) => {
                    let card = self
                        .client
                        .get(
                            "get_card",
                            &format!("/v1/cards/{}", path_segment(provider_card_id)),
                        )
                        .await?;
                    if card.get("state").and_then(Value::as_str) == Some("CLOSED") {
                        Ok(())
                    } else {
                        Err(e.into())
                    }
                }
                Err(e) => Err(e.into()),
            }
        }
        .boxed()
    }

    /// Card funds live in our ledger only; Lithic asks us before each authorization.
    fn topup<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Amount,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        futures::future::ready(Ok(())).boxed()
    }

    fn withdraw<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: Amount,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        futures::future::ready(Ok(())).boxed()
    }

    fn confirm_3ds<'a>(
        &'a self,
        _: &'a str,
        _: &'a str,
        _: &'a str,
        _: bool,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        futures::future::ready(Err(ProviderError::Rejected(
            "Lithic cards are not challenged through cards/3ds/confirm".into(),
        )))
        .boxed()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_issued_card() {
        let card = json!({
            "token": "7ef7d65c-9023-4da3-b113-3b8583fd7951",
            "last_four": "4142",
            "exp_month": "06",
            "exp_year": "2031",
            "state": "OPEN",
            "pan": "4111111289144142",
            "cvv": "776",
        });
        let issued = issued_card(&card).unwrap();
        assert_eq!(issued.label, "4142");
        assert_eq!((issued.expiry_month, issued.expiry_year), (6, 2031));
        assert_eq!(issued.secrets, None, "the PAN is never kept");
        assert!(issued_card(&json!({"token": "t"})).is_err());
    }

    #[test]
    fn tokens_stay_one_path_segment() {
        assert_eq!(path_segment("7ef7d65c-9023"), "7ef7d65c-9023");
        assert_eq!(path_segment("../v1/x"), "invalid-token");
        assert_eq!(path_segment("a?b=c"), "invalid-token");
        assert_eq!(path_segment(""), "invalid-token");
    }
}
