//! The chain watcher's counters: what it asked the API and how that went, what it did
//! with each transfer it saw, and whether it is keeping up (last success, backoff).

use super::text::Text;
use issuing_domain::chain_deposit::Ignored;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Outcomes of page requests (`issuing_chain_polls_total{outcome}`).
const POLL_OUTCOMES: [&str; 4] = ["ok", "rate_limited", "server_error", "error"];
/// What became of a transfer besides the reasons to ignore it.
const HANDLED: [&str; 3] = ["credited", "duplicate", "credited_by_operator"];
const TRANSFER_OUTCOMES: usize = HANDLED.len() + Ignored::ALL.len();

#[derive(Default)]
pub struct ChainMetrics {
    enabled: AtomicU64,
    polls: [AtomicU64; POLL_OUTCOMES.len()],
    transfers: [AtomicU64; TRANSFER_OUTCOMES],
    credited_micros: AtomicU64,
    last_success_secs: AtomicI64,
    backoff_secs: AtomicU64,
}

impl ChainMetrics {
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(u64::from(on), Ordering::Relaxed);
    }

    /// One page request, by outcome (`ok` or a `FetchError` label).
    pub fn poll(&self, outcome: &str) {
        let i = POLL_OUTCOMES
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or(POLL_OUTCOMES.len() - 1);
        self.polls[i].fetch_add(1, Ordering::Relaxed);
        if i == 0 {
            let now = issuing_domain::time::now_micros() / 1_000_000;
            self.last_success_secs.store(now, Ordering::Relaxed);
        }
    }

    /// A transfer credited now, of `micros` micro-USDT.
    pub fn credited(&self, micros: i64) {
        self.transfers[0].fetch_add(1, Ordering::Relaxed);
        self.credited_micros
            .fetch_add(u64::try_from(micros).unwrap_or(0), Ordering::Relaxed);
    }

    pub fn duplicate(&self) {
        self.transfers[1].fetch_add(1, Ordering::Relaxed);
    }

    pub fn credited_by_operator(&self) {
        self.transfers[2].fetch_add(1, Ordering::Relaxed);
    }

    pub fn ignored(&self, reason: Ignored) {
        let i = Ignored::ALL.iter().position(|r| *r == reason).unwrap_or(0);
        self.transfers[HANDLED.len() + i].fetch_add(1, Ordering::Relaxed);
    }

    pub fn set_backoff_secs(&self, secs: u64) {
        self.backoff_secs.store(secs, Ordering::Relaxed);
    }

    pub fn render(&self, t: &mut Text) {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        t.family(
            "issuing_chain_watcher_enabled",
            "gauge",
            "1 when this process runs the chain watcher (ISSUING_TRON_API_URL is set).",
        );
        t.sample("issuing_chain_watcher_enabled", &[], load(&self.enabled));
        t.family(
            "issuing_chain_polls_total",
            "counter",
            "Page requests to the TronGrid-compatible API, by outcome: ok, rate_limited (429), server_error (5xx), error.",
        );
        for (i, outcome) in POLL_OUTCOMES.iter().enumerate() {
            t.sample(
                "issuing_chain_polls_total",
                &[("outcome", outcome)],
                load(&self.polls[i]),
            );
        }
        t.family(
            "issuing_chain_transfers_total",
            "counter",
            "TRC20 transfers seen at deposit addresses, by what became of them: credited, duplicate (credited before), credited_by_operator, or the reason they were ignored.",
        );
        let labels = HANDLED
            .iter()
            .copied()
            .chain(Ignored::ALL.iter().map(|r| r.as_str()));
        for (i, outcome) in labels.enumerate() {
            t.sample(
                "issuing_chain_transfers_total",
                &[("outcome", outcome)],
                load(&self.transfers[i]),
            );
        }
        t.family(
            "issuing_chain_credited_micro_usdt_total",
            "counter",
            "Micro-USDT credited to master balances by this process's chain watcher.",
        );
        t.sample(
            "issuing_chain_credited_micro_usdt_total",
            &[],
            load(&self.credited_micros),
        );
        t.family(
            "issuing_chain_last_success_timestamp_seconds",
            "gauge",
            "Unix time of the last page the API answered; 0 before the first.",
        );
        t.sample(
            "issuing_chain_last_success_timestamp_seconds",
            &[],
            self.last_success_secs.load(Ordering::Relaxed),
        );
        t.family(
            "issuing_chain_backoff_seconds",
            "gauge",
            "How long the watcher is waiting after 429s, 5xx or failed requests; 0 when not backing off.",
        );
        t.sample(
            "issuing_chain_backoff_seconds",
            &[],
            load(&self.backoff_secs),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_outcome() {
        let m = ChainMetrics::default();
        m.set_enabled(true);
        m.poll("ok");
        m.poll("rate_limited");
        m.credited(2_500_000);
        m.ignored(Ignored::BelowMinimum);
        m.duplicate();
        let mut t = Text::default();
        m.render(&mut t);
        let text = t.finish();
        for line in [
            "issuing_chain_watcher_enabled 1",
            "issuing_chain_polls_total{outcome=\"ok\"} 1",
            "issuing_chain_polls_total{outcome=\"rate_limited\"} 1",
            "issuing_chain_transfers_total{outcome=\"credited\"} 1",
            "issuing_chain_transfers_total{outcome=\"duplicate\"} 1",
            "issuing_chain_transfers_total{outcome=\"below_minimum\"} 1",
            "issuing_chain_transfers_total{outcome=\"outgoing\"} 0",
            "issuing_chain_credited_micro_usdt_total 2500000",
            "issuing_chain_backoff_seconds 0",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
    }
}
