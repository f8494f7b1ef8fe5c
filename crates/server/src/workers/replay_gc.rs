//! Deletes replay-guard rows whose timestamps have left the acceptance window.

use issuing_domain::time::now_micros;
use issuing_store::{replay, Store};
use std::time::Duration;
use tokio::sync::watch;

const INTERVAL: Duration = Duration::from_secs(10);
const BATCH: i64 = 5_000;

pub(crate) async fn run(store: Store, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(INTERVAL) => {}
            _ = shutdown.changed() => return,
        }
        let result = async {
            let mut conn = store.conn().await?;
            replay::purge_expired(&mut conn, now_micros(), BATCH).await
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "replay guard cleanup failed; will retry");
        }
    }
}
