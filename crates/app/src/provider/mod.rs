//! The card provider interface. A real provider adapter implements `Provider`; the
//! sandbox implements it over its own records, Lithic (`lithic/`) over Lithic's API.
//! Every call carries an idempotency key derived from the order id, so a worker that
//! crashed mid-call and retries gets the first call's result instead of a second card or
//! a second topup. Each subprovider of the catalog has its provider (`Providers`).

pub mod lithic;
pub mod sandbox;
pub mod unconfigured;

use futures::future::BoxFuture;
use issuing_domain::catalog::{Catalog, ProviderKind};
use issuing_wire::Amount;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A provider call that takes longer counts as a transient failure. Shorter than the
/// order worker's lease, so a slow call can never let a second worker take the order.
pub const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);

/// Bounds a provider call by `PROVIDER_TIMEOUT`.
pub async fn bounded<T>(
    call: impl std::future::Future<Output = Result<T, ProviderError>>,
) -> Result<T, ProviderError> {
    tokio::time::timeout(PROVIDER_TIMEOUT, call)
        .await
        .unwrap_or_else(|_| Err(ProviderError::Transient("provider call timed out".into())))
}

/// A synchronous provider call that failed, as the request's answer (CONTRACT §4: 500
/// `provider_error`); the cause is logged with the card and what was asked.
pub fn failed_call(card_id: &str, action: &str, e: &ProviderError) -> issuing_wire::ApiError {
    tracing::warn!(card_id, action, error = %e, "provider call failed");
    issuing_wire::ApiError::new(
        issuing_wire::ErrorSlug::ProviderError,
        format!("Card provider error: {e}"),
    )
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// Worth retrying (timeouts, provider overload).
    #[error("provider temporarily unavailable: {0}")]
    Transient(String),
    /// Final: retrying the same call cannot succeed.
    #[error("provider rejected the request: {0}")]
    Rejected(String),
}

pub struct CreateCard<'a> {
    pub idempotency_key: &'a str,
    pub project_id: &'a str,
    /// Our card's id (Lithic derives its `Idempotency-Key` from it).
    pub card_id: &'a str,
    pub cardholder_id: &'a str,
    pub subprovider_code: &'a str,
    pub product_code: &'a str,
    pub card_currency: &'a str,
    pub holder_name: &'a str,
}

/// Card credentials. Debug never prints them.
#[derive(Clone, PartialEq, Eq)]
pub struct CardSecrets {
    pub pan: String,
    pub cvv: String,
    pub expiry_month: i64,
    pub expiry_year: i64,
}

impl fmt::Debug for CardSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CardSecrets(***)")
    }
}

impl CardSecrets {
    pub fn label(&self) -> String {
        self.pan
            .chars()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCard {
    pub provider_card_id: String,
    /// The last 4 digits of the card number.
    pub label: String,
    pub expiry_month: i64,
    pub expiry_year: i64,
    /// Kept sealed when given; None when the provider keeps the card number and
    /// `card_details` asks for it each time (Lithic).
    pub secrets: Option<CardSecrets>,
    /// The provider's own status string, shown as `provider_card_status`.
    pub provider_status: String,
}

pub trait Provider: Send + Sync {
    fn create_card<'a>(
        &'a self,
        req: CreateCard<'a>,
    ) -> BoxFuture<'a, Result<IssuedCard, ProviderError>>;
    /// None when the provider does not give this program the card number (a Lithic
    /// program without PAN access): `card_details_plaintext_unavailable`.
    fn card_details<'a>(
        &'a self,
        provider_card_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CardSecrets>, ProviderError>>;
    fn set_frozen<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_card_id: &'a str,
        frozen: bool,
    ) -> BoxFuture<'a, Result<(), ProviderError>>;
    /// Closes the card for good: the network declines it from then on.
    fn close_card<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_card_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ProviderError>>;
    fn topup<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_card_id: &'a str,
        amount: Amount,
    ) -> BoxFuture<'a, Result<(), ProviderError>>;
    fn withdraw<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_card_id: &'a str,
        amount: Amount,
    ) -> BoxFuture<'a, Result<(), ProviderError>>;
    fn confirm_3ds<'a>(
        &'a self,
        idempotency_key: &'a str,
        provider_card_id: &'a str,
        securement_id: &'a str,
        confirm: bool,
    ) -> BoxFuture<'a, Result<(), ProviderError>>;
}

/// The provider of each subprovider: its Lithic program for a `lithic` subprovider, the
/// built-in one (the sandbox, or in production the refusing `UnconfiguredProvider`) for
/// the others.
pub struct Providers {
    builtin: Arc<dyn Provider>,
    lithic: BTreeMap<String, Arc<lithic::LithicProvider>>,
}

impl Providers {
    /// Every `lithic` subprovider needs its API key in `keys`.
    pub fn new(
        builtin: Arc<dyn Provider>,
        catalog: &Catalog,
        keys: &crate::config::ProviderKeys,
        deps: &lithic::Deps,
    ) -> anyhow::Result<Providers> {
        let mut by_code = BTreeMap::new();
        for s in catalog.subproviders() {
            if let ProviderKind::Lithic(settings) = &s.kind {
                let key = keys.get(&s.code).ok_or_else(|| {
                    anyhow::anyhow!(
                        "subprovider {} (lithic): its API key is missing; set {}",
                        s.code,
                        settings.api_key_env
                    )
                })?;
                let provider = lithic::LithicProvider::new(&s.code, settings, key, deps)?;
                by_code.insert(s.code.clone(), Arc::new(provider));
            }
        }
        Ok(Providers {
            builtin,
            lithic: by_code,
        })
    }

    /// The provider of cards of `subprovider_code`.
    pub fn get(&self, subprovider_code: &str) -> &dyn Provider {
        match self.lithic.get(subprovider_code) {
            Some(p) => p.as_ref(),
            None => self.builtin.as_ref(),
        }
    }

    /// The Lithic program of a `lithic` subprovider.
    pub fn lithic(&self, subprovider_code: &str) -> Option<&Arc<lithic::LithicProvider>> {
        self.lithic.get(subprovider_code)
    }
}
