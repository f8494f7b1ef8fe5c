//! The load loop: a fixed number of requests spread over a fixed number of workers, each
//! request timed on its own. Counts, not durations, bound a scenario so that the work
//! each one leaves behind (users, cards, holds) is known to the next.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What one scenario measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub requests: usize,
    pub errors: usize,
    pub elapsed: Duration,
    /// Sorted latencies of every request, errors included.
    pub latencies: Vec<Duration>,
    pub first_error: Option<String>,
}

impl Outcome {
    pub fn per_second(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs > 0.0 {
            self.requests as f64 / secs
        } else {
            0.0
        }
    }

    pub fn percentile(&self, p: f64) -> Duration {
        if self.latencies.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((self.latencies.len() as f64 - 1.0) * p).round() as usize;
        self.latencies[rank.min(self.latencies.len() - 1)]
    }
}

/// Runs `total` calls of `one(i)` for i in 0..total on `concurrency` workers.
pub async fn run<F, Fut>(total: usize, concurrency: usize, one: F) -> Outcome
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let one = Arc::new(one);
    let started = Instant::now();
    let mut workers = Vec::with_capacity(concurrency);
    for _ in 0..concurrency.max(1) {
        let next = next.clone();
        let one = one.clone();
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut errors = 0usize;
            let mut first_error = None;
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total {
                    break;
                }
                let t = Instant::now();
                let result = one(i).await;
                latencies.push(t.elapsed());
                if let Err(e) = result {
                    errors += 1;
                    first_error.get_or_insert(e);
                }
            }
            (latencies, errors, first_error)
        }));
    }
    let mut outcome = Outcome {
        requests: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        latencies: Vec::with_capacity(total),
        first_error: None,
    };
    for w in workers {
        match w.await {
            Ok((latencies, errors, first_error)) => {
                outcome.latencies.extend(latencies);
                outcome.errors += errors;
                if outcome.first_error.is_none() {
                    outcome.first_error = first_error;
                }
            }
            Err(e) => {
                outcome.errors += 1;
                outcome
                    .first_error
                    .get_or_insert(format!("worker panicked: {e}"));
            }
        }
    }
    outcome.elapsed = started.elapsed();
    outcome.requests = outcome.latencies.len();
    outcome.latencies.sort_unstable();
    outcome
}
