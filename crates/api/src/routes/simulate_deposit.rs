//! simulate/project/deposit (sandbox only, beyond the spec): credits the master balance
//! as a confirmed chain deposit to the project's address would, through the same path
//! as the chain watcher, so an integrator can test funding without an operator.

use crate::pipeline::{reply, ApiResult, Caller, Payload};
use axum::extract::State;
use issuing_app::deposits::credit::{self, Credit};
use issuing_app::App;
use issuing_domain::chain_deposit::{is_transaction_id, MAX_DEPOSIT, TRON};
use issuing_domain::trc20;
use issuing_store::chain_deposits::ChainDeposit;
use issuing_store::ledger;
use issuing_wire::api::SimulatedDeposit;
use issuing_wire::{Amount, ApiError, ErrorSlug};
use rand::RngCore;
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
pub(crate) struct DepositRequest {
    #[serde(default)]
    amount: Option<Value>,
    /// A chain transaction id (64 hex digits) to credit once; a fresh one when absent.
    #[serde(default)]
    transaction_id: Option<String>,
    /// The sender's Tron address; a random stand-in when absent.
    #[serde(default)]
    from: Option<String>,
}

pub(crate) async fn deposit(
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<DepositRequest>,
) -> ApiResult<SimulatedDeposit> {
    let amount = deposit_amount(&req.amount, state.config.tron.min_deposit)?;
    let transaction_id = match req.transaction_id.as_deref().map(str::trim) {
        None | Some("") => random_transaction_id(),
        Some(t) if is_transaction_id(t) => t.to_ascii_lowercase(),
        Some(_) => return Err(ApiError::validation("transaction_id must be 64 hex digits").into()),
    };
    let given_from = match req.from.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(f) if trc20::is_valid(f) => Some(f.to_owned()),
        Some(_) => return Err(ApiError::validation("from must be a Tron address").into()),
    };
    let from = given_from.clone().unwrap_or_else(trc20::new_address);
    let address = issuing_app::deposits::wallet_address(&state, &caller.project_id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorSlug::WalletNotFound, "Wallet not found"))?;
    let deposit = ChainDeposit {
        network: TRON.to_owned(),
        transaction_id: transaction_id.clone(),
        address: address.clone(),
        project_id: caller.project_id.clone(),
        from_address: from.clone(),
        token: state.config.tron.usdt_contract.clone(),
        amount,
        block_timestamp: issuing_domain::time::now_micros() / 1_000,
        source: "simulated".to_owned(),
    };
    // A repeat of a credited transaction id answers the first credit, changing nothing.
    let (credited, transfer_id, from) = match credit::credit(&state.store, &deposit).await? {
        Credit::Credited { transfer_id, .. } => (true, Some(transfer_id), from),
        Credit::CreditedByOperator { transfer_id } => (false, Some(transfer_id), from),
        Credit::AlreadyCredited { earlier: Some(e) }
            if e.amount == amount && given_from.is_none_or(|f| f == e.from_address) =>
        {
            (false, e.transfer_id, e.from_address)
        }
        Credit::AlreadyCredited { .. } => {
            let msg = "transaction_id was already credited with another amount or sender";
            return Err(ApiError::new(ErrorSlug::IdempotencyConflict, msg).into());
        }
    };
    let mut conn = state.store.conn().await?;
    let available = ledger::master_balance(&mut conn, &caller.project_id).await?;
    Ok(reply(SimulatedDeposit {
        transaction_id,
        address,
        from,
        amount: amount.into(),
        credited,
        transfer_id,
        available: available.into(),
        currency: ledger::CURRENCY.to_owned(),
    }))
}

/// The amount as the chain watcher would credit it: at least the minimum deposit (a
/// smaller transfer is ignored as dust), at most the largest single deposit.
fn deposit_amount(value: &Option<Value>, minimum: Amount) -> Result<Amount, ApiError> {
    let amount = match value {
        None | Some(Value::Null) => {
            return Err(ApiError::new(
                ErrorSlug::InvalidAmount,
                "amount is required",
            ))
        }
        Some(v) => Amount::parse_positive(v)
            .map_err(|e| ApiError::new(ErrorSlug::InvalidAmount, format!("Invalid amount: {e}")))?,
    };
    if amount < minimum {
        let msg =
            format!("A deposit below {minimum} USDT is not credited (ISSUING_TRON_MIN_DEPOSIT)");
        return Err(ApiError::new(ErrorSlug::AmountBelowMinimum, msg));
    }
    if amount > MAX_DEPOSIT {
        let msg = format!("A single deposit is at most {MAX_DEPOSIT} USDT");
        return Err(ApiError::new(ErrorSlug::AmountAboveMaximum, msg));
    }
    Ok(amount)
}

fn random_transaction_id() -> String {
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
