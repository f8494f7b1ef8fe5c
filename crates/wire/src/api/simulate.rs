//! `simulate/cards/*` (sandbox only): the card network's messages and 3-D Secure
//! challenges.

use super::{or_default, CardTransaction, Decimal, Merchant};
use serde::{Deserialize, Serialize};

/// `simulate/cards/auth`: an authorization request.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulateAuth {
    pub card_id: String,
    #[serde(rename = "transactionAmount")]
    pub transaction_amount: Decimal,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merchant: Option<Merchant>,
    #[serde(
        default,
        rename = "merchantCurrency",
        skip_serializing_if = "Option::is_none"
    )]
    pub merchant_currency: Option<String>,
    #[serde(
        default,
        rename = "merchantAmount",
        skip_serializing_if = "Option::is_none"
    )]
    pub merchant_amount: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_message_id: Option<String>,
}

/// `simulate/cards/clear`: a clearing (`transaction_id`) or a force post (`card_id` and
/// `bill_amount`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulateClear {
    #[serde(
        default,
        rename = "transactionId",
        skip_serializing_if = "Option::is_none"
    )]
    pub transaction_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_id: Option<String>,
    #[serde(
        default,
        rename = "billAmount",
        skip_serializing_if = "Option::is_none"
    )]
    pub bill_amount: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merchant: Option<Merchant>,
    #[serde(
        default,
        rename = "merchantCurrency",
        skip_serializing_if = "Option::is_none"
    )]
    pub merchant_currency: Option<String>,
    #[serde(
        default,
        rename = "merchantAmount",
        skip_serializing_if = "Option::is_none"
    )]
    pub merchant_amount: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_message_id: Option<String>,
}

/// `simulate/cards/reversal`: all of a hold, or `amount` of it.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulateReversal {
    #[serde(rename = "transactionId")]
    pub transaction_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_message_id: Option<String>,
}

/// `simulate/cards/refund`: of a settled transaction (`transaction_id`), or unlinked
/// (`card_id` and `amount`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulateRefund {
    #[serde(
        default,
        rename = "transactionId",
        skip_serializing_if = "Option::is_none"
    )]
    pub transaction_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merchant: Option<Merchant>,
    #[serde(
        default,
        rename = "merchantCurrency",
        skip_serializing_if = "Option::is_none"
    )]
    pub merchant_currency: Option<String>,
    #[serde(
        default,
        rename = "merchantAmount",
        skip_serializing_if = "Option::is_none"
    )]
    pub merchant_amount: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_message_id: Option<String>,
}

/// The answer of `simulate/cards/auth|clear|reversal|refund`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SimulatedTransaction {
    #[serde(rename = "transactionId")]
    pub transaction_id: String,
    pub transaction: CardTransaction,
}

/// `simulate/cards/3ds`: a 3-D Secure challenge of a purchase.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Simulate3ds {
    pub card_id: String,
    pub amount: Decimal,
    /// ISO 4217, default `USD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// `name` and `country` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merchant: Option<Merchant>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
}

/// The answer of `simulate/cards/3ds`: an OOB challenge (`securement_id`, `status`) or
/// an OTP (`code`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreeDsChallenge {
    /// `OOB` or `OTP`.
    pub method: String,
    pub card_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub securement_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// `simulate/settlement/break` (sandbox): plants a settlement reconciliation break in
/// the sandbox provider's settlement records, on a settled transaction.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulateSettlementBreak {
    /// A settled transaction: a clearing, force post or refund.
    #[serde(default, deserialize_with = "or_default")]
    pub transaction_id: String,
    /// `missing_here` (a record the service never applied), `missing_there` (the
    /// transaction's record removed) or `amount_mismatch` (its amount one cent more).
    #[serde(default, deserialize_with = "or_default")]
    pub kind: String,
}

/// The answer of `simulate/settlement/break`: what was planted.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettlementBreak {
    pub transaction_id: String,
    pub kind: String,
    /// The settlement's event token (for `missing_here`, the planted record's).
    pub event_token: String,
    /// The UTC date (`YYYY-MM-DD`) to reconcile to see it.
    pub date: String,
    pub subprovider_code: String,
}
