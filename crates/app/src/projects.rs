//! Creating projects: shared by the operator CLI and the first-run demo project.

use crate::MasterKey;
use issuing_domain::credentials::{new_api_key, ApiSecret};
use issuing_domain::{ids, time};
use issuing_store::{ledger, projects, settings, Store, StoreError};
use issuing_wire::Amount;
use serde::Serialize;

/// What an operator is shown once when a project is created. The secret is never
/// retrievable again; it is kept only sealed under the master key.
#[derive(Serialize)]
pub struct NewProjectCredentials {
    pub project_id: String,
    pub api_key: String,
    pub api_secret: String,
    /// Derived from the deposit key; None while there is none (production without
    /// `ISSUING_TRON_XPUB`: the server assigns it at the first start with one).
    pub deposit_address: Option<String>,
}

impl std::fmt::Debug for NewProjectCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewProjectCredentials")
            .field("project_id", &self.project_id)
            .field("api_key", &self.api_key)
            .field("api_secret", &"***")
            .finish()
    }
}

pub async fn create_project(
    store: &Store,
    master: &MasterKey,
    name: &str,
) -> Result<NewProjectCredentials, StoreError> {
    let mut tx = store.begin().await?;
    let creds = insert_project(&mut tx, master, name).await?;
    tx.commit().await?;
    Ok(creds)
}

async fn insert_project(
    conn: &mut issuing_store::Conn,
    master: &MasterKey,
    name: &str,
) -> Result<NewProjectCredentials, StoreError> {
    let secret = ApiSecret::generate();
    let mut creds = NewProjectCredentials {
        project_id: ids::new_id(),
        api_key: new_api_key(),
        api_secret: secret.expose().to_owned(),
        deposit_address: None,
    };
    projects::create(
        conn,
        &projects::NewProject {
            id: &creds.project_id,
            name,
            deposit_address: None,
            api_key: &creds.api_key,
            secret_enc: &master.seal_secret(&secret),
            created_at: time::now_micros(),
        },
    )
    .await?;
    // The project's deposit index is taken now, for good; its address is derived from
    // the key this database's addresses derive from (recorded when a server or admin
    // command first chose it).
    let xpub = crate::deposits::keys::stored_xpub(conn).await?;
    creds.deposit_address =
        crate::deposits::keys::assign(conn, "", xpub.as_ref(), &creds.project_id).await?;
    Ok(creds)
}

const DEMO_SETTING: &str = "demo_project_id";

/// Sandbox demo projects start with play money so every flow can be tried at once.
pub const DEMO_CREDIT: Amount = Amount::from_micros(1_000 * issuing_wire::MICROS_PER_UNIT);

/// The demo project of this database, if one was created.
pub async fn demo_project_id(store: &Store) -> Result<Option<String>, StoreError> {
    let mut conn = store.conn().await?;
    settings::get(&mut conn, DEMO_SETTING).await
}

/// Creates the demo project once per database, credited with `credit` in the same
/// transaction. Returns its credentials only on the run that created it; several
/// processes starting together still create exactly one.
pub async fn ensure_demo_project(
    store: &Store,
    master: &MasterKey,
    credit: Amount,
) -> Result<Option<NewProjectCredentials>, StoreError> {
    let mut tx = store.begin().await?;
    if settings::get(&mut tx, DEMO_SETTING).await?.is_some() {
        return Ok(None);
    }
    let creds = insert_project(&mut tx, master, "Demo project").await?;
    if credit.micros() > 0 {
        ledger::deposit(
            &mut tx,
            &creds.project_id,
            credit,
            Some("sandbox-demo-credit"),
        )
        .await?;
    }
    if !settings::insert_if_absent(&mut tx, DEMO_SETTING, &creds.project_id).await? {
        // Another process won the race; drop ours with the transaction.
        return Ok(None);
    }
    tx.commit().await?;
    Ok(Some(creds))
}

/// Why an operator change to keys or projects was refused.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("project {0} not found")]
    ProjectNotFound(String),
    #[error("API key {0} not found")]
    KeyNotFound(String),
    #[error(
        "{0} is the project's last valid API key; rotate first (admin key rotate), or pass --force to leave the project without a working key"
    )]
    LastValidKey(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A rotation's result, shown once: the new secret is never retrievable again.
#[derive(Serialize)]
pub struct RotatedKey {
    pub project_id: String,
    pub api_key: String,
    pub api_secret: String,
    /// Until when the project's previous keys keep working (RFC 3339); `None` when none
    /// does (grace 0, or the project had no valid key).
    pub old_keys_valid_until: Option<String>,
}

impl std::fmt::Debug for RotatedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RotatedKey")
            .field("project_id", &self.project_id)
            .field("api_key", &self.api_key)
            .field("api_secret", &"***")
            .field("old_keys_valid_until", &self.old_keys_valid_until)
            .finish()
    }
}

fn micros(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

async fn locked_project(
    store: &Store,
    conn: &mut issuing_store::Conn,
    project_id: &str,
) -> Result<projects::ProjectRecord, AdminError> {
    projects::get_locked(conn, project_id, store.for_update())
        .await?
        .ok_or_else(|| AdminError::ProjectNotFound(project_id.to_owned()))
}

/// Issues a new API key and secret for the project (generated and sealed like a new
/// project's) and lets its other valid keys expire `grace` from now (at the latest: an
/// earlier expiry is kept). With a zero grace they stop working at once. The new key is
/// the newest, so webhooks are sealed with it from now on.
pub async fn rotate_key(
    store: &Store,
    master: &MasterKey,
    project_id: &str,
    grace: std::time::Duration,
) -> Result<RotatedKey, AdminError> {
    let mut tx = store.begin().await?;
    locked_project(store, &mut tx, project_id).await?;
    let now = time::now_micros();
    let until = now.saturating_add(micros(grace));
    let old_until = projects::expire_keys_of(&mut tx, project_id, until, now).await?;
    let secret = ApiSecret::generate();
    let api_key = new_api_key();
    projects::add_api_key(
        &mut tx,
        project_id,
        &api_key,
        &master.seal_secret(&secret),
        now,
    )
    .await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(RotatedKey {
        project_id: project_id.to_owned(),
        api_key,
        api_secret: secret.expose().to_owned(),
        old_keys_valid_until: old_until.map(time::to_rfc3339),
    })
}

/// A revoked key: when it was revoked and how many valid keys its project has left.
#[derive(Debug, Serialize)]
pub struct RevokedKey {
    pub api_key: String,
    pub project_id: String,
    pub revoked_at: String,
    pub valid_keys_left: usize,
}

/// Revokes a key at once: the next request with it is refused by every process (keys
/// are read from the database on each request). Refuses the project's last valid key
/// unless `force`. Revoking a revoked key changes nothing and reports the first
/// revocation.
pub async fn revoke_key(
    store: &Store,
    api_key: &str,
    force: bool,
) -> Result<RevokedKey, AdminError> {
    let mut tx = store.begin().await?;
    let not_found = || AdminError::KeyNotFound(api_key.to_owned());
    let project_id = projects::get_key(&mut tx, api_key, "")
        .await?
        .ok_or_else(not_found)?
        .project_id;
    // Project first, then its keys: the same order as a rotation, so the two serialise.
    locked_project(store, &mut tx, &project_id).await?;
    let key = projects::get_key(&mut tx, api_key, "")
        .await?
        .ok_or_else(not_found)?;
    let now = time::now_micros();
    let others = projects::list_keys(&mut tx, &key.project_id)
        .await?
        .into_iter()
        .filter(|k| k.api_key != key.api_key && k.valid_at(now))
        .count();
    let revoked_at = match key.revoked_at {
        Some(at) => at,
        None => {
            if others == 0 && key.valid_at(now) && !force {
                return Err(AdminError::LastValidKey(api_key.to_owned()));
            }
            projects::revoke_key(&mut tx, api_key, now).await?;
            now
        }
    };
    tx.commit().await.map_err(StoreError::from)?;
    Ok(RevokedKey {
        api_key: key.api_key,
        project_id: key.project_id,
        revoked_at: time::to_rfc3339(revoked_at),
        valid_keys_left: others,
    })
}

/// Every key of the project, oldest first (never secrets).
pub async fn list_keys(
    store: &Store,
    project_id: &str,
) -> Result<Vec<projects::KeyInfo>, AdminError> {
    let mut conn = store.conn().await?;
    if projects::get(&mut conn, project_id).await?.is_none() {
        return Err(AdminError::ProjectNotFound(project_id.to_owned()));
    }
    Ok(projects::list_keys(&mut conn, project_id).await?)
}

pub const ACTIVE: &str = "active";
pub const SUSPENDED: &str = "suspended";

/// Suspends (`suspended`) or resumes (`active`) a project. While suspended, its requests
/// are refused with 403 `api_key_invalid`, its webhook deliveries wait (pending, not
/// attempted) and its order workers still finish orders already in flight. On resume the
/// waiting deliveries are sent and get a fresh `webhook_max_age` window. Returns the
/// previous status.
pub async fn set_project_status(
    store: &Store,
    project_id: &str,
    status: &str,
) -> Result<String, AdminError> {
    let mut tx = store.begin().await?;
    let before = locked_project(store, &mut tx, project_id).await?.status;
    projects::set_status(&mut tx, project_id, status).await?;
    if status == ACTIVE && before != ACTIVE {
        issuing_store::deliveries::restart_windows_of_project(
            &mut tx,
            project_id,
            time::now_micros(),
        )
        .await?;
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(before)
}
