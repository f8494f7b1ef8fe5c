//! `project/*`: the master balance, its movements and the deposit wallet.

use super::{Decimal, ListQuery};
use serde::{Deserialize, Serialize};

/// `project/balance`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProjectBalance {
    /// The master balance; negative while the project owes what a real network's
    /// clearings took beyond its funds (`card_shortfall`).
    pub available: Decimal,
    pub currency: String,
}

/// `project/wallet/trc20`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Wallet {
    pub usdt_trc20: String,
}

/// `project/txs` filters.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectTxs {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub order_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub card_ids: Vec<String>,
    /// RFC 3339, a date `YYYY-MM-DD`, or integer microseconds as a string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_to: Option<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// An item of `project/txs`: one movement of the master balance. The server writes the
/// optional fields as `null` when they do not apply.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProjectTx {
    pub id: String,
    /// `deposit`, `card_issue`, `card_topup`, `fee`, `card_withdraw`, `refund` or
    /// `card_shortfall`.
    #[serde(rename = "type")]
    pub kind: String,
    pub amount: Decimal,
    pub balance_after: Decimal,
    pub currency: String,
    pub transfer_id: String,
    #[serde(default)]
    pub order_id: Option<String>,
    #[serde(default)]
    pub card_id: Option<String>,
    #[serde(default)]
    pub reference: Option<String>,
    pub created_at: String,
}
