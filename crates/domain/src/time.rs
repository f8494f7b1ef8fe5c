//! Time is integer microseconds since the epoch inside the service (as `request_timestamp`
//! is on the wire) and RFC 3339 UTC strings in responses.

use chrono::{DateTime, SecondsFormat, Utc};

pub type Micros = i64;

pub fn now_micros() -> Micros {
    Utc::now().timestamp_micros()
}

pub fn to_rfc3339(micros: Micros) -> String {
    DateTime::<Utc>::from_timestamp_micros(micros)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The UTC date (`YYYY-MM-DD`) of an instant.
pub fn utc_date(micros: Micros) -> String {
    DateTime::<Utc>::from_timestamp_micros(micros)
        .unwrap_or_default()
        .format("%Y-%m-%d")
        .to_string()
}

/// Parses a filter bound: an RFC 3339 string, a `YYYY-MM-DD` date (midnight UTC), or
/// integer microseconds (as a number or a string of digits).
pub fn parse_instant(value: &serde_json::Value) -> Option<Micros> {
    match value {
        serde_json::Value::Number(n) => n.as_i64(),
        serde_json::Value::String(s) => {
            let s = s.trim();
            if let Ok(n) = s.parse::<i64>() {
                return Some(n);
            }
            if let Ok(dt) = DateTime::parse_from_rfc3339(s) {
                return Some(dt.with_timezone(&Utc).timestamp_micros());
            }
            chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|dt| dt.and_utc().timestamp_micros())
        }
        _ => None,
    }
}

/// Like `parse_instant`, for an inclusive upper bound: a bare date means the end of that
/// day, so `created_to: "2026-11-21"` includes everything created on the 21st.
pub fn parse_instant_end(value: &serde_json::Value) -> Option<Micros> {
    const DAY_MICROS: i64 = 86_400_000_000;
    let start = parse_instant(value)?;
    let is_bare_date = value
        .as_str()
        .is_some_and(|s| chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d").is_ok());
    Some(if is_bare_date {
        start + DAY_MICROS - 1
    } else {
        start
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formats_and_parses() {
        let t = 1_700_000_000_123_456;
        let s = to_rfc3339(t);
        assert_eq!(s, "2023-11-14T22:13:20.123456Z");
        assert_eq!(parse_instant(&json!(s)), Some(t));
        assert_eq!(parse_instant(&json!(t)), Some(t));
        assert_eq!(
            parse_instant(&json!("2023-11-14")),
            Some(1_699_920_000_000_000)
        );
        assert_eq!(parse_instant(&json!("yesterday")), None);
        assert_eq!(
            parse_instant_end(&json!("2023-11-14")),
            Some(1_700_006_399_999_999)
        );
        assert_eq!(parse_instant_end(&json!(t)), Some(t));
    }
}
