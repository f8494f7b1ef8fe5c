//! The card provider interface. A real provider adapter implements `Provider`; the
//! sandbox implements it over its own records. Every call carries an idempotency key
//! derived from the order id, so a worker that crashed mid-call and retries gets the
//! first call's result instead of a second card or a second topup.

pub mod sandbox;
pub mod unconfigured;

use futures::future::BoxFuture;
use issuing_wire::Amount;
use std::fmt;
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
pub(crate) fn failed_call(
    card_id: &str,
    action: &str,
    e: &ProviderError,
) -> issuing_wire::ApiError {
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
    pub secrets: CardSecrets,
    /// The provider's own status string, shown as `provider_card_status`.
    pub provider_status: String,
}

pub trait Provider: Send + Sync {
    fn create_card<'a>(
        &'a self,
        req: CreateCard<'a>,
    ) -> BoxFuture<'a, Result<IssuedCard, ProviderError>>;
    fn card_details<'a>(
        &'a self,
        provider_card_id: &'a str,
    ) -> BoxFuture<'a, Result<CardSecrets, ProviderError>>;
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
