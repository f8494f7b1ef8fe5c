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

use crate::pipeline::idempotency::{conflict, IdempotencyToken};
use issuing_domain::ledger::AccountKind;
use issuing_store::events::{self, NewEvent};
use issuing_store::group_commit::Stats;
use issuing_store::idempotency::{self, Claim, Finished, Stored};
use issuing_store::ledger_batch;
use issuing_store::orders::{self, OrderRecord};
use issuing_store::query::Inserts;
use issuing_store::{cardholders, cards, ledger, Backend, Conn, Store, StoreError};
use issuing_wire::ApiError;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Notify};

/// The most moves in one transaction: bounds how long a batch holds the write lock
/// (SQLite) or its projects' rows (PostgreSQL), and so the p99 of its callers.
const MAX_BATCH: usize = 64;
const QUEUE: usize = 1024;
/// PostgreSQL writers; projects are spread over them by hash.
const POSTGRES_STRIPES: usize = 4;

/// A top-up or card issue that passed the checks needing no lock, for the writer.
pub(crate) struct Move {
    pub project_id: String,
    /// The order it creates (and for a card issue, the card's id is in `kind`).
    pub order_id: String,
    pub now: i64,
    pub token: IdempotencyToken,
    /// Until when its key stays valid (CONTRACT §5: 7 days).
    pub key_expires_at: i64,
    pub kind: Kind,
}

pub(crate) enum Kind {
    Topup(super::topup::TopupMove),
    Issue(Box<super::issue::IssueMove>),
}

/// The project's accounts a move's transfers name.
pub(crate) struct ProjectAccounts {
    pub master: String,
    pub in_flight: String,
    pub fee_income: String,
}

/// What an accepted move writes besides its transfers; its order's balances are set by
/// the writer.
pub(crate) struct Made {
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

/// What a move's caller gets.
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
pub(crate) struct MasterWriter {
    stripes: Arc<Vec<mpsc::Sender<(Move, Reply)>>>,
    stats: Arc<Stats>,
}

impl std::fmt::Debug for MasterWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterWriter").finish_non_exhaustive()
    }
}

impl MasterWriter {
    /// Starts the writers on `store`; they run until every handle is dropped.
    pub(crate) fn start(
        store: Store,
        orders_wakeup: Arc<Notify>,
        deliveries_wakeup: Arc<Notify>,
    ) -> MasterWriter {
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
        MasterWriter {
            stripes: Arc::new(stripes),
            stats,
        }
    }

    pub(crate) fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Applies `m` in its writer's next batch; answers once that batch is durable.
    pub(crate) async fn submit(&self, m: Move) -> Result<Answer, ApiError> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        m.project_id.hash(&mut hasher);
        let stripe = usize::try_from(hasher.finish() % self.stripes.len() as u64).unwrap_or(0);
        let writer = self.stripes.get(stripe).ok_or_else(ApiError::internal)?;
        let (reply, answer) = oneshot::channel();
        if writer.send((m, reply)).await.is_err() {
            return Err(StoreError::Batch("the master balance's writer has stopped".into()).into());
        }
        answer
            .await
            .unwrap_or_else(|_| Err(StoreError::Batch("the move was abandoned".into()).into()))
    }
}

/// The answer a key that is not free gives.
pub(crate) fn answered(claim: Claim) -> Result<Answer, ApiError> {
    match claim {
        Claim::Done { status, body } => Ok(Answer::Stored { status, body }),
        refused => Err(conflict(&refused)),
    }
}

/// What a refused request answers: its key's first response if the key finished with
/// these parameters (CONTRACT §5: a retry gets it even if the checks would now refuse),
/// its conflict if the key is in use otherwise, else `refused`.
pub(crate) async fn unless_answered(
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
pub(crate) async fn is_answered(store: &Store, token: &IdempotencyToken) -> Result<bool, ApiError> {
    Ok(stored_claim(store, token).await?.is_some())
}

async fn stored_claim(store: &Store, token: &IdempotencyToken) -> Result<Option<Claim>, ApiError> {
    let mut conn = store.conn().await?;
    let (project_id, endpoint) = token.scope();
    let stored = idempotency::lookup_many(&mut conn, project_id, endpoint, &[token.key()]).await?;
    Ok(stored
        .get(token.key())
        .and_then(|s| s.claim(token.hash(), issuing_domain::time::now_micros())))
}

async fn write(
    store: Store,
    mut queue: mpsc::Receiver<(Move, Reply)>,
    stats: Arc<Stats>,
    wakeups: [Arc<Notify>; 2],
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while queue.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let (moves, replies): (Vec<Move>, Vec<Reply>) =
            std::mem::take(&mut batch).into_iter().unzip();
        let answers = match apply(&store, &moves, &stats).await {
            Ok((answers, durable)) => Pending::Committed(answers, durable),
            Err(why) if moves.len() > 1 => {
                tracing::warn!(error = %why, moves = moves.len(), "a batch of the master balance's writer failed; applying its moves one by one");
                let mut answers = Vec::with_capacity(moves.len());
                for m in &moves {
                    let alone = match apply(&store, std::slice::from_ref(m), &stats).await {
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
                // The caller may have gone; the move stands either way.
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
    /// move of the batch fails (none may be announced).
    async fn wait(self) -> Vec<Result<Answer, ApiError>> {
        match self {
            Pending::Ready(answers) => answers,
            Pending::Committed(answers, durable) => match durable.wait().await {
                Ok(()) => answers,
                Err(e) => {
                    let why = StoreError::from(e);
                    tracing::error!(error = %why, "a commit of the master balance's writer failed");
                    answers
                        .iter()
                        .map(|_| Err(StoreError::Batch(why.to_string()).into()))
                        .collect()
                }
            },
        }
    }
}

/// One transaction for `moves`, each project's in id order. Answers each move, and
/// the commit to wait for before telling anyone. An `Err` means nothing was written.
async fn apply(
    store: &Store,
    moves: &[Move],
    stats: &Stats,
) -> Result<(Vec<Result<Answer, ApiError>>, issuing_store::Durable), StoreError> {
    stats.batches.fetch_add(1, Ordering::Relaxed);
    stats
        .operations
        .fetch_add(moves.len() as u64, Ordering::Relaxed);
    let mut by_project: Vec<usize> = (0..moves.len()).collect();
    by_project.sort_by(|a, b| moves[*a].project_id.cmp(&moves[*b].project_id));
    let mut answers: Vec<Option<Result<Answer, ApiError>>> = moves.iter().map(|_| None).collect();
    let mut tx = store.begin().await?;
    for group in by_project.chunk_by(|a, b| moves[*a].project_id == moves[*b].project_id) {
        let members: Vec<&Move> = group.iter().map(|i| &moves[*i]).collect();
        let decided = apply_project(&mut tx, store.backend(), &members).await?;
        for (i, answer) in group.iter().zip(decided) {
            answers[*i] = Some(answer);
        }
    }
    let durable = tx.commit_deferred().await?;
    let answers = answers
        .into_iter()
        .map(|a| a.ok_or_else(|| StoreError::Corrupt("a move without an answer".into())))
        .collect::<Result<_, _>>()?;
    Ok((answers, durable))
}

/// One project's moves, in arrival order, inside the batch's transaction.
async fn apply_project(
    conn: &mut Conn,
    backend: Backend,
    moves: &[&Move],
) -> Result<Vec<Result<Answer, ApiError>>, StoreError> {
    let Some(project_id) = moves.first().map(|m| m.project_id.as_str()) else {
        return Ok(Vec::new());
    };
    let stored = stored_keys(conn, project_id, moves).await?;
    let (mut topup_cards, mut holders) = (Vec::new(), Vec::new());
    for m in moves {
        match &m.kind {
            Kind::Topup(t) => topup_cards.push(t.card_id.as_str()),
            Kind::Issue(i) => holders.push(i.card.cardholder_id.as_str()),
        }
    }
    let card_statuses = cards::statuses(conn, project_id, &topup_cards).await?;
    let holder_statuses = cardholders::statuses(conn, project_id, &holders).await?;
    // Only an issue that charges nothing checks the debt itself: any debit is refused
    // while the project owes, as its master account is then at zero.
    let in_debt = if moves.iter().any(|m| m.kind.charged() == 0) {
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

    let mut answers: Vec<Option<Result<Answer, ApiError>>> = moves.iter().map(|_| None).collect();
    // The first move of the batch with each key; later ones answer what it got.
    let mut first_with_key: HashMap<(&str, &str), usize> = HashMap::new();
    let mut repeats = Vec::new();
    let (mut planned, mut planned_for) = (Vec::new(), Vec::new());
    for (i, m) in moves.iter().enumerate() {
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
        let transfers = match &m.kind {
            Kind::Topup(t) => t.transfers(&m.order_id, &accounts)?,
            Kind::Issue(issue) => issue.transfers(&m.order_id, &accounts)?,
        };
        planned.push(transfers);
        planned_for.push(i);
    }

    let now = moves.iter().map(|m| m.now).max().unwrap_or(0);
    let mut inserts = Inserts::default();
    let posted = ledger_batch::post_batch(
        conn,
        backend,
        project_id,
        &planned,
        &accounts.master,
        now,
        &mut inserts,
    )
    .await?;
    let (mut new_orders, mut events_of, mut finished, mut bodies) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut new_cards = Vec::new();
    for (i, (posted, master_after)) in planned_for.into_iter().zip(posted) {
        let m = moves[i];
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
    orders::insert_many(&mut inserts, &new_orders);
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
    events::insert_many(conn, &new_events, &mut inserts).await?;
    // Only a key stored before (expired, or a dead request's claim) has a row to replace.
    let replacing = finished
        .iter()
        .any(|f| stored.contains_key(&(f.key.endpoint, f.key.key)));
    idempotency::store_many(conn, &finished, replacing, &mut inserts).await?;
    inserts.write(conn).await?;
    if !new_orders.is_empty() {
        issuing_store::wakeup::announce(conn, issuing_store::wakeup::Queue::Orders).await?;
    }
    for (i, body) in bodies {
        answers[i] = Some(Ok(Answer::Created(body)));
    }
    for (i, first) in repeats {
        answers[i] = Some(repeated(moves[i], moves[first], answers[first].as_ref()));
    }
    answers
        .into_iter()
        .map(|a| a.ok_or_else(|| StoreError::Corrupt("a move without an answer".into())))
        .collect()
}

/// The stored keys of the batch's moves, by endpoint and key.
async fn stored_keys<'m>(
    conn: &mut Conn,
    project_id: &str,
    moves: &[&'m Move],
) -> Result<HashMap<(&'static str, &'m str), Stored>, StoreError> {
    let mut found = HashMap::new();
    for endpoint in [super::topup::ENDPOINT, super::issue::ENDPOINT] {
        let keys: Vec<&str> = moves
            .iter()
            .filter(|m| m.kind.endpoint() == endpoint)
            .map(|m| m.token.key())
            .collect();
        let mut stored = idempotency::lookup_many(conn, project_id, endpoint, &keys).await?;
        for key in keys {
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
