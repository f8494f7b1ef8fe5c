//! Creating projects: shared by the operator CLI and the first-run demo project.

use crate::MasterKey;
use issuing_domain::credentials::{new_api_key, ApiSecret};
use issuing_domain::{ids, time, trc20};
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
    pub deposit_address: String,
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
    let creds = NewProjectCredentials {
        project_id: ids::new_id(),
        api_key: new_api_key(),
        api_secret: secret.expose().to_owned(),
        deposit_address: trc20::new_address(),
    };
    projects::create(
        conn,
        &projects::NewProject {
            id: &creds.project_id,
            name,
            deposit_address: &creds.deposit_address,
            api_key: &creds.api_key,
            secret_enc: &master.seal_secret(&secret),
            created_at: time::now_micros(),
        },
    )
    .await?;
    Ok(creds)
}

const DEMO_SETTING: &str = "demo_project_id";

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
