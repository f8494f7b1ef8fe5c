//! Connections and transactions: the pool, write transactions (`Store::begin`), the
//! batch writers' own connections (`writer/`), and the SQL text both backends share
//! (`sql.rs`).

mod hosts;
pub mod pg_url;
pub mod sql;
pub mod writer;

pub use hosts::Availability;

use crate::StoreError;
use sqlx::any::AnyPoolOptions;
use sqlx::AnyConnection;
use sqlx::{Any, AnyPool, Executor, Row};
use std::time::Duration;

/// A write transaction. `commit` returns once the transaction is durable: on SQLite
/// that includes the shared WAL sync (see `wal_sync.rs`).
pub struct Tx {
    inner: sqlx::Transaction<'static, Any>,
    sync: Option<std::sync::Arc<crate::wal_sync::WalSync>>,
    /// SQLite: this process's turn to write, held until COMMIT or ROLLBACK is done.
    _turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Tx {
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        let Tx { inner, sync, _turn } = self;
        let _writing = sync.as_ref().map(|s| s.writing());
        inner.commit().await?;
        // The next writer may start while this one waits for the log to reach disk.
        drop(_turn);
        if let Some(sync) = &sync {
            sync.wait().await.map_err(sqlx::Error::Io)?;
        }
        Ok(())
    }

    /// Commits and hands the lock to the next writer at once, answering what to wait
    /// for before the commit may be announced (`Durable::wait`).
    pub async fn commit_deferred(self) -> Result<Durable, sqlx::Error> {
        let Tx { inner, sync, _turn } = self;
        let writing = sync.as_ref().map(|s| s.writing());
        inner.commit().await?;
        drop(_turn);
        Ok(Durable {
            sync,
            _writing: writing,
        })
    }

    pub async fn rollback(self) -> Result<(), sqlx::Error> {
        self.inner.rollback().await
    }
}

/// A committed transaction that may not be durable yet (SQLite's shared log fsync).
/// Readers keep waiting for it until `wait` returns.
#[must_use = "a commit may only be announced after `wait`"]
pub struct Durable {
    sync: Option<std::sync::Arc<crate::wal_sync::WalSync>>,
    _writing: Option<crate::wal_sync::Writing>,
}

impl Durable {
    pub(crate) fn new(
        sync: Option<std::sync::Arc<crate::wal_sync::WalSync>>,
        writing: Option<crate::wal_sync::Writing>,
    ) -> Durable {
        Durable {
            sync,
            _writing: writing,
        }
    }

    pub async fn wait(self) -> Result<(), sqlx::Error> {
        if let Some(sync) = &self.sync {
            sync.wait().await.map_err(sqlx::Error::Io)?;
        }
        Ok(())
    }
}

impl std::ops::Deref for Tx {
    type Target = AnyConnection;
    fn deref(&self) -> &AnyConnection {
        &self.inner
    }
}

impl std::ops::DerefMut for Tx {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.inner
    }
}
pub type Conn = AnyConnection;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The backend a connection talks to.
    pub fn of(conn: &Conn) -> Backend {
        if conn.backend_name() == "PostgreSQL" {
            Backend::Postgres
        } else {
            Backend::Sqlite
        }
    }
}

/// Every PostgreSQL connection's settings. A batch writer's statement of many CTEs is
/// costed high enough to be compiled, which took 150 ms where running it takes 18
/// (measured: docs/benchmarks.md); no query here gains from it.
const POSTGRES_SETUP: &str = "SET jit = off";

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
    /// SQLite only: the group fsync of the write-ahead log.
    wal: Option<std::sync::Arc<crate::wal_sync::WalSync>>,
    /// SQLite only: writers of this process take turns here before `BEGIN IMMEDIATE`.
    /// SQLite's own busy handler would make them poll with sleeps of up to 100 ms; a
    /// FIFO queue hands the write lock over at once and in order.
    write_turn: Option<std::sync::Arc<tokio::sync::Mutex<()>>>,
    /// SQLite only: the batch writers' own connection and thread, started by the first
    /// batch (`writer/sqlite.rs`).
    sqlite_writer: std::sync::Arc<std::sync::Mutex<Option<std::sync::Arc<writer::SqliteWriter>>>>,
    /// PostgreSQL: which writes the durable commits of this process have covered.
    commits: std::sync::Arc<crate::Commits>,
    /// PostgreSQL: the URL's hosts, the one in use, and whether any answers.
    hosts: Option<std::sync::Arc<hosts::Hosts>>,
    /// A standby for reads that may lag (`ISSUING_DATABASE_READ_URL`); None: this store.
    reader: Option<std::sync::Arc<Store>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("backend", &self.backend)
            .finish()
    }
}

impl Store {
    /// Connects to `postgres://…` / `postgresql://…` (several hosts as libpq writes
    /// them: `db/pg_url.rs`, `db/hosts.rs`), or to a SQLite file given as `sqlite://path`
    /// or a plain path (created if missing).
    pub async fn connect(url: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let mut hosts = None;
        let (backend, url) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let found = std::sync::Arc::new(hosts::Hosts::new(url)?);
            found.find_first().await?;
            hosts = Some(found);
            (Backend::Postgres, url.to_owned())
        } else {
            let path = sqlite_file(url);
            if path.is_empty() {
                return Err(StoreError::Config("empty SQLite path".into()));
            }
            (Backend::Sqlite, format!("sqlite://{path}?mode=rwc"))
        };
        let pool = match backend {
            Backend::Sqlite => {
                AnyPoolOptions::new()
                    .max_connections(SQLITE_POOL_SIZE)
                    // An open connection keeps the log file in place between bursts.
                    .min_connections(1)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .after_connect(|conn, _| {
                        Box::pin(async move {
                            // WAL lets readers run beside the one writer. NORMAL writes each
                            // commit to the log without its own fsync; durability comes from
                            // the group fsync of the log (`wal_sync.rs`) that every commit
                            // and every answered write waits for, so one fsync covers every
                            // transaction committed while the previous one ran. The busy
                            // timeout lets concurrent BEGIN IMMEDIATE writers queue. No
                            // checkpoint on commit: `checkpoint_in_background` does them.
                            conn.execute(
                                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; \
                                 PRAGMA foreign_keys=ON; PRAGMA busy_timeout=30000; \
                                 PRAGMA wal_autocheckpoint=0;",
                            )
                            .await?;
                            Ok(())
                        })
                    })
                    .connect(&url)
                    .await?
            }
            Backend::Postgres => {
                let Some(found) = hosts.clone() else {
                    return Err(StoreError::Config("PostgreSQL without hosts".into()));
                };
                // Weak: the hosts hold the pool, which holds this callback.
                let checks = std::sync::Arc::downgrade(&found);
                let pool = AnyPoolOptions::new()
                    .max_connections(POSTGRES_POOL_SIZE)
                    .acquire_timeout(ACQUIRE_TIMEOUT)
                    .after_connect(move |conn, _| {
                        let checks = checks.upgrade();
                        Box::pin(async move {
                            // A server that turned read-only (a demoted primary) is
                            // refused: the pool tries again, on the host the watcher
                            // finds.
                            if let Some(checks) = checks {
                                if let Err(e) = checks.acceptable(conn).await {
                                    checks.suspect();
                                    return Err(e);
                                }
                            }
                            conn.execute(POSTGRES_SETUP).await?;
                            Ok(())
                        })
                    })
                    .connect(found.url())
                    .await?;
                found.watch(pool.clone());
                pool
            }
        };
        let wal = match backend {
            Backend::Sqlite => Some(std::sync::Arc::new(crate::wal_sync::WalSync::new(format!(
                "{}-wal",
                sqlite_file(&url)
            )))),
            Backend::Postgres => None,
        };
        let write_turn = match backend {
            Backend::Sqlite => Some(std::sync::Arc::new(tokio::sync::Mutex::new(()))),
            Backend::Postgres => None,
        };
        if let Some(turn) = &write_turn {
            tokio::spawn(checkpoint_in_background(pool.clone(), turn.clone()));
        }
        Ok(Store {
            pool,
            backend,
            url: url.into(),
            wal,
            write_turn,
            sqlite_writer: Default::default(),
            commits: Default::default(),
            hosts,
            reader: None,
        })
    }

    /// This store, reading through `reader` (a standby, `ISSUING_DATABASE_READ_URL`)
    /// where `reader()` is asked for.
    pub fn with_reader(mut self, reader: Store) -> Store {
        self.reader = Some(std::sync::Arc::new(reader));
        self
    }

    /// Where reads that may lag go: the console's pages, never anything that decides
    /// money, claims a key or is read back by a retry. The standby when one is set,
    /// else this store.
    pub fn reader(&self) -> &Store {
        self.reader.as_deref().unwrap_or(self)
    }

    /// Whether the database answers (PostgreSQL; SQLite always does), for `/metrics`.
    pub fn availability(&self) -> Availability {
        self.hosts
            .as_ref()
            .map(|h| h.availability())
            .unwrap_or_default()
    }

    /// Changes when the database was lost or moved (PostgreSQL; always 0 on SQLite): a
    /// connection of its own opened in an earlier epoch may be broken, so its holder
    /// opens a new one before using it instead of failing a request on it.
    pub fn epoch(&self) -> u64 {
        self.hosts.as_ref().map_or(0, |h| h.epoch())
    }

    /// The URL of the PostgreSQL host in use (for connections sqlx makes itself, such
    /// as the wake-up listener's); on SQLite the store's URL.
    pub(crate) fn host_url(&self) -> &str {
        match &self.hosts {
            Some(h) => h.url(),
            None => &self.url,
        }
    }

    /// Waits for `op` (a pooled connection), or fails as soon as the watcher finds no
    /// host answering: a caller does not wait out the pool's acquire timeout on a
    /// dead host.
    async fn pooled<T>(
        &self,
        op: impl std::future::Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, StoreError> {
        let Some(h) = &self.hosts else {
            return Ok(op.await?);
        };
        if h.unavailable() {
            return Err(hosts::unavailable());
        }
        tokio::select! {
            biased;
            r = op => r.map_err(|e| {
                let e = StoreError::from(e);
                if e.is_unavailable() {
                    h.suspect();
                }
                e
            }),
            () = h.until_down() => Err(hosts::unavailable()),
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The clock of this process's durable commits (PostgreSQL; `commits.rs`).
    pub fn commits(&self) -> &std::sync::Arc<crate::Commits> {
        &self.commits
    }

    /// A PostgreSQL connection of its own, outside the pool, set up as the pool's are,
    /// to the host in use.
    pub(crate) async fn connect_own(&self) -> Result<AnyConnection, StoreError> {
        let mut conn = match &self.hosts {
            Some(h) => h.connect().await?,
            None => <AnyConnection as sqlx::Connection>::connect(&self.url).await?,
        };
        conn.execute(POSTGRES_SETUP).await?;
        Ok(conn)
    }

    /// The SQLite batch writer, started on first use.
    pub(crate) fn sqlite_writer(&self) -> Result<std::sync::Arc<writer::SqliteWriter>, StoreError> {
        let mut writer = self
            .sqlite_writer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(w) = writer.as_ref() {
            return Ok(w.clone());
        }
        let (Some(path), Some(turn), Some(wal)) = (
            self.sqlite_path(),
            self.write_turn.clone(),
            self.wal.clone(),
        ) else {
            return Err(StoreError::Config("the SQLite writer needs SQLite".into()));
        };
        let started = std::sync::Arc::new(writer::SqliteWriter::start(path, turn, wal)?);
        *writer = Some(started.clone());
        Ok(started)
    }

    /// The connection URL (holds credentials: never log it unredacted).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database file, on SQLite.
    pub fn sqlite_path(&self) -> Option<&str> {
        match self.backend {
            Backend::Sqlite => Some(sqlite_file(&self.url)),
            Backend::Postgres => None,
        }
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// A write transaction. SQLite takes the write lock up front (`BEGIN IMMEDIATE`) so two
    /// writers never both read and then fail to upgrade; PostgreSQL relies on row locks and
    /// conditional updates.
    pub async fn begin(&self) -> Result<Tx, StoreError> {
        let turn = match &self.write_turn {
            Some(t) => Some(t.clone().lock_owned().await),
            None => None,
        };
        let inner = match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => self.pooled(self.pool.begin()).await?,
        };
        Ok(Tx {
            inner,
            sync: self.wal.clone(),
            _turn: turn,
        })
    }

    /// Returns once everything committed before the call is durable. On SQLite that is
    /// the shared WAL fsync; single statements outside `begin`/`commit` call it before
    /// their effect is announced. PostgreSQL commits are durable when they return.
    /// Marks a piece of work that may write outside `begin`/`commit` (a request to an
    /// endpoint that writes), so that readers meanwhile wait for durability; hold it
    /// until after `sync`. None on PostgreSQL.
    pub fn writing(&self) -> Option<crate::wal_sync::Writing> {
        self.wal.as_ref().map(|w| w.writing())
    }

    /// Like `sync`, for work that only read: returns at once unless a writer is in
    /// progress or a finished one is not yet durable.
    pub async fn sync_read(&self) -> Result<(), StoreError> {
        if let Some(wal) = &self.wal {
            wal.wait_if_written()
                .await
                .map_err(|e| StoreError::Database(sqlx::Error::Io(e)))?;
        }
        Ok(())
    }

    pub async fn sync(&self) -> Result<(), StoreError> {
        if let Some(wal) = &self.wal {
            wal.wait()
                .await
                .map_err(|e| StoreError::Database(sqlx::Error::Io(e)))?;
        }
        Ok(())
    }

    /// A pooled connection for reads.
    pub async fn conn(&self) -> Result<sqlx::pool::PoolConnection<Any>, StoreError> {
        self.pooled(self.pool.acquire()).await
    }

    /// Row-lock clause for `SELECT … FOR UPDATE`; SQLite already holds the write lock.
    pub fn for_update(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite => "",
            Backend::Postgres => " FOR UPDATE",
        }
    }

    pub async fn close(&self) {
        if let Some(reader) = &self.reader {
            Box::pin(reader.close()).await;
        }
        self.pool.close().await;
        // The watcher sees the pool closed and lets its connection go.
        if let Some(h) = &self.hosts {
            h.suspect();
        }
    }
}

/// How often the log is moved into the database file (SQLite).
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// Log frames (pages) past which a checkpoint makes the log start again from its
/// beginning: 16 MiB of 4 KiB pages.
const RESTART_AFTER_FRAMES: i64 = 4_096;

/// Moves SQLite's log into the database file every `CHECKPOINT_EVERY`, until the pool
/// closes. SQLite's own automatic checkpoint runs inside the COMMIT that crosses 1,000
/// pages of log, so one writer's commit in every few dozen paid for copying and syncing
/// them all while every other writer waited on its lock; a passive checkpoint here
/// takes no write lock, so commits go on beside it. It does what the automatic one did
/// (the log is synced before and the database after, so `wal_sync.rs`'s reasoning
/// holds).
///
/// The log starts again from its beginning only when a write begins after every frame
/// was copied, which under steady writes never happens by itself: commits append while
/// the passive checkpoint copies. Measured, the log grew to 2.2 GB in a two-minute
/// benchmark, every commit writing into freshly allocated file pages. So once the log
/// passes `RESTART_AFTER_FRAMES`, the checkpoint takes the process's write turn (the
/// batch writer and `Store::begin` wait for it) and runs a RESTART checkpoint, which
/// copies the few frames the passive one left and makes the next writer overwrite the
/// log from its start: the log stays bounded and its pages stay in the page cache.
async fn checkpoint_in_background(pool: AnyPool, turn: std::sync::Arc<tokio::sync::Mutex<()>>) {
    let mut every = tokio::time::interval(CHECKPOINT_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if pool.is_closed() {
            return;
        }
        let mut conn = match pool.acquire().await {
            Ok(conn) => conn,
            Err(sqlx::Error::PoolClosed) => return,
            Err(e) => {
                tracing::warn!(error = %e, "no connection for the log checkpoint");
                continue;
            }
        };
        let frames = match checkpoint(&mut conn, "PASSIVE").await {
            Ok(frames) => frames,
            Err(e) => {
                tracing::warn!(error = %e, "log checkpoint failed; the next one retries");
                continue;
            }
        };
        if frames > RESTART_AFTER_FRAMES {
            let _turn = turn.lock().await;
            // A long reader (an online backup) would hold the restart, and every writer
            // behind the turn with it: wait briefly, and leave it to the next round.
            let restarted = async {
                conn.execute(RESTART_BUSY_TIMEOUT).await?;
                let restart = checkpoint(&mut conn, "RESTART").await;
                conn.execute(BUSY_TIMEOUT).await?;
                restart
            };
            if let Err(e) = restarted.await {
                tracing::warn!(error = %e, frames, "log restart failed; the next checkpoint retries");
                // It may still wait only briefly for locks: not a connection to pool.
                drop(conn.detach());
            }
        }
    }
}

const RESTART_BUSY_TIMEOUT: &str = "PRAGMA busy_timeout=50";
const BUSY_TIMEOUT: &str = "PRAGMA busy_timeout=30000";

/// Runs a checkpoint of `mode`; answers the frames the log held.
async fn checkpoint(conn: &mut AnyConnection, mode: &str) -> Result<i64, sqlx::Error> {
    let row = sqlx::query(&format!("PRAGMA wal_checkpoint({mode})"))
        .fetch_one(&mut *conn)
        .await?;
    // (busy, frames in the log, frames copied); -1 when not in WAL mode.
    row.try_get::<i64, _>(1)
}

/// The file of a SQLite URL (`sqlite://path?options` or a plain path).
fn sqlite_file(url: &str) -> &str {
    let path = url.strip_prefix("sqlite://").unwrap_or(url);
    path.split('?').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under writes without a pause the passive checkpoint never catches the log's end,
    /// so without the restart the log holds everything written (here 192 MiB).
    #[tokio::test]
    async fn the_log_stays_bounded_under_steady_writes() {
        let dir = std::env::temp_dir().join(format!("wal-bound-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("db.sqlite");
        let store = Store::connect(file.to_str().unwrap()).await.unwrap();
        let mut tx = store.begin().await.unwrap();
        sqlx::query("CREATE TABLE filler (id INTEGER PRIMARY KEY, data BLOB NOT NULL)")
            .execute(&mut *tx)
            .await
            .unwrap();
        tx.commit().await.unwrap();
        // Two writers, so one always waits for the turn: the log never pauses.
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move {
                    for _ in 0..384 {
                        let mut tx = store.begin().await.unwrap();
                        sqlx::query("INSERT INTO filler (data) VALUES (randomblob(262144))")
                            .execute(&mut *tx)
                            .await
                            .unwrap();
                        tx.commit().await.unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.await.unwrap();
        }
        let wal = std::fs::metadata(dir.join("db.sqlite-wal")).unwrap().len();
        store.pool().close().await;
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            wal < 96 << 20,
            "the log grew to {wal} bytes after 192 MiB of writes"
        );
    }
}
