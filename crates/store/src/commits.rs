//! Which of this process's earlier PostgreSQL writes are durable, on one clock.
//!
//! The replay guard commits its rows without waiting for the log flush and answers a
//! request only once a commit that waits for the flush was sent after the row's insert
//! returned (the server's `replay/durable.rs`). The log is flushed in order, so any such
//! commit will do, on any connection: a batch writer's durable commit covers every guard
//! row written before it was sent, and the requests it answers then need no barrier of
//! their own.
//!
//! A write whose durability is wanted takes a `ticket` after it returned; a durable
//! commit takes a `mark` before it is sent and reports it `flushed` once it returned. A
//! mark above a ticket was taken after it, so that commit covers the write.

use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::watch;

#[derive(Debug)]
pub struct Commits {
    clock: AtomicU64,
    /// Every ticket below it is durable.
    covered: watch::Sender<u64>,
}

impl Default for Commits {
    fn default() -> Self {
        Commits {
            clock: AtomicU64::new(0),
            covered: watch::Sender::new(0),
        }
    }
}

impl Commits {
    /// The place of a write that has just returned.
    pub fn ticket(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }

    /// Taken just before a commit that waits for the log flush is sent.
    pub fn mark(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::SeqCst)
    }

    /// The commit of `mark` returned: every ticket below it is durable.
    pub fn flushed(&self, mark: u64) {
        self.covered.send_modify(|c| *c = (*c).max(mark));
    }

    /// Whether the write of `ticket` is durable.
    pub fn covers(&self, ticket: u64) -> bool {
        *self.covered.borrow() > ticket
    }

    /// Follows the covered mark (for waiting on `covers`).
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.covered.subscribe()
    }
}
