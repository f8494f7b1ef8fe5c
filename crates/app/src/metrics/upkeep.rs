//! What the cleanup worker does to keep the database from growing without end
//! (CONTRACT §13): rows deleted by retention, per table, and subscriptions deactivated
//! because their receivers kept failing or answered 410 Gone.

use super::text::Text;
use std::sync::atomic::{AtomicU64, Ordering};

/// Tables retention deletes from (`issuing_retention_deleted_rows_total{table}`).
pub const TABLES: [&str; 8] = [
    "webhook_deliveries",
    "events",
    "replay_guard",
    "idempotency_keys",
    "reveal_sessions",
    "report_tokens",
    "report_chunks",
    "reports",
];
/// Why subscriptions were deactivated by the server (not by wh/unsubscribe).
const REASONS: [&str; 2] = ["failing", "gone"];

#[derive(Default)]
pub struct UpkeepMetrics {
    deleted: [AtomicU64; TABLES.len()],
    deactivated: [AtomicU64; REASONS.len()],
}

impl UpkeepMetrics {
    /// `n` rows of `table` (one of `TABLES`) deleted.
    pub fn deleted(&self, table: &str, n: u64) {
        if let Some(i) = TABLES.iter().position(|t| *t == table) {
            self.deleted[i].fetch_add(n, Ordering::Relaxed);
        }
    }

    /// A subscription deactivated: `failing` or `gone`.
    pub fn deactivated(&self, reason: &str) {
        if let Some(i) = REASONS.iter().position(|r| *r == reason) {
            self.deactivated[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn render(&self, t: &mut Text) {
        t.family(
            "issuing_retention_deleted_rows_total",
            "counter",
            "Rows this process's cleanup deleted, by table: final webhook deliveries and their events past the retention, expired replay records and idempotency keys.",
        );
        for (i, table) in TABLES.iter().enumerate() {
            let n = self.deleted[i].load(Ordering::Relaxed);
            t.sample(
                "issuing_retention_deleted_rows_total",
                &[("table", table)],
                n,
            );
        }
        t.family(
            "issuing_webhook_subscriptions_deactivated_total",
            "counter",
            "Webhook subscriptions this process deactivated, by reason: failing (every attempt failed for webhook_disable_after), gone (the receiver answered 410).",
        );
        for (i, reason) in REASONS.iter().enumerate() {
            let n = self.deactivated[i].load(Ordering::Relaxed);
            t.sample(
                "issuing_webhook_subscriptions_deactivated_total",
                &[("reason", reason)],
                n,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_table_and_reason() {
        let m = UpkeepMetrics::default();
        m.deleted("events", 7);
        m.deleted("events", 3);
        m.deleted("no_such_table", 1);
        m.deactivated("failing");
        let mut t = Text::default();
        m.render(&mut t);
        let text = t.finish();
        for line in [
            "issuing_retention_deleted_rows_total{table=\"events\"} 10",
            "issuing_retention_deleted_rows_total{table=\"webhook_deliveries\"} 0",
            "issuing_retention_deleted_rows_total{table=\"idempotency_keys\"} 0",
            "issuing_webhook_subscriptions_deactivated_total{reason=\"failing\"} 1",
            "issuing_webhook_subscriptions_deactivated_total{reason=\"gone\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
    }
}
