//! Cross-process wake-ups on PostgreSQL: creating an order sends NOTIFY in the order's
//! transaction (delivered only if it commits); every process LISTENs and wakes its
//! workers. SQLite deployments are one process, which wakes its workers directly.

use crate::{Backend, Conn, Store, StoreError};
use sqlx::postgres::PgListener;

const CHANNEL: &str = "issuing_orders";

pub async fn announce_order(conn: &mut Conn, backend: Backend) -> Result<(), StoreError> {
    if backend == Backend::Postgres {
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(CHANNEL)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

pub struct OrderListener(PgListener);

impl OrderListener {
    /// None on SQLite.
    pub async fn connect(store: &Store) -> Result<Option<OrderListener>, StoreError> {
        if store.backend() != Backend::Postgres {
            return Ok(None);
        }
        let mut listener = PgListener::connect(store.url()).await?;
        listener.listen(CHANNEL).await?;
        Ok(Some(OrderListener(listener)))
    }

    pub async fn recv(&mut self) -> Result<(), StoreError> {
        self.0.recv().await?;
        Ok(())
    }
}
