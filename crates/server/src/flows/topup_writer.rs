//! The master balance's writer for top-ups: one writer per hot account (docs/money.md).
//!
//! Every top-up of a project debits one row, its master balance. Applied one transaction
//! each, they run one after another however many arrive: on PostgreSQL each holds the
//! row until its commit record is flushed, on SQLite each pays a dozen statements'
//! hand-overs to the driver's thread under the one write lock. Here a writer drains its
//! queue and applies the batch in one transaction with a few statements per batch: it
//! reads the batch's idempotency keys and cards, checks every top-up in arrival order
//! against the running balance (`ledger_batch`), inserts the accepted ones' transfers,
//! entries, orders, events and keys, writes each account once, commits once, and answers
//! every caller only after the commit is durable.
//!
//! - A refused top-up (insufficient funds, a card no longer active, a key in use) writes
//!   nothing and answers its own error; the rest of its batch stands.
//! - An unexpected error rolls the batch back and reruns its top-ups one per
//!   transaction, so only the faulty one fails.
//! - A second request with a key already in the batch answers what the first got.
//! - The key is decided inside the batch's transaction, so a top-up needs no claim of
//!   its own: its key, its order and its money commit together or not at all.
//!
//! Projects are spread over `stripes` writers by hash, so one project always has the
//! same writer. SQLite has one write lock, so one writer; PostgreSQL has a writer per
//! stripe on connections of their own, each locking its projects' accounts in the
//! ledger's lock order (and projects in id order), so writers of other processes
//! sharing the database queue on the rows, never deadlock.
//!
//! Bounded: `QUEUE` top-ups wait per writer (callers wait for room beyond), a batch
//! holds at most `MAX_BATCH`.

use crate::pipeline::idempotency::{conflict, IdempotencyToken};
use crate::routes::orders::OrderView;
use issuing_domain::ids::new_id;
use issuing_domain::ledger::{AccountKind, Transfer, TransferKind};
use issuing_store::events::{self, NewEvent};
use issuing_store::group_commit::Stats;
use issuing_store::idempotency::{self, Claim, Finished};
use issuing_store::ledger_batch::{self, Planned};
use issuing_store::orders;
use issuing_store::query::Inserts;
use issuing_store::{cards, ledger, Backend, Store, StoreError};
use issuing_wire::{Amount, ApiError, ErrorSlug};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Notify};

/// The most top-ups in one transaction: bounds how long a batch holds the write lock
/// (SQLite) or its projects' rows (PostgreSQL), and so the p99 of its callers.
const MAX_BATCH: usize = 64;
const QUEUE: usize = 1024;
/// PostgreSQL writers; projects are spread over them by hash.
const POSTGRES_STRIPES: usize = 4;

pub(crate) const ENDPOINT: &str = "cards/topup";

/// A top-up that passed the checks needing no lock, for the writer to apply.
pub(crate) struct Topup {
    pub project_id: String,
    pub card_id: String,
    pub amount: Amount,
    pub fee: Amount,
    pub now: i64,
    pub token: IdempotencyToken,
    /// Until when a key stays valid (CONTRACT §5: 7 days).
    pub key_expires_at: i64,
}

/// What a top-up's caller gets.
#[derive(Debug, Clone)]
pub(crate) enum Answer {
    /// A new order: its response body.
    Created(Value),
    /// The key's stored response (a retry).
    Stored { status: i64, body: String },
}

type Reply = oneshot::Sender<Result<Answer, ApiError>>;

/// The handle to the writers. Cloning shares them.
#[derive(Clone)]
pub(crate) struct TopupWriter {
    stripes: Arc<Vec<mpsc::Sender<(Topup, Reply)>>>,
    stats: Arc<Stats>,
}

impl std::fmt::Debug for TopupWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopupWriter").finish_non_exhaustive()
    }
}

impl TopupWriter {
    /// Starts the writers on `store`; they run until every handle is dropped.
    pub(crate) fn start(
        store: Store,
        orders_wakeup: Arc<Notify>,
        deliveries_wakeup: Arc<Notify>,
    ) -> TopupWriter {
        let stats = Arc::<Stats>::default();
        let stripes = match store.backend() {
            Backend::Sqlite => 1,
            Backend::Postgres => POSTGRES_STRIPES,
        };
        let stripes = (0..stripes)
            .map(|_| {
                let (jobs, queue) = mpsc::channel(QUEUE);
                tokio::spawn(write(
                    store.clone(),
                    queue,
                    stats.clone(),
                    [orders_wakeup.clone(), deliveries_wakeup.clone()],
                ));
                jobs
            })
            .collect();
        TopupWriter {
            stripes: Arc::new(stripes),
            stats,
        }
    }

    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Applies `topup` in its writer's next batch; answers once that batch is durable.
    pub(crate) async fn submit(&self, topup: Topup) -> Result<Answer, ApiError> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        topup.project_id.hash(&mut hasher);
        let stripe = usize::try_from(hasher.finish() % self.stripes.len() as u64).unwrap_or(0);
        let writer = self.stripes.get(stripe).ok_or_else(ApiError::internal)?;
        let (reply, answer) = oneshot::channel();
        if writer.send((topup, reply)).await.is_err() {
            return Err(StoreError::Batch("the top-up writer has stopped".into()).into());
        }
        answer
            .await
            .unwrap_or_else(|_| Err(StoreError::Batch("the top-up was abandoned".into()).into()))
    }
}

async fn write(
    store: Store,
    mut queue: mpsc::Receiver<(Topup, Reply)>,
    stats: Arc<Stats>,
    wakeups: [Arc<Notify>; 2],
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let (topups, replies): (Vec<Topup>, Vec<Reply>) =
            std::mem::take(&mut batch).into_iter().unzip();
        let answers = match apply(&store, &topups, &stats).await {
            Ok((answers, durable)) => Pending::Committed(answers, durable),
            Err(why) if topups.len() > 1 => {
                tracing::warn!(error = %why, top_ups = topups.len(), "a top-up batch failed; applying its top-ups one by one");
                let mut answers = Vec::with_capacity(topups.len());
                for topup in &topups {
                    let alone = match apply(&store, std::slice::from_ref(topup), &stats).await {
                        Ok((mut answer, durable)) => match durable.wait().await {
                            Ok(()) => answer.pop().unwrap_or_else(|| Err(ApiError::internal())),
                            Err(e) => Err(StoreError::from(e).into()),
                        },
                        Err(e) => Err(e.into()),
                    };
                    answers.push(alone);
                }
                Pending::Ready(answers)
            }
            Err(why) => Pending::Ready(vec![Err(ApiError::from(why))]),
        };
        let wakeups = wakeups.clone();
        // Answered in a task of its own, so the next batch starts while this one's log
        // reaches the disk.
        tokio::spawn(async move {
            let answers = answers.wait().await;
            if answers.iter().any(|a| matches!(a, Ok(Answer::Created(_)))) {
                // This process's order and delivery workers; others get the NOTIFY.
                wakeups.iter().for_each(|w| w.notify_one());
            }
            for (reply, answer) in replies.into_iter().zip(answers) {
                // The caller may have gone; the top-up stands either way.
                let _ = reply.send(answer);
            }
        });
    }
}

/// A batch's answers, and what they wait for.
enum Pending {
    Ready(Vec<Result<Answer, ApiError>>),
    Committed(Vec<Result<Answer, ApiError>>, issuing_store::Durable),
}

impl Pending {
    /// The answers once the commit is durable; if it could not be made so, every
    /// top-up of the batch fails (none may be announced).
    async fn wait(self) -> Vec<Result<Answer, ApiError>> {
        match self {
            Pending::Ready(answers) => answers,
            Pending::Committed(answers, durable) => match durable.wait().await {
                Ok(()) => answers,
                Err(e) => {
                    let why = StoreError::from(e);
                    tracing::error!(error = %why, "a top-up batch's commit failed");
                    answers
                        .iter()
                        .map(|_| Err(StoreError::Batch(why.to_string()).into()))
                        .collect()
                }
            },
        }
    }
}

/// One transaction for `topups`, each project's in id order. Answers each top-up, and
/// the commit to wait for before telling anyone. An `Err` means nothing was written.
async fn apply(
    store: &Store,
    topups: &[Topup],
    stats: &Stats,
) -> Result<(Vec<Result<Answer, ApiError>>, issuing_store::Durable), StoreError> {
    stats.batches.fetch_add(1, Ordering::Relaxed);
    stats
        .operations
        .fetch_add(topups.len() as u64, Ordering::Relaxed);
    let mut by_project: Vec<usize> = (0..topups.len()).collect();
    by_project.sort_by(|a, b| topups[*a].project_id.cmp(&topups[*b].project_id));
    let mut answers: Vec<Option<Result<Answer, ApiError>>> = topups.iter().map(|_| None).collect();
    let mut tx = store.begin().await?;
    for group in by_project.chunk_by(|a, b| topups[*a].project_id == topups[*b].project_id) {
        let members: Vec<&Topup> = group.iter().map(|i| &topups[*i]).collect();
        let decided = apply_project(&mut tx, store.backend(), &members).await?;
        for (i, answer) in group.iter().zip(decided) {
            answers[*i] = Some(answer);
        }
    }
    let durable = tx.commit_deferred().await?;
    let answers = answers
        .into_iter()
        .map(|a| a.ok_or_else(|| StoreError::Corrupt("a top-up without an answer".into())))
        .collect::<Result<_, _>>()?;
    Ok((answers, durable))
}

/// One project's top-ups, in arrival order, inside the batch's transaction.
async fn apply_project(
    conn: &mut issuing_store::Conn,
    backend: Backend,
    topups: &[&Topup],
) -> Result<Vec<Result<Answer, ApiError>>, StoreError> {
    let Some(project_id) = topups.first().map(|t| t.project_id.as_str()) else {
        return Ok(Vec::new());
    };
    let keys: Vec<&str> = topups.iter().map(|t| t.token.key()).collect();
    let stored = idempotency::lookup_many(conn, project_id, ENDPOINT, &keys).await?;
    let card_ids: Vec<&str> = topups.iter().map(|t| t.card_id.as_str()).collect();
    let statuses = cards::statuses(conn, project_id, &card_ids).await?;
    let master = ledger::project_account(conn, project_id, AccountKind::Master).await?;
    let in_flight = ledger::project_account(conn, project_id, AccountKind::InFlight).await?;
    let fee_income = ledger::project_account(conn, project_id, AccountKind::FeeIncome).await?;

    let mut answers: Vec<Option<Result<Answer, ApiError>>> = topups.iter().map(|_| None).collect();
    // The first top-up of the batch with each key; later ones answer what it got.
    let mut first_with_key: HashMap<&str, usize> = HashMap::new();
    let mut repeats = Vec::new();
    let (mut planned, mut planned_for) = (Vec::new(), Vec::new());
    for (i, t) in topups.iter().enumerate() {
        if let Some(first) = first_with_key.get(t.token.key()) {
            repeats.push((i, *first));
            continue;
        }
        first_with_key.insert(t.token.key(), i);
        if let Some(claim) = stored
            .get(t.token.key())
            .and_then(|s| s.claim(t.token.hash(), t.now))
        {
            answers[i] = Some(answered(claim));
            continue;
        }
        if let Some(refused) = card_refusal(statuses.get(&t.card_id).map(String::as_str)) {
            answers[i] = Some(Err(refused));
            continue;
        }
        let order_id = new_id();
        planned.push(plan(t, &order_id, &master, &in_flight, &fee_income)?);
        planned_for.push((i, order_id));
    }

    let now = topups.iter().map(|t| t.now).max().unwrap_or(0);
    let mut inserts = Inserts::default();
    let posted =
        ledger_batch::post_batch(conn, backend, project_id, &planned, now, &mut inserts).await?;
    let (mut new_orders, mut finished, mut bodies) = (Vec::new(), Vec::new(), Vec::new());
    for ((i, order_id), posted) in planned_for.into_iter().zip(posted) {
        let t = topups[i];
        let posted = match posted {
            Ok(posted) => posted,
            Err(refused) => {
                answers[i] = Some(Err(refused.into()));
                continue;
            }
        };
        // The master balance as this top-up's last debit left it.
        let after = posted
            .iter()
            .flat_map(|p| &p.balances_after)
            .rfind(|(account, _)| *account == master)
            .map(|(_, balance)| balance.micros())
            .ok_or_else(|| StoreError::Corrupt("a top-up that did not debit the master".into()))?;
        let total = t.amount.micros() + t.fee.micros();
        let mut order = super::topup::new_order(
            project_id,
            &order_id,
            "card_topup",
            &t.card_id,
            t.now,
            json!({
                "amount": t.amount,
                "fee": t.fee,
                "total": Amount::from_micros(total),
                "currency": "usdt",
            }),
        );
        order.balance_before = Some(after + total);
        order.balance_after = Some(after);
        let mut body = serde_json::to_value(OrderView::from(order.clone()))
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
        body["success"] = json!(true);
        finished.push(Finished {
            key: t.token.as_key(),
            status: 200,
            body: body.to_string(),
            now: t.now,
            expires_at: t.key_expires_at,
        });
        bodies.push((i, body));
        new_orders.push(order);
    }
    let payloads: Vec<Value> = new_orders
        .iter()
        .map(|o| {
            json!({
                "card_id": o.card_id,
                "order_id": o.id,
                "amount": o.data.get("amount"),
                "status": o.status,
            })
        })
        .collect();
    let new_events: Vec<NewEvent<'_>> = new_orders
        .iter()
        .zip(&payloads)
        .map(|(o, payload)| NewEvent {
            project_id,
            event_type: "card.topup",
            card_id: o.card_id.as_deref(),
            order_id: Some(&o.id),
            payload,
            now: o.created_at,
        })
        .collect();
    orders::insert_many(&mut inserts, &new_orders);
    events::insert_many(conn, &new_events, &mut inserts).await?;
    // Only a key stored before (expired, or a dead request's claim) has a row to replace.
    let replacing = finished.iter().any(|f| stored.contains_key(f.key.key));
    idempotency::store_many(conn, &finished, replacing, &mut inserts).await?;
    inserts.write(conn).await?;
    if !new_orders.is_empty() {
        issuing_store::wakeup::announce(conn, issuing_store::wakeup::Queue::Orders).await?;
    }
    for (i, body) in bodies {
        answers[i] = Some(Ok(Answer::Created(body)));
    }
    for (i, first) in repeats {
        answers[i] = Some(repeated(topups[i], topups[first], answers[first].as_ref()));
    }
    answers
        .into_iter()
        .map(|a| a.ok_or_else(|| StoreError::Corrupt("a top-up without an answer".into())))
        .collect()
}

/// The transfers of one top-up: the master balance pays the amount into in-flight (it
/// reaches the card when the provider confirms) and the fee into fee income.
fn plan(
    t: &Topup,
    order_id: &str,
    master: &str,
    in_flight: &str,
    fee_income: &str,
) -> Result<Vec<Planned>, StoreError> {
    let mut moves = vec![(TransferKind::CardTopup, in_flight, t.amount)];
    if t.fee.micros() > 0 {
        moves.push((TransferKind::TopupFee, fee_income, t.fee));
    }
    moves
        .into_iter()
        .map(|(kind, to, amount)| {
            let transfer = Transfer::simple(kind, master.to_owned(), to.to_owned(), amount)
                .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            Ok(Planned {
                order_id: Some(order_id.to_owned()),
                card_id: Some(t.card_id.clone()),
                transfer,
            })
        })
        .collect()
}

/// Why a top-up may not go to a card with this status (`None`: not found).
fn card_refusal(status: Option<&str>) -> Option<ApiError> {
    match status {
        Some("active") => None,
        Some(status) => Some(ApiError::new(
            ErrorSlug::CardNotActive,
            format!("Card is {status}, not active"),
        )),
        None => Some(ApiError::new(ErrorSlug::CardNotFound, "Card not found")),
    }
}

/// The answer a key that is not free gives.
pub(crate) fn answered(claim: Claim) -> Result<Answer, ApiError> {
    match claim {
        Claim::Done { status, body } => Ok(Answer::Stored { status, body }),
        refused => Err(conflict(&refused)),
    }
}

/// A second top-up of a batch with the first's key: the first's answer if their
/// parameters agree (as a retry after it would get), else a conflict.
fn repeated(
    t: &Topup,
    first: &Topup,
    first_answer: Option<&Result<Answer, ApiError>>,
) -> Result<Answer, ApiError> {
    if t.token.hash() != first.token.hash() {
        return answered(Claim::ParametersDiffer);
    }
    match first_answer {
        Some(Ok(Answer::Created(body))) => Ok(Answer::Stored {
            status: 200,
            body: body.to_string(),
        }),
        Some(Ok(stored)) => Ok(stored.clone()),
        Some(Err(e)) => Err(e.clone()),
        None => answered(Claim::InProgress),
    }
}
