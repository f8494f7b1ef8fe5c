//! `simulate/project/deposit` (sandbox only, beyond the spec): a confirmed TRC20
//! deposit to the project's address, credited as the chain watcher credits one.

use super::Decimal;
use serde::{Deserialize, Serialize};

/// `simulate/project/deposit`: `amount` USDT arrives at the project's deposit address.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulateProjectDeposit {
    pub amount: Decimal,
    /// The chain transaction id (64 hex digits); a fresh one when absent. The same id is
    /// credited once: sending it again changes nothing (`credited` is false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<String>,
    /// The sender's Tron address; a random stand-in when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// The answer of `simulate/project/deposit`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulatedDeposit {
    /// The chain transaction id: the `reference` of the `deposit` item in `project/txs`.
    pub transaction_id: String,
    /// The project's deposit address (as `project/wallet/trc20` shows it).
    pub address: String,
    pub from: String,
    pub amount: Decimal,
    /// False when this transaction id had been credited before (nothing changed).
    pub credited: bool,
    /// The ledger transfer that credited it.
    #[serde(default)]
    pub transfer_id: Option<String>,
    /// The master balance now.
    pub available: Decimal,
    pub currency: String,
}
