//! Card transactions: the items of `cards/txs` and the `transaction` of the simulations
//! (the `card_transaction` webhook shape).

use serde::{Deserialize, Serialize};

/// A card transaction.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardTransaction {
    /// Always `card_transaction`.
    #[serde(rename = "type", default)]
    pub kind: String,
    pub transaction_id: String,
    pub tx_type: String,
    pub card_id: String,
    pub tx_at: String,
    pub card_tx_data: CardTxData,
}

/// The transaction's state. Its amounts are JSON numbers on the wire (exact to the
/// micro-unit), so they are `f64` here.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CardTxData {
    /// `authorization`, `force_post`, `refund` or `dispute`.
    pub auth_type: String,
    /// `pending`, `approved` or `declined`.
    pub status: String,
    /// `auth`, `reversal`, `refund` or `other` (a dispute's movement).
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub card_label: Option<String>,
    #[serde(default)]
    pub merchant: Merchant,
    pub card_amount: f64,
    pub card_currency: String,
    pub merchant_amount: f64,
    pub merchant_currency: String,
    pub fee_amount: f64,
    pub fee_currency: String,
    #[serde(default)]
    pub failure_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub original_transaction_id: Option<String>,
    /// Why rules or a limit declined it (CONTRACT §11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decline: Option<Decline>,
    /// The decision webhook's `reason`, when it gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_reason: Option<String>,
    /// The dispute a dispute's credit or taken-back credit (`type` `other`) belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispute_id: Option<String>,
}

/// The `decline` object of a declined authorization: `rule_ids` for rules; the limit
/// (`interval`, `limit`, `count`, `window_seconds`, `mccs`) and what its window had
/// counted (`spent`, `used_count`) for a limit. Amounts are JSON numbers, like the
/// other amounts of `card_tx_data`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Decline {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_ids: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spent: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mccs: Option<Vec<String>>,
}

/// A merchant: on transactions, and in simulation requests (fields left out get the
/// sandbox defaults).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Merchant {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
}
