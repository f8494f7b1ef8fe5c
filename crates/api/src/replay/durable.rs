//! When the PostgreSQL replay guard's rows are durable. They commit without waiting for
//! the log flush (`issuing_store::replay::connect_unflushed`), so a request's guard costs
//! a round trip, not a round trip and a flush, before its handler runs; the request is
//! answered only once a barrier (`issuing_store::replay::barrier`, a commit that waits for
//! the flush) was sent after its row's insert returned and has returned itself. The log
//! is flushed in order, so that barrier made the row durable. The handler's work overlaps
//! the flush: a top-up waits for its batch's own durable commit far longer.
//!
//! Order is kept by one clock, the store's `Commits`: a row's ticket is read after its
//! insert returned, a barrier's mark before it is sent, so a mark above a ticket is a
//! barrier sent after that row was written. One barrier runs at a time and covers every
//! ticket below its mark; requests that arrive meanwhile share the next one. A batch
//! writer's durable commit marks the same clock (`issuing_store::writer::Lane`): a
//! request whose write went through a batch writer is covered by the time its batch
//! answered it, and sends no barrier.
//!
//! The same holds for what a request did after its guard row: its writes commit
//! durably, each after the row, so their flush covers the row too. An unflushed row
//! lost in a crash belongs to a request that was not answered and wrote nothing durable:
//! a copy of it after the restart is its first execution.

use futures::future::BoxFuture;
use issuing_store::{Commits, StoreError};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Notify};

/// How long a request waits for its barrier before it is answered `internal_error`.
const WAIT: Duration = Duration::from_secs(15);
/// The pause after a failed barrier before the next try.
const RETRY: Duration = Duration::from_millis(100);

/// A barrier: one commit that waits for the log flush.
pub(crate) type FlushFn = Arc<dyn Fn() -> BoxFuture<'static, Result<(), StoreError>> + Send + Sync>;

/// A guard row's place on the clock, read after its insert returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket(u64);

pub(crate) struct Flushes {
    commits: Arc<Commits>,
    wanted: Notify,
}

impl Flushes {
    /// Starts the barrier task; it stops when `shutdown` flips.
    pub(crate) fn start(
        commits: Arc<Commits>,
        flush: FlushFn,
        shutdown: watch::Receiver<bool>,
    ) -> Arc<Flushes> {
        let flushes = Arc::new(Flushes {
            commits,
            wanted: Notify::new(),
        });
        tokio::spawn(run(flushes.clone(), flush, shutdown));
        flushes
    }

    /// The ticket of a row whose insert has just returned.
    pub(crate) fn ticket(&self) -> Ticket {
        Ticket(self.commits.ticket())
    }

    /// Returns once the row of `ticket` is durable.
    pub(crate) async fn durable(&self, ticket: Ticket) -> Result<(), StoreError> {
        let mut covered = self.commits.watch();
        if *covered.borrow_and_update() > ticket.0 {
            return Ok(());
        }
        self.wanted.notify_one();
        let waited = tokio::time::timeout(WAIT, covered.wait_for(|c| *c > ticket.0))
            .await
            .map(|r| r.is_ok());
        match waited {
            Ok(true) => Ok(()),
            _ => Err(StoreError::Batch(
                "the replay guard's row could not be made durable".into(),
            )),
        }
    }
}

async fn run(flushes: Arc<Flushes>, flush: FlushFn, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = flushes.wanted.notified() => {}
            _ = shutdown.changed() => return,
        }
        // Read before the barrier is sent: it covers every ticket below.
        let mark = flushes.commits.mark();
        match flush().await {
            Ok(()) => flushes.commits.flushed(mark),
            Err(e) => {
                tracing::warn!(error = %e, "the replay guard's barrier failed; trying again");
                tokio::time::sleep(RETRY).await;
                flushes.wanted.notify_one();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::{mpsc, oneshot};

    /// A barrier that reports when it was sent and returns when the test says.
    fn held() -> (FlushFn, mpsc::UnboundedReceiver<oneshot::Sender<()>>) {
        let (sent, calls) = mpsc::unbounded_channel();
        let flush: FlushFn = Arc::new(move || {
            let sent = sent.clone();
            Box::pin(async move {
                let (release, released) = oneshot::channel();
                let _ = sent.send(release);
                released
                    .await
                    .map_err(|_| StoreError::Batch("dropped".into()))
            })
        });
        (flush, calls)
    }

    /// A request waits for a barrier sent after its ticket: not for one already under
    /// way, and not at all once one covered it.
    #[tokio::test]
    async fn a_row_is_durable_only_after_a_barrier_sent_after_it() {
        let (_stop, shutdown) = watch::channel(false);
        let (flush, mut calls) = held();
        let flushes = Flushes::start(Arc::default(), flush, shutdown);

        let first = flushes.ticket();
        let waiting = tokio::spawn({
            let f = flushes.clone();
            async move { f.durable(first).await }
        });
        let under_way = calls.recv().await.expect("a barrier is sent");
        // A row written while that barrier is on the wire: it needs the next one.
        let second = flushes.ticket();
        let later = tokio::spawn({
            let f = flushes.clone();
            async move { f.durable(second).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished() && !later.is_finished());
        under_way.send(()).expect("the barrier is waited for");
        waiting.await.expect("joined").expect("durable");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !later.is_finished(),
            "a barrier sent before a row does not cover it"
        );
        calls
            .recv()
            .await
            .expect("the next barrier")
            .send(())
            .expect("waited for");
        later.await.expect("joined").expect("durable");
        // Covered already: no barrier needed.
        flushes.durable(first).await.expect("durable");
        assert!(calls.try_recv().is_err());
    }

    /// A durable commit of a batch writer, sent after a row, covers it: the request
    /// sends no barrier. One sent before the row does not.
    #[tokio::test]
    async fn a_writers_commit_sent_after_a_row_covers_it() {
        let (_stop, shutdown) = watch::channel(false);
        let (flush, mut calls) = held();
        let commits = Arc::new(Commits::default());
        let flushes = Flushes::start(commits.clone(), flush, shutdown);

        let early = commits.mark();
        let row = flushes.ticket();
        commits.flushed(early);
        let waiting = tokio::spawn({
            let f = flushes.clone();
            async move { f.durable(row).await }
        });
        let barrier = calls
            .recv()
            .await
            .expect("a commit sent before the row needs a barrier");
        assert!(!waiting.is_finished());
        let late = commits.mark();
        commits.flushed(late);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("covered by the writer's commit")
            .expect("joined")
            .expect("durable");
        barrier.send(()).expect("the barrier task waits for it");

        let next = flushes.ticket();
        let mark = commits.mark();
        commits.flushed(mark);
        flushes.durable(next).await.expect("durable");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(calls.try_recv().is_err(), "no barrier for a covered row");
    }
}
