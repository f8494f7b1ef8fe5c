//! Statements (CONTRACT §17): a card's or the project's movements over one UTC month,
//! from the ledger, with the balances at both ends and totals per kind.

use super::{or_default, Decimal};
use serde::{Deserialize, Serialize};

/// `cards/statement`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardsStatement {
    #[serde(default, deserialize_with = "or_default")]
    pub card_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
    /// A UTC month, `YYYY-MM`; not in the future (the current month runs up to now).
    #[serde(default, deserialize_with = "or_default")]
    pub period: String,
    /// Items to skip (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip: Option<u32>,
    /// Items to answer, at most 500 (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// `project/statement`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectStatement {
    /// A UTC month, `YYYY-MM`.
    #[serde(default, deserialize_with = "or_default")]
    pub period: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// A card's statement: its funds (available + pending) at the period's bounds.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardStatement {
    pub card_id: String,
    pub period: String,
    pub opening_balance: Decimal,
    pub closing_balance: Decimal,
    /// The part of the closing balance open holds keep.
    pub pending_at_close: Decimal,
    pub totals: CardStatementTotals,
    pub items: Vec<StatementItem>,
    pub total: u64,
    pub skip: u64,
    pub limit: u64,
}

/// A card statement's totals over the whole period, signed.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardStatementTotals {
    pub topups: Decimal,
    pub withdrawals: Decimal,
    pub purchases: Decimal,
    pub refunds: Decimal,
    pub dispute_credits: Decimal,
    pub dispute_debits: Decimal,
    pub fees: Decimal,
    pub other: Decimal,
}

/// One posted movement of a card's funds.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatementItem {
    pub at: String,
    /// `topup`, `withdrawal`, `purchase`, `refund`, `dispute_credit`, `dispute_debit`,
    /// `fee` or `other`.
    pub kind: String,
    /// Signed: positive adds to the card's funds.
    pub amount: Decimal,
    pub balance_after: Decimal,
    #[serde(default)]
    pub transaction_id: Option<String>,
    #[serde(default)]
    pub order_id: Option<String>,
    /// For a dispute's movement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dispute_id: Option<String>,
    pub description: String,
}

/// The project's statement: its master balance at the period's bounds.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProjectStatementResponse {
    pub period: String,
    pub opening_balance: Decimal,
    pub closing_balance: Decimal,
    pub totals: ProjectStatementTotals,
    /// As `project/txs` shows them, oldest first; `balance_after` is the running balance.
    pub items: Vec<super::ProjectTx>,
    pub total: u64,
    pub skip: u64,
    pub limit: u64,
}

/// A project statement's totals over the whole period, signed.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProjectStatementTotals {
    pub deposits: Decimal,
    pub card_issue_fees: Decimal,
    /// Topups and their fees.
    pub card_topups: Decimal,
    pub card_withdrawals: Decimal,
    /// What `cards/close` brought back from closed cards.
    pub card_closes: Decimal,
    /// A closed card's dispute credits and what lost disputes took back.
    pub disputes: Decimal,
    pub shortfalls: Decimal,
    /// Everything else: refunds of failed orders and operator adjustments.
    pub adjustments: Decimal,
}
