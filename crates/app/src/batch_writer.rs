//! The loop every batch writer shares (docs/money.md, "One writer per hot account"):
//! the master balance's writer (`flows/master_writer.rs`), the authorizations' writer
//! (`network/auth_writer.rs`), the webhook outcomes' (`workers/outcomes.rs`), the
//! users' (`flows/user_writer.rs`), the issued cards' (`workers/issued.rs`) and the
//! sandbox provider's books (`provider/sandbox.rs`).
//!
//! Callers queue items for a writer; a writer applies up to `MAX_BATCH` items in one
//! transaction (`apply`): a batch takes every item that arrives until its transaction
//! starts (`Gathering`), then answers every caller only once
//! that transaction is durable, from a task of its own so the next batch starts while
//! this one's log reaches the disk, and then wakes this process's workers for what the
//! batch queued (orders, webhook deliveries). An unexpected error of a batch (anything but the
//! items' own refusals, which `apply` answers per item) rolls it back and reruns its
//! items one per transaction, so only the faulty one fails.
//!
//! Items are spread over `stripes` writers by a key the caller gives (a project, a
//! card), so one key always has the same writer and its items are applied in arrival
//! order.
//!
//! Bounded: `QUEUE` items wait per writer (callers wait for room beyond), a batch holds
//! at most `MAX_BATCH`.

use futures::future::BoxFuture;
use issuing_store::group_commit::Stats;
use issuing_store::writer::{BatchConn, Lane};
use issuing_store::{Durable, Store, StoreError};
use issuing_wire::ApiError;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::{mpsc, oneshot, Notify};

/// The most items in one transaction: bounds how long a batch holds the write lock
/// (SQLite) or its rows (PostgreSQL), and so the p99 of its callers.
pub const MAX_BATCH: usize = 64;
const QUEUE: usize = 1024;

/// Each item's answer, in the batch's order.
pub type Answers<A> = Vec<Result<A, ApiError>>;

/// What a batch queued for this process's workers, to wake them once it is durable
/// (other processes get PostgreSQL's NOTIFY, sent in the batch's transaction).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    pub orders: bool,
    pub deliveries: bool,
}

/// The workers a batch may wake (the default: none that anybody waits on).
#[derive(Clone, Default)]
pub struct Wakeups {
    pub orders: Arc<Notify>,
    pub deliveries: Arc<Notify>,
}

impl Wakeups {
    fn wake(&self, queued: Queued) {
        if queued.orders {
            self.orders.notify_one();
        }
        if queued.deliveries {
            self.deliveries.notify_one();
        }
    }
}

/// A batch applied: each item's answer, what it queued, and the commit to wait for
/// before telling anyone.
pub type Applied<A> = (Answers<A>, Queued, Durable);

/// Applies a batch (or, with `Some(i)`, only its item `i`: `picked`) on the connection
/// of the transaction the writer runs it in (`Store::write_batch_in`, on the writer's
/// own connection): each item's answer, and what the batch queued. An `Err` rolls the
/// transaction back: nothing was written.
pub type ApplyFn<I, A> = Arc<
    dyn for<'c> Fn(
            BatchConn<'c>,
            Arc<Vec<I>>,
            Option<usize>,
        ) -> BoxFuture<'c, Result<(Answers<A>, Queued), StoreError>>
        + Send
        + Sync,
>;

/// The items an `ApplyFn` applies: all of `items`, or with `Some(i)` only item `i`.
pub fn picked<I>(items: &[I], only: Option<usize>) -> Vec<&I> {
    match only {
        Some(i) => items.get(i).into_iter().collect(),
        None => items.iter().collect(),
    }
}

type Reply<A> = oneshot::Sender<Result<A, ApiError>>;
/// One writer's queue: each item with the reply its caller waits for.
type Queue<I, A> = mpsc::Sender<(I, Reply<A>)>;

/// How a writer's work is laid out.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Writers, each with its own queue; a key always goes to the same one.
    pub stripes: usize,
    /// Batches of one writer under way at once. More than one only where batches are
    /// applied one after another in the order they were started (SQLite's one writer
    /// thread): the next batch then waits, queued and still gathering, while the one
    /// before it commits, instead of being started only after its answer came back.
    pub depth: usize,
}

impl Shape {
    /// The shape of a backend: SQLite has one writer thread, so one stripe two deep;
    /// PostgreSQL `stripes` writers one batch at a time each, so a key's batches never
    /// run side by side on two connections.
    pub fn of(backend: issuing_store::Backend, stripes: usize) -> Shape {
        match backend {
            issuing_store::Backend::Sqlite => Shape {
                stripes: 1,
                depth: 2,
            },
            issuing_store::Backend::Postgres => Shape { stripes, depth: 1 },
        }
    }
}

/// The handle to a writer's stripes. Cloning shares them.
pub struct BatchWriter<I, A> {
    name: &'static str,
    stripes: Arc<Vec<Queue<I, A>>>,
    stats: Arc<Stats>,
}

impl<I, A> Clone for BatchWriter<I, A> {
    fn clone(&self) -> Self {
        BatchWriter {
            name: self.name,
            stripes: self.stripes.clone(),
            stats: self.stats.clone(),
        }
    }
}

impl<I, A> std::fmt::Debug for BatchWriter<I, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchWriter")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl<I: Send + Sync + 'static, A: Send + 'static> BatchWriter<I, A> {
    /// Starts `stripes` writers on `store`; they run until every handle is dropped.
    pub fn start(
        store: Store,
        name: &'static str,
        shape: Shape,
        apply: ApplyFn<I, A>,
        wakeups: Wakeups,
    ) -> BatchWriter<I, A> {
        let stats = Arc::<Stats>::default();
        let stripes = (0..shape.stripes.max(1))
            .map(|_| {
                let (items, queue) = mpsc::channel(QUEUE);
                tokio::spawn(run(
                    store.clone(),
                    name,
                    queue,
                    apply.clone(),
                    wakeups.clone(),
                    stats.clone(),
                    shape.depth.max(1),
                ));
                items
            })
            .collect();
        BatchWriter {
            name,
            stripes: Arc::new(stripes),
            stats,
        }
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Applies `item` in the next batch of the writer of `key`; answers once that
    /// batch is durable.
    pub async fn submit(&self, key: &str, item: I) -> Result<A, ApiError> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut hasher);
        let stripe = usize::try_from(hasher.finish() % self.stripes.len() as u64).unwrap_or(0);
        let writer = self.stripes.get(stripe).ok_or_else(ApiError::internal)?;
        let (reply, answer) = oneshot::channel();
        if writer.send((item, reply)).await.is_err() {
            return Err(StoreError::Batch(format!("the {} writer has stopped", self.name)).into());
        }
        answer
            .await
            .unwrap_or_else(|_| Err(StoreError::Batch("the item was abandoned".into()).into()))
    }
}

async fn run<I: Send + Sync + 'static, A: Send + 'static>(
    store: Store,
    name: &'static str,
    mut queue: mpsc::Receiver<(I, Reply<A>)>,
    apply: ApplyFn<I, A>,
    wakeups: Wakeups,
    stats: Arc<Stats>,
    depth: usize,
) {
    use futures::stream::{FuturesOrdered, StreamExt};
    let lane = Lane::default();
    let mut in_flight = FuturesOrdered::new();
    let mut open = true;
    // The newest batch, taking items until its transaction starts.
    let mut gathering: Option<Shared<I, A>> = None;
    // Items received that no batch could take yet (at most one `recv_many`).
    let mut held: VecDeque<(I, Reply<A>)> = VecDeque::with_capacity(MAX_BATCH);
    loop {
        while let Some((item, reply)) = held.pop_front() {
            let refused = match &gathering {
                Some(g) => Gathering::offer(g, item, reply),
                None => Err((item, reply)),
            };
            let Err((item, reply)) = refused else {
                continue;
            };
            if in_flight.len() >= depth {
                held.push_front((item, reply));
                break;
            }
            let g = Gathering::new(item, reply);
            gathering = Some(g.clone());
            let writer = Writer {
                store: store.clone(),
                lane: lane.clone(),
                apply: apply.clone(),
            };
            in_flight.push_back(one_batch(name, g, writer, wakeups.clone(), stats.clone()));
        }
        let mut got = Vec::with_capacity(MAX_BATCH);
        tokio::select! {
            biased;
            Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
            n = queue.recv_many(&mut got, MAX_BATCH), if open && held.is_empty() => {
                if n == 0 {
                    open = false;
                }
                held.extend(got);
            }
            else => return,
        }
    }
}

/// The items and replies of a batch that is still taking items: it is queued for its
/// transaction at once, and takes what arrives until that transaction starts (`seal`).
/// On SQLite's one writer thread a batch waits there while the one before it commits;
/// gathered at queueing time it would hold the item or two that had arrived, and what
/// arrived during the wait would make a batch of its own, paying a commit of its own.
struct Gathering<I, A> {
    items: Vec<I>,
    replies: Vec<Reply<A>>,
    sealed: Option<Arc<Vec<I>>>,
}

type Shared<I, A> = Arc<Mutex<Gathering<I, A>>>;

impl<I, A> Gathering<I, A> {
    fn new(item: I, reply: Reply<A>) -> Shared<I, A> {
        let mut items = Vec::with_capacity(MAX_BATCH);
        items.push(item);
        let mut replies = Vec::with_capacity(MAX_BATCH);
        replies.push(reply);
        Arc::new(Mutex::new(Gathering {
            items,
            replies,
            sealed: None,
        }))
    }

    /// Adds an item unless the batch has started or is full (then answers it back).
    fn offer(g: &Shared<I, A>, item: I, reply: Reply<A>) -> Result<(), (I, Reply<A>)> {
        let mut g = g.lock().unwrap_or_else(PoisonError::into_inner);
        if g.sealed.is_some() || g.items.len() >= MAX_BATCH {
            return Err((item, reply));
        }
        g.items.push(item);
        g.replies.push(reply);
        Ok(())
    }

    /// The batch's items, final from the first call on.
    fn seal(g: &Shared<I, A>) -> Arc<Vec<I>> {
        let mut g = g.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(items) = &g.sealed {
            return items.clone();
        }
        let items = Arc::new(std::mem::take(&mut g.items));
        g.sealed = Some(items.clone());
        items
    }

    fn take_replies(g: &Shared<I, A>) -> Vec<Reply<A>> {
        std::mem::take(&mut g.lock().unwrap_or_else(PoisonError::into_inner).replies)
    }
}

/// What a transaction of a writer applies: a batch still gathering (sealed when the
/// transaction starts), or items already sealed (a failed batch's reruns).
enum Source<I, A> {
    Gathering(Shared<I, A>),
    Sealed(Arc<Vec<I>>),
}

/// Where a writer applies its batches.
struct Writer<I, A> {
    store: Store,
    lane: Lane,
    apply: ApplyFn<I, A>,
}

impl<I: Send + Sync + 'static, A: Send + 'static> Writer<I, A> {
    /// `apply` in a transaction of its own on the writer's connection.
    async fn apply(
        &self,
        source: Source<I, A>,
        only: Option<usize>,
    ) -> Result<Applied<A>, StoreError> {
        let apply = self.apply.clone();
        let ((answers, queued), durable) = self
            .store
            .write_batch_in(&self.lane, move |conn| {
                let items = match source {
                    Source::Gathering(g) => Gathering::seal(&g),
                    Source::Sealed(items) => items,
                };
                apply(conn, items, only)
            })
            .await?;
        Ok((answers, queued, durable))
    }
}

/// Applies one batch (its items one by one if it fails as a whole) and answers its
/// callers from a task of its own once it is durable.
async fn one_batch<I: Send + Sync + 'static, A: Send + 'static>(
    name: &'static str,
    gathering: Shared<I, A>,
    writer: Writer<I, A>,
    wakeups: Wakeups,
    stats: Arc<Stats>,
) {
    let first = writer
        .apply(Source::Gathering(gathering.clone()), None)
        .await;
    // Sealed by its transaction, or here if that never started.
    let items = Gathering::seal(&gathering);
    let replies = Gathering::take_replies(&gathering);
    debug_assert_eq!(items.len(), replies.len());
    stats.batches.fetch_add(1, Ordering::Relaxed);
    stats
        .operations
        .fetch_add(items.len() as u64, Ordering::Relaxed);
    let pending = match first {
        Ok((answers, queued, durable)) => Pending::Committed(answers, queued, durable),
        Err(why) if items.len() > 1 => {
            tracing::warn!(writer = name, error = %why, items = items.len(), "a batch failed; applying its items one by one");
            let mut answers = Vec::with_capacity(items.len());
            let mut queued = Queued::default();
            for i in 0..items.len() {
                stats.batches.fetch_add(1, Ordering::Relaxed);
                let alone = match writer.apply(Source::Sealed(items.clone()), Some(i)).await {
                    Ok((mut answer, q, durable)) => match durable.wait().await {
                        Ok(()) => {
                            queued.orders |= q.orders;
                            queued.deliveries |= q.deliveries;
                            answer.pop().unwrap_or_else(|| Err(ApiError::internal()))
                        }
                        Err(e) => Err(StoreError::from(e).into()),
                    },
                    Err(e) => Err(e.into()),
                };
                answers.push(alone);
            }
            Pending::Ready(answers, queued)
        }
        Err(why) => Pending::Ready(vec![Err(ApiError::from(why))], Queued::default()),
    };
    tokio::spawn(async move {
        let (answers, queued) = pending.wait(name).await;
        wakeups.wake(queued);
        for (reply, answer) in replies.into_iter().zip(answers) {
            // The caller may have gone; its item stands either way.
            let _ = reply.send(answer);
        }
    });
}

/// A batch's answers, and what they wait for.
enum Pending<A> {
    Ready(Answers<A>, Queued),
    Committed(Answers<A>, Queued, Durable),
}

impl<A> Pending<A> {
    /// The answers once the commit is durable; if it could not be made so, every
    /// item of the batch fails (none may be announced) and nothing is woken.
    async fn wait(self, name: &str) -> (Answers<A>, Queued) {
        match self {
            Pending::Ready(answers, queued) => (answers, queued),
            Pending::Committed(answers, queued, durable) => match durable.wait().await {
                Ok(()) => (answers, queued),
                Err(e) => {
                    let why = StoreError::from(e);
                    tracing::error!(writer = name, error = %why, "a batch's commit failed");
                    let failed = answers.iter().map(|_| Err(why.repeat().into())).collect();
                    (failed, Queued::default())
                }
            },
        }
    }
}
