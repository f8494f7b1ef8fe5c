//! The webhook delivery worker: drains `webhook_deliveries`, at least once per delivery.
//!
//! One dispatcher per process claims due deliveries in batches (one statement, a lease
//! and a fresh token per batch) and runs each attempt as its own task. At most
//! `MAX_IN_FLIGHT` attempts run at once, and at most `PER_SUBSCRIPTION` to any one
//! subscription, so a slow or dead receiver holds a few slots and never the rest. The
//! lease outlasts the attempt's timeout, and an attempt that could no longer finish
//! inside its lease is not started, so two workers never send the same attempt at once.
//! A crashed worker's claims expire and are taken up again: nothing is lost, and a
//! receiver may see a delivery twice (it deduplicates by `delivery_id`).

use super::outcomes::{Attempted, Receiver, Recorded};
use crate::webhooks::{http, payload};
use crate::App;
use issuing_domain::time::now_micros;
use issuing_store::deliveries::{self, Claimed, Outcome, SendInfo};
use issuing_store::projects::ApiKeyRecord;
use issuing_store::writer::AsBatch;
use issuing_store::{projects, StoreError};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Semaphore};
use tokio::task::{Id, JoinSet};

/// Attempts in flight per process: each holds a socket and, briefly, a DB connection.
const MAX_IN_FLIGHT: usize = 256;
/// Attempts in flight per subscription and process: a slow or dead receiver holds at
/// most this many slots; a healthy one is sent this many at once. One receiver gets at
/// most this many divided by an attempt's round trip a second: at 16, with attempts
/// taking 5–10 ms on a loaded 2-core machine, deliveries to one receiver stalled near
/// 1,600/s and fell behind authorizations at half their capacity (docs/benchmarks.md).
const PER_SUBSCRIPTION: usize = 64;
const _: () = assert!(PER_SUBSCRIPTION < MAX_IN_FLIGHT);
/// An idle dispatcher looks for due retries at least this often.
const POLL: Duration = Duration::from_secs(1);
/// How much longer than the attempt timeout a claim is held: room for loading the event
/// and recording the outcome.
const LEASE_MARGIN: Duration = Duration::from_secs(5);
/// An attempt starts only if it can end this long before its lease does.
const START_SLACK: Duration = Duration::from_secs(2);
const _: () = assert!(START_SLACK.as_secs() < LEASE_MARGIN.as_secs());

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Runs until `shutdown`; attempts in flight then finish and record their outcome,
/// unless `hand_back` comes first: then they are cut off and their claims released, so
/// the next server sends them at once instead of when the leases run out.
pub async fn run(
    state: App,
    mut shutdown: watch::Receiver<bool>,
    mut hand_back: watch::Receiver<bool>,
) {
    let client = match http::client(
        state.config.mode,
        state.config.webhook_timeout,
        &state.config.webhook_allowed_networks,
    ) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the webhook HTTP client; no webhooks will be sent");
            return;
        }
    };
    let mut tasks: JoinSet<()> = JoinSet::new();
    let mut slots = Slots::default();
    let recording: Recording = Arc::new(Semaphore::new(RECORDING));
    // After a claim that found nothing, a wake-up first reads when the next delivery is
    // due: a claim is a write (on SQLite it takes the write lock), and most wake-ups of
    // an idle worker (every committed card transaction, say) find nothing to send.
    let mut idle = false;
    loop {
        while let Some(done) = tasks.try_join_next_with_id() {
            slots.done(task_id(done));
        }
        if *shutdown.borrow() {
            break;
        }
        let mut wait = POLL;
        if tasks.len() < MAX_IN_FLIGHT {
            let due = if idle {
                due_in(&state).await
            } else {
                Some(Duration::ZERO)
            };
            match due {
                Some(d) if d.is_zero() => {
                    let skip = slots.saturated();
                    let limit = slots.batch_limit(MAX_IN_FLIGHT - tasks.len());
                    match claim(&state, &skip, limit).await {
                        Ok(batch) if !batch.is_empty() => {
                            idle = false;
                            let mut prepared = match prepare(&state, &batch).await {
                                Ok(p) => p,
                                Err(e) => {
                                    // The claims expire and the deliveries are taken up again.
                                    tracing::warn!(error = %e, "could not read what claimed webhooks send");
                                    continue;
                                }
                            };
                            for claimed in batch {
                                let ready = Ready {
                                    info: prepared.infos.remove(&claimed.delivery.id),
                                    key: prepared
                                        .keys
                                        .get(&claimed.delivery.project_id)
                                        .cloned()
                                        .flatten(),
                                    claimed: claimed.clone(),
                                };
                                let handle = tasks.spawn(attempt(
                                    state.clone(),
                                    client.clone(),
                                    ready,
                                    recording.clone(),
                                ));
                                slots.add(handle.id(), claimed);
                            }
                            continue;
                        }
                        Ok(_) if skip.is_empty() => {
                            idle = true;
                            wait = idle_wait(due_in(&state).await);
                        }
                        Ok(_) => {}
                        Err(e) => tracing::warn!(error = %e, "could not claim webhook deliveries"),
                    }
                }
                other => wait = idle_wait(other),
            }
        }
        tokio::select! {
            _ = state.deliveries_wakeup.notified() => {}
            Some(done) = tasks.join_next_with_id(), if !tasks.is_empty() => slots.done(task_id(done)),
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => break,
        }
    }
    // Attempts in flight end within their timeout; let them record their outcome.
    loop {
        tokio::select! {
            done = tasks.join_next_with_id() => match done {
                Some(done) => slots.done(task_id(done)),
                None => return,
            },
            _ = hand_back.changed() => break,
        }
    }
    tasks.abort_all();
    while let Some(done) = tasks.join_next_with_id().await {
        slots.done(task_id(done));
    }
    let cut = slots.running.len();
    let mut released = 0usize;
    if let Ok(mut conn) = state.store.conn().await {
        for claimed in slots.running.values() {
            // An outcome recorded meanwhile released the claim already; this then
            // changes nothing.
            if deliveries::release(&mut conn, claimed).await.is_ok() {
                released += 1;
            }
        }
    }
    tracing::info!(
        cut,
        released,
        "stopping: webhook attempts in flight handed back"
    );
}

/// The claim each running attempt holds, and how many run per subscription.
#[derive(Default)]
struct Slots {
    running: HashMap<Id, Claimed>,
    per_sub: HashMap<String, usize>,
}

impl Slots {
    fn add(&mut self, id: Id, claimed: Claimed) {
        let sub = claimed.delivery.subscription_id.clone();
        *self.per_sub.entry(sub).or_default() += 1;
        self.running.insert(id, claimed);
    }

    fn done(&mut self, id: Id) {
        let Some(claimed) = self.running.remove(&id) else {
            return;
        };
        let sub = claimed.delivery.subscription_id;
        if let Some(n) = self.per_sub.get_mut(&sub) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_sub.remove(&sub);
            }
        }
    }

    /// How many deliveries the next claim may take: within the free slots, and small
    /// enough that even if all were for the busiest subscription not yet at its limit,
    /// it would not pass the limit.
    fn batch_limit(&self, free: usize) -> i64 {
        let busiest = self
            .per_sub
            .values()
            .copied()
            .filter(|n| *n < PER_SUBSCRIPTION)
            .max()
            .unwrap_or(0);
        let limit = free.min(PER_SUBSCRIPTION - busiest).max(1);
        i64::try_from(limit).unwrap_or(1)
    }

    /// Subscriptions at their limit: the next claim passes over them.
    fn saturated(&self) -> Vec<String> {
        self.per_sub
            .iter()
            .filter(|(_, n)| **n >= PER_SUBSCRIPTION)
            .map(|(s, _)| s.clone())
            .collect()
    }
}

fn task_id(done: Result<(Id, ()), tokio::task::JoinError>) -> Id {
    match done {
        Ok((id, ())) => id,
        Err(e) => {
            tracing::error!(error = %e, "a webhook attempt task failed");
            e.id()
        }
    }
}

/// How long until the next delivery can be claimed (zero: now; None: none is pending).
/// A read error counts as due now, so the claim that follows reports it.
async fn due_in(state: &App) -> Option<Duration> {
    let due = async {
        let mut conn = state.store.conn().await?;
        deliveries::next_due(&mut conn).await
    };
    match due.await {
        Ok(Some(at)) => Some(Duration::from_micros(
            u64::try_from(at.saturating_sub(now_micros())).unwrap_or(0),
        )),
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(error = %e, "could not read the next due delivery");
            Some(Duration::ZERO)
        }
    }
}

/// How long an idle worker sleeps when the next delivery is due in `due`.
fn idle_wait(due: Option<Duration>) -> Duration {
    match due {
        // A due delivery nobody could claim is another process's: look again soon.
        Some(d) => d.clamp(Duration::from_millis(50), POLL),
        None => POLL,
    }
}

/// Claims up to `limit` due deliveries in one write (on SQLite, on the batch writers'
/// thread, in turn with them). A claim lost in a crash is harmless (the deliveries are
/// due again), so it is not waited on to be durable.
async fn claim(state: &App, skip: &[String], limit: i64) -> Result<Vec<Claimed>, StoreError> {
    let now = now_micros();
    let lease = micros(state.config.webhook_timeout + LEASE_MARGIN);
    let skip = skip.to_vec();
    let (claimed, _durable) = state
        .store
        .write_batch(move |mut conn| {
            Box::pin(async move {
                conn.commit_without_flush().await?;
                deliveries::claim_due(&mut conn, now, now + lease, &skip, limit).await
            })
        })
        .await?;
    Ok(claimed)
}

/// What an attempt sends, read for a whole claimed batch at once: each delivery's event
/// and subscription, and each project's newest valid key (`api_keys_of` is newest
/// first: after a rotation, webhooks use the new key and secret at once, grace period
/// or not).
struct Prepared {
    infos: HashMap<String, SendInfo>,
    keys: HashMap<String, Option<ApiKeyRecord>>,
}

async fn prepare(state: &App, batch: &[Claimed]) -> Result<Prepared, StoreError> {
    let mut conn = state.store.conn().await?;
    let records: Vec<&deliveries::DeliveryRecord> = batch.iter().map(|c| &c.delivery).collect();
    let infos = deliveries::send_infos(&mut conn.as_batch(), &records).await?;
    let mut keys = HashMap::new();
    for c in batch {
        let project = &c.delivery.project_id;
        if !keys.contains_key(project) {
            let newest = projects::api_keys_of(&mut conn, project)
                .await?
                .into_iter()
                .next();
            keys.insert(project.clone(), newest);
        }
    }
    Ok(Prepared { infos, keys })
}

/// What one attempt needs: its claim, and what `prepare` read for it.
struct Ready {
    claimed: Claimed,
    info: Option<SendInfo>,
    key: Option<ApiKeyRecord>,
}

async fn attempt(state: App, client: reqwest::Client, ready: Ready, recording: Recording) {
    let id = ready.claimed.delivery.id.clone();
    if let Err(e) = deliver(&state, &client, ready, recording).await {
        // The claim expires and the attempt is made again.
        tracing::warn!(delivery_id = %id, error = %e, "webhook attempt could not be completed; will retry");
    }
}

async fn deliver(
    state: &App,
    client: &reqwest::Client,
    ready: Ready,
    recording: Recording,
) -> Result<(), StoreError> {
    let Ready { claimed, info, key } = ready;
    let d = &claimed.delivery;
    let Some(info) = info.filter(|i| i.subscription_active) else {
        let outcome = ended("subscription is inactive");
        return finish_later(state, claimed, outcome, Receiver::NotAsked, recording).await;
    };
    let Some(secret) = key
        .as_ref()
        .and_then(|k| state.master.open_secret(&k.secret_enc))
    else {
        // Nothing to seal with: the project has no usable key. Retried like any failure.
        tracing::error!(project_id = %d.project_id, "no usable API key to seal a webhook with");
        let outcome = retry_or_fail(state, d, None, "project has no usable API key".into());
        return finish_later(state, claimed, outcome, Receiver::NotAsked, recording).await;
    };
    let api_key = key.map(|k| k.api_key).unwrap_or_default();
    let deadline = claimed.locked_until - micros(START_SLACK);
    if now_micros() + micros(state.config.webhook_timeout) > deadline {
        let mut conn = state.store.conn().await?;
        return deliveries::release(&mut conn, &claimed).await;
    }
    let plain = payload::plaintext(&d.event_type, &d.project_id, &d.id, &info.payload);
    let sealed = issuing_envelope::seal(
        &issuing_envelope::Key::from_secret(secret.expose()),
        plain.to_string().as_bytes(),
    );
    let body = serde_json::json!({ "encrypted": sealed }).to_string();
    let result = http::send(
        client,
        state.config.mode,
        &state.config.webhook_allowed_networks,
        &info.url,
        &api_key,
        body,
    )
    .await;
    let status = result.status.map(i64::from);
    let outcome = match &result.error {
        None => Outcome {
            state: "succeeded",
            last_status: status,
            last_error: None,
            next_attempt_at: None,
        },
        Some(e) if result.gone() => Outcome {
            state: "failed",
            last_status: status,
            last_error: Some(format!("{e}; subscription deactivated")),
            next_attempt_at: None,
        },
        Some(e) => retry_or_fail(state, d, status, e.clone()),
    };
    tracing::debug!(delivery_id = %d.id, state = outcome.state, status = ?status, "webhook attempt");
    state.metrics.webhook_attempt(outcome.state);
    let receiver = match &result.error {
        None => Receiver::Succeeded,
        Some(_) if result.gone() => Receiver::Gone,
        Some(_) => Receiver::Failed,
    };
    finish_later(state, claimed, outcome, receiver, recording).await
}

/// Outcomes being recorded at once, per process: an attempt's slot is free once its
/// receiver answered, while its outcome waits for the outcome writer's next batch.
const RECORDING: usize = 4 * MAX_IN_FLIGHT;

/// The permits of `RECORDING`.
type Recording = Arc<Semaphore>;

/// Records the outcome in a task of its own, so the attempt's slot (and the
/// subscription's share of them) is free for the next delivery at once. Waits only
/// for a permit: when recording falls behind, attempts hold their slots again. The
/// claim stays leased until the outcome is written (a crash meanwhile sends the
/// delivery again: at least once).
async fn finish_later(
    state: &App,
    claimed: Claimed,
    outcome: Outcome,
    receiver: Receiver,
    recording: Recording,
) -> Result<(), StoreError> {
    let permit = recording
        .acquire_owned()
        .await
        .map_err(|_| StoreError::Batch("outcome recording stopped".into()))?;
    let state = state.clone();
    tokio::spawn(async move {
        let id = claimed.delivery.id.clone();
        if let Err(e) = finish(&state, &claimed, &outcome, receiver).await {
            // The claim expires and the attempt is made again.
            tracing::warn!(delivery_id = %id, error = %e, "webhook outcome could not be recorded; will retry");
        }
        drop(permit);
    });
    Ok(())
}

fn ended(reason: &str) -> Outcome {
    Outcome {
        state: "failed",
        last_status: None,
        last_error: Some(reason.to_owned()),
        next_attempt_at: None,
    }
}

/// After a failed attempt: again in `webhook_retry_interval`, unless that would be past
/// `webhook_max_age` from the start of the delivery's window; then it has failed.
fn retry_or_fail(
    state: &App,
    d: &deliveries::DeliveryRecord,
    status: Option<i64>,
    error: String,
) -> Outcome {
    let now = now_micros();
    let next = now + micros(state.config.webhook_retry_interval);
    if next > d.window_start + micros(state.config.webhook_max_age) {
        Outcome {
            state: "failed",
            last_status: status,
            last_error: Some(format!("{error}; gave up after webhook_max_age")),
            next_attempt_at: None,
        }
    } else {
        Outcome {
            state: "pending",
            last_status: status,
            last_error: Some(error),
            next_attempt_at: Some(next),
        }
    }
}

/// Records an attempt's outcome through the outcome writer (`outcomes.rs`): outcomes of
/// many attempts share one transaction instead of queueing one by one for the write
/// lock behind the writes that produce events.
async fn finish(
    state: &App,
    claimed: &Claimed,
    outcome: &Outcome,
    receiver: Receiver,
) -> Result<(), StoreError> {
    let d = &claimed.delivery;
    let recorded = state
        .webhook_outcomes
        .submit(Attempted {
            claimed: claimed.clone(),
            outcome: outcome.clone(),
            receiver,
            disable_after: micros(state.config.webhook_disable_after),
        })
        .await
        .map_err(|e| StoreError::Batch(e.message))?;
    match recorded {
        Recorded::Lost => {
            tracing::warn!(delivery_id = %d.id, "attempt outcome not recorded: the claim was lost or the delivery ended meanwhile")
        }
        Recorded::Kept => {}
        Recorded::Deactivated(reason) => {
            state.metrics.upkeep.deactivated(reason);
            tracing::warn!(
                project_id = %d.project_id,
                subscription_id = %d.subscription_id,
                reason,
                "webhook subscription deactivated; its pending deliveries failed"
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claimed_for(subscription: &str) -> Claimed {
        Claimed {
            delivery: deliveries::DeliveryRecord {
                id: "d".into(),
                project_id: "p".into(),
                event_id: "e".into(),
                subscription_id: subscription.into(),
                event_type: "card.freeze".into(),
                state: "pending".into(),
                attempts: 1,
                last_status: None,
                last_error: None,
                last_attempt_at: None,
                next_attempt_at: Some(0),
                window_start: 0,
                created_at: 0,
                updated_at: 0,
                completed_at: None,
            },
            token: "t".into(),
            locked_until: 0,
        }
    }

    #[tokio::test]
    async fn a_batch_never_takes_a_subscription_past_its_limit() {
        let mut slots = Slots::default();
        assert_eq!(slots.batch_limit(MAX_IN_FLIGHT), PER_SUBSCRIPTION as i64);
        assert_eq!(slots.batch_limit(3), 3, "within the free slots");
        let mut set = JoinSet::new();
        for _ in 0..(PER_SUBSCRIPTION - 2) {
            let h = set.spawn(async {});
            slots.add(h.id(), claimed_for("busy"));
        }
        assert_eq!(slots.batch_limit(MAX_IN_FLIGHT), 2);
        for _ in 0..2 {
            let h = set.spawn(async {});
            slots.add(h.id(), claimed_for("busy"));
        }
        // At its limit it is skipped by the claim, so it no longer bounds the batch.
        assert_eq!(slots.saturated(), vec!["busy".to_owned()]);
        assert_eq!(slots.batch_limit(MAX_IN_FLIGHT), PER_SUBSCRIPTION as i64);
        while set.join_next().await.is_some() {}
    }
}
