//! `users/*`.

use super::{or_default, Decimal, ListQuery};
use serde::{Deserialize, Serialize};

/// `users/create`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsersCreate {
    #[serde(default, deserialize_with = "or_default")]
    pub external_user_id: String,
}

/// `users/get`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsersGet {
    #[serde(default, deserialize_with = "or_default")]
    pub external_user_id: String,
}

/// `users/find` filters.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsersFind {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external_user_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_from: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_to: Option<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// The user object.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct User {
    pub user_id: String,
    pub external_user_id: String,
    pub project_id: String,
    /// Users hold no funds of their own: money sits on the project's master balance and
    /// on cards, so this is `"0.00"`.
    pub usdt_balance: Decimal,
    #[serde(default)]
    pub deposit_addresses: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
}
