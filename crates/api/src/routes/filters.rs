//! Request fields shared by the find endpoints: id filters given in singular and plural
//! form, and time bounds.

use issuing_domain::time::{parse_instant, parse_instant_end};
use issuing_wire::ApiError;
use serde_json::Value;

/// A find request may filter on at most this many values per field.
pub(crate) const MAX_FILTER_VALUES: usize = 100;

/// Collects `singular` and `plural` (each a string or an array of strings).
pub(crate) fn strings(req: &Value, singular: &str, plural: &str) -> Result<Vec<String>, ApiError> {
    let mut out = Vec::new();
    for name in [singular, plural] {
        match req.get(name) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => out.push(s.clone()),
            Some(Value::Array(items)) => {
                for item in items {
                    match item {
                        Value::String(s) => out.push(s.clone()),
                        _ => return Err(ApiError::validation(format!("{name} must hold strings"))),
                    }
                }
            }
            Some(_) => {
                return Err(ApiError::validation(format!(
                    "{name} must be a string or an array of strings"
                )))
            }
        }
    }
    if out.len() > MAX_FILTER_VALUES {
        return Err(ApiError::validation(format!(
            "{singular}/{plural} accept at most {MAX_FILTER_VALUES} values"
        )));
    }
    Ok(out)
}

/// A filter that also has a legacy name (`product_id` for `product_code`, …): the values
/// of both names, singular and plural, are combined.
pub(crate) fn strings_with_legacy(
    req: &Value,
    (singular, plural): (&str, &str),
    (legacy, legacy_plural): (&str, &str),
) -> Result<Vec<String>, ApiError> {
    let mut values = strings(req, singular, plural)?;
    values.extend(strings(req, legacy, legacy_plural)?);
    if values.len() > MAX_FILTER_VALUES {
        return Err(ApiError::validation(format!(
            "{singular} filters accept at most {MAX_FILTER_VALUES} values"
        )));
    }
    Ok(values)
}

/// An optional time bound: RFC 3339, `YYYY-MM-DD` or integer microseconds. Upper
/// bounds (`..._to`) given as a date include that whole day.
pub(crate) fn instant(req: &Value, name: &str) -> Result<Option<i64>, ApiError> {
    let parse = if name.ends_with("_to") {
        parse_instant_end
    } else {
        parse_instant
    };
    match req.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => parse(v).map(Some).ok_or_else(|| {
            ApiError::validation(format!(
                "{name} must be an RFC 3339 time, a date or integer microseconds"
            ))
        }),
    }
}
