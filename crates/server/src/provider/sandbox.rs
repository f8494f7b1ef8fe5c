//! The sandbox card provider: issues Luhn-valid test cards, keeps its books in the
//! `sandbox_provider_ops` table (so retries after a crash are idempotent, as with a real
//! provider), and injects latency and failures on request.

use super::{CardSecrets, CreateCard, IssuedCard, Provider, ProviderError};
use futures::future::BoxFuture;
use futures::FutureExt;
use issuing_domain::ids::new_id;
use issuing_domain::time::now_micros;
use issuing_store::{sandbox, Store};
use issuing_wire::Amount;
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Failure injection and latency for tests and demos.
#[derive(Debug, Clone, Default)]
pub struct SandboxConfig {
    /// Added to every provider call.
    pub latency: Duration,
    /// Every card creation is rejected (tests the refund path).
    pub reject_card_create: bool,
    /// Every topup is rejected.
    pub reject_topup: bool,
    /// The first N calls of this process fail transiently (tests the retry path).
    pub transient_failures: u32,
}

pub struct SandboxProvider {
    store: Store,
    config: SandboxConfig,
    transient_left: AtomicU32,
}

/// A test BIN; every sandbox PAN starts with it.
const BIN: &str = "400000";
const CARD_LIFETIME_YEARS: i64 = 3;

impl SandboxProvider {
    pub fn new(store: Store, config: SandboxConfig) -> Self {
        let transient_left = AtomicU32::new(config.transient_failures);
        SandboxProvider {
            store,
            config,
            transient_left,
        }
    }

    async fn simulate_call(&self) -> Result<(), ProviderError> {
        if !self.config.latency.is_zero() {
            tokio::time::sleep(self.config.latency).await;
        }
        let took = self
            .transient_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if took {
            return Err(ProviderError::Transient(
                "sandbox: injected transient failure".into(),
            ));
        }
        Ok(())
    }

    async fn record(
        &self,
        key: &str,
        op: &str,
        card: &str,
        amount: Option<i64>,
    ) -> Result<String, ProviderError> {
        let mut conn = self
            .store
            .conn()
            .await
            .map_err(|e| ProviderError::Transient(e.to_string()))?;
        let (card, _, _) = sandbox::record_op(&mut conn, key, op, card, amount, now_micros())
            .await
            .map_err(|e| ProviderError::Transient(e.to_string()))?;
        Ok(card)
    }
}

/// Card credentials derived from the provider card id, so the sandbox can answer
/// `card_details` without storing a PAN anywhere.
pub fn derive_secrets(provider_card_id: &str, issued_at_micros: i64) -> CardSecrets {
    let digest = Sha256::digest(format!("issuing-sandbox-card:{provider_card_id}").as_bytes());
    let digits: String = digest.iter().map(|b| char::from(b'0' + b % 10)).collect();
    let body = format!("{BIN}{}", &digits[..9]);
    let pan = format!("{body}{}", luhn_check_digit(&body));
    let cvv = digits[9..12].to_owned();
    let issued = chrono::DateTime::from_timestamp_micros(issued_at_micros).unwrap_or_default();
    use chrono::Datelike;
    CardSecrets {
        pan,
        cvv,
        expiry_month: i64::from(issued.month()),
        expiry_year: i64::from(issued.year()) + CARD_LIFETIME_YEARS,
    }
}

pub fn luhn_check_digit(body: &str) -> u32 {
    let sum: u32 = body
        .chars()
        .rev()
        .filter_map(|c| c.to_digit(10))
        .enumerate()
        .map(|(i, d)| {
            if i % 2 == 0 {
                let x = d * 2;
                if x > 9 {
                    x - 9
                } else {
                    x
                }
            } else {
                d
            }
        })
        .sum();
    (10 - sum % 10) % 10
}

pub fn luhn_valid(number: &str) -> bool {
    number.len() >= 2
        && number.chars().all(|c| c.is_ascii_digit())
        && luhn_check_digit(&number[..number.len() - 1]).to_string() == number[number.len() - 1..]
}

/// Provider card ids encode their issue time so derived expiry dates stay stable.
fn card_issued_at(provider_card_id: &str) -> i64 {
    provider_card_id
        .rsplit('_')
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0)
}

impl Provider for SandboxProvider {
    fn create_card<'a>(
        &'a self,
        req: CreateCard<'a>,
    ) -> BoxFuture<'a, Result<IssuedCard, ProviderError>> {
        async move {
            self.simulate_call().await?;
            if self.config.reject_card_create {
                return Err(ProviderError::Rejected(
                    "sandbox: card creation rejected (injected)".into(),
                ));
            }
            let candidate = format!("sbx_{}_{}", new_id(), now_micros());
            let provider_card_id = self
                .record(req.idempotency_key, "create_card", &candidate, None)
                .await?;
            Ok(IssuedCard {
                secrets: derive_secrets(&provider_card_id, card_issued_at(&provider_card_id)),
                provider_card_id,
                provider_status: "ACTIVE".into(),
            })
        }
        .boxed()
    }

    fn card_details<'a>(
        &'a self,
        provider_card_id: &'a str,
    ) -> BoxFuture<'a, Result<CardSecrets, ProviderError>> {
        async move {
            self.simulate_call().await?;
            Ok(derive_secrets(
                provider_card_id,
                card_issued_at(provider_card_id),
            ))
        }
        .boxed()
    }

    fn set_frozen<'a>(
        &'a self,
        key: &'a str,
        card: &'a str,
        frozen: bool,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        async move {
            self.simulate_call().await?;
            let op = if frozen { "freeze" } else { "unfreeze" };
            self.record(key, op, card, None).await.map(|_| ())
        }
        .boxed()
    }

    fn topup<'a>(
        &'a self,
        key: &'a str,
        card: &'a str,
        amount: Amount,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        async move {
            self.simulate_call().await?;
            if self.config.reject_topup {
                return Err(ProviderError::Rejected(
                    "sandbox: topup rejected (injected)".into(),
                ));
            }
            self.record(key, "topup", card, Some(amount.micros()))
                .await
                .map(|_| ())
        }
        .boxed()
    }

    fn withdraw<'a>(
        &'a self,
        key: &'a str,
        card: &'a str,
        amount: Amount,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        async move {
            self.simulate_call().await?;
            self.record(key, "withdraw", card, Some(amount.micros()))
                .await
                .map(|_| ())
        }
        .boxed()
    }

    fn confirm_3ds<'a>(
        &'a self,
        key: &'a str,
        card: &'a str,
        _securement_id: &'a str,
        confirm: bool,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        async move {
            self.simulate_call().await?;
            let op = if confirm {
                "3ds_confirm"
            } else {
                "3ds_decline"
            };
            self.record(key, op, card, None).await.map(|_| ())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pans_pass_luhn_and_are_stable() {
        for i in 0..100 {
            let id = format!("sbx_{i}_1700000000000000");
            let s = derive_secrets(&id, card_issued_at(&id));
            assert!(luhn_valid(&s.pan), "{}", s.pan);
            assert_eq!(s.pan.len(), 16);
            assert!(s.pan.starts_with(BIN));
            assert_eq!(s.cvv.len(), 3);
            assert_eq!(s, derive_secrets(&id, card_issued_at(&id)));
            assert_eq!(s.expiry_year, 2023 + CARD_LIFETIME_YEARS);
        }
        assert!(luhn_valid("4111111111111111"));
        assert!(!luhn_valid("4111111111111112"));
        assert_eq!(format!("{:?}", derive_secrets("x", 0)), "CardSecrets(***)");
    }
}
