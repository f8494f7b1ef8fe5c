//! The sandbox's card network simulator (CONTRACT §7): a `simulate/cards/*` request (or
//! the console's `Simulate authorization`) as the one network message it describes, for
//! `network::apply`, the entry point a real provider adapter calls.

use super::{Merchant, Message, Origin, Purchase};
use issuing_wire::{Amount, ApiError, ErrorSlug};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize, Default)]
pub struct MerchantIn {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    mcc: Option<String>,
    #[serde(default)]
    country: Option<String>,
}

/// Every simulate request: the fields each message takes (unknown ones are ignored).
#[derive(Deserialize)]
pub struct SimRequest {
    #[serde(default)]
    card_id: Option<String>,
    #[serde(default, rename = "transactionId")]
    transaction_id: Option<String>,
    #[serde(default, rename = "transactionAmount")]
    transaction_amount: Option<Value>,
    #[serde(default, rename = "billAmount")]
    bill_amount: Option<Value>,
    #[serde(default)]
    amount: Option<Value>,
    #[serde(default)]
    merchant: Option<MerchantIn>,
    #[serde(default, rename = "merchantCurrency")]
    merchant_currency: Option<String>,
    #[serde(default, rename = "merchantAmount")]
    merchant_amount: Option<Value>,
    /// Extension: the network's id of this message; a replay is applied once.
    #[serde(default)]
    network_message_id: Option<String>,
}

/// A positive amount, or 400 `invalid_amount` naming the field.
fn amount(value: &Option<Value>, field: &str) -> Result<Option<Amount>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(v) => Amount::parse_positive(v)
            .map(Some)
            .map_err(|e| ApiError::new(ErrorSlug::InvalidAmount, format!("Invalid {field}: {e}"))),
    }
}

fn required_amount(value: &Option<Value>, field: &str) -> Result<Amount, ApiError> {
    amount(value, field)?
        .ok_or_else(|| ApiError::new(ErrorSlug::InvalidAmount, format!("{field} is required")))
}

fn text(value: &Option<String>) -> Option<String> {
    value
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn card_id(req: &SimRequest) -> Result<String, ApiError> {
    text(&req.card_id).ok_or_else(|| ApiError::validation("card_id is required"))
}

fn transaction_id(req: &SimRequest) -> Result<String, ApiError> {
    text(&req.transaction_id).ok_or_else(|| ApiError::validation("transactionId is required"))
}

/// The merchant side of a purchase; `card_amount` is the default merchant amount.
fn purchase(req: &SimRequest, card_amount: Amount) -> Result<Purchase, ApiError> {
    let m = req.merchant.as_ref();
    let field = |f: fn(&MerchantIn) -> &Option<String>, default: &str| {
        m.and_then(|m| text(f(m)))
            .unwrap_or_else(|| default.to_owned())
    };
    let merchant_currency = text(&req.merchant_currency)
        .unwrap_or_else(|| "USD".into())
        .to_ascii_uppercase();
    if merchant_currency.len() != 3 || !merchant_currency.chars().all(|c| c.is_ascii_alphabetic()) {
        return Err(ApiError::validation(
            "merchantCurrency must be an ISO 4217 code",
        ));
    }
    Ok(Purchase {
        merchant: Merchant {
            name: field(|m| &m.name, "Sandbox Merchant"),
            mcc: field(|m| &m.mcc, "5999"),
            country: field(|m| &m.country, "US"),
        },
        merchant_currency,
        merchant_amount: amount(&req.merchant_amount, "merchantAmount")?.unwrap_or(card_amount),
    })
}

/// The authorization request a simulate/cards/auth body describes (the console's
/// `Simulate authorization` builds the same body).
pub fn authorization(req: &SimRequest) -> Result<Message, ApiError> {
    let card_id = card_id(req)?;
    let amount = required_amount(&req.transaction_amount, "transactionAmount")?;
    let purchase = purchase(req, amount)?;
    Ok(Message::Authorization {
        card_id,
        amount,
        purchase,
    })
}

/// simulate/cards/clear: with `transactionId`, the clearing of that authorization;
/// with `card_id` and `billAmount` and no `transactionId`, a force post (extension).
pub fn clearing(req: &SimRequest) -> Result<Message, ApiError> {
    let bill = amount(&req.bill_amount, "billAmount")?;
    Ok(
        match (text(&req.transaction_id), text(&req.card_id), bill) {
            (Some(transaction_id), _, bill_amount) => Message::Clearing {
                transaction_id,
                bill_amount,
                origin: Origin::Sandbox,
            },
            (None, Some(card_id), Some(bill_amount)) => Message::ForcePost {
                card_id,
                bill_amount,
                purchase: purchase(req, bill_amount)?,
                origin: Origin::Sandbox,
            },
            (None, Some(_), None) => {
                return Err(ApiError::new(
                    ErrorSlug::InvalidAmount,
                    "billAmount is required for a force post",
                ))
            }
            (None, None, _) => return Err(ApiError::validation("transactionId is required")),
        },
    )
}

/// simulate/cards/reversal: `amount` (extension) releases part of the hold.
pub fn reversal(req: &SimRequest) -> Result<Message, ApiError> {
    Ok(Message::Reversal {
        transaction_id: transaction_id(req)?,
        amount: amount(&req.amount, "amount")?,
    })
}

/// simulate/cards/refund: with `transactionId`, a refund of that cleared
/// authorization; with `card_id` and `amount` and no `transactionId`, an unlinked refund
/// (extension).
pub fn refund(req: &SimRequest) -> Result<Message, ApiError> {
    let amount_in = amount(&req.amount, "amount")?;
    Ok(
        match (text(&req.transaction_id), text(&req.card_id), amount_in) {
            (Some(transaction_id), _, amount) => Message::Refund {
                transaction_id,
                amount,
            },
            (None, Some(card_id), Some(amount)) => Message::UnlinkedRefund {
                card_id,
                amount,
                purchase: purchase(req, amount)?,
            },
            (None, Some(_), None) => {
                return Err(ApiError::new(
                    ErrorSlug::InvalidAmount,
                    "amount is required for an unlinked refund",
                ))
            }
            (None, None, _) => return Err(ApiError::validation("transactionId is required")),
        },
    )
}

/// Extension: the network's id of the message; a replay is applied once.
pub fn message_id(req: &SimRequest) -> Option<String> {
    text(&req.network_message_id)
}
