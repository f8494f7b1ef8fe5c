use crate::{migrate, StoreError};
use sqlx::any::AnyPoolOptions;
use sqlx::AnyConnection;
use sqlx::{Any, AnyPool, Executor};
use std::time::Duration;

pub type Tx = sqlx::Transaction<'static, Any>;
pub type Conn = AnyConnection;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Bounds on the pool: enough for 2 cores and a few workers, small enough that a burst
/// queues in the pool instead of overwhelming the database.
const SQLITE_POOL_SIZE: u32 = 8;
const POSTGRES_POOL_SIZE: u32 = 16;
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Clone)]
pub struct Store {
    pool: AnyPool,
    backend: Backend,
    url: std::sync::Arc<str>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .finish()
    }
}

impl Store {
    /// Connects to `postgres://…` / `postgresql://…`, or to a SQLite file given as
    /// `sqlite://path` or a plain path (created if missing).
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let (backend, url) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (Backend::Postgres, url.to_owned())
        } else {
            let path = url.strip_prefix("sqlite://").unwrap_or(url);
            let path = path.split('?').next().unwrap_or(path);
            if path.is_empty() {
                return Err(StoreError::Config("empty SQLite path".into()));
            }
            (Backend::Sqlite, format!("sqlite://{path}?mode=rwc"))
        };
        let pool = match backend {
            Backend::Sqlite => {
                AnyPoolOptions::new()
                    .max_connections(SQLITE_POOL_SIZE)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            // WAL lets readers run beside the one writer; FULL makes every
                            // commit durable before we answer; the busy timeout lets
                            // concurrent BEGIN IMMEDIATE writers queue instead of failing.
                            conn.execute(
                                "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; \
                                 PRAGMA foreign_keys=ON; PRAGMA busy_timeout=30000;",
                            )
                            .await?;
                            Ok(())
                        })
                    })
                    .connect(&url)
                    .await?
            }
            Backend::Postgres => {
                AnyPoolOptions::new()
                    .max_connections(POSTGRES_POOL_SIZE)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .connect(&url)
                    .await?
            }
        };
        Ok(Store {
            pool,
            backend,
            url: url.into(),
        })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The connection URL (holds credentials: never log it unredacted).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    pub async fn migrate(&self) -> Result<(), StoreError> {
        migrate::run(self).await
    }

    /// A write transaction. SQLite takes the write lock up front (`BEGIN IMMEDIATE`) so two
    /// writers never both read and then fail to upgrade; PostgreSQL relies on row locks and
    /// conditional updates.
    pub async fn begin(&self) -> Result<Tx, StoreError> {
        let tx = match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => self.pool.begin().await?,
        };
        Ok(tx)
    }

    /// A pooled connection for reads.
    pub async fn conn(&self) -> Result<sqlx::pool::PoolConnection<Any>, StoreError> {
        Ok(self.pool.acquire().await?)
    }

    /// Row-lock clause for `SELECT … FOR UPDATE`; SQLite already holds the write lock.
    pub fn for_update(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite => "",
            Backend::Postgres => " FOR UPDATE",
        }
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}
