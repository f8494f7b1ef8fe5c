//! 3-D Secure and OTP (CONTRACT §10).
//!
//! simulate/cards/3ds plays the card network asking for a cardholder verification. For
//! a card whose subprovider verifies out of band (OOB), it stores a `pending` securement
//! that expires after `SECUREMENT_TTL_MICROS` and emits `card_3ds` (`confirm` `pending`,
//! `status` `challenge_sent`). For an OTP subprovider it sends a 6-digit code in
//! `card_otp` (and keeps a securement row for audit; it can never be confirmed).
//!
//! cards/3ds/confirm answers an OOB challenge: after every check it calls the provider
//! (idempotency key `<securement_id>:confirm`), then answers the securement with one
//! conditional update and emits `card_3ds` again (`confirmed` or `declined`, `status`
//! `completed`) in the same transaction. Of two concurrent answers only the one whose
//! update matched succeeds; the other is `securement_id_invalid`.

use super::{card_for_user, required_user};
use crate::App;
use issuing_domain::catalog::ThreeDsMethod;
use issuing_domain::ids::new_id;
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_store::cards::CardRecord;
use issuing_store::events::{self, NewEvent};
use issuing_store::securements::{self, SecurementRecord};
use issuing_store::StoreError;
use issuing_wire::{Amount, ApiError, ErrorSlug};
use rand::Rng;
use serde::Deserialize;
use serde_json::{json, Value};

/// A challenge can be answered for 10 minutes (CONTRACT §10).
pub const SECUREMENT_TTL_MICROS: i64 = 10 * 60 * 1_000_000;

/// The merchant shown when the simulation names none.
const DEFAULT_MERCHANT_NAME: &str = "Sandbox Merchant";
const DEFAULT_MERCHANT_COUNTRY: &str = "US";
const DEFAULT_CURRENCY: &str = "USD";
const MAX_MERCHANT_NAME_CHARS: usize = 255;

pub const EVENT_3DS: &str = "card_3ds";
pub const EVENT_OTP: &str = "card_otp";

#[derive(Deserialize)]
pub struct ChallengeRequest {
    #[serde(default)]
    card_id: Option<String>,
    #[serde(default)]
    external_user_id: Option<String>,
    #[serde(default)]
    amount: Option<Value>,
    #[serde(default)]
    currency: Option<String>,
    #[serde(default)]
    merchant: Option<Value>,
}

#[derive(Deserialize)]
pub struct ConfirmRequest {
    #[serde(default)]
    card_id: Option<String>,
    #[serde(default)]
    external_user_id: Option<String>,
    #[serde(default)]
    securement_id: Option<String>,
    #[serde(default)]
    confirm: Option<Value>,
}

fn securement_invalid(why: &str) -> ApiError {
    ApiError::new(
        ErrorSlug::SecurementIdInvalid,
        format!("Invalid securement id: {why}"),
    )
}

fn parse_amount(value: Option<&Value>) -> Result<Amount, ApiError> {
    let value = value
        .filter(|v| !v.is_null())
        .ok_or_else(|| ApiError::new(ErrorSlug::InvalidAmount, "amount is required"))?;
    Amount::parse_positive(value)
        .map_err(|e| ApiError::new(ErrorSlug::InvalidAmount, format!("Invalid amount: {e}")))
}

/// ISO 4217: three letters, any case on input, upper case on the wire.
fn parse_currency(value: Option<&str>) -> Result<String, ApiError> {
    let Some(text) = value else {
        return Ok(DEFAULT_CURRENCY.to_owned());
    };
    let text = text.trim();
    if text.len() == 3 && text.bytes().all(|b| b.is_ascii_alphabetic()) {
        Ok(text.to_ascii_uppercase())
    } else {
        Err(ApiError::validation(format!(
            "currency must be a three-letter ISO 4217 code, not {text:?}"
        )))
    }
}

/// `{name, country}`; either may be left out (a sandbox default is used). The country is
/// two letters (ISO 3166-1 alpha-2), upper-cased.
fn parse_merchant(value: Option<&Value>) -> Result<Value, ApiError> {
    let empty = serde_json::Map::new();
    let obj = match value {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(m)) => m,
        Some(_) => {
            return Err(ApiError::validation(
                "merchant must be an object with name and country",
            ))
        }
    };
    let text = |field: &str| -> Result<Option<String>, ApiError> {
        match obj.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.trim().to_owned())),
            Some(_) => Err(ApiError::validation(format!(
                "merchant.{field} must be a non-empty string"
            ))),
        }
    };
    let name = text("name")?.unwrap_or_else(|| DEFAULT_MERCHANT_NAME.to_owned());
    if name.chars().count() > MAX_MERCHANT_NAME_CHARS {
        return Err(ApiError::validation(format!(
            "merchant.name is longer than {MAX_MERCHANT_NAME_CHARS} characters"
        )));
    }
    let country = match text("country")? {
        None => DEFAULT_MERCHANT_COUNTRY.to_owned(),
        Some(c) if c.len() == 2 && c.bytes().all(|b| b.is_ascii_alphabetic()) => {
            c.to_ascii_uppercase()
        }
        Some(c) => {
            return Err(ApiError::validation(format!(
                "merchant.country must be a two-letter ISO 3166-1 code, not {c:?}"
            )))
        }
    };
    Ok(json!({ "name": name, "country": country }))
}

/// The 3DS method of the card's subprovider, as the catalog configures it.
fn method_of(state: &App, card: &CardRecord) -> Option<ThreeDsMethod> {
    state
        .catalog()
        .subprovider(&card.subprovider_code)
        .map(|s| s.three_ds_method)
}

/// The stored body of a `card_3ds` event (the delivery adds `delivery_id`).
fn three_ds_payload(s: &SecurementRecord, confirm: &str, status: &str, occurred_at: i64) -> Value {
    json!({
        "type": EVENT_3DS,
        "card_id": s.card_id,
        "securement_id": s.id,
        "method": s.method,
        "confirm": confirm,
        "status": status,
        "currency": s.currency,
        "amount": Amount::from_micros(s.amount).to_string(),
        "occurred_at": to_rfc3339(occurred_at),
        "reason": null,
        "remark": null,
        "merchant": s.merchant,
    })
}

/// simulate/cards/3ds: the response body (without `success`).
pub async fn challenge(
    state: &App,
    project_id: &str,
    req: ChallengeRequest,
) -> Result<Value, ApiError> {
    let amount = parse_amount(req.amount.as_ref())?;
    let currency = parse_currency(req.currency.as_deref())?;
    let merchant = parse_merchant(req.merchant.as_ref())?;
    let card = {
        let mut conn = state.store.conn().await?;
        card_for_user(
            &mut conn,
            project_id,
            req.card_id.as_deref(),
            req.external_user_id.as_deref(),
        )
        .await?
    };
    if card.status != "active" {
        return Err(ApiError::new(
            ErrorSlug::CardNotActive,
            format!("Card is {}, not active", card.status),
        ));
    }
    let method = method_of(state, &card).ok_or_else(|| {
        tracing::error!(
            card_id = %card.id,
            subprovider = %card.subprovider_code,
            "the card's subprovider is not in the catalog"
        );
        ApiError::internal()
    })?;

    let now = now_micros();
    let securement = SecurementRecord {
        id: new_id(),
        project_id: project_id.to_owned(),
        card_id: card.id.clone(),
        method: method.as_str().to_owned(),
        state: securements::PENDING.to_owned(),
        amount: amount.micros(),
        currency,
        merchant,
        created_at: now,
        expires_at: now + SECUREMENT_TTL_MICROS,
        answered_at: None,
    };
    let (event_type, payload, response) = match method {
        ThreeDsMethod::Oob => (
            EVENT_3DS,
            three_ds_payload(&securement, "pending", "challenge_sent", now),
            json!({
                "securement_id": securement.id,
                "method": method.as_str(),
                "card_id": card.id,
                "status": "challenge_sent",
            }),
        ),
        ThreeDsMethod::Otp => {
            let code = format!("{:06}", rand::thread_rng().gen_range(0..1_000_000u32));
            (
                EVENT_OTP,
                json!({
                    "type": EVENT_OTP,
                    "card_id": card.id,
                    "code": code,
                    "sent_at": to_rfc3339(now),
                }),
                json!({
                    "code": code,
                    "method": method.as_str(),
                    "card_id": card.id,
                }),
            )
        }
    };

    let mut tx = state.store.begin().await?;
    securements::insert(&mut tx, &securement).await?;
    events::insert(
        &mut tx,
        &NewEvent {
            project_id,
            event_type,
            card_id: Some(&card.id),
            order_id: None,
            payload: &payload,
            now,
        },
    )
    .await?;
    tx.commit().await.map_err(StoreError::from)?;
    state.deliveries_wakeup.notify_one();
    Ok(response)
}

/// cards/3ds/confirm: the response body (without `success`).
pub async fn confirm(
    state: &App,
    project_id: &str,
    req: ConfirmRequest,
) -> Result<Value, ApiError> {
    let user = required_user(req.external_user_id.as_deref())?;
    let confirm = match req.confirm {
        Some(Value::Bool(b)) => b,
        None | Some(Value::Null) => {
            return Err(ApiError::validation(
                "confirm is required: true confirms, false declines",
            ))
        }
        Some(_) => {
            return Err(ApiError::validation(
                "confirm must be a boolean: true confirms, false declines",
            ))
        }
    };
    let securement_id = req
        .securement_id
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::validation("securement_id is required"))?;

    let (card, securement) = {
        let mut conn = state.store.conn().await?;
        let card = card_for_user(&mut conn, project_id, req.card_id.as_deref(), Some(user)).await?;
        let securement = securements::get(&mut conn, project_id, securement_id).await?;
        (card, securement)
    };
    let now = now_micros();
    let securement = securement.ok_or_else(|| securement_invalid("unknown securement"))?;
    if securement.card_id != card.id {
        return Err(securement_invalid("it belongs to another card"));
    }
    if securement.method != ThreeDsMethod::Oob.as_str()
        || method_of(state, &card) != Some(ThreeDsMethod::Oob)
    {
        return Err(securement_invalid(
            "the card's provider verifies by one-time password, not out-of-band confirmation",
        ));
    }
    if securement.state != securements::PENDING {
        return Err(securement_invalid("it was already answered"));
    }
    if now > securement.expires_at {
        return Err(securement_invalid(
            "it expired (challenges last 10 minutes)",
        ));
    }
    let provider_card_id = card
        .provider_card_id
        .as_deref()
        .ok_or_else(|| securement_invalid("the card has no provider card"))?;

    let idempotency_key = format!("{}:confirm", securement.id);
    crate::provider::bounded(state.providers.get(&card.subprovider_code).confirm_3ds(
        &idempotency_key,
        provider_card_id,
        &securement.id,
        confirm,
    ))
    .await
    .map_err(|e| crate::provider::failed_call(&card.id, "3ds answer", &e))?;

    let outcome = if confirm {
        securements::CONFIRMED
    } else {
        securements::DECLINED
    };
    let now = now_micros();
    let mut tx = state.store.begin().await?;
    if !securements::answer(&mut tx, project_id, &card.id, &securement.id, outcome, now).await? {
        // Answered by a concurrent request meanwhile, or it expired during the call.
        return Err(securement_invalid("it was already answered or has expired"));
    }
    events::insert(
        &mut tx,
        &NewEvent {
            project_id,
            event_type: EVENT_3DS,
            card_id: Some(&card.id),
            order_id: None,
            payload: &three_ds_payload(&securement, outcome, "completed", now),
            now,
        },
    )
    .await?;
    tx.commit().await.map_err(StoreError::from)?;
    state.deliveries_wakeup.notify_one();
    Ok(json!({ "securement_id": securement.id, "confirm": outcome }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn currency_defaults_and_normalises() {
        assert_eq!(parse_currency(None).unwrap(), "USD");
        assert_eq!(parse_currency(Some(" eur ")).unwrap(), "EUR");
        for bad in ["", "US", "USDT", "U$D"] {
            assert_eq!(
                parse_currency(Some(bad)).unwrap_err().slug,
                ErrorSlug::ValidationError,
                "{bad}"
            );
        }
    }

    #[test]
    fn merchant_defaults_and_checks() {
        assert_eq!(
            parse_merchant(None).unwrap(),
            json!({"name": "Sandbox Merchant", "country": "US"})
        );
        assert_eq!(
            parse_merchant(Some(&json!({"name": " Shop ", "country": "de"}))).unwrap(),
            json!({"name": "Shop", "country": "DE"})
        );
        for bad in [
            json!("shop"),
            json!({"name": 5}),
            json!({"country": "DEU"}),
            json!({"name": ""}),
        ] {
            assert!(parse_merchant(Some(&bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn amounts() {
        assert_eq!(
            parse_amount(Some(&json!("12.50"))).unwrap(),
            Amount::from_micros(12_500_000)
        );
        for bad in [
            json!("0"),
            json!("-1"),
            json!("abc"),
            json!("1.0000001"),
            Value::Null,
        ] {
            assert_eq!(
                parse_amount(Some(&bad)).unwrap_err().slug,
                ErrorSlug::InvalidAmount,
                "{bad}"
            );
        }
        assert!(parse_amount(None).is_err());
    }
}
