//! Deletes what has outlived its purpose: replay-guard rows whose timestamps have left
//! the acceptance window, and idempotency keys past their 7 days. Bounded batches keep
//! each pass short; a backlog drains over a few passes.

use crate::replay::ReplayGuard;
use issuing_domain::time::now_micros;
use issuing_store::{idempotency, replay, Store, StoreError};
use std::time::Duration;
use tokio::sync::watch;

const INTERVAL: Duration = Duration::from_secs(10);
const BATCH: i64 = 5_000;

pub(crate) async fn run(store: Store, guard: ReplayGuard, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(INTERVAL) => {}
            _ = shutdown.changed() => return,
        }
        guard.purge(now_micros());
        if let Err(e) = pass(&store).await {
            tracing::warn!(error = %e, "cleanup pass failed; will retry");
        }
    }
}

async fn pass(store: &Store) -> Result<(), StoreError> {
    let mut conn = store.conn().await?;
    let now = now_micros();
    replay::purge_expired(&mut conn, now, BATCH).await?;
    idempotency::purge_expired(&mut conn, now, BATCH).await?;
    Ok(())
}
