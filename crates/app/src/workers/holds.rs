//! Expires authorization holds that were never cleared (CONTRACT §9: `hold_expiry`,
//! default 7 days): each becomes an approved reversal with `failure_reason` `expired`
//! and its money returns to the card. Every process runs it; the release is
//! conditional on the hold still being open, so two processes never release one hold
//! twice. Bounded batches keep each pass short.
//!
//! The same pass resolves authorizations whose decision webhook was never answered in
//! the process that asked (it crashed): past their deadline and a margin, each is
//! decided by its stored `on_timeout` (`network::decision::recover`).

use crate::network::{decision, release};
use crate::App;
use issuing_domain::time::now_micros;
use issuing_store::card_txs;
use std::time::Duration;
use tokio::sync::watch;

const INTERVAL: Duration = Duration::from_secs(1);
const BATCH: i64 = 100;

pub async fn run(state: App, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(INTERVAL) => {}
            _ = shutdown.changed() => return,
        }
        match decision::recover(&state).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(resolved = n, "awaited decisions resolved by on_timeout"),
            Err(e) => tracing::warn!(error = %e, "could not resolve overdue decisions; will retry"),
        }
        let due = async {
            let mut conn = state.store.conn().await?;
            card_txs::expired_holds(&mut conn, now_micros(), BATCH).await
        };
        let due = match due.await {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(error = %e, "could not look for expired holds; will retry");
                continue;
            }
        };
        for stale in &due {
            if *shutdown.borrow() {
                return;
            }
            match release::expire(&state, stale).await {
                Ok(true) => {
                    tracing::info!(transaction_id = %stale.id, "authorization hold expired");
                    state.deliveries_wakeup.notify_one();
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(transaction_id = %stale.id, error = %e, "could not expire a hold; will retry")
                }
            }
        }
    }
}
