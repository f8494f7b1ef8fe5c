//! The PostgreSQL replay guard: requests queue their (key, path, timestamp) and a few
//! flushers insert whatever is queued in one statement each. The row insert is what
//! makes the guarantee hold across processes; batching makes it one round trip per
//! batch instead of per request. Each flusher commits on a connection of its own
//! without waiting for the log flush; the request's answer waits for a barrier instead
//! (`durable.rs`).

use super::durable::{Flushes, Ticket};
use super::Admission;
use issuing_store::replay::{self, Entry, MAX_BATCH};
use issuing_store::{Conn, Store, StoreError};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch, Mutex};

/// Requests waiting for a flush; beyond it new requests wait for room.
const QUEUE: usize = 4_096;
/// Concurrent flushes: one fills while others are on the wire.
const FLUSHERS: usize = 4;

type Reply = oneshot::Sender<Result<(bool, Ticket), StoreError>>;

#[derive(Clone)]
pub(crate) struct Batcher {
    tx: mpsc::Sender<(Entry, Reply)>,
    flushes: Arc<Flushes>,
}

impl Batcher {
    pub fn start(store: Store, shutdown: watch::Receiver<bool>) -> Batcher {
        let (tx, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let flushes = Flushes::start(
            store.commits().clone(),
            barrier(store.clone()),
            shutdown.clone(),
        );
        for _ in 0..FLUSHERS {
            tokio::spawn(flusher(
                store.clone(),
                rx.clone(),
                flushes.clone(),
                shutdown.clone(),
            ));
        }
        Batcher { tx, flushes }
    }

    /// The guard's answer, and the ticket the request's answer must wait for
    /// (`durable`).
    pub async fn admit(&self, entry: Entry) -> Result<(Admission, Ticket), StoreError> {
        let (reply, answer) = oneshot::channel();
        let gone = || StoreError::Config("the replay guard stopped".into());
        self.tx.send((entry, reply)).await.map_err(|_| gone())?;
        match answer.await.map_err(|_| gone())? {
            Ok((true, ticket)) => Ok((Admission::Fresh, ticket)),
            Ok((false, ticket)) => Ok((Admission::Duplicate, ticket)),
            // An outage stays one: the request answers 503 and may be retried.
            Err(e @ StoreError::Unavailable(_)) => Err(e),
            Err(e) => Err(StoreError::Config(format!("replay guard: {e}"))),
        }
    }

    /// Returns once the guard row of `ticket` is durable.
    pub async fn durable(&self, ticket: Ticket) -> Result<(), StoreError> {
        self.flushes.durable(ticket).await
    }
}

/// The barrier on a connection of its own, opened again after a failure.
fn barrier(store: Store) -> super::durable::FlushFn {
    let conn: Arc<Mutex<Option<(Conn, u64)>>> = Arc::default();
    Arc::new(move || {
        let (store, conn) = (store.clone(), conn.clone());
        Box::pin(async move {
            let mut own = conn.lock().await;
            // Opened before the database was lost or moved: opened again.
            if own
                .as_ref()
                .is_some_and(|(_, epoch)| *epoch != store.epoch())
            {
                *own = None;
            }
            let open = match own.as_mut() {
                Some((c, _)) => c,
                None => {
                    let epoch = store.epoch();
                    &mut own
                        .insert((replay::connect_barrier(&store).await?, epoch))
                        .0
                }
            };
            let flushed = replay::barrier(open).await;
            if flushed.is_err() {
                *own = None;
            }
            flushed
        })
    })
}

async fn flusher(
    store: Store,
    rx: Arc<Mutex<mpsc::Receiver<(Entry, Reply)>>>,
    flushes: Arc<Flushes>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    // Its own connection, opened on first use and again after a failure, or once the
    // database was lost or moved (the store's epoch).
    let mut conn: Option<(Conn, u64)> = None;
    loop {
        {
            let mut rx = rx.lock().await;
            tokio::select! {
                n = rx.recv_many(&mut batch, MAX_BATCH) => if n == 0 { return },
                _ = shutdown.changed() => return,
            }
        }
        flush(&store, &mut conn, &flushes, std::mem::take(&mut batch)).await;
    }
}

async fn flush(
    store: &Store,
    conn: &mut Option<(Conn, u64)>,
    flushes: &Flushes,
    batch: Vec<(Entry, Reply)>,
) {
    // Copies of one request inside the batch: the first goes to the database, the
    // others are duplicates of it whatever the database says.
    let mut first: HashMap<(String, String, i64), usize> = HashMap::new();
    let mut unique = Vec::with_capacity(batch.len());
    let mut slots = Vec::with_capacity(batch.len());
    for (entry, _) in &batch {
        let k = (
            entry.api_key.clone(),
            entry.path.clone(),
            entry.request_timestamp,
        );
        match first.get(&k) {
            Some(_) => slots.push(None),
            None => {
                first.insert(k, unique.len());
                slots.push(Some(unique.len()));
                unique.push(entry.clone());
            }
        }
    }
    if conn
        .as_ref()
        .is_some_and(|(_, epoch)| *epoch != store.epoch())
    {
        *conn = None;
    }
    let outcome = async {
        let open = match conn.as_mut() {
            Some((c, _)) => c,
            None => {
                let epoch = store.epoch();
                &mut conn
                    .insert((replay::connect_unflushed(store).await?, epoch))
                    .0
            }
        };
        replay::remember_many(open, &unique).await
    }
    .await;
    if outcome.is_err() {
        *conn = None;
    }
    // Read after the insert returned: a barrier that covers it was sent after the rows.
    let ticket = flushes.ticket();
    for ((_, reply), slot) in batch.into_iter().zip(slots) {
        let answer = match (&outcome, slot) {
            (Ok(fresh), Some(i)) => Ok((fresh[i], ticket)),
            (Ok(_), None) => Ok((false, ticket)),
            (Err(e), _) => Err(e.repeat()),
        };
        let _ = reply.send(answer);
    }
}
