//! `cards/limits/*`: a card's spending limits and what each has counted (CONTRACT §11).

use super::{or_default, Decimal};
use serde::{Deserialize, Serialize};

/// One limit as `cards/limits/set` takes it: an `amount`, a `count`, or both.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardLimit {
    /// `per_authorization`, `daily`, `weekly`, `monthly`, `yearly`, `all_time` or
    /// `rolling` (with `window_seconds`).
    #[serde(default, deserialize_with = "or_default")]
    pub interval: String,
    /// The most the window may count, > 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Decimal>,
    /// The most authorizations the window may count, ≥ 1 (not on `per_authorization`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    /// `rolling` only: 60 to 7,776,000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<u32>,
    /// Only authorizations with these MCCs count and are limited; absent: all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mccs: Vec<String>,
}

/// `cards/limits/set`: replaces the card's whole list (empty removes every limit).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardsLimitsSet {
    #[serde(default, deserialize_with = "or_default")]
    pub card_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
    #[serde(default, deserialize_with = "or_default")]
    pub limits: Vec<CardLimit>,
    /// IANA zone of the calendar windows; default `UTC`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timezone: Option<String>,
}

/// `cards/limits/get`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardsLimitsGet {
    #[serde(default, deserialize_with = "or_default")]
    pub card_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
}

/// A limit with what its current window has counted.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardLimitUsage {
    pub interval: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Decimal>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mccs: Vec<String>,
    /// What the current window counted (0 for `per_authorization`).
    pub spent: Decimal,
    /// Authorizations the current window counted.
    pub used_count: u64,
    /// `amount − spent`, never below 0 (limits with an amount).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_amount: Option<Decimal>,
    /// `count − used_count`, never below 0 (limits with a count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_count: Option<u64>,
    /// Where the current window starts (RFC 3339 UTC); absent for `per_authorization`
    /// and `all_time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start: Option<String>,
    /// Where it ends (exclusive); for `rolling`, now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_end: Option<String>,
}

/// The answer of `cards/limits/set` and `cards/limits/get`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardLimits {
    pub card_id: String,
    pub timezone: String,
    pub limits: Vec<CardLimitUsage>,
}
