//! `admin backup` and `admin restore` of a SQLite database (PostgreSQL has `pg_dump` and
//! `pg_restore`; docs/operations.md gives the commands).
//!
//! A backup is SQLite's `VACUUM INTO`: one read transaction copies a consistent snapshot
//! into a new file while `serve` keeps reading and writing (WAL: writers never wait for
//! it). The master key is never written into the backup: it goes to a separate file
//! only when asked (`--master-key-to`), because a database copy alone reveals no secret
//! and that protection is lost if the key sits beside it.
//!
//! A restore refuses while a server holds the database (the `serve` lock, held until the
//! restore is done so none starts meanwhile), refuses a backup the master key does not
//! open, keeps any database it replaces, and fences the replay guard: the restored
//! database does not know what was accepted after the backup, so the next server
//! refuses every request signed before the restore (as after a crash).

use crate::settings::{self, FileConfig, GlobalArgs};
use anyhow::{bail, Context};
use issuing_server::MasterKey;
use issuing_store::{backup as sqlite, replay, Conn, Store};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `admin backup --to FILE [--master-key-to KEYFILE]`, on an open store.
pub async fn backup(
    store: &Store,
    master: &MasterKey,
    to: &Path,
    master_key_to: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let Some(source) = store.sqlite_path() else {
        bail!("admin backup copies SQLite databases; back up PostgreSQL with pg_dump (docs/operations.md, \"Backups\")");
    };
    if to.exists() {
        bail!("--to {}: the file exists; give a new file", to.display());
    }
    if let Some(key_file) = master_key_to {
        if key_file == to {
            bail!(
                "--master-key-to must not be the backup file: keep the key apart from the database"
            );
        }
        if key_file.exists() {
            bail!("--master-key-to {}: the file exists", key_file.display());
        }
    }
    // Created empty first with owner-only permissions: the copy holds API keys and the
    // ledger. VACUUM INTO accepts an empty file.
    settings::write_private(to, "")?;
    let path = to.to_str().context("the backup path is not UTF-8")?;
    if let Err(e) = sqlite::vacuum_into(store, path).await {
        let _ = std::fs::remove_file(to);
        return Err(anyhow::Error::from(e).context(format!("backing up {source}")));
    }
    let mut copy = open_read_only(to).await?;
    check_integrity(&mut copy, to).await?;
    drop(copy);
    if let Some(key_file) = master_key_to {
        settings::write_private(key_file, &master.to_base64())?;
    }
    let bytes = std::fs::metadata(to)?.len();
    println!(
        "{}",
        json!({
            "backup": to.display().to_string(),
            "bytes": bytes,
            "master_key": match master_key_to {
                Some(k) => k.display().to_string(),
                None => "not included: keep the master key (master.key or ISSUING_MASTER_KEY) apart from this backup".to_owned(),
            },
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// `admin restore --from FILE [--master-key-from KEYFILE] [--force]`: before anything
/// opens the database.
pub async fn restore(
    global: &GlobalArgs,
    file: &FileConfig,
    from: &Path,
    master_key_from: Option<&Path>,
    force: bool,
) -> anyhow::Result<ExitCode> {
    let resolved = settings::resolve_storage(global, file)?;
    let Some(target) = settings::sqlite_path(&resolved.database_url) else {
        bail!("admin restore restores SQLite databases; restore PostgreSQL with pg_restore (docs/operations.md, \"Backups\")");
    };
    let target_text = target.to_str().context("the database path is not UTF-8")?;
    // Held until the end: no server starts on the database while it is replaced.
    let Some(_lock) = crate::lock::try_lock(target_text)? else {
        bail!(
            "a server is running on {target_text} (lock file {}); stop it before restoring",
            crate::lock::lock_path(target_text)
        );
    };
    if !from.is_file() {
        bail!("--from {}: no such file", from.display());
    }
    let master = restore_master_key(&resolved.data_dir, master_key_from)?;
    let mut backup = open_read_only(from).await?;
    check_integrity(&mut backup, from).await?;
    if !master.opens_check_of(&mut backup).await? {
        bail!(
            "the master key does not open this backup: give the key that was in use when it was taken (--master-key-from FILE or ISSUING_MASTER_KEY)"
        );
    }
    drop(backup);

    let kept = set_aside(&target, force)?;
    if let Some(key_file) = master_key_from {
        let installed = resolved.data_dir.join("master.key");
        if std::env::var_os("ISSUING_MASTER_KEY").is_none() && !installed.exists() {
            settings::write_private(&installed, &master.to_base64()).with_context(|| {
                format!("installing the master key from {}", key_file.display())
            })?;
        }
    }
    let partial = PathBuf::from(format!("{target_text}.restoring"));
    let _ = std::fs::remove_file(&partial);
    settings::write_private(&partial, "")?;
    std::fs::copy(from, &partial)
        .with_context(|| format!("copying {} to {}", from.display(), partial.display()))?;
    std::fs::File::open(&partial)?.sync_all()?;
    std::fs::rename(&partial, &target)?;
    if let Some(dir) = target.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }

    // Now as every command opens it: migrated to this version, key checked.
    let (store, _, _) = settings::open_store(global, file).await?;
    let mut tx = store.begin().await?;
    let now = issuing_domain::time::now_micros();
    replay::take_handover(&mut tx, now).await?;
    replay::raise_ceiling(&mut tx, now).await?;
    tx.commit().await?;
    store.close().await;
    println!(
        "{}",
        json!({
            "restored": target_text,
            "from": from.display().to_string(),
            "bytes": std::fs::metadata(&target)?.len(),
            "previous_database_kept_as": kept.map(|p| p.display().to_string()),
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// The key the restored database must open with: `ISSUING_MASTER_KEY`, else the file
/// given, else the data directory's `master.key`. A key file that disagrees with the
/// data directory's is refused rather than overwritten.
fn restore_master_key(data_dir: &Path, key_file: Option<&Path>) -> anyhow::Result<MasterKey> {
    let read = |path: &Path| -> anyhow::Result<MasterKey> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the master key {}", path.display()))?;
        MasterKey::from_base64(&text).with_context(|| format!("{}", path.display()))
    };
    if let Ok(text) = std::env::var("ISSUING_MASTER_KEY") {
        return MasterKey::from_base64(&text).context("ISSUING_MASTER_KEY");
    }
    let installed = data_dir.join("master.key");
    match (key_file, installed.exists()) {
        (Some(file), true) => {
            let (given, present) = (read(file)?, read(&installed)?);
            if given.to_base64() != present.to_base64() {
                bail!(
                    "{} holds another master key than --master-key-from {}; move it away first",
                    installed.display(),
                    file.display()
                );
            }
            Ok(given)
        }
        (Some(file), false) => read(file),
        (None, true) => read(&installed),
        (None, false) => bail!(
            "no master key: give --master-key-from FILE (the key backed up with the database) or ISSUING_MASTER_KEY"
        ),
    }
}

/// A database already at `target` (with its log files) is renamed aside with `--force`,
/// refused without. Returns where it went.
fn set_aside(target: &Path, force: bool) -> anyhow::Result<Option<PathBuf>> {
    let file = |suffix: &str| PathBuf::from(format!("{}{suffix}", target.display()));
    let present: Vec<&str> = ["", "-wal", "-shm"]
        .into_iter()
        .filter(|s| file(s).exists())
        .collect();
    if present.is_empty() {
        return Ok(None);
    }
    // A new database may still hold everything in its log, the main file empty.
    let holds_data = ["", "-wal"]
        .iter()
        .any(|s| std::fs::metadata(file(s)).is_ok_and(|m| m.len() > 0));
    if holds_data && !force {
        bail!(
            "{} exists: restore into a fresh data directory, or give --force to replace it (it is kept beside, renamed)",
            target.display()
        );
    }
    let stamp = issuing_domain::time::now_micros() / 1_000_000;
    let aside = PathBuf::from(format!("{}.before-restore-{stamp}", target.display()));
    // The log files go too: left in place, SQLite would apply them to the restored file.
    for suffix in present {
        std::fs::rename(file(suffix), format!("{}{suffix}", aside.display()))?;
    }
    Ok(holds_data.then_some(aside))
}

async fn open_read_only(path: &Path) -> anyhow::Result<Conn> {
    let text = path.to_str().context("the path is not UTF-8")?;
    sqlite::open_read_only(text)
        .await
        .with_context(|| format!("{} cannot be opened as a SQLite database", path.display()))
}

async fn check_integrity(conn: &mut Conn, path: &Path) -> anyhow::Result<()> {
    let problem = sqlite::problem(conn)
        .await
        .with_context(|| format!("{} is not a SQLite database", path.display()))?;
    match problem {
        Some(why) => bail!("{}: {why}", path.display()),
        None => Ok(()),
    }
}
