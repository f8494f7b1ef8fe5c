//! Prometheus metrics of the core, served with the API's own by `GET /metrics` on their
//! own listener (`metrics_listen`; `issuing-api`'s `metrics/`).
//!
//! What happens in this process (webhook attempts, provider calls, the chain watcher) is
//! counted in memory as it happens; what lives in the database (orders, queue depths) is counted by the
//! database when scraped, at most once a second and within a time limit. Every label
//! has a bounded set of values: HTTP endpoints are route paths, never raw request paths.
//! The metric names and labels are listed in docs/operations.md, "Metrics and logs".

mod chain;
mod db;
mod provider;
pub mod text;
mod upkeep;

use issuing_store::group_commit::Stats as GroupCommitStats;
use issuing_store::stats::{DeliveryQueue, OrderCount, PoolStats};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use text::Text;

/// Upper bounds of the latency histogram's buckets, in seconds.
pub const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Outcomes of webhook attempts (`issuing_webhook_attempts_total{outcome}`).
const WEBHOOK_OUTCOMES: [&str; 3] = ["succeeded", "failed", "retry"];

/// The process's metrics. One per running server.
#[derive(Default)]
pub struct Metrics {
    webhook_attempts: [AtomicU64; 3],
    /// The chain watcher's counters.
    pub chain: chain::ChainMetrics,
    /// Retention and subscription deactivation counters.
    pub upkeep: upkeep::UpkeepMetrics,
    /// The card provider's counters (Lithic).
    pub provider: provider::ProviderMetrics,
    /// The last database counts and when they were taken; one collection at a time.
    db: tokio::sync::Mutex<Option<(Instant, Option<DbStats>)>>,
}

/// Counts read from the database at scrape time.
#[derive(Debug, Clone)]
pub struct DbStats {
    pub orders: Vec<OrderCount>,
    pub orders_due: i64,
    pub deliveries: DeliveryQueue,
    /// The latest finished settlement reconciliation of each subprovider.
    pub reconciliations: Vec<issuing_store::reconciliation::Reconciliation>,
}

impl Metrics {
    /// One webhook attempt sent, by the delivery state it led to: `succeeded`, `failed`,
    /// or `pending` (a retry is scheduled).
    pub fn webhook_attempt(&self, delivery_state: &str) {
        let i = match delivery_state {
            "succeeded" => 0,
            "pending" => 2,
            _ => 1,
        };
        self.webhook_attempts[i].fetch_add(1, Ordering::Relaxed);
    }

    /// `issuing_build_info`: the first family of a scrape.
    pub fn render_build_info(&self, t: &mut Text) {
        t.family(
            "issuing_build_info",
            "gauge",
            "Always 1; the version of the running server.",
        );
        t.sample(
            "issuing_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))],
            1u64,
        );
    }

    /// The core's families: in-process counters, the database counts (`None` when the
    /// database did not answer), the connection pool and the batch writers.
    pub fn render(
        &self,
        t: &mut Text,
        db: Option<&DbStats>,
        pool: PoolStats,
        writers: &[(&str, &GroupCommitStats)],
    ) {
        t.family(
            "issuing_webhook_attempts_total",
            "counter",
            "Webhook delivery attempts sent by this process, by outcome: succeeded, failed (given up), retry (another attempt is scheduled).",
        );
        for (i, outcome) in WEBHOOK_OUTCOMES.iter().enumerate() {
            let n = self.webhook_attempts[i].load(Ordering::Relaxed);
            t.sample("issuing_webhook_attempts_total", &[("outcome", outcome)], n);
        }
        self.chain.render(t);
        self.upkeep.render(t);
        self.provider.render(t);

        t.family(
            "issuing_db_up",
            "gauge",
            "1 when the database answered this scrape's count queries in time, else 0.",
        );
        t.sample("issuing_db_up", &[], u64::from(db.is_some()));
        if let Some(db) = db {
            render_db(t, db);
        }

        t.family(
            "issuing_db_pool_connections",
            "gauge",
            "Open connections of this process's database pool, by state: idle or in_use.",
        );
        t.sample(
            "issuing_db_pool_connections",
            &[("state", "idle")],
            pool.idle,
        );
        t.sample(
            "issuing_db_pool_connections",
            &[("state", "in_use")],
            pool.open.saturating_sub(pool.idle),
        );
        t.family(
            "issuing_db_pool_max_connections",
            "gauge",
            "The most connections this process's database pool opens.",
        );
        t.sample("issuing_db_pool_max_connections", &[], pool.max);
        t.family(
            "issuing_database_unavailable",
            "gauge",
            "1 while no database host answers (requests that need it answer 503 service_unavailable), else 0.",
        );
        t.sample(
            "issuing_database_unavailable",
            &[],
            u64::from(pool.unavailable),
        );
        t.family(
            "issuing_database_unavailable_total",
            "counter",
            "Times this process found no database host answering (outages, failovers) since it started.",
        );
        t.sample("issuing_database_unavailable_total", &[], pool.outages);
        render_writers(t, writers);
    }
}

/// One histogram's `_bucket` (cumulative), `_sum` and `_count` samples, labelled with
/// `label`; `buckets` are per bucket, the last one `+Inf`.
pub fn render_histogram(
    t: &mut Text,
    family: &str,
    label: (&str, &str),
    (buckets, sum, count): (&[u64; BUCKETS.len() + 1], f64, u64),
) {
    let mut cumulative = 0u64;
    for (i, n) in buckets.iter().enumerate() {
        cumulative += n;
        let le = BUCKETS.get(i).map_or("+Inf".to_owned(), |b| b.to_string());
        t.sample(
            &format!("{family}_bucket"),
            &[label, ("le", &le)],
            cumulative,
        );
    }
    t.sample(&format!("{family}_sum"), &[label], sum);
    t.sample(&format!("{family}_count"), &[label], count);
}

/// Group commit writers: operations per batch is how much they save.
fn render_writers(t: &mut Text, writers: &[(&str, &GroupCommitStats)]) {
    type Counter = fn(&GroupCommitStats) -> &AtomicU64;
    let families: [(&str, &str, Counter); 2] = [
        (
            "issuing_group_commit_batches_total",
            "Transactions the writers ran, by writer (master_moves, authorizations, decisions, webhook_outcomes).",
            |s| &s.batches,
        ),
        (
            "issuing_group_commit_operations_total",
            "Operations the group commit writers applied in those transactions, by writer.",
            |s| &s.operations,
        ),
    ];
    for (family, help, counter) in families {
        t.family(family, "counter", help);
        for (name, stats) in writers {
            let n = counter(stats).load(Ordering::Relaxed);
            t.sample(family, &[("writer", name)], n);
        }
    }
}

fn render_db(t: &mut Text, db: &DbStats) {
    t.family(
        "issuing_orders",
        "gauge",
        "Orders in the database, by type and status (all processes on this database).",
    );
    for o in &db.orders {
        t.sample(
            "issuing_orders",
            &[("type", &o.order_type), ("status", &o.status)],
            o.count,
        );
    }
    t.family(
        "issuing_orders_due",
        "gauge",
        "Orders due for a worker now and not being worked on: the order queue's backlog.",
    );
    t.sample("issuing_orders_due", &[], db.orders_due);
    t.family(
        "issuing_webhook_deliveries_pending",
        "gauge",
        "Webhook deliveries not yet delivered and still being tried.",
    );
    t.sample(
        "issuing_webhook_deliveries_pending",
        &[],
        db.deliveries.pending,
    );
    t.family(
        "issuing_webhook_deliveries_due",
        "gauge",
        "Pending webhook deliveries due now and not being attempted: the delivery queue's backlog.",
    );
    t.sample("issuing_webhook_deliveries_due", &[], db.deliveries.due);
    t.family(
        "issuing_webhook_deliveries_failed",
        "gauge",
        "Webhook deliveries given up on (they can be queued again with wh/redeliver).",
    );
    t.sample(
        "issuing_webhook_deliveries_failed",
        &[],
        db.deliveries.failed,
    );
    t.family(
        "issuing_reconciliation_breaks",
        "gauge",
        "Breaks of the latest finished settlement reconciliation of each subprovider, by kind: missing_here, missing_there, amount_mismatch.",
    );
    for r in &db.reconciliations {
        let code = r.subprovider_code.as_str();
        for (kind, n) in [
            ("missing_here", r.missing_here),
            ("missing_there", r.missing_there),
            ("amount_mismatch", r.amount_mismatch),
        ] {
            let n = u64::try_from(n).unwrap_or(0);
            t.sample(
                "issuing_reconciliation_breaks",
                &[("subprovider", code), ("kind", kind)],
                n,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool() -> PoolStats {
        PoolStats {
            open: 3,
            idle: 2,
            max: 8,
            unavailable: true,
            outages: 4,
        }
    }

    #[test]
    fn renders_the_core_families() {
        let m = Metrics::default();
        m.webhook_attempt("pending");
        let topups = GroupCommitStats::default();
        topups.batches.fetch_add(2, Ordering::Relaxed);
        topups.operations.fetch_add(9, Ordering::Relaxed);
        let mut t = Text::default();
        m.render_build_info(&mut t);
        m.render(&mut t, None, pool(), &[("topups", &topups)]);
        let text = t.finish();
        for line in [
            "issuing_webhook_attempts_total{outcome=\"retry\"} 1",
            "issuing_webhook_attempts_total{outcome=\"succeeded\"} 0",
            "issuing_db_up 0",
            "issuing_db_pool_connections{state=\"in_use\"} 1",
            "issuing_db_pool_max_connections 8",
            "issuing_database_unavailable 1",
            "issuing_database_unavailable_total 4",
            "issuing_group_commit_batches_total{writer=\"topups\"} 2",
            "issuing_group_commit_operations_total{writer=\"topups\"} 9",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
        assert!(text.starts_with("# HELP issuing_build_info"), "{text}");
        assert!(!text.contains("issuing_orders"), "{text}");
    }
}
