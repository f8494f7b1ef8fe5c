//! The database counts of a scrape: read at most once a second, by one scrape at a time,
//! within a time limit.

use super::{DbStats, Metrics};
use issuing_domain::time::now_micros;
use issuing_store::{stats, Store, StoreError};
use std::time::{Duration, Instant};

/// The database counts of a scrape must arrive within this, or the scrape reports
/// `issuing_db_up 0` without them.
const DB_TIMEOUT: Duration = Duration::from_secs(2);
/// Scrapes closer together than this share one set of database counts.
const DB_MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Bound on (type, status) pairs reported by `issuing_orders`.
const MAX_ORDER_GROUPS: i64 = 100;

impl Metrics {
    /// The database counts, taken at most once per `DB_MIN_INTERVAL` and by one scrape at
    /// a time, so frequent or parallel scrapes do not multiply the load on the database.
    pub async fn db_stats(&self, store: &Store) -> Option<DbStats> {
        let mut cached = self.db.lock().await;
        if let Some((at, stats)) = cached.as_ref() {
            if at.elapsed() < DB_MIN_INTERVAL {
                return stats.clone();
            }
        }
        let stats = match tokio::time::timeout(DB_TIMEOUT, read_db(store)).await {
            Ok(Ok(s)) => Some(s),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "metrics: database counts failed");
                None
            }
            Err(_) => {
                tracing::warn!(
                    "metrics: database counts took longer than {DB_TIMEOUT:?}; left out"
                );
                None
            }
        };
        *cached = Some((Instant::now(), stats.clone()));
        stats
    }
}

async fn read_db(store: &Store) -> Result<DbStats, StoreError> {
    let mut conn = store.conn().await?;
    let now = now_micros();
    Ok(DbStats {
        orders: stats::orders_by_type_and_status(&mut conn, MAX_ORDER_GROUPS).await?,
        orders_due: stats::orders_due(&mut conn, now).await?,
        deliveries: stats::delivery_queue(&mut conn, now).await?,
        reconciliations: issuing_store::reconciliation::latest_done(&mut conn).await?,
    })
}
