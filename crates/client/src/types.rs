//! Typed requests and answers of every endpoint (docs/api.md has the meaning of each
//! field).
//!
//! Requests serialize to the endpoint's fields; optional fields that are `None` (and
//! empty filter lists) are left out. Answers deserialize from the opened success body and
//! ignore fields they do not know, so a server that adds fields does not break them.
//! Amounts are [`Decimal`] strings as on the wire, never floats; the one exception is
//! [`CardTxData`], whose amounts the API sends as JSON numbers.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A decimal amount as the API writes it: `"12.50"`, `"-2.00"`, `"0.000001"`. Requests
/// send it as a JSON string, which the server judges by its text.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Decimal(pub String);

impl Decimal {
    /// Wraps a decimal text (not checked: the server judges it).
    pub fn new(text: impl Into<String>) -> Decimal {
        Decimal(text.into())
    }

    /// The text, e.g. `"12.50"`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The value in millionths (`"12.5"` → 12_500_000), for comparing amounts without
    /// floats. `None` for a text that is not `[-]digits[.1 to 6 digits]`.
    pub fn to_micros(&self) -> Option<i64> {
        let text = self.0.trim();
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty()
            || !all_digits(whole)
            || !all_digits(fraction)
            || fraction.len() > 6
            || (digits.contains('.') && fraction.is_empty())
        {
            return None;
        }
        let whole: i64 = whole.parse().ok()?;
        let fraction: i64 = format!("{fraction:0<6}").parse().ok()?;
        let micros = whole.checked_mul(1_000_000)?.checked_add(fraction)?;
        Some(if negative { -micros } else { micros })
    }
}

/// A JSON string in the plain decimal form `[-]digits[.1 to 6 digits]`.
#[cfg(feature = "openapi")]
impl schemars::JsonSchema for Decimal {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Decimal".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "A decimal amount as a JSON string, never a number: `\"12.50\"`, `\"-2.00\"`, `\"0.000001\"` (at most 6 fractional digits).",
            "pattern": "^-?[0-9]+(\\.[0-9]{1,6})?$",
            "examples": ["12.50"]
        })
    }
}

impl std::fmt::Display for Decimal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Decimal {
    fn from(text: &str) -> Decimal {
        Decimal(text.to_owned())
    }
}

impl From<String> for Decimal {
    fn from(text: String) -> Decimal {
        Decimal(text)
    }
}

/// A page of a list endpoint: `items`, `total` (every match), and the `skip` and `limit`
/// that were used.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", schemars(rename = "Page_of_{T}"))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
    #[serde(default)]
    pub skip: u64,
    #[serde(default)]
    pub limit: u64,
}

/// Paging and sorting of a list request (all optional: `skip` 0, `limit` 20,
/// `sort_by` `created_at`, `sort_dir` `desc`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ListQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort_by: Option<String>,
    /// `asc` or `desc`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sort_dir: Option<String>,
}

/// The body of endpoints without fields.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Empty {}

// ---------------------------------------------------------------- system and project

/// `system/health`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Health {
    pub status: String,
}

/// `system/time`: the server clock in microseconds since the epoch.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ServerTime {
    pub timestamp: i64,
}

/// `project/balance`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProjectBalance {
    pub available: Decimal,
    pub currency: String,
}

/// `project/wallet/trc20`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Wallet {
    pub usdt_trc20: String,
}

/// `project/txs` filters.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ProjectTxs {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub types: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub order_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub card_ids: Vec<String>,
    /// RFC 3339, a date `YYYY-MM-DD`, or integer microseconds as a string.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_to: Option<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// An item of `project/txs`: one movement of the master balance.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProjectTx {
    pub id: String,
    /// `deposit`, `card_issue`, `card_topup`, `fee`, `card_withdraw` or `refund`.
    #[serde(rename = "type")]
    pub kind: String,
    pub amount: Decimal,
    pub balance_after: Decimal,
    pub currency: String,
    pub transfer_id: String,
    #[serde(default)]
    pub order_id: Option<String>,
    #[serde(default)]
    pub card_id: Option<String>,
    #[serde(default)]
    pub reference: Option<String>,
    pub created_at: String,
}

// ---------------------------------------------------------------- users

/// `users/create`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UsersCreate {
    pub external_user_id: String,
}

/// `users/get`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UsersGet {
    pub external_user_id: String,
}

/// `users/find` filters.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UsersFind {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub external_user_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub user_ids: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_from: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_to: Option<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// The user object.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct User {
    pub user_id: String,
    pub external_user_id: String,
    pub project_id: String,
    pub usdt_balance: Decimal,
    #[serde(default)]
    pub deposit_addresses: Vec<String>,
    pub created_at: String,
    pub updated_at: String,
}

// ---------------------------------------------------------------- cardholders

/// KYC data of a cardholder (`cardholders/create`, `cards/create`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KycData {
    pub first_name: String,
    pub last_name: String,
    /// `YYYY-MM-DD`.
    pub birth_date: String,
    pub email: String,
    /// E.164, e.g. `+447700900123`.
    pub phone_number_full: String,
    /// ISO 3166-1 alpha-2.
    pub country_iso: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<Address>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_document: Option<IdDocument>,
}

/// A postal address (KYC data; card billing address).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Address {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line1: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line2: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub city: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postal_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country_iso: Option<String>,
}

/// An identity document in KYC data.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdDocument {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country_iso: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry_date: Option<String>,
}

/// `cardholders/create`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CardholdersCreate {
    pub external_user_id: String,
    pub subprovider_code: String,
    /// Required by some subproviders (`sandbox_restricted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub product_code: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kyc_data: Option<KycData>,
}

/// `cardholders/get`: by `cardholder_id`, or by `external_user_id` and `subprovider_code`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CardholdersGet {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cardholder_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subprovider_code: Option<String>,
}

impl CardholdersGet {
    pub fn by_id(cardholder_id: impl Into<String>) -> Self {
        CardholdersGet {
            cardholder_id: Some(cardholder_id.into()),
            ..Self::default()
        }
    }

    pub fn by_user(
        external_user_id: impl Into<String>,
        subprovider_code: impl Into<String>,
    ) -> Self {
        CardholdersGet {
            cardholder_id: None,
            external_user_id: Some(external_user_id.into()),
            subprovider_code: Some(subprovider_code.into()),
        }
    }
}

/// `cardholders/find` filters.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CardholdersFind {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cardholder_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub external_user_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub user_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subprovider_codes: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub product_codes: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub registration_statuses: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kyc_statuses: Vec<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// The cardholder object.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Cardholder {
    pub cardholder_id: String,
    pub user_id: String,
    pub external_user_id: String,
    pub project_id: String,
    pub subprovider_code: String,
    #[serde(default)]
    pub product_code: Option<String>,
    /// `pending`, `active`, `suspended` or `failed`.
    pub registration_status: String,
    /// `not_started`, `pending`, `approved`, `rejected` or `expired`.
    pub kyc_status: String,
    /// `none`, `basic`, `advanced` or `full`.
    pub kyc_level: String,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub registered_at: Option<String>,
    #[serde(default)]
    pub activated_at: Option<String>,
}

impl Cardholder {
    /// `active` and `approved`: cards can be issued to it.
    pub fn is_ready(&self) -> bool {
        self.registration_status == "active" && self.kyc_status == "approved"
    }
}

// ---------------------------------------------------------------- products

/// `cards/products` (not paged).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ProductList {
    pub items: Vec<Product>,
    pub total: u64,
}

/// A card product of the catalog.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Product {
    pub product_code: String,
    pub name: String,
    pub subprovider_code: String,
    pub active: bool,
    pub card_currency: String,
    pub pricing: Pricing,
    pub limits: Limits,
}

/// A product's fees (USDT).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Pricing {
    pub currency: String,
    pub issue_fee: Decimal,
    pub topup_fee_percent: Decimal,
    pub topup_fee_fixed: Decimal,
    pub valid: bool,
}

/// A product's topup bounds (USDT, inclusive).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Limits {
    pub currency: String,
    pub topup_min: Decimal,
    pub topup_max: Decimal,
    pub valid: bool,
}

// ---------------------------------------------------------------- cards

/// `cards/create` (the idempotency key is an argument of
/// [`Client::cards_create`](crate::Client::cards_create)).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CardsCreate {
    pub external_user_id: String,
    pub product_code: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kyc_data: Option<KycData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub initial_topup: Option<Decimal>,
}

/// The answer of `cards/create`: the new card (`pending`) and its `card_issue` order.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CreateCardResponse {
    pub card_id: String,
    pub status: String,
    pub order: Order,
}

/// A card and its user: `cards/get`, `cards/balance`, `cards/details`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CardRef {
    pub card_id: String,
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CardsFind {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub card_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub external_user_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub user_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub statuses: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub product_codes: Vec<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// The card object.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CardBalance {
    pub currency: String,
    pub available: Decimal,
    pub pending: Decimal,
}

/// `cards/balance`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CardBalanceResponse {
    pub card_id: String,
    pub currency: String,
    pub available: Decimal,
    pub pending: Decimal,
}

/// `cards/details`: the card's credentials. Its `Debug` hides the number and the CVV.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Clone, PartialEq, Deserialize)]
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
#[derive(Clone, PartialEq, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Holder {
    pub first_name: String,
    pub last_name: String,
    pub name: String,
}

/// `cards/freeze` and `cards/unfreeze`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CardsFreeze {
    pub card_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
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
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct CardStatusResponse {
    pub card_id: String,
    pub status: String,
}

/// `cards/topup` and `cards/withdraw` (the idempotency key is a method argument).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CardsTopup {
    pub card_id: String,
    /// USDT.
    pub amount: Decimal,
    /// `"usdt"` if given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
}

/// `cards/withdraw` has the fields of `cards/topup`.
pub type CardsWithdraw = CardsTopup;

/// `cards/txs`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CardsTxs {
    pub card_id: String,
    pub external_user_id: String,
    /// `auth`, `reversal` or `refund`: only transactions of this `card_tx_data.type`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slug: Option<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// `cards/close` (the idempotency key is a method argument).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CardsClose {
    pub card_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The answer of `cards/close`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CloseCardResponse {
    pub card_id: String,
    pub status: String,
    pub closed_at: String,
    /// The `card_status_change` order, already `completed`.
    pub order: Order,
    /// The `card_withdraw` order returning the card's money, when it held any.
    #[serde(default)]
    pub withdraw_order: Option<Order>,
}

/// `cards/3ds/confirm`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Cards3dsConfirm {
    pub card_id: String,
    pub external_user_id: String,
    pub securement_id: String,
    /// `true` confirms the purchase, `false` declines it.
    pub confirm: bool,
}

/// The answer of `cards/3ds/confirm`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ThreeDsConfirmResponse {
    pub securement_id: String,
    /// `confirmed` or `declined`.
    pub confirm: String,
}

// ---------------------------------------------------------------- orders

/// `orders/check`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct OrdersCheck {
    pub order_id: String,
}

/// The order object. Fields that do not apply to an order are `None`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Order {
    pub order_id: String,
    /// `card_issue`, `card_topup`, `card_withdraw` or `card_status_change`.
    pub order_type: String,
    /// `new`, `processing`, `completed` or `failed`.
    pub status: String,
    #[serde(default)]
    pub card_id: Option<String>,
    #[serde(default)]
    pub balance_before: Option<Decimal>,
    #[serde(default)]
    pub balance_after: Option<Decimal>,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub last_error_slug: Option<String>,
    /// Type-specific data (amounts as decimal strings).
    #[serde(default)]
    pub data: Value,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub completed_at: Option<String>,
    #[serde(default)]
    pub failed_at: Option<String>,
    #[serde(default)]
    pub issue_status: Option<String>,
    #[serde(default)]
    pub is_issued: Option<bool>,
    #[serde(default)]
    pub provider_card_status: Option<String>,
    #[serde(default)]
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

// ---------------------------------------------------------------- card transactions

/// A card transaction (items of `cards/txs`, `transaction` of the simulations).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct CardTxData {
    /// `authorization`, `force_post` or `refund`.
    pub auth_type: String,
    /// `pending`, `approved` or `declined`.
    pub status: String,
    /// `auth`, `reversal` or `refund`.
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
    #[serde(default)]
    pub original_transaction_id: Option<String>,
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

// ---------------------------------------------------------------- webhooks

/// `wh/subscribe`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WhSubscribe {
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Empty: every event type.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub event_types: Vec<String>,
}

/// `wh/unsubscribe`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WhUnsubscribe {
    pub id: String,
}

/// A webhook subscription.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Subscription {
    pub id: String,
    #[serde(default)]
    pub title: String,
    pub url: String,
    pub active: bool,
    pub created_at: String,
    #[serde(default)]
    pub event_types: Vec<String>,
    #[serde(default)]
    pub deactivated_at: Option<String>,
    #[serde(default)]
    pub deactivated_reason: Option<String>,
}

/// `wh/deliveries` filters.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WhDeliveries {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subscription_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub event_types: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub event_ids: Vec<String>,
    /// `pending`, `succeeded` or `failed`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// An item of the delivery log.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Delivery {
    pub delivery_id: String,
    pub subscription_id: String,
    pub event_id: String,
    pub event_type: String,
    /// `pending`, `succeeded` or `failed`.
    pub state: String,
    pub attempts: u32,
    #[serde(default)]
    pub last_status: Option<u16>,
    #[serde(default)]
    pub last_error: Option<String>,
    #[serde(default)]
    pub last_attempt_at: Option<String>,
    #[serde(default)]
    pub next_attempt_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub completed_at: Option<String>,
}

/// `wh/redeliver`: exactly one of `delivery_id` and `since`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WhRedeliver {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery_id: Option<String>,
    /// Failed deliveries that ended at or after this time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// With `since`: only this subscription's deliveries.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_id: Option<String>,
}

/// The answer of `wh/redeliver`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct RedeliverResponse {
    pub queued: u64,
    /// With `delivery_id`: the delivery, now pending.
    #[serde(default)]
    pub delivery: Option<Delivery>,
    /// With `since`: call again while `queued` equals it.
    #[serde(default)]
    pub batch_limit: Option<u64>,
}

// ---------------------------------------------------------------- sandbox simulations

/// `simulate/cards/auth`: an authorization request.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimulateAuth {
    pub card_id: String,
    #[serde(rename = "transactionAmount")]
    pub transaction_amount: Decimal,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merchant: Option<Merchant>,
    #[serde(rename = "merchantCurrency", skip_serializing_if = "Option::is_none")]
    pub merchant_currency: Option<String>,
    #[serde(rename = "merchantAmount", skip_serializing_if = "Option::is_none")]
    pub merchant_amount: Option<Decimal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_message_id: Option<String>,
}

/// `simulate/cards/clear`: a clearing (`transaction_id`) or a force post (`card_id` and
/// `bill_amount`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimulateClear {
    #[serde(rename = "transactionId", skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card_id: Option<String>,
    #[serde(rename = "billAmount", skip_serializing_if = "Option::is_none")]
    pub bill_amount: Option<Decimal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merchant: Option<Merchant>,
    #[serde(rename = "merchantCurrency", skip_serializing_if = "Option::is_none")]
    pub merchant_currency: Option<String>,
    #[serde(rename = "merchantAmount", skip_serializing_if = "Option::is_none")]
    pub merchant_amount: Option<Decimal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_message_id: Option<String>,
}

/// `simulate/cards/reversal`: all of a hold, or `amount` of it.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimulateReversal {
    #[serde(rename = "transactionId")]
    pub transaction_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount: Option<Decimal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_message_id: Option<String>,
}

/// `simulate/cards/refund`: of a settled transaction (`transaction_id`), or unlinked
/// (`card_id` and `amount`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimulateRefund {
    #[serde(rename = "transactionId", skip_serializing_if = "Option::is_none")]
    pub transaction_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount: Option<Decimal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merchant: Option<Merchant>,
    #[serde(rename = "merchantCurrency", skip_serializing_if = "Option::is_none")]
    pub merchant_currency: Option<String>,
    #[serde(rename = "merchantAmount", skip_serializing_if = "Option::is_none")]
    pub merchant_amount: Option<Decimal>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_message_id: Option<String>,
}

/// The answer of `simulate/cards/auth|clear|reversal|refund`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SimulatedTransaction {
    #[serde(rename = "transactionId")]
    pub transaction_id: String,
    pub transaction: CardTransaction,
}

/// `simulate/cards/3ds`: a 3-D Secure challenge of a purchase.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Simulate3ds {
    pub card_id: String,
    pub amount: Decimal,
    /// ISO 4217, default `USD`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub currency: Option<String>,
    /// `name` and `country` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merchant: Option<Merchant>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
}

/// The answer of `simulate/cards/3ds`: an OOB challenge (`securement_id`, `status`) or
/// an OTP (`code`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ThreeDsChallenge {
    /// `OOB` or `OTP`.
    pub method: String,
    pub card_id: String,
    #[serde(default)]
    pub securement_id: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub code: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decimals_convert_to_micros() {
        for (text, micros) in [
            ("0.00", Some(0)),
            ("12.5", Some(12_500_000)),
            ("-2.00", Some(-2_000_000)),
            ("0.000001", Some(1)),
            ("10", Some(10_000_000)),
            ("1.0000001", None),
            ("1e3", None),
            (".5", None),
            ("5.", None),
            ("", None),
        ] {
            assert_eq!(Decimal::from(text).to_micros(), micros, "{text}");
        }
    }

    #[test]
    fn requests_leave_out_what_is_not_set() {
        let v = serde_json::to_value(CardsFind {
            statuses: vec!["active".into()],
            page: ListQuery {
                limit: Some(5),
                ..ListQuery::default()
            },
            ..CardsFind::default()
        })
        .unwrap();
        assert_eq!(v, json!({"statuses": ["active"], "limit": 5}));
        let v = serde_json::to_value(SimulateAuth {
            card_id: "c".into(),
            transaction_amount: "1.00".into(),
            ..SimulateAuth::default()
        })
        .unwrap();
        assert_eq!(v, json!({"card_id": "c", "transactionAmount": "1.00"}));
    }

    #[test]
    fn answers_ignore_unknown_fields_and_read_tx_numbers() {
        let tx: SimulatedTransaction = serde_json::from_value(json!({
            "success": true, "transactionId": "t", "new_field": 1,
            "transaction": {"type": "card_transaction", "transaction_id": "t", "tx_type": "x",
              "card_id": "c", "tx_at": "2026-01-01T00:00:00Z",
              "card_tx_data": {"auth_type": "authorization", "status": "pending", "type": "auth",
                "card_label": "1234", "merchant": {"name": "M"}, "card_amount": 1e-6,
                "card_currency": "USD", "merchant_amount": 30.0, "merchant_currency": "USD",
                "fee_amount": 0.0, "fee_currency": "usd", "failure_reason": null}}
        }))
        .unwrap();
        assert_eq!(tx.transaction.card_tx_data.card_amount, 1e-6);
        assert_eq!(
            tx.transaction.card_tx_data.merchant.name.as_deref(),
            Some("M")
        );
    }
}
