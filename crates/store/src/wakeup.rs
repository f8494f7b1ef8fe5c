//! Cross-process wake-ups on PostgreSQL: writing queued work (an order, a webhook
//! delivery) sends NOTIFY in the writing transaction, delivered only if it commits;
//! every process LISTENs and wakes its workers. On SQLite the writing process wakes
//! its own workers directly, and the others poll.

use crate::writer::BatchConn;
use crate::{Store, StoreError};
use sqlx::postgres::PgListener;

/// The queues a wake-up can be for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queue {
    Orders,
    Deliveries,
}

impl Queue {
    fn channel(self) -> &'static str {
        match self {
            Queue::Orders => "issuing_orders",
            Queue::Deliveries => "issuing_deliveries",
        }
    }
}

/// Sends the wake-up at commit of the caller's transaction (PostgreSQL only).
pub async fn announce(conn: &mut BatchConn<'_>, queue: Queue) -> Result<(), StoreError> {
    if conn.backend() == crate::Backend::Postgres {
        conn.rows("SELECT pg_notify($1, '')", &[queue.channel().into()])
            .await?;
    }
    Ok(())
}

/// Sends the wake-up with `inserts`' rows, in the same statement (PostgreSQL only).
pub fn announce_with(inserts: &mut crate::query::Inserts, queue: Queue) {
    inserts.notify(queue.channel());
}

pub struct Listener(PgListener);

impl Listener {
    /// Listens to every queue's channel. None on SQLite.
    pub async fn connect(store: &Store) -> Result<Option<Listener>, StoreError> {
        if store.backend() != crate::Backend::Postgres {
            return Ok(None);
        }
        if store.availability().unavailable {
            return Err(StoreError::Unavailable("no PostgreSQL host answers".into()));
        }
        let mut listener = PgListener::connect(store.host_url()).await?;
        listener
            .listen_all([Queue::Orders.channel(), Queue::Deliveries.channel()])
            .await?;
        Ok(Some(Listener(listener)))
    }

    /// The queue the next wake-up is for.
    pub async fn recv(&mut self) -> Result<Queue, StoreError> {
        let n = self.0.recv().await?;
        Ok(if n.channel() == Queue::Deliveries.channel() {
            Queue::Deliveries
        } else {
            Queue::Orders
        })
    }
}
