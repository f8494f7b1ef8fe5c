//! KYC data submitted for a cardholder (CONTRACT §3), and the registration and KYC states
//! it leads to (CONTRACT §3 and §7).

use chrono::{Datelike, NaiveDate, Utc};
use issuing_wire::{ApiError, ErrorSlug};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

/// Upper bound on every KYC string: far above any real name or address line, and it keeps
/// a stored (encrypted) record small whatever a client sends.
pub const MAX_FIELD_CHARS: usize = 256;
/// RFC 5321's limit on a forward path.
const MAX_EMAIL_CHARS: usize = 254;
/// Unknown field names are echoed back; one absurd key must not make the message huge.
const MAX_ECHOED_NAME_CHARS: usize = 64;

const TOP_FIELDS: &[&str] = &[
    "first_name",
    "last_name",
    "birth_date",
    "email",
    "phone_number_full",
    "country_iso",
    "address",
    "id_document",
];
const ADDRESS_FIELDS: &[&str] = &[
    "line1",
    "line2",
    "city",
    "state",
    "postal_code",
    "country_iso",
];
const ID_DOCUMENT_FIELDS: &[&str] = &["type", "number", "country_iso", "expiry_date"];

const EXPECTED_DATE: &str = "expected YYYY-MM-DD";

/// Validated KYC data, trimmed and normalised. Stored encrypted as its JSON form.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KycData {
    pub first_name: String,
    pub last_name: String,
    /// `YYYY-MM-DD`.
    pub birth_date: String,
    pub email: String,
    /// E.164.
    pub phone_number_full: String,
    /// ISO 3166-1 alpha-2, uppercase.
    pub country_iso: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<Address>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_document: Option<IdDocument>,
}

#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdDocument {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub r#type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country_iso: Option<String>,
    /// `YYYY-MM-DD`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry_date: Option<String>,
}

// Debug output ends up in logs; only the country is shown, never personal data.
impl fmt::Debug for KycData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KycData")
            .field("country_iso", &self.country_iso)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Address")
            .field("country_iso", &self.country_iso)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for IdDocument {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IdDocument")
            .field("country_iso", &self.country_iso)
            .finish_non_exhaustive()
    }
}

/// Validates a request's `kyc_data`. Unknown fields are reported first, all of them
/// (`kyc_unexpected_fields`); then every bad field is named in one `validation_error`.
pub fn parse_kyc(value: &Value) -> Result<KycData, ApiError> {
    parse_kyc_on(value, Utc::now().date_naive())
}

fn parse_kyc_on(value: &Value, today: NaiveDate) -> Result<KycData, ApiError> {
    let Value::Object(obj) = value else {
        return Err(ApiError::validation("kyc_data must be an object"));
    };
    let unknown = unknown_fields(obj);
    if !unknown.is_empty() {
        return Err(ApiError::new(
            ErrorSlug::KycUnexpectedFields,
            format!("Unexpected KYC fields: {}", unknown.join(", ")),
        ));
    }

    let mut c = Checker::default();
    let data = KycData {
        first_name: c.required(obj, "first_name", any_text),
        last_name: c.required(obj, "last_name", any_text),
        birth_date: c.required(obj, "birth_date", |t| birth_date(t, today)),
        email: c.required(obj, "email", email),
        phone_number_full: c.required(obj, "phone_number_full", phone),
        country_iso: c.required(obj, "country_iso", country),
        address: c.nested(obj, "address").and_then(|m| {
            let a = Address {
                line1: c.optional(m, "address", "line1", any_text),
                line2: c.optional(m, "address", "line2", any_text),
                city: c.optional(m, "address", "city", any_text),
                state: c.optional(m, "address", "state", any_text),
                postal_code: c.optional(m, "address", "postal_code", any_text),
                country_iso: c.optional(m, "address", "country_iso", country),
            };
            (a != Address::default()).then_some(a)
        }),
        id_document: c.nested(obj, "id_document").and_then(|m| {
            let d = IdDocument {
                r#type: c.optional(m, "id_document", "type", any_text),
                number: c.optional(m, "id_document", "number", any_text),
                country_iso: c.optional(m, "id_document", "country_iso", country),
                expiry_date: c.optional(m, "id_document", "expiry_date", expiry_date),
            };
            (d != IdDocument::default()).then_some(d)
        }),
    };
    if c.bad.is_empty() {
        Ok(data)
    } else {
        Err(ApiError::validation(format!(
            "Invalid KYC fields: {}",
            c.bad.join(", ")
        )))
    }
}

fn unknown_fields(obj: &Map<String, Value>) -> Vec<String> {
    let mut names: Vec<String> = obj
        .keys()
        .filter(|k| !TOP_FIELDS.contains(&k.as_str()))
        .map(|k| echoed(k))
        .collect();
    for (parent, allowed) in [
        ("address", ADDRESS_FIELDS),
        ("id_document", ID_DOCUMENT_FIELDS),
    ] {
        // A non-object here is a validation error, reported after this check.
        if let Some(Value::Object(inner)) = obj.get(parent) {
            names.extend(
                inner
                    .keys()
                    .filter(|k| !allowed.contains(&k.as_str()))
                    .map(|k| format!("{parent}.{}", echoed(k))),
            );
        }
    }
    // serde_json's map order depends on a crate feature; the message must not.
    names.sort();
    names
}

fn echoed(name: &str) -> String {
    if name.chars().count() <= MAX_ECHOED_NAME_CHARS {
        name.to_owned()
    } else {
        let head: String = name.chars().take(MAX_ECHOED_NAME_CHARS).collect();
        format!("{head}...")
    }
}

/// A field's raw value, before its own format is checked.
enum Raw {
    Absent,
    Blank,
    Text(String),
}

fn raw_text(value: Option<&Value>) -> Result<Raw, &'static str> {
    match value {
        None | Some(Value::Null) => Ok(Raw::Absent),
        Some(Value::String(s)) => {
            let t = s.trim();
            if t.is_empty() {
                Ok(Raw::Blank)
            } else if t.chars().count() > MAX_FIELD_CHARS {
                Err("too long, at most 256 characters")
            } else if t.chars().any(char::is_control) {
                Err("contains control characters")
            } else {
                Ok(Raw::Text(t.to_owned()))
            }
        }
        Some(_) => Err("expected a string"),
    }
}

/// Collects every bad field as `name (reason)`, so one answer names them all.
#[derive(Default)]
struct Checker {
    bad: Vec<String>,
}

impl Checker {
    fn fail(&mut self, name: &str, reason: &str) {
        self.bad.push(format!("{name} ({reason})"));
    }

    /// A failed field yields an empty string; the caller answers an error anyway.
    fn required(
        &mut self,
        obj: &Map<String, Value>,
        name: &str,
        check: impl Fn(&str) -> Result<String, &'static str>,
    ) -> String {
        let outcome = match raw_text(obj.get(name)) {
            Ok(Raw::Absent) => Err("missing"),
            Ok(Raw::Blank) => Err("empty"),
            Ok(Raw::Text(t)) => check(&t),
            Err(reason) => Err(reason),
        };
        outcome.unwrap_or_else(|reason| {
            self.fail(name, reason);
            String::new()
        })
    }

    /// Optional fields sent as "" are taken as absent: integrators often send every key.
    fn optional(
        &mut self,
        obj: &Map<String, Value>,
        parent: &str,
        key: &str,
        check: impl Fn(&str) -> Result<String, &'static str>,
    ) -> Option<String> {
        let outcome = match raw_text(obj.get(key)) {
            Ok(Raw::Absent | Raw::Blank) => return None,
            Ok(Raw::Text(t)) => check(&t),
            Err(reason) => Err(reason),
        };
        match outcome {
            Ok(t) => Some(t),
            Err(reason) => {
                self.fail(&format!("{parent}.{key}"), reason);
                None
            }
        }
    }

    fn nested<'a>(
        &mut self,
        obj: &'a Map<String, Value>,
        name: &str,
    ) -> Option<&'a Map<String, Value>> {
        match obj.get(name) {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => Some(m),
            Some(_) => {
                self.fail(name, "expected an object");
                None
            }
        }
    }
}

fn any_text(text: &str) -> Result<String, &'static str> {
    Ok(text.to_owned())
}

/// Strictly `YYYY-MM-DD`: chrono alone would also take `2023-2-3`.
fn iso_date(text: &str) -> Result<NaiveDate, &'static str> {
    let shaped = text.len() == 10
        && text.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        });
    if !shaped {
        return Err(EXPECTED_DATE);
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| "not a calendar date")
}

fn birth_date(text: &str, today: NaiveDate) -> Result<String, &'static str> {
    let date = iso_date(text)?;
    if date.year() < 1900 {
        Err("before 1900")
    } else if date > today {
        Err("in the future")
    } else {
        Ok(text.to_owned())
    }
}

fn expiry_date(text: &str) -> Result<String, &'static str> {
    // Whether an expired document is acceptable is the KYC review's call, not ours.
    iso_date(text).map(|_| text.to_owned())
}

/// A sanity check only: whether the address exists is for the KYC review to find out.
fn email(text: &str) -> Result<String, &'static str> {
    const REASON: &str = "expected an email address";
    if text.chars().count() > MAX_EMAIL_CHARS || text.chars().any(char::is_whitespace) {
        return Err(REASON);
    }
    let (local, domain) = text.split_once('@').ok_or(REASON)?;
    let domain_ok = domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !domain.contains('@');
    if local.is_empty() || !domain_ok {
        return Err(REASON);
    }
    Ok(text.to_owned())
}

fn phone(text: &str) -> Result<String, &'static str> {
    const REASON: &str = "expected E.164, e.g. +14155550123";
    let digits = text.strip_prefix('+').ok_or(REASON)?;
    let ok = (8..=15).contains(&digits.len())
        && digits.bytes().all(|b| b.is_ascii_digit())
        && !digits.starts_with('0');
    if ok {
        Ok(text.to_owned())
    } else {
        Err(REASON)
    }
}

/// Any two letters: a country list would need upkeep, and the KYC review checks it anyway.
fn country(text: &str) -> Result<String, &'static str> {
    if text.len() == 2 && text.bytes().all(|b| b.is_ascii_alphabetic()) {
        Ok(text.to_ascii_uppercase())
    } else {
        Err("expected ISO 3166-1 alpha-2")
    }
}

/// A state enum stored and answered as its lowercase wire name.
macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }

            pub fn parse(text: &str) -> Option<Self> {
                Self::ALL.iter().copied().find(|v| v.as_str() == text)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

wire_enum!(
    /// A cardholder's registration with the subprovider.
    RegistrationStatus {
        Pending => "pending",
        Active => "active",
        Suspended => "suspended",
        Failed => "failed",
    }
);

wire_enum!(
    /// Where the review of the submitted KYC data stands.
    KycStatus {
        NotStarted => "not_started",
        Pending => "pending",
        Approved => "approved",
        Rejected => "rejected",
        Expired => "expired",
    }
);

wire_enum!(
    /// How much identity verification has been achieved.
    KycLevel {
        None => "none",
        Basic => "basic",
        Advanced => "advanced",
        Full => "full",
    }
);

/// The three states a cardholder carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KycState {
    pub registration_status: RegistrationStatus,
    pub kyc_status: KycStatus,
    pub kyc_level: KycLevel,
}

impl KycState {
    /// A cardholder created without `kyc_data`.
    pub fn not_submitted() -> KycState {
        KycState {
            registration_status: RegistrationStatus::Pending,
            kyc_status: KycStatus::NotStarted,
            kyc_level: KycLevel::None,
        }
    }

    /// CONTRACT §3: cards/create needs `active` + `approved`, whatever the level.
    pub fn is_ready_for_cards(&self) -> bool {
        self.registration_status == RegistrationStatus::Active
            && self.kyc_status == KycStatus::Approved
    }
}

/// The sandbox KYC review (CONTRACT §7). `kyc` is already complete (parse_kyc saw to it),
/// so it is approved at once, unless the last name is exactly "Reject".
pub fn sandbox_check(kyc: &KycData) -> KycState {
    if kyc.last_name == "Reject" {
        KycState {
            registration_status: RegistrationStatus::Failed,
            kyc_status: KycStatus::Rejected,
            kyc_level: KycLevel::None,
        }
    } else {
        KycState {
            registration_status: RegistrationStatus::Active,
            kyc_status: KycStatus::Approved,
            kyc_level: KycLevel::Full,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn minimal() -> Value {
        json!({
            "first_name": "Ada",
            "last_name": "Lovelace",
            "birth_date": "1990-12-10",
            "email": "ada@example.com",
            "phone_number_full": "+447911123456",
            "country_iso": "GB",
        })
    }

    fn with(field: &str, value: Value) -> Value {
        let mut v = minimal();
        v[field] = value;
        v
    }

    fn without(field: &str) -> Value {
        let mut v = minimal();
        v.as_object_mut().unwrap().remove(field);
        v
    }

    fn err(v: &Value) -> ApiError {
        parse_kyc(v).unwrap_err()
    }

    fn invalid(v: &Value) -> String {
        let e = err(v);
        assert_eq!(e.slug, ErrorSlug::ValidationError, "{e:?}");
        e.message
    }

    #[test]
    fn valid_minimal() {
        let k = parse_kyc(&minimal()).unwrap();
        assert_eq!(k.first_name, "Ada");
        assert_eq!(k.last_name, "Lovelace");
        assert_eq!(k.birth_date, "1990-12-10");
        assert_eq!(k.email, "ada@example.com");
        assert_eq!(k.phone_number_full, "+447911123456");
        assert_eq!(k.country_iso, "GB");
        assert_eq!(k.address, None);
        assert_eq!(k.id_document, None);
    }

    #[test]
    fn valid_full_and_round_trips_through_json() {
        let mut v = minimal();
        v["first_name"] = json!("  Ada ");
        v["address"] = json!({
            "line1": "12 St James's Square", "line2": "", "city": "London",
            "state": null, "postal_code": "SW1Y 4JH", "country_iso": "gb",
        });
        v["id_document"] = json!({
            "type": "passport", "number": "123456789", "country_iso": "gb",
            "expiry_date": "2031-01-31",
        });
        let k = parse_kyc(&v).unwrap();
        assert_eq!(k.first_name, "Ada");
        let a = k.address.clone().unwrap();
        assert_eq!(a.line1.as_deref(), Some("12 St James's Square"));
        assert_eq!(a.line2, None);
        assert_eq!(a.state, None);
        assert_eq!(a.country_iso.as_deref(), Some("GB"));
        let d = k.id_document.clone().unwrap();
        assert_eq!(d.r#type.as_deref(), Some("passport"));
        assert_eq!(d.country_iso.as_deref(), Some("GB"));
        assert_eq!(d.expiry_date.as_deref(), Some("2031-01-31"));

        let stored = serde_json::to_value(&k).unwrap();
        assert_eq!(stored["id_document"]["type"], "passport");
        assert!(stored["address"].get("line2").is_none());
        let back: KycData = serde_json::from_value(stored).unwrap();
        assert_eq!(back, k);
    }

    #[test]
    fn null_or_empty_nested_objects_are_absent() {
        let mut v = minimal();
        v["address"] = Value::Null;
        v["id_document"] = json!({});
        let k = parse_kyc(&v).unwrap();
        assert_eq!(k.address, None);
        assert_eq!(k.id_document, None);
    }

    #[test]
    fn not_an_object() {
        for v in [json!(null), json!("x"), json!([]), json!(1)] {
            assert_eq!(invalid(&v), "kyc_data must be an object");
        }
    }

    #[test]
    fn unknown_fields_are_all_listed_sorted() {
        let mut v = minimal();
        v["zeta"] = json!(1);
        v["alpha"] = json!("x");
        let e = err(&v);
        assert_eq!(e.slug, ErrorSlug::KycUnexpectedFields);
        assert_eq!(e.message, "Unexpected KYC fields: alpha, zeta");

        v["address"] = json!({"line1": "x", "street": "y", "apartment": "z"});
        v["id_document"] = json!({"type": "passport", "issued": "2020-01-01"});
        assert_eq!(
            err(&v).message,
            "Unexpected KYC fields: address.apartment, address.street, alpha, \
             id_document.issued, zeta"
        );

        // Only nested ones, and reported before any validation problem.
        let mut v = without("email");
        v["address"] = json!({"zip": "1"});
        let e = err(&v);
        assert_eq!(e.slug, ErrorSlug::KycUnexpectedFields);
        assert_eq!(e.message, "Unexpected KYC fields: address.zip");
    }

    #[test]
    fn absurd_unknown_names_are_shortened() {
        let name = "x".repeat(10_000);
        let e = err(&with(&name, json!(1)));
        assert!(e.message.len() < 100, "{}", e.message);
    }

    #[test]
    fn each_required_field_missing_or_malformed() {
        for field in [
            "first_name",
            "last_name",
            "birth_date",
            "email",
            "phone_number_full",
            "country_iso",
        ] {
            let expect = |reason: &str| format!("Invalid KYC fields: {field} ({reason})");
            assert_eq!(invalid(&without(field)), expect("missing"));
            assert_eq!(invalid(&with(field, Value::Null)), expect("missing"));
            assert_eq!(invalid(&with(field, json!(""))), expect("empty"));
            assert_eq!(invalid(&with(field, json!("   "))), expect("empty"));
            assert_eq!(
                invalid(&with(field, json!(12))),
                expect("expected a string")
            );
            assert_eq!(
                invalid(&with(field, json!("a".repeat(257)))),
                expect("too long, at most 256 characters")
            );
        }
        assert_eq!(
            invalid(&with("first_name", json!("A\nda"))),
            "Invalid KYC fields: first_name (contains control characters)"
        );
        // 256 characters (not bytes) is still fine.
        let k = parse_kyc(&with("first_name", json!("é".repeat(256)))).unwrap();
        assert_eq!(k.first_name.chars().count(), 256);
    }

    #[test]
    fn every_bad_field_is_named_at_once() {
        let mut v = without("email");
        v["birth_date"] = json!("10/12/1990");
        v["address"] = json!("London");
        v["id_document"] = json!({"expiry_date": "2031-13-01", "country_iso": "GBR"});
        assert_eq!(
            invalid(&v),
            "Invalid KYC fields: birth_date (expected YYYY-MM-DD), email (missing), \
             address (expected an object), id_document.country_iso (expected ISO 3166-1 \
             alpha-2), id_document.expiry_date (not a calendar date)"
        );
    }

    #[test]
    fn birth_dates() {
        let msg = |d: &str| invalid(&with("birth_date", json!(d)));
        assert_eq!(
            msg("2023-02-30"),
            "Invalid KYC fields: birth_date (not a calendar date)"
        );
        for bad in [
            "1990-1-10",
            "19901210",
            "1990-12-10T00:00:00Z",
            "abcd-ef-gh",
        ] {
            assert_eq!(
                msg(bad),
                "Invalid KYC fields: birth_date (expected YYYY-MM-DD)"
            );
        }
        assert_eq!(
            msg("1899-12-31"),
            "Invalid KYC fields: birth_date (before 1900)"
        );
        assert_eq!(
            msg("2999-01-01"),
            "Invalid KYC fields: birth_date (in the future)"
        );
        assert!(parse_kyc(&with("birth_date", json!("1900-01-01"))).is_ok());
        assert!(parse_kyc(&with("birth_date", json!("2024-02-29"))).is_ok());

        let today = NaiveDate::from_ymd_opt(2030, 6, 15).unwrap();
        assert!(parse_kyc_on(&with("birth_date", json!("2030-06-15")), today).is_ok());
        let e = parse_kyc_on(&with("birth_date", json!("2030-06-16")), today).unwrap_err();
        assert_eq!(e.message, "Invalid KYC fields: birth_date (in the future)");
    }

    #[test]
    fn emails() {
        for good in ["a@b.co", "first.last+tag@mail.example.org"] {
            assert_eq!(parse_kyc(&with("email", json!(good))).unwrap().email, good);
        }
        let long = format!("{}@example.com", "a".repeat(243));
        for bad in [
            "plain",
            "@example.com",
            "a@",
            "a@localhost",
            "a@b@c.com",
            "a b@c.com",
            "a@.com",
            "a@com.",
            long.as_str(),
        ] {
            assert_eq!(
                invalid(&with("email", json!(bad))),
                "Invalid KYC fields: email (expected an email address)",
                "{bad}"
            );
        }
    }

    #[test]
    fn phone_numbers() {
        for good in ["+14155550123", "+12345678", "+123456789012345"] {
            let k = parse_kyc(&with("phone_number_full", json!(good))).unwrap();
            assert_eq!(k.phone_number_full, good);
        }
        for bad in [
            "14155550123",
            "+1234567",
            "+1234567890123456",
            "+04155550123",
            "+1 415 555 0123",
            "+1-415-555-0123",
            "+",
            "++14155550123",
        ] {
            assert_eq!(
                invalid(&with("phone_number_full", json!(bad))),
                "Invalid KYC fields: phone_number_full (expected E.164, e.g. +14155550123)",
                "{bad}"
            );
        }
    }

    #[test]
    fn country_is_normalised_to_uppercase() {
        assert_eq!(
            parse_kyc(&with("country_iso", json!("de")))
                .unwrap()
                .country_iso,
            "DE"
        );
        assert_eq!(
            parse_kyc(&with("country_iso", json!(" Fr ")))
                .unwrap()
                .country_iso,
            "FR"
        );
        for bad in ["USA", "U", "1A", "ü1"] {
            assert_eq!(
                invalid(&with("country_iso", json!(bad))),
                "Invalid KYC fields: country_iso (expected ISO 3166-1 alpha-2)"
            );
        }
        let mut v = minimal();
        v["address"] = json!({"country_iso": 12});
        assert_eq!(
            invalid(&v),
            "Invalid KYC fields: address.country_iso (expected a string)"
        );
    }

    #[test]
    fn debug_shows_no_personal_data() {
        let mut v = minimal();
        v["address"] = json!({"line1": "12 Secret Street", "country_iso": "GB"});
        v["id_document"] = json!({"number": "P1234567"});
        let k = parse_kyc(&v).unwrap();
        let shown = format!("{k:?} {:?} {:?}", k.address, k.id_document);
        for private in [
            "Ada",
            "Lovelace",
            "ada@example.com",
            "+447911123456",
            "1990",
            "Secret",
            "P1234567",
        ] {
            assert!(!shown.contains(private), "{shown}");
        }
        assert!(
            shown.starts_with("KycData { country_iso: \"GB\", .. }"),
            "{shown}"
        );
    }

    #[test]
    fn sandbox_approves_or_rejects() {
        let approved = sandbox_check(&parse_kyc(&minimal()).unwrap());
        assert_eq!(approved.registration_status, RegistrationStatus::Active);
        assert_eq!(approved.kyc_status, KycStatus::Approved);
        assert_eq!(approved.kyc_level, KycLevel::Full);
        assert!(approved.is_ready_for_cards());

        let rejected = sandbox_check(&parse_kyc(&with("last_name", json!("Reject"))).unwrap());
        assert_eq!(rejected.registration_status, RegistrationStatus::Failed);
        assert_eq!(rejected.kyc_status, KycStatus::Rejected);
        assert_eq!(rejected.kyc_level, KycLevel::None);
        assert!(!rejected.is_ready_for_cards());

        // Only exactly "Reject".
        let other = sandbox_check(&parse_kyc(&with("last_name", json!("Rejected"))).unwrap());
        assert!(other.is_ready_for_cards());
    }

    #[test]
    fn states() {
        let s = KycState::not_submitted();
        assert_eq!(
            (s.registration_status, s.kyc_status, s.kyc_level),
            (
                RegistrationStatus::Pending,
                KycStatus::NotStarted,
                KycLevel::None
            )
        );
        assert!(!s.is_ready_for_cards());
        let mut s = sandbox_check(&parse_kyc(&minimal()).unwrap());
        s.kyc_level = KycLevel::Basic;
        assert!(s.is_ready_for_cards());
        s.registration_status = RegistrationStatus::Suspended;
        assert!(!s.is_ready_for_cards());

        let names = |all: Vec<&str>| all.join(",");
        assert_eq!(
            names(RegistrationStatus::ALL.iter().map(|v| v.as_str()).collect()),
            "pending,active,suspended,failed"
        );
        assert_eq!(
            names(KycStatus::ALL.iter().map(|v| v.as_str()).collect()),
            "not_started,pending,approved,rejected,expired"
        );
        assert_eq!(
            names(KycLevel::ALL.iter().map(|v| v.as_str()).collect()),
            "none,basic,advanced,full"
        );
        for v in RegistrationStatus::ALL {
            assert_eq!(RegistrationStatus::parse(v.as_str()), Some(*v));
        }
        for v in KycStatus::ALL {
            assert_eq!(KycStatus::parse(v.as_str()), Some(*v));
        }
        for v in KycLevel::ALL {
            assert_eq!(KycLevel::parse(&v.to_string()), Some(*v));
        }
        assert_eq!(KycStatus::parse("Approved"), None);
        assert_eq!(KycLevel::parse(""), None);
    }
}
