//! What Lithic sends us, parsed before anything else reads it: a signed message is
//! JSON, holds no control character in any string or key (the rule every `/api/v2`
//! request obeys, `issuing_wire::text`), and each field we use has its type, its form
//! and its range (tokens are UUIDs, amounts integer cents within the bound of every
//! amount of ours, currencies three letters, texts short). A message that fails is a
//! `BadMessage` naming the field, and nothing of it reaches the network or the store.
//!
//! A bad message is permanent: Lithic would send the same bytes again, so it is never
//! answered 5xx (which asks for a retry). Each route answers it as Lithic documents a
//! handled message (`../shared/lithic-openapi.yml`): an ASA request is declined with a
//! 200 `asa-response` (the only answer its webhook declares besides a 5xx retry), and
//! an event delivery is acknowledged with a 200, not applied (any other status is a
//! failed delivery that Lithic retries on its schedule).

use crate::network::{Merchant, Purchase};
use issuing_domain::controls::rules::MAX_TEXT_LEN;
use issuing_domain::lithic::{cents_to_amount, is_token};
use issuing_wire::text::find_control_char;
use serde_json::Value;

/// Why a signed message cannot be applied: the field (a JSON path) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} {reason}")]
pub struct BadMessage {
    pub field: String,
    pub reason: &'static str,
}

impl BadMessage {
    pub fn new(field: impl Into<String>, reason: &'static str) -> BadMessage {
        BadMessage {
            field: field.into(),
            reason,
        }
    }
}

/// A Lithic token (`is_token`): it can key a network message id and a stored row.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Token(String);

impl Token {
    /// The required token at `field` of `v`.
    pub fn at(v: &Value, field: &str) -> Result<Token, BadMessage> {
        match v.get(field) {
            Some(Value::String(s)) if is_token(s) => Ok(Token(s.clone())),
            Some(Value::String(_)) => Err(BadMessage::new(field, "is not a Lithic token")),
            Some(_) => Err(BadMessage::new(field, "must be a string")),
            None => Err(BadMessage::new(field, "is required")),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The body of a signed message: a JSON object with no control character anywhere.
pub fn body(bytes: &[u8]) -> Result<Value, BadMessage> {
    let value: Value =
        serde_json::from_slice(bytes).map_err(|_| BadMessage::new("body", "is not JSON"))?;
    if !value.is_object() {
        return Err(BadMessage::new("body", "is not a JSON object"));
    }
    if let Some(path) = find_control_char(&value) {
        let shown: String = path.escape_debug().collect();
        return Err(BadMessage::new(
            shown,
            "must not contain control characters",
        ));
    }
    Ok(value)
}

/// The object at `field` of `v`: None when absent or null.
pub fn object<'a>(v: &'a Value, field: &str) -> Result<Option<&'a Value>, BadMessage> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(o @ Value::Object(_)) => Ok(Some(o)),
        Some(_) => Err(BadMessage::new(field, "must be an object")),
    }
}

/// The text at `field` of `v` (at most `MAX_TEXT_LEN` characters, no control
/// character): None when absent or null. As long as any text a spend rule can name.
pub fn text<'a>(v: &'a Value, field: &str) -> Result<Option<&'a str>, BadMessage> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() > MAX_TEXT_LEN => {
            Err(BadMessage::new(field, "is too long"))
        }
        Some(Value::String(s)) if issuing_wire::text::has_control(s) => Err(BadMessage::new(
            field,
            "must not contain control characters",
        )),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(BadMessage::new(field, "must be a string")),
    }
}

/// The required text at `field` of `v`, not empty.
pub fn required_text<'a>(v: &'a Value, field: &str) -> Result<&'a str, BadMessage> {
    match text(v, field)? {
        Some(s) if !s.trim().is_empty() => Ok(s),
        Some(_) => Err(BadMessage::new(field, "must not be empty")),
        None => Err(BadMessage::new(field, "is required")),
    }
}

/// Cents at `field` of `v`: a JSON integer (its text, as written: no fraction, no
/// exponent) whose micro-units are an amount of ours. None when absent or null.
pub fn cents(v: &Value, field: &str) -> Result<Option<i64>, BadMessage> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => {
            let c = n
                .as_i64()
                .ok_or_else(|| BadMessage::new(field, "must be a whole number of cents"))?;
            cents_to_amount(c)
                .map(|_| Some(c))
                .ok_or_else(|| BadMessage::new(field, "is out of range"))
        }
        Some(_) => Err(BadMessage::new(field, "must be a number")),
    }
}

/// An amount's cents: `amounts.cardholder.amount` (cents of the card's currency), or
/// the deprecated top-level `amount` when `amounts` is absent.
pub fn cardholder_cents(v: &Value) -> Result<i64, BadMessage> {
    let cardholder = match object(v, "amounts")? {
        Some(amounts) => object(amounts, "cardholder")?,
        None => None,
    };
    let found = match cardholder {
        Some(c) => cents(c, "amount").map_err(|e| nested("amounts.cardholder", e))?,
        None => cents(v, "amount")?,
    };
    found.ok_or_else(|| BadMessage::new("amounts.cardholder.amount", "is required"))
}

/// `e` of a field inside `parent`.
pub fn nested(parent: &str, e: BadMessage) -> BadMessage {
    BadMessage {
        field: if e.field.is_empty() {
            parent.to_owned()
        } else {
            format!("{parent}.{}", e.field)
        },
        reason: e.reason,
    }
}

/// Lithic's merchant (descriptor, MCC, alpha-3 country) as ours (alpha-2 for rules).
fn merchant(m: Option<&Value>) -> Result<Merchant, BadMessage> {
    let field = |f: &str| -> Result<String, BadMessage> {
        Ok(match m {
            Some(m) => text(m, f)
                .map_err(|e| nested("merchant", e))?
                .unwrap_or_default()
                .trim()
                .to_owned(),
            None => String::new(),
        })
    };
    let country = field("country")?;
    Ok(Merchant {
        name: field("descriptor")?,
        mcc: field("mcc")?,
        // An unknown code is kept as sent rather than lost.
        country: issuing_domain::country::alpha2_of(&country)
            .map(str::to_owned)
            .unwrap_or(country),
    })
}

/// The purchase of a message: the merchant (`merchant` of `message`) and the merchant
/// side of its amounts (`amounts.merchant` of `amounts_of`: minor units of a
/// three-letter currency, USD when absent).
pub fn purchase(message: &Value, amounts_of: &Value) -> Result<Purchase, BadMessage> {
    let merchant = merchant(object(message, "merchant")?)?;
    let side = match object(amounts_of, "amounts")? {
        Some(a) => object(a, "merchant").map_err(|e| nested("amounts", e))?,
        None => None,
    };
    let (currency, minor) = match side {
        Some(s) => {
            let within = |e| nested("amounts.merchant", e);
            let currency = text(s, "currency").map_err(within)?;
            if currency.is_some_and(|c| c.len() != 3 || !c.bytes().all(|b| b.is_ascii_alphabetic()))
            {
                return Err(BadMessage::new(
                    "amounts.merchant.currency",
                    "must be an ISO 4217 code",
                ));
            }
            (currency, cents(s, "amount").map_err(within)?)
        }
        None => (None, None),
    };
    Ok(Purchase {
        merchant,
        merchant_currency: currency.unwrap_or("USD").to_ascii_uppercase(),
        // Within the bound, so it converts (`cents`); its sign is the event's direction.
        merchant_amount: cents_to_amount(minor.unwrap_or(0).abs()).unwrap_or_default(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const T: &str = "4f9b0c3e-8a2f-4e7b-9c1d-2f3e4a5b6c7d";

    #[test]
    fn bodies_are_json_objects_without_control_characters() {
        assert!(body(br#"{"a": "b"}"#).is_ok());
        assert_eq!(body(b"{").unwrap_err().field, "body");
        assert_eq!(body(b"[1]").unwrap_err().field, "body");
        let e = body(br#"{"merchant": {"descriptor": "A\u0000B"}}"#).unwrap_err();
        assert_eq!(e.field, "merchant.descriptor");
        let e = body(br#"{"k\u0007": 1}"#).unwrap_err();
        assert_eq!(e.field, "k\\u{7}");
    }

    #[test]
    fn tokens() {
        assert_eq!(Token::at(&json!({"t": T}), "t").unwrap().as_str(), T);
        for bad in [
            json!({}),
            json!({"t": 1}),
            json!({"t": "x"}),
            json!({"t": "a".repeat(245)}),
        ] {
            assert_eq!(Token::at(&bad, "t").unwrap_err().field, "t", "{bad}");
        }
    }

    #[test]
    fn amounts_are_whole_cents_in_range() {
        let at = |v: Value| cardholder_cents(&v);
        assert_eq!(
            at(json!({"amounts": {"cardholder": {"amount": 1250}}, "amount": 9})),
            Ok(1250)
        );
        assert_eq!(at(json!({"amount": -7})), Ok(-7));
        assert_eq!(
            at(json!({"amount": 100_000_000_000_000_i64})),
            Ok(100_000_000_000_000)
        );
        for bad in [
            json!({}),
            json!({"amount": 922_337_203_685_478_i64}),
            json!({"amount": 100_000_000_000_001_i64}),
            json!({"amount": -100_000_000_000_001_i64}),
            json!({"amount": "12"}),
            json!({"amounts": {"cardholder": {"amount": 12.5}}}),
            json!({"amounts": {"cardholder": {"amount": u64::MAX}}}),
            json!({"amounts": {"cardholder": {}}}),
            json!({"amounts": {"cardholder": 5}}),
            json!({"amounts": []}),
        ] {
            assert!(at(bad.clone()).is_err(), "{bad}");
        }
        let text: Value = serde_json::from_str(r#"{"amount": 1e3}"#).unwrap();
        assert!(cardholder_cents(&text).is_err(), "an exponent is not cents");
    }

    #[test]
    fn purchases() {
        let m = json!({"merchant": {"descriptor": " COFFEE ", "mcc": "5814", "country": "DEU"},
                       "amounts": {"merchant": {"amount": -1100, "currency": "eur"}}});
        let p = purchase(&m, &m).unwrap();
        assert_eq!(p.merchant.name, "COFFEE");
        assert_eq!(p.merchant.country, "DE");
        assert_eq!(p.merchant_currency, "EUR");
        assert_eq!(p.merchant_amount.micros(), 11_000_000);
        let none = purchase(&json!({}), &json!({})).unwrap();
        assert_eq!(
            (
                none.merchant_currency.as_str(),
                none.merchant_amount.micros()
            ),
            ("USD", 0)
        );
        for (bad, field) in [
            (json!({"merchant": {"mcc": "5\u{0}14"}}), "merchant.mcc"),
            (
                json!({"merchant": {"descriptor": "x".repeat(129)}}),
                "merchant.descriptor",
            ),
            (json!({"merchant": {"country": 3}}), "merchant.country"),
            (json!({"merchant": "x"}), "merchant"),
            (
                json!({"amounts": {"merchant": {"currency": "US\u{0}"}}}),
                "amounts.merchant.currency",
            ),
            (
                json!({"amounts": {"merchant": {"currency": "EURO"}}}),
                "amounts.merchant.currency",
            ),
            (
                json!({"amounts": {"merchant": {"amount": 1.5}}}),
                "amounts.merchant.amount",
            ),
        ] {
            assert_eq!(purchase(&bad, &bad).unwrap_err().field, field, "{bad}");
        }
    }
}
