//! Deposits that arrive by themselves. Each project's TRC20 deposit address is derived
//! from the operator's account xpub (`keys`), so the server never holds a private key;
//! the chain watcher (`workers::chain`) polls a TronGrid-compatible API for confirmed
//! USDT transfers to those addresses and credits each one once (`credit`).

pub mod credit;
pub mod keys;
pub mod trongrid;

use crate::App;
use issuing_store::StoreError;

/// The project's deposit address as `project/wallet/trc20` shows it: None when this
/// server has no deposit key (production without `ISSUING_TRON_XPUB`) or no such
/// project. A project still without one (created while no key was known) gets it now.
pub async fn wallet_address(state: &App, project_id: &str) -> Result<Option<String>, StoreError> {
    let Some(key) = &state.deposit_key else {
        return Ok(None);
    };
    {
        let mut conn = state.store.conn().await?;
        let slot = issuing_store::deposit_addresses::slot_of(&mut conn, project_id, "").await?;
        match slot {
            None => return Ok(None),
            Some(s) if s.deposit_address.is_some() => return Ok(s.deposit_address),
            Some(_) => {}
        }
    }
    let mut tx = state.store.begin().await?;
    let address = keys::assign(
        &mut tx,
        state.store.for_update(),
        Some(&key.xpub),
        project_id,
    )
    .await?;
    tx.commit().await?;
    Ok(address)
}
