//! `cards/*`: the product catalog, cards, their balances, credentials, status changes
//! and money movements.

use super::{or_default, Address, Decimal, KycData, ListQuery, Order};
use serde::{Deserialize, Serialize};

/// `cards/products` (not paged).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProductList {
    pub items: Vec<Product>,
    pub total: u64,
}

/// A card product of the catalog.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Product {
    pub product_code: String,
    /// Legacy name of `product_code` (the earlier API generation's).
    #[serde(default)]
    pub product_id: String,
    pub name: String,
    pub subprovider_code: String,
    pub active: bool,
    pub card_currency: String,
    pub pricing: Pricing,
    pub limits: Limits,
}

/// A product's fees (USDT).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pricing {
    pub currency: String,
    pub issue_fee: Decimal,
    pub topup_fee_percent: Decimal,
    pub topup_fee_fixed: Decimal,
    pub valid: bool,
}

/// A product's topup bounds (USDT, inclusive).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    pub currency: String,
    pub topup_min: Decimal,
    pub topup_max: Decimal,
    pub valid: bool,
}

/// `cards/create` (the idempotency key is an argument of the client's `cards_create`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardsCreate {
    pub external_user_id: String,
    pub product_code: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kyc_data: Option<KycData>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_topup: Option<Decimal>,
}

/// The answer of `cards/create`: the new card (`pending`) and its `card_issue` order.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateCardResponse {
    pub card_id: String,
    pub status: String,
    pub order: Order,
}

/// A card and its user: `cards/get`, `cards/balance`, `cards/details`. The server reads
/// a missing or `null` field as empty and answers `card_id is required` /
/// `external_user_id_required` for it.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardRef {
    #[serde(default, deserialize_with = "or_default")]
    pub card_id: String,
    #[serde(default, deserialize_with = "or_default")]
    pub external_user_id: String,
}

impl CardRef {
    pub fn new(card_id: impl Into<String>, external_user_id: impl Into<String>) -> CardRef {
        CardRef {
            card_id: card_id.into(),
            external_user_id: external_user_id.into(),
        }
    }
}

/// `cards/find` filters.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardsFind {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub card_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external_user_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statuses: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub product_codes: Vec<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// The card object. The server writes the optional fields as `null` when they do not
/// apply.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Card {
    pub card_id: String,
    pub user_id: String,
    pub project_id: String,
    pub external_user_id: String,
    pub product_code: String,
    /// `pending`, `active`, `frozen`, `failed` or `closed`.
    pub status: String,
    pub balance: CardBalance,
    #[serde(default)]
    pub label: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub issued_at: Option<String>,
    #[serde(default)]
    pub activated_at: Option<String>,
    #[serde(default)]
    pub frozen_at: Option<String>,
    #[serde(default)]
    pub closed_at: Option<String>,
}

/// A card's balance, in the card currency (`"usd"`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardBalance {
    pub currency: String,
    pub available: Decimal,
    /// Authorised but not yet settled amounts.
    pub pending: Decimal,
}

/// `cards/balance`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardBalanceResponse {
    pub card_id: String,
    pub currency: String,
    pub available: Decimal,
    pub pending: Decimal,
}

/// `cards/details`: the card's credentials. Its `Debug` hides the number and the CVV.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct CardDetailsResponse {
    pub card_id: String,
    pub status: String,
    pub details: CardDetails,
    #[serde(default)]
    pub holder: Option<Holder>,
}

impl std::fmt::Debug for CardDetailsResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CardDetailsResponse")
            .field("card_id", &self.card_id)
            .field("status", &self.status)
            .field("details", &self.details)
            .field("holder", &self.holder)
            .finish()
    }
}

/// The plaintext card credentials.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct CardDetails {
    pub card_number: String,
    pub cvv: String,
    pub expiry_month: u32,
    pub expiry_year: u32,
    pub billing_address: Address,
}

impl std::fmt::Debug for CardDetails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let last4 = self
            .card_number
            .get(self.card_number.len().saturating_sub(4)..)
            .unwrap_or("");
        f.debug_struct("CardDetails")
            .field("card_number", &format!("…{last4}"))
            .field("cvv", &"***")
            .field("expiry_month", &self.expiry_month)
            .field("expiry_year", &self.expiry_year)
            .field("billing_address", &self.billing_address)
            .finish()
    }
}

/// The card holder's name on `cards/details`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    pub first_name: String,
    pub last_name: String,
    pub name: String,
}

/// `cards/freeze` and `cards/unfreeze`. The server checks `external_user_id` only when
/// given.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardsFreeze {
    #[serde(default, deserialize_with = "or_default")]
    pub card_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
}

impl CardsFreeze {
    pub fn new(card_id: impl Into<String>) -> CardsFreeze {
        CardsFreeze {
            card_id: card_id.into(),
            external_user_id: None,
        }
    }
}

/// The answer of `cards/freeze` and `cards/unfreeze`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardStatusResponse {
    pub card_id: String,
    pub status: String,
}

/// `cards/topup` and `cards/withdraw` (the idempotency key is a method argument).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardsTopup {
    pub card_id: String,
    /// USDT.
    pub amount: Decimal,
    /// `"usdt"` if given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
}

/// `cards/withdraw` has the fields of `cards/topup`.
pub type CardsWithdraw = CardsTopup;

/// `cards/txs`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardsTxs {
    pub card_id: String,
    pub external_user_id: String,
    /// `auth`, `reversal` or `refund`: only transactions of this `card_tx_data.type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slug: Option<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// `cards/close` (the idempotency key is a method argument).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardsClose {
    pub card_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The answer of `cards/close`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CloseCardResponse {
    pub card_id: String,
    pub status: String,
    pub closed_at: String,
    /// The `card_status_change` order, already `completed`.
    pub order: Order,
    /// The `card_withdraw` order returning the card's money, when it held any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdraw_order: Option<Order>,
}

/// `cards/3ds/confirm`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cards3dsConfirm {
    pub card_id: String,
    pub external_user_id: String,
    pub securement_id: String,
    /// `true` confirms the purchase, `false` declines it.
    pub confirm: bool,
}

/// The answer of `cards/3ds/confirm`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreeDsConfirmResponse {
    pub securement_id: String,
    /// `confirmed` or `declined`.
    pub confirm: String,
}
