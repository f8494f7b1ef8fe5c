//! One `issuing serve` per SQLite database: its replay guard lives in process memory, so
//! a second server on the same file could accept a copy of a request the first accepted.
//! `admin restore` takes the same lock, so it never replaces a database under a server.
//! The lock is released by the kernel when the process ends, however it ends.

use std::fs::{File, OpenOptions, TryLockError};

/// The lock file of the SQLite database at `path`.
pub fn lock_path(path: &str) -> String {
    format!("{path}.serve.lock")
}

/// Takes the database's server lock; None when another process holds it.
pub fn try_lock(path: &str) -> anyhow::Result<Option<File>> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path(path))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(e.into()),
    }
}
