//! The PostgreSQL replay guard: requests queue their (key, path, timestamp) and a few
//! flushers insert whatever is queued in one statement each. The row insert is what
//! makes the guarantee hold across processes; batching makes it one round trip and one
//! commit per batch instead of per request.

use super::Admission;
use issuing_store::replay::{self, Entry, MAX_BATCH};
use issuing_store::{Store, StoreError};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch, Mutex};

/// Requests waiting for a flush; beyond it new requests wait for room.
const QUEUE: usize = 4_096;
/// Concurrent flushes: one fills while others are on the wire.
const FLUSHERS: usize = 4;

type Reply = oneshot::Sender<Result<bool, String>>;

#[derive(Clone)]
pub(crate) struct Batcher {
    tx: mpsc::Sender<(Entry, Reply)>,
}

impl Batcher {
    pub fn start(store: Store, shutdown: watch::Receiver<bool>) -> Batcher {
        let (tx, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..FLUSHERS {
            tokio::spawn(flusher(store.clone(), rx.clone(), shutdown.clone()));
        }
        Batcher { tx }
    }

    pub async fn admit(&self, entry: Entry) -> Result<Admission, StoreError> {
        let (reply, answer) = oneshot::channel();
        let gone = || StoreError::Config("the replay guard stopped".into());
        self.tx.send((entry, reply)).await.map_err(|_| gone())?;
        match answer.await.map_err(|_| gone())? {
            Ok(true) => Ok(Admission::Fresh),
            Ok(false) => Ok(Admission::Duplicate),
            Err(e) => Err(StoreError::Config(format!("replay guard: {e}"))),
        }
    }
}

async fn flusher(
    store: Store,
    rx: Arc<Mutex<mpsc::Receiver<(Entry, Reply)>>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        {
            let mut rx = rx.lock().await;
            tokio::select! {
                n = rx.recv_many(&mut batch, MAX_BATCH) => if n == 0 { return },
                _ = shutdown.changed() => return,
            }
        }
        flush(&store, std::mem::take(&mut batch)).await;
    }
}

async fn flush(store: &Store, batch: Vec<(Entry, Reply)>) {
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
    let outcome = async {
        let mut conn = store.conn().await?;
        replay::remember_many(&mut conn, &unique).await
    }
    .await;
    for ((_, reply), slot) in batch.into_iter().zip(slots) {
        let answer = match (&outcome, slot) {
            (Ok(fresh), Some(i)) => Ok(fresh[i]),
            (Ok(_), None) => Ok(false),
            (Err(e), _) => Err(e.to_string()),
        };
        let _ = reply.send(answer);
    }
}
