//! Where deposit addresses come from: the operator's account xpub, or in the sandbox a
//! test key of its own. The xpub the addresses were derived from is recorded in the
//! database on first use, and a server configured with another one refuses to start:
//! changing it would change every project's address under its feet.

use crate::MasterKey;
use crate::Mode;
use issuing_domain::chain_deposit::TRON;
use issuing_domain::time::now_micros;
use issuing_domain::tron_hd::{self, AccountXpub, XpubError};
use issuing_store::{chain_watch, deposit_addresses, settings, Conn, Store, StoreError};
use rand::RngCore;

/// The xpub this database's deposit addresses derive from.
const XPUB_SETTING: &str = "tron_xpub";
/// `operator` or `sandbox_test_key`.
const SOURCE_SETTING: &str = "tron_xpub_source";
/// The sandbox test key's seed, sealed under the master key. Never set in production.
const SANDBOX_SEED_SETTING: &str = "tron_sandbox_test_seed";

/// Projects given an address per batch when the server starts, and the most batches:
/// bounds the start-up work (100,000 projects) while every later start finishes the rest.
const BACKFILL_BATCH: i64 = 100;
const BACKFILL_MAX_BATCHES: usize = 1_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeySource {
    /// `ISSUING_TRON_XPUB`: the operator holds the private key, offline.
    Operator,
    /// The sandbox test key — not for real funds.
    SandboxTestKey,
}

impl KeySource {
    const fn as_str(self) -> &'static str {
        match self {
            KeySource::Operator => "operator",
            KeySource::SandboxTestKey => "sandbox_test_key",
        }
    }
}

/// The key deposit addresses are derived from, as this process uses it.
#[derive(Debug, Clone)]
pub struct DepositKey {
    pub xpub: AccountXpub,
    pub source: KeySource,
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("ISSUING_TRON_XPUB: {0}")]
    Invalid(#[from] XpubError),
    #[error(
        "ISSUING_TRON_XPUB (fingerprint {configured}) differs from the key this database's deposit addresses were derived from ({stored_source}, fingerprint {stored}); every project's address would change. Configure the original xpub, or start from a new database"
    )]
    Mismatch {
        configured: String,
        stored: String,
        stored_source: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Decides the deposit key of a server about to start (or an admin command about to
/// create projects) and records it on first use: the configured xpub; else in the
/// sandbox the recorded key or a fresh sandbox test key; else (production without an
/// xpub) none, and projects have no deposit address.
pub async fn prepare(
    store: &Store,
    master: &MasterKey,
    mode: Mode,
    configured: Option<&str>,
) -> Result<Option<DepositKey>, KeyError> {
    let configured = configured.map(str::trim).filter(|s| !s.is_empty());
    let key = match (configured, mode) {
        (Some(text), _) => {
            let xpub = AccountXpub::parse(text)?;
            Some(record(store, xpub).await?)
        }
        (None, Mode::Sandbox) => Some(sandbox_key(store, master).await?),
        (None, Mode::Production) => None,
    };
    Ok(key)
}

/// Logs where deposit addresses come from; once per server start.
pub fn announce(key: Option<&DepositKey>) {
    match key {
        Some(k) if k.source == KeySource::SandboxTestKey => tracing::warn!(
            fingerprint = %k.xpub.fingerprint(),
            "deposit addresses derive from the sandbox test key — not for real funds"
        ),
        Some(k) => tracing::info!(
            fingerprint = %k.xpub.fingerprint(),
            "deposit addresses derive from the operator's xpub (m/44'/195'/0')"
        ),
        None => tracing::warn!(
            "ISSUING_TRON_XPUB is not set: projects have no deposit address and project/wallet/trc20 answers wallet_not_found"
        ),
    }
}

/// The operator's xpub, recorded now unless the database already names one, which
/// must be the same. Several processes starting together record it once.
async fn record(store: &Store, xpub: AccountXpub) -> Result<DepositKey, KeyError> {
    if let Some(stored) = recorded(store).await? {
        return same_or_mismatch(stored, xpub);
    }
    let source = KeySource::Operator;
    let mut tx = store.begin().await?;
    if settings::insert_if_absent(&mut tx, XPUB_SETTING, &xpub.to_xpub_string()).await? {
        settings::insert_if_absent(&mut tx, SOURCE_SETTING, source.as_str()).await?;
        tx.commit().await.map_err(StoreError::from)?;
        return Ok(DepositKey { xpub, source });
    }
    drop(tx);
    // Another process recorded one first.
    match recorded(store).await? {
        Some(stored) => same_or_mismatch(stored, xpub),
        None => Err(StoreError::NotFound("recorded deposit xpub").into()),
    }
}

fn same_or_mismatch(stored: DepositKey, wanted: AccountXpub) -> Result<DepositKey, KeyError> {
    if stored.xpub.to_xpub_string() == wanted.to_xpub_string() {
        return Ok(stored);
    }
    Err(KeyError::Mismatch {
        configured: wanted.fingerprint(),
        stored: stored.xpub.fingerprint(),
        stored_source: stored.source.as_str().to_owned(),
    })
}

/// The key recorded in the database, if any.
async fn recorded(store: &Store) -> Result<Option<DepositKey>, KeyError> {
    let mut conn = store.conn().await?;
    let Some(xpub) = stored_xpub(&mut conn).await? else {
        return Ok(None);
    };
    let source = match settings::get(&mut conn, SOURCE_SETTING).await?.as_deref() {
        Some("sandbox_test_key") => KeySource::SandboxTestKey,
        _ => KeySource::Operator,
    };
    Ok(Some(DepositKey { xpub, source }))
}

/// The xpub this database's addresses derive from, read in the caller's transaction.
pub async fn stored_xpub(conn: &mut Conn) -> Result<Option<AccountXpub>, StoreError> {
    let Some(text) = settings::get(conn, XPUB_SETTING).await? else {
        return Ok(None);
    };
    AccountXpub::parse(&text)
        .map(Some)
        .map_err(|e| StoreError::Corrupt(format!("recorded deposit xpub: {e}")))
}

/// The sandbox's own key: recorded one, or a new random seed whose account xpub is
/// recorded with the seed sealed under the master key (so the test funds of a sandbox
/// pointed at a test network can be recovered from the database and the master key).
async fn sandbox_key(store: &Store, master: &MasterKey) -> Result<DepositKey, KeyError> {
    if let Some(stored) = recorded(store).await? {
        return Ok(stored);
    }
    let mut seed = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut seed);
    let xpub = tron_hd::account_from_seed(&seed)?;
    let sealed = master.seal(&seed);
    seed.fill(0);
    let mut tx = store.begin().await?;
    if settings::insert_if_absent(&mut tx, XPUB_SETTING, &xpub.to_xpub_string()).await? {
        let source = KeySource::SandboxTestKey;
        settings::insert_if_absent(&mut tx, SOURCE_SETTING, source.as_str()).await?;
        settings::insert_if_absent(&mut tx, SANDBOX_SEED_SETTING, &sealed).await?;
        tx.commit().await.map_err(StoreError::from)?;
        tracing::warn!(
            fingerprint = %xpub.fingerprint(),
            "generated the sandbox test key (seed sealed in the database) — not for real funds"
        );
        return Ok(DepositKey { xpub, source });
    }
    drop(tx);
    recorded(store)
        .await?
        .ok_or_else(|| StoreError::NotFound("recorded deposit xpub").into())
}

/// Gives the project its deposit index (once, for good) and, when `xpub` is known, the
/// address derived from it, which the chain watcher then watches. In the caller's
/// transaction; `lock` is `Store::for_update` unless the project row is the caller's own
/// new insert. Returns the address (None without an xpub or without such a project).
pub async fn assign(
    conn: &mut Conn,
    lock: &str,
    xpub: Option<&AccountXpub>,
    project_id: &str,
) -> Result<Option<String>, StoreError> {
    let Some(slot) = deposit_addresses::slot_of(conn, project_id, lock).await? else {
        return Ok(None);
    };
    if slot.deposit_address.is_some() {
        return Ok(slot.deposit_address);
    }
    let index = match slot.deposit_index {
        Some(i) => i,
        None => {
            let i = deposit_addresses::allocate_index(conn).await?;
            deposit_addresses::set_index(conn, project_id, i).await?;
            i
        }
    };
    let Some(xpub) = xpub else {
        return Ok(None);
    };
    let address = xpub
        .address(index)
        .map_err(|e| StoreError::Corrupt(format!("deposit index {index}: {e}")))?;
    deposit_addresses::set_address(conn, project_id, index, &address).await?;
    chain_watch::add(conn, project_id, &address, TRON, now_micros()).await?;
    Ok(Some(address))
}

/// Gives every project without an address its derived one (projects of earlier versions,
/// whose random address stays recorded as `legacy_deposit_address`, and projects
/// created while no xpub was known). Bounded; returns how many it assigned.
pub async fn backfill(store: &Store, xpub: &AccountXpub) -> Result<usize, StoreError> {
    let mut assigned = 0;
    for _ in 0..BACKFILL_MAX_BATCHES {
        let ids = {
            let mut conn = store.conn().await?;
            deposit_addresses::without_address(&mut conn, BACKFILL_BATCH).await?
        };
        let before = assigned;
        for id in &ids {
            let mut tx = store.begin().await?;
            if assign(&mut tx, store.for_update(), Some(xpub), id)
                .await?
                .is_some()
            {
                assigned += 1;
            }
            tx.commit().await?;
        }
        // Nothing left, or nothing this pass could do (the same rows would come back).
        if assigned == before {
            break;
        }
    }
    if assigned > 0 {
        tracing::info!(projects = assigned, "assigned derived deposit addresses");
    }
    Ok(assigned)
}
