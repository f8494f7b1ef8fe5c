//! A card transaction as `cards/txs` lists it and the `card_transaction` webhook
//! carries it (CONTRACT §9): amounts as JSON numbers in `card_tx_data`, as the spec
//! types them.

use issuing_domain::time::to_rfc3339;
use issuing_store::card_txs::CardTxRecord;
use issuing_store::cards::CardRecord;
use serde_json::{json, Value};

/// Micro-units as a JSON number of units (12.5 for 12500000). Amounts are far below
/// 2^53 micro-units, so the float is exact to the micro-unit when printed.
pub fn number(micros: i64) -> Value {
    let units = micros as f64 / 1_000_000.0;
    serde_json::Number::from_f64(units).map_or(Value::Null, Value::Number)
}

fn auth_type(rec: &CardTxRecord) -> &'static str {
    match rec.tx_kind.as_str() {
        "refund" => "refund",
        "other" => "dispute",
        // A force post has no authorization behind it.
        _ if rec.auth_amount == 0 => "force_post",
        _ => "authorization",
    }
}

pub fn item(rec: &CardTxRecord, card: &CardRecord) -> Value {
    let mut data = json!({
        "auth_type": auth_type(rec),
        "status": rec.status,
        "type": rec.tx_kind,
        "card_label": card.label.clone().unwrap_or_default(),
        "merchant": rec.merchant,
        "fee_amount": number(0),
        "fee_currency": card.card_currency.to_ascii_lowercase(),
        "card_currency": card.card_currency.to_ascii_uppercase(),
        "card_amount": number(rec.card_amount),
        "merchant_currency": rec.merchant_currency,
        "merchant_amount": number(rec.merchant_amount),
        "failure_reason": rec.failure_reason,
    });
    if let Some(original) = &rec.original_transaction_id {
        data["original_transaction_id"] = json!(original);
    }
    // CONTRACT §11: why rules or a limit declined it, and the decision webhook's reason.
    if let Some(decline) = &rec.decline {
        data["decline"] = decline.clone();
    }
    if let Some(reason) = &rec.decision_reason {
        data["decision_reason"] = json!(reason);
    }
    if let Some(dispute) = &rec.dispute_id {
        data["dispute_id"] = json!(dispute);
    }
    json!({
        "type": "card_transaction",
        "transaction_id": rec.id,
        "tx_type": rec.tx_type,
        "card_id": rec.card_id,
        "tx_at": to_rfc3339(rec.updated_at),
        "card_tx_data": data,
    })
}
