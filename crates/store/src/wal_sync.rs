//! Group commit for SQLite. Commits run with `synchronous=NORMAL`, so each one only
//! appends to the write-ahead log; this makes them durable together: a waiter takes a
//! ticket after its commit, and one fsync of the log file covers every ticket taken
//! before it started. While one fsync runs the next waiters queue, so under load one
//! fsync serves a whole batch of transactions instead of one each.
//!
//! Why this is as strong as `synchronous=FULL` for everything we answer: the log is
//! replayed as a prefix on recovery, and nothing that waited here is answered or acted on
//! before an fsync that began after its commit has finished. If the log file is gone, a
//! checkpoint moved its content into the database file and synced that first (SQLite
//! syncs the log before and the database after every checkpoint in NORMAL mode).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

pub(crate) struct WalSync {
    path: PathBuf,
    /// Tickets handed out; each one stands for a commit that had finished.
    issued: AtomicU64,
    /// The highest ticket known durable; held while an fsync runs, so one runs at a time.
    synced: tokio::sync::Mutex<u64>,
    /// The same, readable without waiting.
    synced_seen: AtomicU64,
    /// Writers between the start of their COMMIT (or of a request that may write) and
    /// the end of their wait. A read that may have seen their data must wait too.
    writing: AtomicU64,
}

/// Marks a writer in progress for `WalSync::wait_if_written` (see `Store::writing`).
pub struct Writing(std::sync::Arc<WalSync>);

impl Drop for Writing {
    fn drop(&mut self) {
        self.0.writing.fetch_sub(1, Ordering::AcqRel);
    }
}

impl WalSync {
    pub fn new(path: impl Into<PathBuf>) -> WalSync {
        WalSync {
            path: path.into(),
            issued: AtomicU64::new(0),
            synced: tokio::sync::Mutex::new(0),
            synced_seen: AtomicU64::new(0),
            writing: AtomicU64::new(0),
        }
    }

    pub fn writing(self: &std::sync::Arc<Self>) -> Writing {
        self.writing.fetch_add(1, Ordering::AcqRel);
        Writing(self.clone())
    }

    /// For readers: waits only if something may have been written and not yet synced.
    /// Data a reader saw was written by a commit that had marked itself writing before
    /// its COMMIT, and stays marked until durable; a writer that finished has its ticket
    /// covered once `synced_seen` reaches `issued`.
    pub async fn wait_if_written(&self) -> std::io::Result<()> {
        if self.writing.load(Ordering::Acquire) == 0
            && self.synced_seen.load(Ordering::Acquire) >= self.issued.load(Ordering::Acquire)
        {
            return Ok(());
        }
        self.wait().await
    }

    /// Returns once everything committed before this call is on disk.
    pub async fn wait(&self) -> std::io::Result<()> {
        let ticket = self.issued.fetch_add(1, Ordering::AcqRel) + 1;
        let mut synced = self.synced.lock().await;
        if *synced >= ticket {
            return Ok(());
        }
        // Every ticket up to here belongs to a commit that finished before this fsync
        // starts, so the fsync covers it.
        let covered = self.issued.load(Ordering::Acquire);
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || match std::fs::File::open(&path) {
            Ok(f) => f.sync_data(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        })
        .await
        .map_err(std::io::Error::other)??;
        debug_assert!(covered >= ticket);
        *synced = covered;
        self.synced_seen.store(covered, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn one_fsync_serves_the_waiters_that_queued_behind_it() {
        let dir = std::env::temp_dir().join(format!("wal-sync-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("db-wal");
        std::fs::write(&path, b"x").unwrap();
        let sync = Arc::new(WalSync::new(&path));
        let waiters: Vec<_> = (0..50)
            .map(|_| {
                let s = sync.clone();
                tokio::spawn(async move { s.wait().await })
            })
            .collect();
        for w in waiters {
            w.await.unwrap().unwrap();
        }
        assert_eq!(sync.issued.load(Ordering::Acquire), 50);
        assert_eq!(*sync.synced.lock().await, 50, "every ticket is covered");
        // A missing log (checkpointed and removed) is not an error.
        std::fs::remove_file(&path).unwrap();
        sync.wait().await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
