//! The daily settlement reconciliation (CONTRACT §17): once a day per subprovider, the
//! previous UTC date is reconciled. Every process runs this worker; the row of
//! (subprovider, date) in `reconciliations` is the claim, so one process reconciles a
//! date once. A claim left `running` by a process that died is taken over after
//! `STALE`; a `failed` result (the provider could not be read) is tried again on the
//! next pass.

use crate::reconcile::{self, Sources};
use crate::{App, Mode};
use issuing_domain::catalog::ProviderKind;
use issuing_domain::time::{now_micros, utc_date};
use issuing_store::reconciliation;
use std::time::Duration;
use tokio::sync::watch;

/// Between passes: the previous date is reconciled within this of midnight UTC.
const PASS: Duration = Duration::from_secs(300);
/// The first pass, shortly after start.
const FIRST: Duration = Duration::from_secs(5);
/// A `running` claim older than this is taken over.
const STALE: i64 = 3600 * 1_000_000;
const DAY: i64 = 86_400 * 1_000_000;

pub async fn run(state: App, mut shutdown: watch::Receiver<bool>) {
    let mut pause = FIRST;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => return,
        }
        pause = PASS;
        pass(&state).await;
    }
}

/// The subprovider codes reconciled here: Lithic programs, and the sandbox provider's
/// subproviders in sandbox mode (in production it issues nothing).
fn codes(state: &App) -> Vec<String> {
    state
        .config
        .catalog
        .subproviders()
        .iter()
        .filter(|s| match s.kind {
            ProviderKind::Lithic(_) => true,
            ProviderKind::Sandbox => state.config.mode == Mode::Sandbox,
        })
        .map(|s| s.code.clone())
        .collect()
}

/// Reconciles yesterday (UTC) of each subprovider this process can claim.
pub async fn pass(state: &App) {
    let now = now_micros();
    let date = utc_date(now - DAY);
    for code in codes(state) {
        let claimed = match state.store.conn().await {
            Ok(mut conn) => reconciliation::claim(&mut conn, &code, &date, now, now - STALE).await,
            Err(e) => Err(e),
        };
        match claimed {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                tracing::warn!(subprovider = %code, error = %e, "reconciliation claim failed; will retry");
                continue;
            }
        }
        match reconcile::run(&Sources::of(state, &code), &code, &date).await {
            Ok(r) if r.status == "done" => {
                let breaks = r.missing_here + r.missing_there + r.amount_mismatch;
                if breaks > 0 {
                    tracing::warn!(subprovider = %code, date = %date, breaks, "settlement reconciliation found breaks");
                } else {
                    tracing::info!(subprovider = %code, date = %date, matched = r.matched_count, "settlement reconciliation: no breaks");
                }
            }
            Ok(r) => {
                tracing::warn!(subprovider = %code, date = %date, error = ?r.error, "settlement reconciliation failed; will retry");
            }
            Err(e) => {
                tracing::warn!(subprovider = %code, date = %date, error = %e, "settlement reconciliation failed; will retry after the claim goes stale");
            }
        }
    }
}
