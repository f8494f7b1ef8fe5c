//! `wh/*`: webhook subscriptions and the delivery log.

use super::{or_default, ListQuery};
use serde::{Deserialize, Serialize};

/// `wh/subscribe`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhSubscribe {
    #[serde(default, deserialize_with = "or_default")]
    pub url: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Empty: every event type.
    #[serde(
        default,
        deserialize_with = "or_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub event_types: Vec<String>,
}

/// `wh/unsubscribe`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhUnsubscribe {
    #[serde(default, deserialize_with = "or_default")]
    pub id: String,
}

/// A webhook subscription.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    pub id: String,
    #[serde(default)]
    pub title: String,
    pub url: String,
    pub active: bool,
    pub created_at: String,
    /// Beyond the spec: the event types it receives; empty means all.
    #[serde(default)]
    pub event_types: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deactivated_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deactivated_reason: Option<String>,
}

/// `wh/deliveries` filters.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhDeliveries {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subscription_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_types: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub event_ids: Vec<String>,
    /// `pending`, `succeeded` or `failed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// An item of the delivery log. Fields that do not apply yet are left out.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delivery {
    pub delivery_id: String,
    pub subscription_id: String,
    pub event_id: String,
    pub event_type: String,
    /// `pending`, `succeeded` or `failed`.
    pub state: String,
    pub attempts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<String>,
}

/// `wh/redeliver`: exactly one of `delivery_id` and `since`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhRedeliver {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
    /// Failed deliveries that ended at or after this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// With `since`: only this subscription's deliveries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<String>,
}

/// The answer of `wh/redeliver`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RedeliverResponse {
    pub queued: u64,
    /// With `delivery_id`: the delivery, now pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<Delivery>,
    /// With `since`: call again while `queued` equals it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_limit: Option<u64>,
}
