//! `rules/*`: authorization rules and the log of their results (CONTRACT §11).

use super::{or_default, ListQuery};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One condition of a rule; a rule matches when all of its conditions hold.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleCondition {
    /// `mcc`, `merchant_country`, `merchant_name` or `amount`.
    pub attribute: String,
    /// `is_one_of`, `is_not_one_of` (a list of strings), `contains` (merchant_name, a
    /// string), `greater_than`, `greater_or_equal`, `less_than`, `less_or_equal`
    /// (amount, a decimal string).
    pub operator: String,
    pub value: Value,
}

/// `rules/create`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesCreate {
    #[serde(default, deserialize_with = "or_default")]
    pub name: String,
    #[serde(default, deserialize_with = "or_default")]
    pub conditions: Vec<RuleCondition>,
    /// `active` (default), `shadow` or `inactive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Lower decides first; default 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// Only these cards; absent: every card of the project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_ids: Option<Vec<String>>,
}

/// `rules/update`: the fields given replace the rule's; `version` goes up by one.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesUpdate {
    #[serde(default, deserialize_with = "or_default")]
    pub rule_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<RuleCondition>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i64>,
    /// A list scopes the rule to those cards; an empty list makes it apply to every card.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_ids: Option<Vec<String>>,
}

/// `rules/get` and `rules/delete`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleRef {
    #[serde(default, deserialize_with = "or_default")]
    pub rule_id: String,
}

/// `rules/list`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesList {
    /// Only rules in this mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// A rule.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub rule_id: String,
    pub name: String,
    pub conditions: Vec<RuleCondition>,
    pub mode: String,
    pub priority: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_ids: Option<Vec<String>>,
    pub version: i64,
    pub created_at: String,
    pub updated_at: String,
}

/// The answer of `rules/delete`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleDeleted {
    pub rule_id: String,
    pub deleted: bool,
}

/// `rules/results`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesResults {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// One match of a rule.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuleResult {
    pub rule_id: String,
    /// The rule's version that matched.
    pub version: i64,
    pub transaction_id: String,
    pub card_id: String,
    /// `active` or `shadow`.
    pub mode: String,
    /// Always true: only matches are recorded.
    pub matched: bool,
    /// `declined` (an active rule declined the authorization) or `none`.
    pub decided: String,
    pub evaluated_at: String,
}
