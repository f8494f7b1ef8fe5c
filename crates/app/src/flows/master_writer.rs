//! The master balance's writer: one writer per hot account (docs/money.md). Top-ups and
//! card issues go through it.
//!
//! Every top-up and card issue of a project debits one row, its master balance. Applied
//! one transaction each, they run one after another however many arrive: on PostgreSQL
//! each holds the row until its commit record is flushed, on SQLite each pays a dozen
//! statements' hand-overs to the driver's thread under the one write lock. Here a writer
//! drains its queue and applies the batch in one transaction with a few statements per
//! batch: it reads the batch's idempotency keys, cards and cardholders, checks every move
//! in arrival order against the running balance (`ledger_batch`), inserts the accepted
//! ones' cards, accounts, transfers, entries, orders, events and keys, writes each account
//! once, commits once, and answers every caller only after the commit is durable.
//!
//! - A refused move (insufficient funds, a card no longer active, a cardholder no longer
//!   ready, a key in use) writes nothing and answers its own error; the rest of its batch
//!   stands.
//! - An unexpected error rolls the batch back and reruns its moves one per transaction,
//!   so only the faulty one fails.
//! - A second request with a key already in the batch answers what the first got.
//! - The key is decided inside the batch's transaction, so a move needs no claim of its
//!   own: its key, its order and its money commit together or not at all.
//!
//! Projects are spread over `stripes` writers by hash, so one project always has the
//! same writer. SQLite has one write lock, so one writer; PostgreSQL has a writer per
//! stripe on connections of their own, each locking its projects' accounts in the
//! ledger's lock order (and projects in id order), so writers of other processes
//! sharing the database queue on the rows, never deadlock.
//!
//! Bounded: `QUEUE` moves wait per writer (callers wait for room beyond), a batch holds
//! at most `MAX_BATCH`.

use crate::batch_writer::{picked, ApplyFn, BatchWriter, Queued, Shape, Wakeups};
use crate::flows::born::{Born, IssueFacts, Place};
use crate::idempotency::{conflict, IdempotencyToken};
use issuing_domain::ledger::AccountKind;
use issuing_store::events::{self, NewEvent};
use issuing_store::group_commit::Stats;
use issuing_store::idempotency::{self, Claim, Finished, Stored};
use issuing_store::ledger_batch::{self, Planned};
use issuing_store::orders::{self, OrderRecord};
use issuing_store::query::Inserts;
use issuing_store::writer::{AsBatch, BatchConn, Part, Row};
use issuing_store::{cardholders, cards, ledger, subscriptions, Store, StoreError};
use issuing_wire::ApiError;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Notify;

/// PostgreSQL writers; projects are spread over them by hash.
const POSTGRES_STRIPES: usize = 4;

/// A top-up or card issue that passed the checks needing no lock, for the writer.
pub struct Move {
    pub project_id: String,
    /// The order it creates (and for a card issue, the card's id is in `kind`).
    pub order_id: String,
    pub now: i64,
    pub token: IdempotencyToken,
    /// Until when its key stays valid (CONTRACT §5: 7 days).
    pub key_expires_at: i64,
    pub kind: Kind,
}

pub enum Kind {
    Topup(super::topup::TopupMove),
    Issue(Box<super::issue::IssueMove>),
}

/// The project's accounts a move's transfers name.
pub struct ProjectAccounts {
    pub master: String,
    pub in_flight: String,
    pub fee_income: String,
}

/// What an accepted move writes besides its transfers; its order's balances are set by
/// the writer.
pub struct Made {
    pub order: OrderRecord,
    pub event_type: &'static str,
    pub event: Value,
}

impl Kind {
    fn endpoint(&self) -> &'static str {
        match self {
            Kind::Topup(_) => super::topup::ENDPOINT,
            Kind::Issue(_) => super::issue::ENDPOINT,
        }
    }

    /// What the move takes from the master balance in all.
    fn charged(&self) -> i64 {
        match self {
            Kind::Topup(t) => t.charged(),
            Kind::Issue(i) => i.charged(),
        }
    }

    /// The response body, from the order once its balances are set.
    fn body(&self, order: &OrderRecord) -> Result<Value, StoreError> {
        match self {
            Kind::Topup(_) => super::topup::body(order),
            Kind::Issue(i) => i.body(order),
        }
    }
}

/// What the writer applies: a request's move, or the provider's confirmation of a
/// top-up (from the order worker), whose amount then leaves the same project's
/// in-flight account that the top-ups fill.
pub enum Item {
    Move(Move),
    Confirmed(Box<super::topup::Confirmed>),
}

impl Item {
    fn project_id(&self) -> &str {
        match self {
            Item::Move(m) => &m.project_id,
            Item::Confirmed(c) => &c.order.project_id,
        }
    }
}

/// What a move's caller gets.
#[derive(Debug, Clone)]
pub enum Answer {
    /// A new order: its response body.
    Created(Value),
    /// The key's stored response (a retry).
    Stored { status: i64, body: String },
}

/// What the writer did with an item.
#[derive(Debug)]
pub enum Written {
    /// A move's answer, and the order it created if that was born leased to this
    /// process's workers (`workers/born.rs`): handed over once the batch is durable.
    Move(Answer, Option<Box<Handoff>>),
    /// A confirmed top-up completed its order.
    Confirmed,
}

/// A committed order born leased, and its place in the queue of this process's workers.
#[derive(Debug)]
pub struct Handoff {
    place: Place,
    order: OrderRecord,
    /// The end of its lease.
    until: i64,
    /// A card issue's card and holder name, so its worker reads neither.
    issue: Option<Box<IssueFacts>>,
}

/// The handle to the writers. Cloning shares them.
#[derive(Clone, Debug)]
pub struct MasterWriter(BatchWriter<Item, Written>);

impl MasterWriter {
    /// Starts the writers on `store`; they run until every handle is dropped.
    pub fn start(
        store: Store,
        orders_wakeup: Arc<Notify>,
        deliveries_wakeup: Arc<Notify>,
        born: Arc<Born>,
    ) -> MasterWriter {
        let shape = Shape::of(store.backend(), POSTGRES_STRIPES);
        let apply: ApplyFn<Item, Written> = Arc::new(move |mut conn, items, only| {
            let born = born.clone();
            Box::pin(async move { apply_in(&mut conn, &picked(&items, only), &born).await })
        });
        let wakeups = Wakeups {
            orders: orders_wakeup,
            deliveries: deliveries_wakeup,
        };
        MasterWriter(BatchWriter::start(
            store,
            "master_moves",
            shape,
            apply,
            wakeups,
        ))
    }

    pub fn stats(&self) -> &Stats {
        self.0.stats()
    }

    /// Applies `m` in its project's writer's next batch; answers once that batch is
    /// durable, after handing the order it created to this process's workers if it was
    /// born leased to them.
    pub async fn submit(&self, m: Move) -> Result<Answer, ApiError> {
        let project = m.project_id.clone();
        match self.0.submit(&project, Item::Move(m)).await? {
            Written::Move(answer, handoff) => {
                if let Some(h) = handoff {
                    h.place.hand_over(h.order, h.until, h.issue);
                }
                Ok(answer)
            }
            Written::Confirmed => Err(ApiError::internal()),
        }
    }

    /// Completes a top-up the provider confirmed in its project's writer's next batch:
    /// its order saved (if its worker still holds the lease) and its amount moved from
    /// in-flight to the card, together; answers once durable.
    pub async fn confirm(&self, c: super::topup::Confirmed) -> Result<(), ApiError> {
        let project = c.order.project_id.clone();
        match self
            .0
            .submit(&project, Item::Confirmed(Box::new(c)))
            .await?
        {
            Written::Confirmed => Ok(()),
            Written::Move(..) => Err(ApiError::internal()),
        }
    }
}

/// The answer a key that is not free gives.
pub fn answered(claim: Claim) -> Result<Answer, ApiError> {
    match claim {
        Claim::Done { status, body } => Ok(Answer::Stored { status, body }),
        refused => Err(conflict(&refused)),
    }
}

/// What a refused request answers: its key's first response if the key finished with
/// these parameters (CONTRACT §5: a retry gets it even if the checks would now refuse),
/// its conflict if the key is in use otherwise, else `refused`.
pub async fn unless_answered(
    store: &Store,
    token: &IdempotencyToken,
    refused: ApiError,
) -> Result<Answer, ApiError> {
    match stored_claim(store, token).await? {
        Some(claim) => answered(claim),
        None => Err(refused),
    }
}

/// Whether the key is not free: a request with it must not act before the writer
/// decides it (`unless_answered` then says what it gets).
pub async fn is_answered(store: &Store, token: &IdempotencyToken) -> Result<bool, ApiError> {
    Ok(stored_claim(store, token).await?.is_some())
}

async fn stored_claim(store: &Store, token: &IdempotencyToken) -> Result<Option<Claim>, ApiError> {
    let mut conn = store.conn().await?;
    let (project_id, endpoint) = token.scope();
    let stored =
        idempotency::lookup_many(&mut conn.as_batch(), project_id, endpoint, &[token.key()])
            .await?;
    Ok(stored
        .get(token.key())
        .and_then(|s| s.claim(token.hash(), issuing_domain::time::now_micros())))
}

type Answers = Vec<Result<Written, ApiError>>;

/// Every item's answer, applied on `conn` project by project (projects in id order),
/// and what the batch queued.
async fn apply_in(
    conn: &mut BatchConn<'_>,
    items: &[&Item],
    born: &Born,
) -> Result<(Answers, Queued), StoreError> {
    let mut by_project: Vec<usize> = (0..items.len()).collect();
    by_project.sort_by(|a, b| items[*a].project_id().cmp(items[*b].project_id()));
    let mut answers: Vec<Option<Result<Written, ApiError>>> = items.iter().map(|_| None).collect();
    let mut queued = Queued::default();
    for group in by_project.chunk_by(|a, b| items[*a].project_id() == items[*b].project_id()) {
        let members: Vec<&Item> = group.iter().map(|i| items[*i]).collect();
        let applied = apply_project(conn, &members, born).await?;
        queued.deliveries |= applied.deliveries > 0;
        queued.orders |= applied.claimable;
        for (i, answer) in group.iter().zip(applied.answers) {
            answers[*i] = Some(answer);
        }
    }
    let answers = answers
        .into_iter()
        .map(|a| a.ok_or_else(|| StoreError::Corrupt("a move without an answer".into())))
        .collect::<Result<_, _>>()?;
    Ok((answers, queued))
}

/// Where a batch's transfers come from: a move or a confirmation, by its place.
enum Source {
    Move(usize),
    Confirmed(usize),
}

/// One project's items applied.
struct Applied {
    answers: Answers,
    /// Webhook deliveries their events queued.
    deliveries: usize,
    /// Whether an order was created that no worker holds yet (its workers must claim it).
    claimable: bool,
}

/// One project's items, in arrival order, inside the batch's transaction.
async fn apply_project(
    conn: &mut BatchConn<'_>,
    items: &[&Item],
    born: &Born,
) -> Result<Applied, StoreError> {
    let Some(project_id) = items.first().map(|m| m.project_id()) else {
        return Ok(Applied {
            answers: Vec::new(),
            deliveries: 0,
            claimable: false,
        });
    };
    // Every move is a request; `Item` places are kept for the answers.
    let moves: Vec<Option<&Move>> = items
        .iter()
        .map(|item| match item {
            Item::Move(m) => Some(m),
            Item::Confirmed(_) => None,
        })
        .collect();
    let requests: Vec<&Move> = moves.iter().flatten().copied().collect();
    let (mut topup_cards, mut holders) = (Vec::new(), Vec::new());
    let (mut topup_keys, mut issue_keys) = (Vec::new(), Vec::new());
    for m in &requests {
        match &m.kind {
            Kind::Topup(t) => {
                topup_cards.push(t.card_id.as_str());
                topup_keys.push(m.token.key());
            }
            Kind::Issue(i) => {
                holders.push(i.card.cardholder_id.as_str());
                issue_keys.push(m.token.key());
            }
        }
    }
    // Only an issue that charges nothing checks the debt itself: any debit is refused
    // while the project owes, as its master account is then at zero.
    let in_debt = if requests.iter().any(|m| m.kind.charged() == 0) {
        ledger::lock_master_read_debt(conn, project_id)
            .await?
            .micros()
            < 0
    } else {
        false
    };
    let accounts = ProjectAccounts {
        master: ledger::project_account(conn, project_id, AccountKind::Master).await?,
        in_flight: ledger::project_account(conn, project_id, AccountKind::InFlight).await?,
        fee_income: ledger::project_account(conn, project_id, AccountKind::FeeIncome).await?,
    };
    // Every move's transfers, planned now so the accounts they touch are locked with the
    // batch's reads; a move's are posted only if it passes its checks.
    let mut plans: Vec<Option<Vec<Planned>>> = Vec::with_capacity(moves.len());
    for m in &moves {
        plans.push(match m.map(|m| (&m.kind, m.order_id.as_str())) {
            Some((Kind::Topup(t), order_id)) => Some(t.transfers(order_id, &accounts)?),
            Some((Kind::Issue(issue), order_id)) => Some(issue.transfers(order_id, &accounts)?),
            None => None,
        });
    }
    let confirmations =
        super::topup::Confirmations::plan(conn, project_id, items, &accounts).await?;
    let every_plan = plans.iter().flatten().chain(confirmations.plans());
    let locked = ledger_batch::lock_order(
        conn,
        project_id,
        ledger_batch::touched(every_plan.flatten(), &accounts.master),
    )
    .await?;
    // What the batch reads and saves before its checks, in one round trip: the
    // confirmed orders' saves, the keys of both endpoints, the top-ups' cards, the
    // issues' cardholders, the accounts (locked) and the project's subscriptions.
    let [saved_rows, topup_rows, issue_rows, card_rows, holder_rows, account_rows, subscription_rows]: [Vec<Row>; 7] = conn
        .together(&[
            confirmations.saves(),
            Part::Keys(idempotency::lookup(project_id, super::topup::ENDPOINT, topup_keys)),
            Part::Keys(idempotency::lookup(project_id, super::issue::ENDPOINT, issue_keys)),
            Part::Keys(cards::statuses_lookup(project_id, topup_cards)),
            Part::Keys(cardholders::statuses_lookup(project_id, holders)),
            ledger_batch::lock_part(project_id, &locked),
            subscriptions::active_part(project_id),
        ])
        .await?
        .try_into()
        .map_err(|_| StoreError::Corrupt("the batch's reads answered out of shape".into()))?;
    let stored = stored_keys(&requests, [topup_rows, issue_rows])?;
    let card_statuses = cards::statuses_of(card_rows)?;
    let holder_statuses = cardholders::statuses_of(holder_rows)?;
    let now = items
        .iter()
        .map(|item| match item {
            Item::Move(m) => m.now,
            Item::Confirmed(c) => c.order.updated_at,
        })
        .max()
        .unwrap_or(0);
    let mut batch = ledger_batch::Batch::of_rows(project_id, &locked, account_rows, now)?;
    let subscriptions =
        HashMap::from([(project_id, subscriptions::active_of(&subscription_rows)?)]);

    let mut answers: Vec<Option<Result<Answer, ApiError>>> = items.iter().map(|_| None).collect();
    let mut confirmed = Vec::new();
    // The first move of the batch with each key; later ones answer what it got.
    let mut first_with_key: HashMap<(&str, &str), usize> = HashMap::new();
    let mut repeats = Vec::new();
    let (mut planned, mut planned_for) = (Vec::new(), Vec::new());
    for (i, (m, plan)) in moves.iter().zip(plans).enumerate() {
        let (Some(m), Some(transfers)) = (m, plan) else {
            continue;
        };
        let key = (m.kind.endpoint(), m.token.key());
        if let Some(first) = first_with_key.get(&key) {
            repeats.push((i, *first));
            continue;
        }
        first_with_key.insert(key, i);
        if let Some(claim) = stored
            .get(&key)
            .and_then(|s| s.claim(m.token.hash(), m.now))
        {
            answers[i] = Some(answered(claim));
            continue;
        }
        let refused = match &m.kind {
            Kind::Topup(t) => super::topup::card_refusal(card_statuses.get(&t.card_id)),
            Kind::Issue(issue) => {
                super::issue::holder_refusal(holder_statuses.get(&issue.card.cardholder_id))
            }
        };
        if let Some(refused) = refused {
            answers[i] = Some(Err(refused));
            continue;
        }
        if in_debt && m.kind.charged() == 0 {
            answers[i] = Some(Err(StoreError::InsufficientFunds {
                account_id: accounts.master.clone(),
            }
            .into()));
            continue;
        }
        planned.push(transfers);
        planned_for.push(Source::Move(i));
    }
    for (i, saved) in confirmations.saved(&saved_rows)? {
        match saved {
            Ok(transfers) => {
                planned.push(transfers);
                planned_for.push(Source::Confirmed(i));
            }
            Err(lost) => confirmed.push((i, Err(lost))),
        }
    }

    let mut inserts = Inserts::default();
    let posted = batch.post_all(&planned, &accounts.master);
    batch.finish(conn, &mut inserts).await?;
    let (mut new_orders, mut events_of, mut finished, mut bodies) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut new_cards = Vec::new();
    for (source, (posted, master_after)) in planned_for.into_iter().zip(posted) {
        let i = match source {
            Source::Move(i) => i,
            Source::Confirmed(i) => {
                // Its order is saved completed in this transaction: a confirmation whose
                // money is not in flight breaks an invariant, and fails the batch (which
                // then reruns it alone).
                posted?;
                confirmed.push((i, Ok(Written::Confirmed)));
                continue;
            }
        };
        let Some(m) = moves[i] else { continue };
        if let Err(refused) = posted {
            answers[i] = Some(Err(refused.into()));
            continue;
        }
        let made = match &m.kind {
            Kind::Topup(t) => t.made(m),
            Kind::Issue(issue) => {
                new_cards.push(issue.card.clone());
                issue.made(m)
            }
        };
        let mut order = made.order;
        order.balance_before = Some(master_after + m.kind.charged());
        order.balance_after = Some(master_after);
        let body = m.kind.body(&order)?;
        finished.push(Finished {
            key: m.token.as_key(),
            status: 200,
            body: body.to_string(),
            now: m.now,
            expires_at: m.key_expires_at,
        });
        bodies.push((i, body));
        events_of.push((made.event_type, made.event));
        new_orders.push(order);
    }
    cards::insert_many(&mut inserts, &new_cards);
    for card in &new_cards {
        ledger::open_card_accounts(&mut inserts, project_id, &card.id, card.created_at);
    }
    // Each new order with a place in this process's queue is born leased to its workers,
    // its attempt counted as the claim it replaces would count it. `bodies` and
    // `new_orders` were pushed together, one per created order.
    let lease_until = issuing_domain::time::now_micros() + crate::flows::born::lease_micros();
    let (mut leased, mut places, mut claimable) = (Vec::new(), Vec::new(), Vec::new());
    for ((i, _), order) in bodies.iter().zip(&new_orders) {
        let mut order = order.clone();
        match born.reserve() {
            Some(place) => {
                order.attempts += 1;
                leased.push(order);
                let facts = match moves[*i].map(|m| &m.kind) {
                    Some(Kind::Issue(issue)) => Some(Box::new(IssueFacts {
                        card: issue.card.clone(),
                        holder_name: issue.holder_name.clone(),
                    })),
                    _ => None,
                };
                places.push((*i, place, facts));
            }
            None => claimable.push(order),
        }
    }
    orders::insert_many(&mut inserts, &leased, Some((born.worker_id(), lease_until)));
    orders::insert_many(&mut inserts, &claimable, None);
    let new_events: Vec<NewEvent<'_>> = new_orders
        .iter()
        .zip(&events_of)
        .map(|(o, (event_type, payload))| NewEvent {
            project_id,
            event_type,
            card_id: o.card_id.as_deref(),
            order_id: Some(&o.id),
            payload,
            now: o.created_at,
        })
        .collect();
    let deliveries = events::insert_many(&new_events, &subscriptions, &mut inserts);
    // Only a key stored before (expired, or a dead request's claim) has a row to replace.
    let replacing = finished
        .iter()
        .any(|f| stored.contains_key(&(f.key.endpoint, f.key.key)));
    idempotency::store_many(conn, &finished, replacing, &mut inserts).await?;
    if !claimable.is_empty() {
        issuing_store::wakeup::announce_with(&mut inserts, issuing_store::wakeup::Queue::Orders);
    }
    inserts.write(conn).await?;
    let mut handoffs: HashMap<usize, Box<Handoff>> = places
        .into_iter()
        .zip(leased)
        .map(|((i, place, issue), order)| {
            let handoff = Handoff {
                place,
                order,
                until: lease_until,
                issue,
            };
            (i, Box::new(handoff))
        })
        .collect();
    for (i, body) in bodies {
        answers[i] = Some(Ok(Answer::Created(body)));
    }
    for (i, first) in repeats {
        if let (Some(m), Some(first_move)) = (moves[i], moves[first]) {
            answers[i] = Some(repeated(m, first_move, answers[first].as_ref()));
        }
    }
    let mut answers: Vec<Option<Result<Written, ApiError>>> = answers
        .into_iter()
        .enumerate()
        .map(|(i, a)| a.map(|a| a.map(|answer| Written::Move(answer, handoffs.remove(&i)))))
        .collect();
    for (i, written) in confirmed {
        answers[i] = Some(written);
    }
    let answers = answers
        .into_iter()
        .map(|a| a.ok_or_else(|| StoreError::Corrupt("an item without an answer".into())))
        .collect::<Result<_, _>>()?;
    Ok(Applied {
        answers,
        deliveries,
        claimable: !claimable.is_empty(),
    })
}

/// The stored keys of the batch's moves, by endpoint and key, from the rows of the
/// lookups of the top-ups' keys and the issues' keys.
fn stored_keys<'m>(
    moves: &[&'m Move],
    rows: [Vec<Row>; 2],
) -> Result<HashMap<(&'static str, &'m str), Stored>, StoreError> {
    let mut found = HashMap::new();
    for (endpoint, rows) in [super::topup::ENDPOINT, super::issue::ENDPOINT]
        .into_iter()
        .zip(rows)
    {
        let mut stored = idempotency::stored_of(rows)?;
        for m in moves.iter().filter(|m| m.kind.endpoint() == endpoint) {
            let key = m.token.key();
            if let Some(s) = stored.remove(key) {
                found.insert((endpoint, key), s);
            }
        }
    }
    Ok(found)
}

/// A second move of a batch with the first's key: the first's answer if their
/// parameters agree (as a retry after it would get), else a conflict.
fn repeated(
    m: &Move,
    first: &Move,
    first_answer: Option<&Result<Answer, ApiError>>,
) -> Result<Answer, ApiError> {
    if m.token.hash() != first.token.hash() {
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
