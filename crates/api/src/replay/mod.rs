//! Replay protection: each (API key, path, request_timestamp) is accepted once while the
//! timestamp is inside the window. Two implementations, chosen by backend:
//! - SQLite (one server process per database, enforced by `issuing serve`'s lock file):
//!   an in-memory set, bounded, with a durable ceiling so that a restart cannot accept a
//!   copy of a request the previous process accepted (`memory.rs`).
//! - PostgreSQL (several processes share the database): rows in `replay_guard`, inserted
//!   for many concurrent requests in one statement (`batch.rs`), so the cross-process
//!   guarantee costs one round trip per batch instead of one commit per request. The
//!   rows commit without waiting for the log flush; a request is answered once a barrier
//!   made its row durable (`durable.rs`), while its handler runs.

mod batch;
mod durable;
mod memory;

pub(crate) use durable::Ticket;

use issuing_store::{Backend, Store, StoreError};
use std::time::Duration;
use tokio::sync::watch;

/// The guard's answer for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    Fresh,
    Duplicate,
    /// Signed before this process's fence: possibly a copy of a request accepted before
    /// a restart. Carries the fence (microseconds).
    BeforeFence(i64),
    /// The in-memory guard is at its bound; the client should retry shortly.
    Full,
}

#[derive(Clone)]
pub(crate) enum ReplayGuard {
    Memory(std::sync::Arc<memory::MemoryGuard>),
    Database(batch::Batcher),
}

impl ReplayGuard {
    /// Starts the guard's background tasks; they stop when `shutdown` flips. The memory
    /// guard forgets what has left the window every `purge_every` (the cleanup worker
    /// purges the table's rows at the same pace).
    pub async fn start(
        store: &Store,
        shutdown: watch::Receiver<bool>,
        purge_every: Duration,
    ) -> Result<Self, StoreError> {
        Ok(match store.backend() {
            Backend::Sqlite => {
                let guard = memory::MemoryGuard::start(store.clone(), shutdown.clone()).await?;
                tokio::spawn(purge_loop(guard.clone(), purge_every, shutdown));
                ReplayGuard::Memory(guard)
            }
            Backend::Postgres => {
                ReplayGuard::Database(batch::Batcher::start(store.clone(), shutdown))
            }
        })
    }

    /// The guard's answer, and on PostgreSQL the ticket the request's answer waits for
    /// (`durable`).
    pub async fn admit(
        &self,
        api_key: &str,
        path: &str,
        request_timestamp: i64,
        expires_at: i64,
    ) -> Result<(Admission, Option<Ticket>), StoreError> {
        match self {
            ReplayGuard::Memory(g) => Ok((
                g.admit(api_key, path, request_timestamp, expires_at)
                    .await?,
                None,
            )),
            ReplayGuard::Database(b) => {
                let (admission, ticket) = b
                    .admit(issuing_store::replay::Entry {
                        api_key: api_key.to_owned(),
                        path: path.to_owned(),
                        request_timestamp,
                        expires_at,
                    })
                    .await?;
                Ok((admission, Some(ticket)))
            }
        }
    }

    /// Returns once the guard row of `ticket` is durable (at once without one: the
    /// SQLite guard's own durability is its ceiling's).
    pub async fn durable(&self, ticket: Option<Ticket>) -> Result<(), StoreError> {
        match (self, ticket) {
            (ReplayGuard::Database(b), Some(t)) => b.durable(t).await,
            _ => Ok(()),
        }
    }

    /// At a graceful stop, once no request is served any more: the SQLite guard leaves
    /// what it accepted for the next server (see `memory.rs`). Returns how many requests
    /// it handed over; the PostgreSQL guard is in the database already.
    pub async fn hand_over(&self) -> Result<usize, StoreError> {
        match self {
            ReplayGuard::Memory(g) => g.hand_over().await,
            ReplayGuard::Database(_) => Ok(0),
        }
    }
}

/// Forgets the memory guard's entries whose timestamps have left the window, every
/// `every`, until `shutdown`.
async fn purge_loop(
    guard: std::sync::Arc<memory::MemoryGuard>,
    every: Duration,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = shutdown.changed() => return,
        }
        guard.purge(issuing_domain::time::now_micros());
    }
}
