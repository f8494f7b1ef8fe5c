//! The order worker: drives card issue, topup and withdraw orders through the provider.
//!
//! Orders are the job queue. A worker leases one order at a time; each step's outcome is
//! committed before the next step starts, so a crash resumes at the step it was in, and
//! the provider's idempotency keys (derived from the order id) make the repeated call
//! return the first result. A crashed worker's lease expires and the order is taken up
//! again. New orders wake the workers at once (in-process notify; PostgreSQL NOTIFY for
//! the other processes); polling only covers retries and lost wake-ups.

use super::issued::IssuedCard;
use crate::flows::born::{self, IssueFacts, LEASE};
use crate::flows::money::{self, Acct};
use crate::provider::{bounded, CreateCard, ProviderError};
use crate::App;
use issuing_domain::ids::new_id;
use issuing_domain::ledger::{AccountKind, TransferKind};
use issuing_domain::time::now_micros;
use issuing_store::cards::CardRecord;
use issuing_store::orders::{self, Lease, OrderRecord};
use issuing_store::{cardholders, cards, StoreError};
use issuing_wire::{Amount, ErrorSlug};
use std::time::Duration;
use tokio::sync::watch;

/// Orders one worker claims at once and works on side by side.
const CLAIM_BATCH: i64 = 16;
/// Idle workers look for due retries at least this often.
const POLL: Duration = Duration::from_millis(500);
/// Provider calls per order before a transient failure becomes final.
pub const MAX_ATTEMPTS: i64 = 6;
const BACKOFF_BASE: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(60);

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Runs until `shutdown`; the orders in hand are finished first, unless `hand_back`
/// comes before: then their steps are cut short (nothing of them is committed, and the
/// provider calls are repeated with the same idempotency keys) and the orders are
/// released for the next worker at once instead of when their leases run out.
///
/// A worker takes the orders born leased to this process first (`born.rs`: they need no
/// claim), else claims up to `CLAIM_BATCH` due orders in one write, and works on them
/// side by side: (for top-ups) one batch of the master balance's writer for their
/// completions, instead of a write transaction each. Stopping, it hands back the born
/// orders no worker took yet.
pub async fn run(
    state: App,
    mut shutdown: watch::Receiver<bool>,
    mut hand_back: watch::Receiver<bool>,
) {
    let worker_id = new_id();
    let born_id = state.born.worker_id().to_owned();
    loop {
        if *shutdown.borrow() {
            release_born(&state).await;
            return;
        }
        let born = fresh(&state, state.born.take_waiting(BORN_BATCH)).await;
        let (orders, holder) = if born.is_empty() {
            match claim(&state, &worker_id).await {
                Ok(claimed) => (claimed.into_iter().map(Job::claimed).collect(), &worker_id),
                Err(e) => {
                    tracing::warn!(error = %e, "could not claim an order");
                    (Vec::new(), &worker_id)
                }
            }
        } else {
            (born, &born_id)
        };
        if !orders.is_empty() {
            if work(&state, holder, orders, &mut hand_back).await == Stop::HandedBack {
                return;
            }
            continue;
        }
        tokio::select! {
            born = state.born.take(BORN_BATCH) => {
                let born = fresh(&state, born).await;
                if work(&state, &born_id, born, &mut hand_back).await == Stop::HandedBack {
                    return;
                }
            }
            _ = state.orders_wakeup.notified() => {}
            _ = tokio::time::sleep(POLL) => {}
            _ = shutdown.changed() => {
                release_born(&state).await;
                return;
            }
        }
    }
}

/// Why a stopping server's orders are handed back, for the log.
const STOPPING: &str = "the server is stopping";

/// Born orders one worker takes at once, as many as a claim.
const BORN_BATCH: usize = CLAIM_BATCH as usize;

#[derive(Debug, PartialEq, Eq)]
enum Stop {
    Finished,
    HandedBack,
}

/// Works on `orders`, leased to `holder`, side by side until they are done, or until
/// `hand_back`: then they are released, with the born orders no worker took yet.
async fn work(
    state: &App,
    holder: &str,
    orders: Vec<Job>,
    hand_back: &mut watch::Receiver<bool>,
) -> Stop {
    let ids: Vec<String> = orders.iter().map(|j| j.order.id.clone()).collect();
    let work = futures::future::join_all(orders.into_iter().map(|job| async move {
        let id = job.order.id.clone();
        if let Err(e) = process(state, holder, job).await {
            // The lease expires and the order is retried from its saved step.
            tracing::error!(order_id = %id, error = %e, "order step failed; will retry");
        }
    }));
    tokio::select! {
        _ = work => Stop::Finished,
        _ = hand_back.changed() => {
            // An order whose step committed was released by it already.
            for id in &ids {
                release(state, id, holder, STOPPING).await;
            }
            release_born(state).await;
            Stop::HandedBack
        }
    }
}

/// Hands back the orders born leased to this process that no worker took: due at once
/// for the next server's workers instead of when their leases run out.
async fn release_born(state: &App) {
    loop {
        let waiting = state.born.take_waiting(BORN_BATCH);
        if waiting.is_empty() {
            return;
        }
        for leased in &waiting {
            release(state, &leased.order.id, state.born.worker_id(), STOPPING).await;
        }
    }
}

/// The born orders whose lease still covers a provider call: a step must never run on a
/// lease that may run out under it. The others waited too long in the queue and are
/// handed back, due at once for a claim with a fresh lease.
async fn fresh(state: &App, born: Vec<born::Leased>) -> Vec<Job> {
    let enough = now_micros() + micros(crate::provider::PROVIDER_TIMEOUT);
    let mut fresh = Vec::with_capacity(born.len());
    for leased in born {
        if leased.until > enough {
            fresh.push(Job {
                order: leased.order,
                issue: leased.issue,
            });
        } else {
            let why = "its lease ran low while it waited in the queue";
            release(state, &leased.order.id, state.born.worker_id(), why).await;
        }
    }
    fresh
}

/// Hands an order back, due at once for the next worker; `why` says why, for the log.
async fn release(state: &App, order_id: &str, worker_id: &str, why: &'static str) {
    let released = async {
        let mut conn = state.store.conn().await?;
        orders::release(&mut conn, order_id, worker_id).await
    };
    match released.await {
        Ok(()) => tracing::info!(order_id, why, "order handed back for the next worker"),
        // Its lease runs out instead.
        Err(e) => tracing::warn!(order_id, why, error = %e, "could not hand an order back"),
    }
}

/// Leases up to `CLAIM_BATCH` due orders in one write (on SQLite, on the batch writers'
/// thread, in turn with them). A claim lost in a crash is harmless (the orders are due
/// again and their provider calls repeat with the same keys), so it is not waited on
/// to be durable.
async fn claim(state: &App, worker_id: &str) -> Result<Vec<OrderRecord>, StoreError> {
    let now = now_micros();
    let worker = worker_id.to_owned();
    let (claimed, _durable) = state
        .store
        .write_batch(move |mut conn| {
            Box::pin(async move {
                conn.commit_without_flush().await?;
                orders::claim_many(&mut conn, &worker, now, now + micros(LEASE), CLAIM_BATCH).await
            })
        })
        .await?;
    Ok(claimed)
}

/// An order to work on, with what its creating batch knew of it (only an order born
/// leased here comes with that).
struct Job {
    order: OrderRecord,
    issue: Option<Box<IssueFacts>>,
}

impl Job {
    fn claimed(order: OrderRecord) -> Job {
        Job { order, issue: None }
    }
}

async fn process(state: &App, worker: &str, job: Job) -> Result<(), StoreError> {
    let Job {
        order,
        issue: facts,
    } = job;
    match order.order_type.as_str() {
        "card_issue" => issue(state, worker, order, facts).await,
        "card_topup" => topup(state, worker, order).await,
        "card_withdraw" => withdraw(state, worker, order).await,
        other => {
            tracing::error!(order_id = %order.id, order_type = other, "order type has no worker; parking it");
            park(state, worker, order).await
        }
    }
}

/// Saves the order and lets go of it (finished, parked, or a retry scheduled).
async fn save(state: &App, worker: &str, order: &OrderRecord) -> Result<(), StoreError> {
    let mut conn = state.store.conn().await?;
    orders::save_step(&mut conn, order, worker, Lease::Release).await
}

/// Keeps the order for the next step.
fn renew() -> Lease {
    Lease::Renew {
        until: now_micros() + micros(LEASE),
    }
}

async fn park(state: &App, worker: &str, mut order: OrderRecord) -> Result<(), StoreError> {
    order.next_attempt_at = None;
    order.updated_at = now_micros();
    save(state, worker, &order).await
}

fn backoff(attempts: i64) -> Duration {
    let exp = u32::try_from(attempts.clamp(0, 16)).unwrap_or(16);
    BACKOFF_BASE
        .saturating_mul(2u32.saturating_pow(exp))
        .min(BACKOFF_MAX)
}

/// What to do after a provider error: retry later, or give up with this slug.
fn after_error(order: &mut OrderRecord, err: &ProviderError) -> Option<ErrorSlug> {
    order.last_error = Some(err.to_string());
    match err {
        ProviderError::Transient(_) if order.attempts < MAX_ATTEMPTS => {
            order.next_attempt_at = Some(now_micros() + micros(backoff(order.attempts)));
            None
        }
        ProviderError::Transient(_) => Some(ErrorSlug::TopupAttemptsExceeded),
        ProviderError::Rejected(_) => Some(ErrorSlug::ProviderError),
    }
}

fn mark_failed(order: &mut OrderRecord, slug: ErrorSlug, now: i64) {
    order.status = "failed".into();
    order.last_error_slug = Some(slug.as_str().into());
    order.failed_at = Some(now);
    order.next_attempt_at = None;
    order.updated_at = now;
}

fn mark_completed(order: &mut OrderRecord, now: i64) {
    order.status = "completed".into();
    // An earlier transient failure no longer describes the order.
    order.last_error = None;
    order.completed_at = Some(now);
    order.next_attempt_at = None;
    order.updated_at = now;
}

fn amount_in(data: &serde_json::Value, path: &[&str]) -> Amount {
    let mut v = data;
    for p in path {
        v = &v[*p];
    }
    v.as_str()
        .and_then(|s| Amount::parse_decimal(s).ok())
        .unwrap_or(Amount::ZERO)
}

async fn issue(
    state: &App,
    worker: &str,
    mut order: OrderRecord,
    mut facts: Option<Box<IssueFacts>>,
) -> Result<(), StoreError> {
    let card_id = order
        .card_id
        .clone()
        .ok_or(StoreError::Corrupt("issue order without card".into()))?;
    let project_id = order.project_id.clone();
    loop {
        let now = now_micros();
        match order
            .issue_status
            .as_deref()
            .unwrap_or("card_create_pending")
        {
            "card_create_pending" => {
                order.status = "processing".into();
                let (card, holder_name) = match facts.take() {
                    Some(facts) => (facts.card, facts.holder_name),
                    None => read_issue(state, &project_id, &card_id).await?,
                };
                let provider = state.providers.get(&card.subprovider_code);
                let result = bounded(provider.create_card(CreateCard {
                    idempotency_key: &order.id,
                    project_id: &project_id,
                    card_id: &card_id,
                    cardholder_id: &card.cardholder_id,
                    subprovider_code: &card.subprovider_code,
                    product_code: &card.product_code,
                    card_currency: &card.card_currency,
                    holder_name: &holder_name,
                }))
                .await;
                match result {
                    Ok(issued) => {
                        let sealed = issued.secrets.as_ref().map(|s| {
                            let secrets = serde_json::json!({ "pan": s.pan, "cvv": s.cvv });
                            state.master.seal(secrets.to_string().as_bytes())
                        });
                        let now = now_micros();
                        order.issue_status = Some("card_create_done".into());
                        order.is_issued = Some(true);
                        order.provider_card_status = Some(issued.provider_status.clone());
                        order.last_error = None;
                        order.updated_at = now;
                        // With no initial top-up the order is complete with its card: one
                        // write, not a second one for the skipped step (the state a
                        // resumed order reaches through `card_create_done` is the same).
                        let complete = order.data.get("initial_topup").is_none();
                        let lease = if complete {
                            order.issue_status = Some("completed".into());
                            mark_completed(&mut order, now);
                            Lease::Release
                        } else {
                            renew()
                        };
                        // With the other workers' issues, in one transaction.
                        state
                            .issue_writer
                            .save(IssuedCard {
                                order: order.clone(),
                                worker: worker.to_owned(),
                                lease,
                                card_id: card_id.clone(),
                                provider_card_id: issued.provider_card_id,
                                label: issued.label,
                                secrets_enc: sealed,
                                expiry_month: issued.expiry_month,
                                expiry_year: issued.expiry_year,
                                now,
                            })
                            .await
                            .map_err(|e| StoreError::Batch(e.message))?;
                        if complete {
                            return Ok(());
                        }
                    }
                    Err(e) => match after_error(&mut order, &e) {
                        None => return save(state, worker, &order).await,
                        Some(slug) => {
                            return fail_issue(state, worker, order, &card_id, slug).await
                        }
                    },
                }
            }
            "card_create_done" => {
                order.issue_status = Some(if order.data.get("initial_topup").is_some() {
                    "initial_topup_pending".into()
                } else {
                    "initial_topup_skipped".into()
                });
            }
            "initial_topup_pending" | "initial_topup_in_progress" => {
                order.issue_status = Some("initial_topup_in_progress".into());
                let amount = amount_in(&order.data, &["initial_topup", "amount"]);
                let fee = amount_in(&order.data, &["initial_topup", "fee"]);
                let (subprovider, provider_card_id) =
                    provider_card(state, &project_id, &card_id).await?;
                let key = format!("{}:initial_topup", order.id);
                let provider = state.providers.get(&subprovider);
                match bounded(provider.topup(&key, &provider_card_id, amount)).await {
                    Ok(()) => {
                        order.issue_status = Some("initial_topup_done".into());
                        order.last_error = None;
                        order.updated_at = now;
                        let mut tx = state.store.begin().await?;
                        settle_topup(&mut tx, &project_id, &card_id, &order.id, amount).await?;
                        orders::save_step(&mut tx, &order, worker, renew()).await?;
                        tx.commit().await?;
                    }
                    Err(e) => match after_error(&mut order, &e) {
                        None => return save(state, worker, &order).await,
                        Some(slug) => {
                            // The card exists and keeps its issue fee; the topup is refunded.
                            order.issue_status = Some("initial_topup_error".into());
                            mark_failed(&mut order, slug, now);
                            let mut tx = state.store.begin().await?;
                            refund_topup(&mut tx, &project_id, &card_id, &order.id, amount, fee)
                                .await?;
                            order.balance_after =
                                Some(money::master_balance(&mut tx, &project_id).await?.micros());
                            orders::save_step(&mut tx, &order, worker, Lease::Release).await?;
                            tx.commit().await?;
                            return Ok(());
                        }
                    },
                }
            }
            "initial_topup_skipped" | "initial_topup_done" => {
                order.issue_status = Some("completed".into());
                mark_completed(&mut order, now);
                return save(state, worker, &order).await;
            }
            _ => return park(state, worker, order).await,
        }
    }
}

/// The card an issue order makes, and its cardholder's name for the provider, as
/// stored (for an order its creating batch did not hand over: `born.rs`).
async fn read_issue(
    state: &App,
    project_id: &str,
    card_id: &str,
) -> Result<(CardRecord, String), StoreError> {
    let mut conn = state.store.conn().await?;
    let card = cards::get(&mut conn, project_id, card_id)
        .await?
        .ok_or(StoreError::NotFound("card"))?;
    let holder_name = cardholders::get(&mut conn, project_id, &card.cardholder_id)
        .await?
        .map(|h| crate::flows::kyc::holder_name(state, &h))
        .unwrap_or_default();
    Ok((card, holder_name))
}

/// The card's subprovider and the provider's id of the card.
async fn provider_card(
    state: &App,
    project_id: &str,
    card_id: &str,
) -> Result<(String, String), StoreError> {
    cards::provider_card(&state.store, project_id, card_id)
        .await?
        .ok_or(StoreError::NotFound("provider card"))
}

/// The provider confirmed a topup: its amount moves from in-flight onto the card.
async fn settle_topup(
    tx: &mut issuing_store::Tx,
    project_id: &str,
    card_id: &str,
    order_id: &str,
    amount: Amount,
) -> Result<(), StoreError> {
    let tag = money::Tag {
        project_id,
        order_id,
        card_id,
    };
    let in_flight = Acct::Project(AccountKind::InFlight);
    money::transfer(
        tx,
        &tag,
        TransferKind::CardTopup,
        in_flight,
        Acct::Card(card_id),
        amount,
    )
    .await
    .map(drop)
}

async fn refund_topup(
    tx: &mut issuing_store::Tx,
    project_id: &str,
    card_id: &str,
    order_id: &str,
    amount: Amount,
    fee: Amount,
) -> Result<(), StoreError> {
    let master = || Acct::Project(AccountKind::Master);
    money::transfer(
        tx,
        &money::Tag {
            project_id,
            order_id,
            card_id,
        },
        TransferKind::Refund,
        Acct::Project(AccountKind::InFlight),
        master(),
        amount,
    )
    .await?;
    money::transfer(
        tx,
        &money::Tag {
            project_id,
            order_id,
            card_id,
        },
        TransferKind::Refund,
        Acct::Project(AccountKind::FeeIncome),
        master(),
        fee,
    )
    .await
    .map(drop)
}

/// A card that could not be issued: the order fails, the fee (and any initial topup)
/// goes back to the master balance, the card is marked failed.
async fn fail_issue(
    state: &App,
    worker: &str,
    mut order: OrderRecord,
    card_id: &str,
    slug: ErrorSlug,
) -> Result<(), StoreError> {
    let now = now_micros();
    let project_id = order.project_id.clone();
    order.issue_status = Some("card_create_error".into());
    order.is_issued = Some(false);
    mark_failed(&mut order, slug, now);
    let mut tx = state.store.begin().await?;
    let issue_fee = amount_in(&order.data, &["issue_fee"]);
    money::transfer(
        &mut tx,
        &money::Tag {
            project_id: &project_id,
            order_id: &order.id,
            card_id,
        },
        TransferKind::Refund,
        Acct::Project(AccountKind::FeeIncome),
        Acct::Project(AccountKind::Master),
        issue_fee,
    )
    .await?;
    if order.data.get("initial_topup").is_some() {
        let amount = amount_in(&order.data, &["initial_topup", "amount"]);
        let fee = amount_in(&order.data, &["initial_topup", "fee"]);
        refund_topup(&mut tx, &project_id, card_id, &order.id, amount, fee).await?;
    }
    cards::transition(
        &mut tx,
        &project_id,
        card_id,
        crate::flows::issue::CARD_PENDING,
        "failed",
        None,
        now,
    )
    .await?;
    order.balance_after = Some(money::master_balance(&mut tx, &project_id).await?.micros());
    orders::save_step(&mut tx, &order, worker, Lease::Release).await?;
    tx.commit().await?;
    Ok(())
}

async fn topup(state: &App, worker: &str, mut order: OrderRecord) -> Result<(), StoreError> {
    let card_id = order
        .card_id
        .clone()
        .ok_or(StoreError::Corrupt("topup order without card".into()))?;
    let project_id = order.project_id.clone();
    let amount = amount_in(&order.data, &["amount"]);
    let fee = amount_in(&order.data, &["fee"]);
    order.status = "processing".into();
    order.topup_status = Some("provider_in_progress".into());
    let (subprovider, provider_card_id) = provider_card(state, &project_id, &card_id).await?;
    let provider = state.providers.get(&subprovider);
    let result = bounded(provider.topup(&order.id, &provider_card_id, amount)).await;
    let now = now_micros();
    if result.is_ok() {
        order.topup_status = Some("completed".into());
        mark_completed(&mut order, now);
        // With the batch's other completions and top-ups, in one transaction.
        return state
            .master_writer
            .confirm(crate::flows::topup::Confirmed {
                order,
                worker: worker.to_owned(),
                card_id,
                amount,
            })
            .await
            .map_err(|e| StoreError::Batch(e.message));
    }
    let mut tx = state.store.begin().await?;
    if let Err(e) = result {
        match after_error(&mut order, &e) {
            None => order.topup_status = Some("provider_in_progress_error".into()),
            Some(slug) => {
                refund_topup(&mut tx, &project_id, &card_id, &order.id, amount, fee).await?;
                order.topup_status = Some("failed".into());
                mark_failed(&mut order, slug, now);
                order.balance_after =
                    Some(money::master_balance(&mut tx, &project_id).await?.micros());
            }
        }
    }
    order.updated_at = now;
    orders::save_step(&mut tx, &order, worker, Lease::Release).await?;
    Ok(tx.commit().await?)
}

async fn withdraw(state: &App, worker: &str, mut order: OrderRecord) -> Result<(), StoreError> {
    let card_id = order
        .card_id
        .clone()
        .ok_or(StoreError::Corrupt("withdraw order without card".into()))?;
    let project_id = order.project_id.clone();
    let amount = amount_in(&order.data, &["amount"]);
    order.status = "processing".into();
    let (subprovider, provider_card_id) = provider_card(state, &project_id, &card_id).await?;
    let provider = state.providers.get(&subprovider);
    let result = bounded(provider.withdraw(&order.id, &provider_card_id, amount)).await;
    let now = now_micros();
    let mut tx = state.store.begin().await?;
    let in_flight = || Acct::Project(AccountKind::InFlight);
    match result {
        Ok(()) => {
            money::transfer(
                &mut tx,
                &money::Tag {
                    project_id: &project_id,
                    order_id: &order.id,
                    card_id: &card_id,
                },
                TransferKind::CardWithdraw,
                in_flight(),
                Acct::Project(AccountKind::Master),
                amount,
            )
            .await?;
            mark_completed(&mut order, now);
        }
        Err(e) => match after_error(&mut order, &e) {
            None => {}
            Some(slug) => {
                // The funds never left the provider: they go back onto the card.
                money::transfer(
                    &mut tx,
                    &money::Tag {
                        project_id: &project_id,
                        order_id: &order.id,
                        card_id: &card_id,
                    },
                    TransferKind::Refund,
                    in_flight(),
                    Acct::Card(&card_id),
                    amount,
                )
                .await?;
                mark_failed(&mut order, slug, now);
            }
        },
    }
    order.balance_after = Some(money::master_balance(&mut tx, &project_id).await?.micros());
    order.updated_at = now;
    orders::save_step(&mut tx, &order, worker, Lease::Release).await?;
    Ok(tx.commit().await?)
}
