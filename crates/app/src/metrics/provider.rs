//! The card provider's counters (Lithic): calls to its API by operation and outcome,
//! retries, ASA decisions (latency and answers) and transaction events. Every label has
//! a bounded set of values: operations and outcomes are names in the code, subprovider
//! codes come from the configured catalog.

use super::text::Text;
use super::BUCKETS;
use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

/// Far above (subprovider, operation, outcome) combinations that exist; past it new
/// series are dropped rather than growing without end.
const MAX_SERIES: usize = 1024;

type Key = (String, &'static str, &'static str);

#[derive(Default)]
struct Histogram {
    /// Per bucket (not cumulative); the last one is `+Inf`.
    buckets: [u64; BUCKETS.len() + 1],
    sum: f64,
    count: u64,
}

#[derive(Default)]
pub struct ProviderMetrics {
    calls: Mutex<BTreeMap<Key, u64>>,
    retries: Mutex<BTreeMap<Key, u64>>,
    asa_answers: Mutex<BTreeMap<Key, u64>>,
    asa_latency: Mutex<BTreeMap<String, Histogram>>,
    events: Mutex<BTreeMap<Key, u64>>,
}

fn bump(map: &Mutex<BTreeMap<Key, u64>>, key: Key) {
    let mut m = map.lock().unwrap_or_else(PoisonError::into_inner);
    if m.len() < MAX_SERIES || m.contains_key(&key) {
        *m.entry(key).or_default() += 1;
    }
}

impl ProviderMetrics {
    /// One attempt of an API call: `ok`, `refused`, `rate_limited`, `server_error` or
    /// `transport`.
    pub fn call(&self, subprovider: &str, op: &'static str, outcome: &'static str) {
        bump(&self.calls, (subprovider.to_owned(), op, outcome));
    }

    /// A retry of an API call, by the reason of the attempt before it.
    pub fn retry(&self, subprovider: &str, op: &'static str, reason: &'static str) {
        bump(&self.retries, (subprovider.to_owned(), op, reason));
    }

    /// One ASA request answered: its `status` kind and our `result`.
    pub fn asa(&self, subprovider: &str, kind: &'static str, result: &'static str, took: Duration) {
        bump(&self.asa_answers, (subprovider.to_owned(), kind, result));
        let mut h = self
            .asa_latency
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if h.len() >= MAX_SERIES && !h.contains_key(subprovider) {
            return;
        }
        let e = h.entry(subprovider.to_owned()).or_default();
        let secs = took.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|le| secs <= *le)
            .unwrap_or(BUCKETS.len());
        e.buckets[bucket] += 1;
        e.sum += secs;
        e.count += 1;
    }

    /// One transaction event handled: `applied`, `ignored`, `duplicate`, `failed` or
    /// `malformed` (a whole delivery).
    pub fn event(&self, subprovider: &str, event_type: &'static str, outcome: &'static str) {
        bump(&self.events, (subprovider.to_owned(), event_type, outcome));
    }

    pub fn render(&self, t: &mut Text) {
        let series = [
            (
                "issuing_provider_calls_total",
                "Attempts of calls to the card provider's API (Lithic), by subprovider, operation and outcome: ok, refused (a final 4xx), rate_limited (429), server_error (5xx, 408, 409), transport.",
                &self.calls,
                ["subprovider", "operation", "outcome"],
            ),
            (
                "issuing_provider_retries_total",
                "Retries of calls to the card provider's API, by subprovider, operation and the reason of the failed attempt.",
                &self.retries,
                ["subprovider", "operation", "reason"],
            ),
            (
                "issuing_provider_asa_answers_total",
                "Authorization Stream Access requests answered, by subprovider, request status (authorization, financial_authorization, balance_inquiry, credit, malformed: a request we could not read, declined) and result (APPROVED or the declining result).",
                &self.asa_answers,
                ["subprovider", "status", "result"],
            ),
            (
                "issuing_provider_events_total",
                "Provider transaction events handled, by subprovider, event type and outcome: applied, ignored, duplicate (seen before), failed (answered 500 so that the provider sends it again), malformed (a delivery we could not read, acknowledged and not applied; type OTHER).",
                &self.events,
                ["subprovider", "type", "outcome"],
            ),
        ];
        for (family, help, map, labels) in series {
            t.family(family, "counter", help);
            let m = map.lock().unwrap_or_else(PoisonError::into_inner);
            for ((sub, a, b), n) in m.iter() {
                t.sample(
                    family,
                    &[(labels[0], sub), (labels[1], a), (labels[2], b)],
                    *n,
                );
            }
        }
        t.family(
            "issuing_provider_asa_duration_seconds",
            "histogram",
            "Time from receiving an ASA request to answering it, by subprovider.",
        );
        let h = self
            .asa_latency
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (sub, e) in h.iter() {
            super::render_histogram(
                t,
                "issuing_provider_asa_duration_seconds",
                ("subprovider", sub),
                (&e.buckets, e.sum, e.count),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_provider_series() {
        let m = ProviderMetrics::default();
        m.call("lithic_us", "create_card", "rate_limited");
        m.call("lithic_us", "create_card", "ok");
        m.retry("lithic_us", "create_card", "rate_limited");
        m.asa(
            "lithic_us",
            "authorization",
            "APPROVED",
            Duration::from_millis(7),
        );
        m.event("lithic_us", "CLEARING", "applied");
        let mut t = Text::default();
        m.render(&mut t);
        let text = t.finish();
        for line in [
            "issuing_provider_calls_total{subprovider=\"lithic_us\",operation=\"create_card\",outcome=\"ok\"} 1",
            "issuing_provider_retries_total{subprovider=\"lithic_us\",operation=\"create_card\",reason=\"rate_limited\"} 1",
            "issuing_provider_asa_answers_total{subprovider=\"lithic_us\",status=\"authorization\",result=\"APPROVED\"} 1",
            "issuing_provider_asa_duration_seconds_bucket{subprovider=\"lithic_us\",le=\"0.01\"} 1",
            "issuing_provider_asa_duration_seconds_count{subprovider=\"lithic_us\"} 1",
            "issuing_provider_events_total{subprovider=\"lithic_us\",type=\"CLEARING\",outcome=\"applied\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line} in\n{text}");
        }
    }
}
