//! Webhook attempt outcomes, recorded a batch at a time through the batch writers' loop
//! (`batch_writer.rs`): on SQLite, on the writer's thread with its cached statements, in
//! turn with the writes that produce events; on PostgreSQL on a connection of its own.
//! Each outcome is fenced on its claim (a lost claim records nothing), keeps its
//! subscription's failing clock and may deactivate it (CONTRACT §13). A batch locks its
//! subscriptions' rows before it touches any delivery (`record_all`).

use crate::batch_writer::{picked, ApplyFn, BatchWriter, Queued, Shape, Wakeups};
use issuing_domain::time::now_micros;
use issuing_store::deliveries::{self, Claimed, Outcome};
use issuing_store::group_commit::Stats;
use issuing_store::writer::BatchConn;
use issuing_store::{subscriptions, Store, StoreError};
use issuing_wire::ApiError;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

/// PostgreSQL writers; subscriptions are spread over them, so one subscription's
/// outcomes (which all touch its row) never wait for each other's locks.
const POSTGRES_STRIPES: usize = 2;

/// What the receiver made of an attempt; it decides the subscription's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Receiver {
    /// Nothing was sent (the subscription ended, or nothing to seal with).
    NotAsked,
    Succeeded,
    Failed,
    /// 410 Gone: the receiver asks to be unsubscribed.
    Gone,
}

/// An attempt's outcome, to record.
pub struct Attempted {
    pub claimed: Claimed,
    pub outcome: Outcome,
    pub receiver: Receiver,
    /// `webhook_disable_after` in microseconds (0: never).
    pub disable_after: i64,
}

/// What recording an outcome did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// Nothing: the claim was lost or the delivery ended meanwhile.
    Lost,
    Kept,
    /// The subscription was deactivated: `gone` or `failing`.
    Deactivated(&'static str),
}

/// The handle to the writers. Cloning shares them.
#[derive(Clone, Debug)]
pub struct OutcomeWriter(BatchWriter<Attempted, Recorded>);

impl OutcomeWriter {
    /// Starts the writers on `store`; they run until every handle is dropped.
    pub fn start(store: Store) -> OutcomeWriter {
        let shape = Shape::of(store.backend(), POSTGRES_STRIPES);
        let apply: ApplyFn<Attempted, Recorded> = Arc::new(|mut conn, attempts, only| {
            Box::pin(async move {
                let answers = record_all(&mut conn, &picked(&attempts, only)).await?;
                Ok((answers, Queued::default()))
            })
        });
        OutcomeWriter(BatchWriter::start(
            store,
            "webhook_outcomes",
            shape,
            apply,
            Wakeups::default(),
        ))
    }

    pub fn stats(&self) -> &Stats {
        self.0.stats()
    }

    /// Records `a` in its subscription's writer's next batch; answers once durable.
    pub async fn submit(&self, a: Attempted) -> Result<Recorded, ApiError> {
        let subscription = a.claimed.delivery.subscription_id.clone();
        self.0.submit(&subscription, a).await
    }
}

/// Records a batch's outcomes in order. Each run of succeeded attempts (the usual
/// batch) is written with one statement per claim and one `note_success` per
/// subscription; any other outcome is recorded alone, in its place, so a subscription's
/// failing clock sees the outcomes in the same order as one by one.
async fn record_all(
    conn: &mut BatchConn<'_>,
    attempts: &[&Attempted],
) -> Result<Vec<Result<Recorded, ApiError>>, StoreError> {
    // The subscriptions' rows before any of their deliveries, the order every writer
    // of both takes (`subscriptions::lock_rows`): recording outcomes updates the
    // deliveries and then the subscription's failing clock, an unsubscribe the other way
    // round, and on PostgreSQL the two deadlocked. One statement for the whole batch, so
    // the delivery hot path pays one round trip per batch, not per outcome; locking the
    // deliveries in one order instead would cost the same and leave the subscription's
    // row to be taken after them.
    let subs: BTreeSet<(&str, &str)> = attempts
        .iter()
        .map(|a| {
            let d = &a.claimed.delivery;
            (d.project_id.as_str(), d.subscription_id.as_str())
        })
        .collect();
    subscriptions::lock_rows(conn, &subs).await?;
    let mut answers = Vec::with_capacity(attempts.len());
    let mut rest = attempts;
    while let Some(first) = rest.first() {
        let run = rest.iter().take_while(|a| succeeded(a)).count();
        if run == 0 {
            answers.push(Ok(record(conn, first).await?));
            rest = &rest[1..];
        } else {
            answers.extend(record_run(conn, &rest[..run]).await?.into_iter().map(Ok));
            rest = &rest[run..];
        }
    }
    Ok(answers)
}

/// An attempt `record_run` may write: what `record` would write for it is exactly
/// `deliveries::record_succeeded`'s.
fn succeeded(a: &Attempted) -> bool {
    a.receiver == Receiver::Succeeded
        && a.outcome.state == "succeeded"
        && a.outcome.last_error.is_none()
        && a.outcome.next_attempt_at.is_none()
}

async fn record_run(
    conn: &mut BatchConn<'_>,
    run: &[&Attempted],
) -> Result<Vec<Recorded>, StoreError> {
    let now = now_micros();
    let mut claims: BTreeMap<(&str, &str, Option<i64>), Vec<&str>> = BTreeMap::new();
    for a in run {
        let d = &a.claimed.delivery;
        let claim = (
            d.project_id.as_str(),
            a.claimed.token.as_str(),
            a.outcome.last_status,
        );
        claims.entry(claim).or_default().push(d.id.as_str());
    }
    // (delivery, token): a delivery claimed again meanwhile may appear under both tokens,
    // and only the claim that still held was recorded.
    let mut kept: HashSet<(String, &str)> = HashSet::new();
    for ((project, token, status), ids) in claims {
        let recorded =
            deliveries::record_succeeded(conn, project, token, status, &ids, now).await?;
        kept.extend(recorded.into_iter().map(|id| (id, token)));
    }
    let mut noted = HashSet::new();
    let mut answers = Vec::with_capacity(run.len());
    for a in run {
        let d = &a.claimed.delivery;
        if !kept.contains(&(d.id.clone(), a.claimed.token.as_str())) {
            answers.push(Recorded::Lost);
            continue;
        }
        if noted.insert((d.project_id.as_str(), d.subscription_id.as_str())) {
            subscriptions::note_success(conn, &d.project_id, &d.subscription_id).await?;
        }
        answers.push(Recorded::Kept);
    }
    Ok(answers)
}

async fn record(conn: &mut BatchConn<'_>, a: &Attempted) -> Result<Recorded, StoreError> {
    let d = &a.claimed.delivery;
    let (project, sub) = (d.project_id.as_str(), d.subscription_id.as_str());
    let now = now_micros();
    if !deliveries::record(conn, &a.claimed, &a.outcome, now).await? {
        return Ok(Recorded::Lost);
    }
    let reason = match a.receiver {
        Receiver::NotAsked => None,
        Receiver::Succeeded => {
            subscriptions::note_success(conn, project, sub).await?;
            None
        }
        Receiver::Gone => Some(("gone", "receiver answered 410 Gone")),
        Receiver::Failed => {
            let since = subscriptions::note_failure(conn, project, sub, now).await?;
            // CONTRACT §13: every attempt failed for webhook_disable_after (0: never).
            let failing = a.disable_after > 0 && since.is_some_and(|s| now - s >= a.disable_after);
            failing.then_some(("failing", subscriptions::FAILING))
        }
    };
    let Some((label, reason)) = reason else {
        return Ok(Recorded::Kept);
    };
    if subscriptions::deactivate(conn, project, sub, reason, now).await? {
        return Ok(Recorded::Deactivated(label));
    }
    Ok(Recorded::Kept)
}
