//! Which PostgreSQL host this process talks to, and whether any answers.
//!
//! A URL may name several hosts (`pg_url.rs`). They are probed in order, as libpq does,
//! for the first that accepts a connection (and, with `target_session_attrs=read-write`,
//! whose sessions accept writes: `SHOW transaction_read_only` is `off`). Every
//! connection of the process goes there: the pool's (its connect options are replaced
//! when the host changes, and `after_connect` refuses a server that turned read-only),
//! the batch writers' and the replay guard's own (`Store::connect_own`), and the
//! wake-up listener.
//!
//! A watcher task keeps one connection of its own to that host and asks it the same
//! question every `HEARTBEAT` (or at once when a caller saw a connection fail). When it
//! gets no answer it probes every host again, until one answers. Meanwhile the store is
//! *unavailable*: new connections are refused at once with `StoreError::Unavailable`
//! (the API answers 503 `service_unavailable`), and callers already waiting for a
//! pooled connection stop waiting, instead of each retrying a dead host until the
//! pool's acquire timeout.

use super::pg_url::{PgUrl, TargetSession};
use crate::StoreError;
use sqlx::{AnyConnection, AnyPool, Connection, Row};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{watch, Notify};

/// How often the watcher asks the host whether it still answers (and accepts writes).
const HEARTBEAT: Duration = Duration::from_secs(1);
/// How long one host may take to accept a connection and answer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The pause between two rounds of probes while no host answers.
const PROBE_AGAIN: Duration = Duration::from_millis(250);

/// The hosts of one URL and which of them is in use.
pub(crate) struct Hosts {
    /// One URL per host that sqlx reads; for a URL of one host, that URL as given.
    urls: Vec<String>,
    /// The hosts as text for logs (no credentials).
    names: Vec<String>,
    target: TargetSession,
    current: AtomicUsize,
    /// True while no host answers.
    down: watch::Sender<bool>,
    /// A caller saw a connection fail: the watcher checks at once.
    suspect: Notify,
    /// Outages since start (transitions to unavailable).
    outages: AtomicU64,
    /// Bumped when an outage starts or the host changes: connections of an older epoch
    /// may be broken, or on the wrong host, and are opened again before their next use.
    epoch: AtomicU64,
    /// The pool whose connect options follow the current host.
    pool: OnceLock<AnyPool>,
}

/// Whether the database answers, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Availability {
    /// No host answers right now.
    pub unavailable: bool,
    /// Times the database stopped answering since the process started.
    pub outages: u64,
}

impl Hosts {
    /// The hosts of `url` (a `postgres://` URL).
    pub(crate) fn new(url: &str) -> Result<Hosts, StoreError> {
        let parsed = PgUrl::parse(url).map_err(|e| StoreError::Config(e.0))?;
        let (urls, names) = if parsed.hosts.len() <= 1 {
            // One host: sqlx reads the URL as written (a socket directory, an option we
            // do not know), less the parameter it would warn about.
            let name = parsed
                .hosts
                .first()
                .map(|h| h.to_string())
                .unwrap_or_else(|| "the local socket".into());
            (vec![without_target_attrs(url)], vec![name])
        } else {
            (
                parsed.host_urls(),
                parsed.hosts.iter().map(|h| h.to_string()).collect(),
            )
        };
        Ok(Hosts {
            urls,
            names,
            target: parsed.target,
            current: AtomicUsize::new(0),
            down: watch::channel(false).0,
            suspect: Notify::new(),
            outages: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            pool: OnceLock::new(),
        })
    }

    /// The URL of the host in use.
    pub(crate) fn url(&self) -> &str {
        let i = self.current.load(Ordering::Acquire);
        self.urls.get(i).map(String::as_str).unwrap_or_default()
    }

    fn name(&self, i: usize) -> &str {
        self.names.get(i).map(String::as_str).unwrap_or_default()
    }

    /// Finds the host to use before the pool exists: the first that answers. Errors
    /// when none does, as a one-host start always did.
    pub(crate) async fn find_first(&self) -> Result<(), StoreError> {
        let (i, conn) = self.find().await?;
        let _ = conn.close().await;
        self.current.store(i, Ordering::Release);
        Ok(())
    }

    /// Starts the watcher; the pool follows the host it finds.
    pub(crate) fn watch(self: &Arc<Self>, pool: AnyPool) {
        let _ = self.pool.set(pool);
        tokio::spawn(watcher(Arc::downgrade(self)));
    }

    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    pub(crate) fn unavailable(&self) -> bool {
        *self.down.borrow()
    }

    pub(crate) fn availability(&self) -> Availability {
        Availability {
            unavailable: self.unavailable(),
            outages: self.outages.load(Ordering::Relaxed),
        }
    }

    /// A caller saw a connection fail: check now rather than at the next heartbeat.
    pub(crate) fn suspect(&self) {
        self.suspect.notify_one();
    }

    /// Resolves once the store is unavailable (at once if it is).
    pub(crate) async fn until_down(&self) {
        let mut rx = self.down.subscribe();
        // The sender lives as long as `self`.
        let _ = rx.wait_for(|down| *down).await;
    }

    /// Whether a fresh connection is to a server this URL accepts (with
    /// `read-write`: one whose sessions accept writes).
    pub(crate) async fn acceptable(&self, conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
        if self.target == TargetSession::Any {
            return Ok(());
        }
        let row = sqlx::query("SHOW transaction_read_only")
            .fetch_one(&mut *conn)
            .await?;
        let read_only: String = row.try_get(0)?;
        if read_only == "on" {
            return Err(sqlx::Error::Configuration(
                "the server does not accept writes (target_session_attrs=read-write)".into(),
            ));
        }
        Ok(())
    }

    /// A connection to the host in use, checked as `acceptable`; when that fails the
    /// watcher is told and the store's outage answers.
    pub(crate) async fn connect(&self) -> Result<AnyConnection, StoreError> {
        if self.unavailable() {
            return Err(unavailable());
        }
        match tokio::time::timeout(PROBE_TIMEOUT, self.probe(self.url())).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => {
                self.suspect();
                Err(StoreError::Unavailable(e.to_string()))
            }
            Err(_) => {
                self.suspect();
                Err(unavailable())
            }
        }
    }

    async fn probe(&self, url: &str) -> Result<AnyConnection, sqlx::Error> {
        let mut conn = AnyConnection::connect(url).await?;
        if let Err(e) = self.acceptable(&mut conn).await {
            let _ = conn.close().await;
            return Err(e);
        }
        Ok(conn)
    }

    /// The first host, in order, that answers and is acceptable, with a connection to it.
    async fn find(&self) -> Result<(usize, AnyConnection), StoreError> {
        let mut why = Vec::with_capacity(self.urls.len());
        for (i, url) in self.urls.iter().enumerate() {
            match tokio::time::timeout(PROBE_TIMEOUT, self.probe(url)).await {
                Ok(Ok(conn)) => return Ok((i, conn)),
                Ok(Err(e)) => why.push(format!("{}: {e}", self.name(i))),
                Err(_) => why.push(format!(
                    "{}: no answer within {} ms",
                    self.name(i),
                    PROBE_TIMEOUT.as_millis()
                )),
            }
        }
        Err(StoreError::Unavailable(format!(
            "no PostgreSQL host {} ({})",
            match self.target {
                TargetSession::Any => "answers",
                TargetSession::ReadWrite => "accepts writes",
            },
            why.join("; ")
        )))
    }

    /// Uses host `i` from now on: new pooled connections go there.
    fn settle(&self, i: usize) {
        let before = self.current.swap(i, Ordering::AcqRel);
        if before == i {
            return;
        }
        self.epoch.fetch_add(1, Ordering::AcqRel);
        tracing::warn!(
            from = self.name(before),
            to = self.name(i),
            "the database moved to another host; new connections go there"
        );
        if let (Some(pool), Some(url)) = (self.pool.get(), self.urls.get(i)) {
            match url.parse::<sqlx::any::AnyConnectOptions>() {
                Ok(options) => pool.set_connect_options(options),
                Err(e) => tracing::error!(error = %e, "cannot point the pool at the new host"),
            }
        }
    }
}

/// The one error of every call made while no host answers.
pub(crate) fn unavailable() -> StoreError {
    StoreError::Unavailable("no PostgreSQL host answers".into())
}

/// `url` without its `target_session_attrs` parameter (sqlx does not know it).
fn without_target_attrs(url: &str) -> String {
    match url.split_once('?') {
        Some((base, query)) => {
            let kept: Vec<&str> = query
                .split('&')
                .filter(|p| !p.starts_with("target_session_attrs="))
                .collect();
            if kept.is_empty() {
                base.to_owned()
            } else {
                format!("{base}?{}", kept.join("&"))
            }
        }
        None => url.to_owned(),
    }
}

/// Asks the host in use every heartbeat (or when told) whether it still answers; when
/// it does not, marks the store unavailable and probes every host until one answers.
/// Ends when the store is dropped.
async fn watcher(hosts: std::sync::Weak<Hosts>) {
    let mut own: Option<AnyConnection> = None;
    loop {
        let Some(h) = hosts.upgrade() else { return };
        if h.pool.get().is_some_and(|p| p.is_closed()) {
            return;
        }
        let healthy = match own.as_mut() {
            Some(conn) => matches!(
                tokio::time::timeout(PROBE_TIMEOUT, h.acceptable_ping(conn)).await,
                Ok(Ok(()))
            ),
            None => false,
        };
        if !healthy {
            // A broken connection is only dropped: closing it politely could wait.
            drop(own.take());
            own = recover(&h).await;
            if own.is_none() {
                return;
            }
        }
        let wait = async {
            tokio::select! {
                _ = tokio::time::sleep(HEARTBEAT) => {}
                _ = h.suspect.notified() => {}
            }
        };
        wait.await;
    }
}

/// Probes until a host answers, the store unavailable meanwhile; None once the store
/// is gone (its pool closed, or nothing but this task holds the hosts).
async fn recover(h: &Arc<Hosts>) -> Option<AnyConnection> {
    let mut since: Option<Instant> = None;
    loop {
        match h.find().await {
            Ok((i, conn)) => {
                h.settle(i);
                if let Some(since) = since {
                    h.down.send_replace(false);
                    tracing::warn!(
                        host = h.name(i),
                        after_ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX),
                        "the database answers again"
                    );
                }
                return Some(conn);
            }
            Err(e) => {
                if since.is_none() {
                    since = Some(Instant::now());
                    h.outages.fetch_add(1, Ordering::Relaxed);
                    h.epoch.fetch_add(1, Ordering::AcqRel);
                    h.down.send_replace(true);
                    tracing::error!(error = %e, "the database is unavailable; requests that need it answer 503");
                }
                if h.pool.get().is_some_and(|p| p.is_closed()) || Arc::strong_count(h) <= 1 {
                    return None;
                }
                tokio::time::sleep(PROBE_AGAIN).await;
            }
        }
    }
}

impl Hosts {
    /// The watcher's heartbeat: the same question as a new connection's.
    async fn acceptable_ping(&self, conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
        match self.target {
            TargetSession::Any => conn.ping().await,
            TargetSession::ReadWrite => self.acceptable(conn).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_host_urls_pass_as_written() {
        let h =
            Hosts::new("postgres://u@h:5433/db?sslmode=disable&target_session_attrs=any").unwrap();
        assert_eq!(h.url(), "postgres://u@h:5433/db?sslmode=disable");
        assert_eq!(h.names, ["h:5433"]);
        let h = Hosts::new("postgres://u@a:1,b:2/db").unwrap();
        assert_eq!(h.urls.len(), 2);
        assert!(h.url().contains("host=a&port=1"), "{}", h.url());
        assert!(Hosts::new("postgres://u@a:1,b:x/db").is_err());
    }
}
