//! `orders/check` and the order object every order-returning endpoint answers.

use super::{or_default, Decimal};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `orders/check`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrdersCheck {
    #[serde(default, deserialize_with = "or_default")]
    pub order_id: String,
}

/// The order object. Fields that do not apply to an order are left out (`None`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    pub order_id: String,
    /// `card_issue`, `card_topup`, `card_withdraw` or `card_status_change`.
    pub order_type: String,
    /// `new`, `processing`, `completed` or `failed`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance_before: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balance_after: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error_slug: Option<String>,
    /// Type-specific data (amounts as decimal strings).
    #[serde(default)]
    pub data: Value,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issue_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_issued: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_card_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topup_status: Option<String>,
}

impl Order {
    pub fn is_completed(&self) -> bool {
        self.status == "completed"
    }

    pub fn is_failed(&self) -> bool {
        self.status == "failed"
    }

    /// `completed` or `failed`: the order will not change any more.
    pub fn is_final(&self) -> bool {
        self.is_completed() || self.is_failed()
    }
}
