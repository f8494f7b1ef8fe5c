//! `wh/decision/*`: the project's real-time decision webhook (CONTRACT §11).

use super::or_default;
use serde::{Deserialize, Serialize};

/// `wh/decision/set`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhDecisionSet {
    #[serde(default, deserialize_with = "or_default")]
    pub url: String,
    /// 300 to 4000; default 2000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u32>,
    /// `decline` (default) or `approve`: what a timeout or a bad answer decides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<String>,
    /// `live` (default) or `stand_in` (no call; `on_timeout` decides at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

/// The answer of `wh/decision/set|get|delete`: `configured` false (and nothing else)
/// when the project has no endpoint.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionEndpoint {
    pub configured: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// What the decision endpoint receives (sealed like webhook deliveries).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizationRequest {
    /// Always `authorization_request`.
    #[serde(rename = "type")]
    pub kind: String,
    pub request_id: String,
    pub transaction_id: String,
    pub card_id: String,
    pub external_user_id: String,
    pub amount: super::Decimal,
    pub currency: String,
    pub merchant: super::Merchant,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merchant_amount: Option<super::Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merchant_currency: Option<String>,
    /// The card's available funds with this authorization held.
    pub available: super::Decimal,
    /// Answers after this instant change nothing.
    pub deadline_at: String,
}

/// The endpoint's answer (sealed, with HTTP 200).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizationDecision {
    pub approved: bool,
    /// Kept as `card_tx_data.decision_reason` (at most 64 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}
