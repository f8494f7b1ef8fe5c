//! The sandbox card provider: issues Luhn-valid test cards, keeps its books in the
//! `sandbox_provider_ops` table (so retries after a crash are idempotent, as with a real
//! provider), and injects latency and failures on request.
//!
//! Decline triggers, so integrators can exercise the failure paths without configuring
//! anything (the provider answers "rejected", a final failure: the order fails with
//! `last_error_slug` `provider_error` and its money goes back where it came from):
//! - a topup or withdraw whose amount has the fractional part exactly `.66` (`12.66`,
//!   `100.660000`; not `12.665` or `12.06`), i.e. `amount_micros % 1_000_000 == 660_000`;
//! - card creation for a cardholder whose KYC `last_name` is `Decline` (case-sensitive):
//!   the provider sees the holder name `"<first_name> <last_name>"` and declines it when
//!   its last space-separated word is exactly `Decline` (`"Ada Decline"`, not
//!   `"Ada Declined"` or `"Ada decline"`).
//!
//! The triggers apply after the injected latency and transient failures, and before the
//! operation is recorded, so a declined call leaves no provider-side record.

use super::{CardSecrets, CreateCard, IssuedCard, Provider, ProviderError};
use crate::batch_writer::{picked, ApplyFn, BatchWriter, Queued, Shape, Wakeups};
use futures::future::BoxFuture;
use futures::FutureExt;
use issuing_domain::ids::new_id;
use issuing_domain::time::now_micros;
use issuing_store::{sandbox, Store};
use issuing_wire::Amount;
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

pub use crate::config::SandboxConfig;

pub struct SandboxProvider {
    config: SandboxConfig,
    transient_left: AtomicU32,
    /// The provider's books (`sandbox_provider_ops`), written a batch at a time: many
    /// orders' provider calls run at once, and each would otherwise be a transaction.
    books: BatchWriter<BookEntry, String>,
}

/// An operation for the books, under its idempotency key.
struct BookEntry {
    key: String,
    op: &'static str,
    card: String,
    amount: Option<i64>,
    now: i64,
}

/// A test BIN; every sandbox PAN starts with it.
const BIN: &str = "400000";
const CARD_LIFETIME_YEARS: i64 = 3;

/// The fractional part (in micro-units) that makes the sandbox decline a topup or withdraw.
pub const DECLINE_FRACTION_MICROS: i64 = 660_000;
/// The cardholder last name that makes the sandbox decline card creation.
pub const DECLINE_LAST_NAME: &str = "Decline";

/// Decline trigger for topups and withdraws: the amount ends in exactly `.66`.
pub fn declines_amount(amount: Amount) -> bool {
    amount.micros().rem_euclid(1_000_000) == DECLINE_FRACTION_MICROS
}

/// Decline trigger for card creation: the holder name's last word is exactly `Decline`.
/// The provider sees the holder as `"<first name> <last name>"`.
pub fn declines_holder(holder_name: &str) -> bool {
    holder_name
        .rsplit(' ')
        .next()
        .is_some_and(|last| last == DECLINE_LAST_NAME)
}

impl SandboxProvider {
    pub fn new(store: Store, config: SandboxConfig) -> Self {
        let transient_left = AtomicU32::new(config.transient_failures);
        let shape = Shape::of(store.backend(), 1);
        let apply: ApplyFn<BookEntry, String> = Arc::new(|mut conn, entries, only| {
            Box::pin(async move {
                let ops: Vec<sandbox::Op> = picked(&entries, only)
                    .into_iter()
                    .map(|e| sandbox::Op {
                        key: &e.key,
                        operation: e.op,
                        provider_card_id: &e.card,
                        amount: e.amount,
                        now: e.now,
                    })
                    .collect();
                let cards = sandbox::record_ops(&mut conn, &ops).await?;
                Ok((cards.into_iter().map(Ok).collect(), Queued::default()))
            })
        });
        SandboxProvider {
            config,
            transient_left,
            books: BatchWriter::start(store, "sandbox_books", shape, apply, Wakeups::default()),
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

    /// Records an operation under its key unless one holds it (a repeated call), and
    /// answers the provider card id of the first; durable before it answers.
    async fn record(
        &self,
        key: &str,
        op: &'static str,
        card: &str,
        amount: Option<i64>,
    ) -> Result<String, ProviderError> {
        let entry = BookEntry {
            key: key.to_owned(),
            op,
            card: card.to_owned(),
            amount,
            now: now_micros(),
        };
        self.books
            .submit(key, entry)
            .await
            .map_err(|e| ProviderError::Transient(e.message))
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
            if declines_holder(req.holder_name) {
                return Err(ProviderError::Rejected(format!(
                    "sandbox: card creation declined (holder last name \"{DECLINE_LAST_NAME}\")"
                )));
            }
            let candidate = format!("sbx_{}_{}", new_id(), now_micros());
            let provider_card_id = self
                .record(req.idempotency_key, "create_card", &candidate, None)
                .await?;
            let secrets = derive_secrets(&provider_card_id, card_issued_at(&provider_card_id));
            Ok(IssuedCard {
                label: secrets.label(),
                expiry_month: secrets.expiry_month,
                expiry_year: secrets.expiry_year,
                secrets: Some(secrets),
                provider_card_id,
                provider_status: "ACTIVE".into(),
            })
        }
        .boxed()
    }

    fn card_details<'a>(
        &'a self,
        provider_card_id: &'a str,
    ) -> BoxFuture<'a, Result<Option<CardSecrets>, ProviderError>> {
        async move {
            self.simulate_call().await?;
            Ok(Some(derive_secrets(
                provider_card_id,
                card_issued_at(provider_card_id),
            )))
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

    fn close_card<'a>(
        &'a self,
        key: &'a str,
        card: &'a str,
    ) -> BoxFuture<'a, Result<(), ProviderError>> {
        async move {
            self.simulate_call().await?;
            self.record(key, "close", card, None).await.map(|_| ())
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
            if declines_amount(amount) {
                return Err(ProviderError::Rejected(format!(
                    "sandbox: topup of {amount} declined (amounts ending in .66 are declined)"
                )));
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
            if declines_amount(amount) {
                return Err(ProviderError::Rejected(format!(
                    "sandbox: withdraw of {amount} declined (amounts ending in .66 are declined)"
                )));
            }
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn amt(s: &str) -> Amount {
        Amount::parse_decimal(s).unwrap()
    }

    #[test]
    fn amounts_ending_in_66_are_declined() {
        for a in ["12.66", "0.66", "100.660000", "5000.66", "10.66"] {
            assert!(declines_amount(amt(a)), "{a}");
        }
        for a in [
            "12.00",
            "12.6",
            "12.665",
            "12.06",
            "66.00",
            "12.660001",
            "12.659999",
            "0.066",
        ] {
            assert!(!declines_amount(amt(a)), "{a}");
        }
    }

    #[test]
    fn holders_named_decline_are_declined() {
        for n in [
            "Ada Decline",
            "Decline",
            "Ada Maria Decline",
            "Ada Van Decline",
        ] {
            assert!(declines_holder(n), "{n}");
        }
        for n in [
            "Ada Lovelace",
            "Decline Lovelace",
            "Ada decline",
            "Ada DECLINE",
            "Ada Declined",
            "Ada Decline ",
            "Ada Nodecline",
            "",
        ] {
            assert!(!declines_holder(n), "{n}");
        }
    }

    /// The provider itself, over a scratch SQLite database: declines are final
    /// (`Rejected`), record nothing, and leave other amounts and names alone.
    #[tokio::test]
    async fn provider_declines_by_trigger_and_records_nothing() {
        let path = std::env::temp_dir().join(format!("issuing-sandbox-{}.db", new_id()));
        let store = Store::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let p = SandboxProvider::new(store.clone(), SandboxConfig::default());
        let create = |key: &'static str, holder: &'static str| CreateCard {
            idempotency_key: key,
            project_id: "p",
            card_id: key,
            cardholder_id: "h",
            subprovider_code: "sandbox",
            product_code: "virtual_usd",
            card_currency: "USD",
            holder_name: holder,
        };
        let declined = p.create_card(create("c1", "Ada Decline")).await;
        assert!(
            matches!(&declined, Err(ProviderError::Rejected(m)) if m.contains("Decline")),
            "{declined:?}"
        );
        let card = p
            .create_card(create("c2", "Ada Lovelace"))
            .await
            .unwrap()
            .provider_card_id;

        let topup = p.topup("t1", &card, amt("12.66")).await;
        assert!(
            matches!(topup, Err(ProviderError::Rejected(_))),
            "{topup:?}"
        );
        p.topup("t2", &card, amt("12.65")).await.unwrap();
        let withdraw = p.withdraw("w1", &card, amt("3.66")).await;
        assert!(
            matches!(withdraw, Err(ProviderError::Rejected(_))),
            "{withdraw:?}"
        );
        p.withdraw("w2", &card, amt("3.67")).await.unwrap();
        // A retry of a declined call is declined again (the trigger is deterministic).
        assert!(p.topup("t1", &card, amt("12.66")).await.is_err());

        let mut conn = store.conn().await.unwrap();
        for (prefix, op, n) in [
            ("c", "create_card", 1),
            ("t", "topup", 1),
            ("w", "withdraw", 1),
        ] {
            let found = sandbox::count_ops(&mut conn, prefix, op).await.unwrap();
            assert_eq!(found, n, "{op}");
        }
        drop(conn);
        store.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    /// The decline triggers sit beside the configured injection, not instead of it.
    #[tokio::test]
    async fn injected_failures_still_apply() {
        let path = std::env::temp_dir().join(format!("issuing-sandbox-{}.db", new_id()));
        let store = Store::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let p = SandboxProvider::new(
            store.clone(),
            SandboxConfig {
                reject_topup: true,
                transient_failures: 1,
                ..Default::default()
            },
        );
        let first = p.topup("k", "sbx_x_0", amt("12.00")).await;
        assert!(
            matches!(first, Err(ProviderError::Transient(_))),
            "{first:?}"
        );
        let second = p.topup("k", "sbx_x_0", amt("12.00")).await;
        assert!(matches!(&second, Err(ProviderError::Rejected(m)) if m.contains("injected")));
        p.withdraw("w", "sbx_x_0", amt("12.00")).await.unwrap();
        store.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

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
