//! Keeps the database from growing without end (CONTRACT §13). Every pass:
//! - deactivates subscriptions whose every attempt has failed for
//!   `webhook_disable_after` (their next attempt would do it too; this catches those
//!   with nothing left to attempt);
//! - deletes replay-guard rows whose timestamps have left the acceptance window,
//!   idempotency keys past their 7 days, and reveal sessions a day after they expired
//!   (until then a used or expired link answers 410, after it 404);
//! - deletes reports (their files' chunks, then the reports and their links) 7 days
//!   after they were ready, and report download links a day after they expired;
//! - with a `retention`, deletes final webhook deliveries that completed longer ago, and
//!   events once none of their deliveries is left.
//!
//! Passes run every `cleanup_interval` (10 s). Each batch is one short transaction of at
//! most `batch_rows` rows, deleted through an index. On SQLite a batch holds the one
//! write lock, so it is small and the worker pauses between batches, letting the
//! requests' writers (queued in FIFO order in `Store::begin`) go first. A pass stops
//! after `PASS_BUDGET`; a backlog (the first pass over an old database, or a peak of
//! load) drains over the following passes, a second apart.

use crate::App;
use issuing_domain::time::now_micros;
use issuing_store::retention::{self, EventCursor};
use issuing_store::{
    idempotency, replay, reports, reveal_sessions, subscriptions, Backend, StoreError,
};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Longest one pass keeps deleting.
const PASS_BUDGET: Duration = Duration::from_secs(5);
/// Between batches on SQLite: the write lock goes to whoever is waiting for it.
const BREATHE: Duration = Duration::from_millis(5);
/// Between passes while a backlog is left.
const BACKLOG_PAUSE: Duration = Duration::from_secs(1);
/// How long an expired reveal session is kept: a link opened late still learns it was
/// used or expired (410) rather than unknown (404).
const REVEAL_SESSIONS_KEPT: i64 = 24 * 3600 * 1_000_000;
/// Chunks of a report's file deleted per transaction: each is up to 256 KiB, so few.
const REPORT_CHUNKS_BATCH: i64 = 16;
/// Subscriptions deactivated per pass, each in its own transaction.
const DEACTIVATE_BATCH: i64 = 100;

/// Rows per transaction. SQLite: 100 deliveries and their events are deleted and
/// committed in about 3 ms (measured on a 200,000-delivery database), the most a request
/// should wait behind a batch; 256 took 15 ms.
fn batch_rows(backend: Backend) -> i64 {
    match backend {
        Backend::Sqlite => 100,
        Backend::Postgres => 1_000,
    }
}

pub async fn run(state: App, mut shutdown: watch::Receiver<bool>) {
    let mut cursor: EventCursor = None;
    let mut pause = state.config.cleanup_interval;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => return,
        }
        pause = match pass(&state, &mut cursor, &shutdown).await {
            // A backlog is worked off at once, a pass after another.
            Ok(Backlog::Left) => BACKLOG_PAUSE.min(state.config.cleanup_interval),
            Ok(Backlog::None) => state.config.cleanup_interval,
            Err(e) => {
                tracing::warn!(error = %e, "cleanup pass failed; will retry");
                state.config.cleanup_interval
            }
        };
    }
}

/// Whether a pass left work for the next.
enum Backlog {
    None,
    Left,
}

/// What one batch deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Replay,
    Idempotency,
    RevealSessions,
    ReportLinks,
    Reports,
    Deliveries,
    UndeliveredEvents,
}

async fn pass(
    state: &App,
    cursor: &mut EventCursor,
    shutdown: &watch::Receiver<bool>,
) -> Result<Backlog, StoreError> {
    let deadline = Instant::now() + PASS_BUDGET;
    deactivate_failing(state).await?;
    let mut steps = vec![
        Step::Replay,
        Step::Idempotency,
        Step::RevealSessions,
        Step::ReportLinks,
        Step::Reports,
    ];
    if !state.config.retention.is_zero() {
        steps.extend([Step::Deliveries, Step::UndeliveredEvents]);
    }
    for step in steps {
        loop {
            if *shutdown.borrow() {
                return Ok(Backlog::None);
            }
            if Instant::now() >= deadline {
                return Ok(Backlog::Left);
            }
            let more = batch(state, step, cursor).await?;
            if !more {
                break;
            }
            if state.store.backend() == Backend::Sqlite {
                tokio::time::sleep(BREATHE).await;
            }
        }
    }
    Ok(Backlog::None)
}

/// One transaction of `step`; answers whether there is more to do.
async fn batch(state: &App, step: Step, cursor: &mut EventCursor) -> Result<bool, StoreError> {
    let n = batch_rows(state.store.backend());
    let now = now_micros();
    let retention = i64::try_from(state.config.retention.as_micros()).unwrap_or(i64::MAX);
    let cutoff = now.saturating_sub(retention);
    let mut tx = state.store.begin().await?;
    let (deleted, more, next): (Vec<(&str, u64)>, bool, EventCursor) = match step {
        Step::Replay => {
            let d = replay::purge_expired(&mut tx, now, n).await?;
            (vec![("replay_guard", d)], d as i64 >= n, None)
        }
        Step::Idempotency => {
            let d = idempotency::purge_expired(&mut tx, now, n).await?;
            (vec![("idempotency_keys", d)], d as i64 >= n, None)
        }
        Step::RevealSessions => {
            let before = now.saturating_sub(REVEAL_SESSIONS_KEPT);
            let d = reveal_sessions::purge_expired(&mut tx, before, n).await?;
            (vec![("reveal_sessions", d)], d as i64 >= n, None)
        }
        Step::ReportLinks => {
            let before = now.saturating_sub(REVEAL_SESSIONS_KEPT);
            let d = reports::purge_expired_tokens(&mut tx, before, n).await?;
            (vec![("report_tokens", d)], d as i64 >= n, None)
        }
        Step::Reports => {
            let (c, r) = reports::purge_expired(&mut tx, now, REPORT_CHUNKS_BATCH).await?;
            let deleted = vec![("report_chunks", c), ("reports", r)];
            (deleted, c + r > 0, None)
        }
        Step::Deliveries => {
            let (d, e) = retention::purge_final_deliveries(&mut tx, cutoff, n).await?;
            let deleted = vec![("webhook_deliveries", d), ("events", e)];
            (deleted, d as i64 >= n, None)
        }
        Step::UndeliveredEvents => {
            let (e, next) = retention::purge_undelivered_events(&mut tx, cutoff, cursor, n).await?;
            (vec![("events", e)], next.is_some(), next)
        }
    };
    tx.commit().await?;
    if step == Step::UndeliveredEvents {
        *cursor = next;
    }
    for (table, d) in deleted {
        state.metrics.upkeep.deleted(table, d);
    }
    Ok(more)
}

/// Subscriptions failing for longer than `webhook_disable_after` are deactivated as
/// `failing`, and their pending deliveries fail with them.
async fn deactivate_failing(state: &App) -> Result<(), StoreError> {
    let after = state.config.webhook_disable_after;
    if after.is_zero() {
        return Ok(());
    }
    let now = now_micros();
    let cutoff = now.saturating_sub(i64::try_from(after.as_micros()).unwrap_or(i64::MAX));
    let due = {
        let mut conn = state.store.conn().await?;
        subscriptions::failing_before(&mut conn, cutoff, DEACTIVATE_BATCH).await?
    };
    for (project_id, id) in due {
        let mut tx = state.store.begin().await?;
        // Unless an attempt succeeded since the query above.
        let done =
            subscriptions::deactivate_failing(&mut tx, &project_id, &id, cutoff, now).await?;
        tx.commit().await?;
        if done {
            state.metrics.upkeep.deactivated("failing");
            tracing::warn!(
                project_id = %project_id,
                subscription_id = %id,
                reason = subscriptions::FAILING,
                "webhook subscription deactivated; its pending deliveries failed"
            );
        }
    }
    Ok(())
}
