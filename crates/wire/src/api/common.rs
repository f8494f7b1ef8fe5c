//! What every resource uses: decimal amounts, pages and paging, the empty request.

use crate::{Amount, PageRequest};
use serde::{Deserialize, Deserializer, Serialize};

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

/// The server's amounts in the text they have always had on the wire (`Amount`'s
/// `Display` is its serialization).
impl From<Amount> for Decimal {
    fn from(amount: Amount) -> Decimal {
        Decimal(amount.to_string())
    }
}

/// A page of a list endpoint: `items`, `total` (every match), and the `skip` and `limit`
/// that were used.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "openapi", schemars(rename = "Page_of_{T}"))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
    #[serde(default)]
    pub skip: u64,
    #[serde(default)]
    pub limit: u64,
}

impl<T> Page<T> {
    /// The page `request` asked for, holding `items` of `total` matches.
    pub fn new(items: Vec<T>, total: i64, request: &PageRequest) -> Page<T> {
        // Counts and validated paging are never negative.
        let unsigned = |n: i64| u64::try_from(n).unwrap_or(0);
        Page {
            items,
            total: unsigned(total),
            skip: unsigned(request.skip),
            limit: unsigned(request.limit),
        }
    }
}

/// Paging and sorting of a list request (all optional: `skip` 0, `limit` 20,
/// `sort_by` `created_at`, `sort_dir` `desc`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// A request field that may be missing or `null`: its default then, so the handler
/// reports the missing field with its own error slug rather than serde's message.
pub(crate) fn or_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
