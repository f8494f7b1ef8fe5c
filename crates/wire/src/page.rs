use crate::{ApiError, ErrorSlug};
use serde::Serialize;
use serde_json::Value;

pub const DEFAULT_LIMIT: i64 = 20;
/// CONTRACT §3: larger pages are a validation error, not silently clamped.
pub const MAX_LIMIT: i64 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortDir {
    Asc,
    Desc,
}

impl SortDir {
    pub fn sql(self) -> &'static str {
        match self {
            SortDir::Asc => "ASC",
            SortDir::Desc => "DESC",
        }
    }
}

/// Pagination and sorting of a find request, validated against the endpoint's sort keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    pub skip: i64,
    pub limit: i64,
    /// Always one of the endpoint's allowed keys.
    pub sort_by: &'static str,
    pub sort_dir: SortDir,
}

impl PageRequest {
    /// Reads `skip`, `limit`, `sort_by` and `sort_dir` from a request object.
    /// `sort_keys` lists the allowed keys; the default sort is `created_at desc`.
    pub fn parse(req: &Value, sort_keys: &[&'static str]) -> Result<Self, ApiError> {
        let skip = int_field(req, "skip")?.unwrap_or(0);
        if skip < 0 {
            return Err(ApiError::validation("skip must not be negative"));
        }
        let limit = int_field(req, "limit")?.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(ApiError::validation(format!(
                "limit must be between 1 and {MAX_LIMIT}"
            )));
        }
        let sort_by = match req.get("sort_by") {
            None | Some(Value::Null) => "created_at",
            Some(Value::String(s)) => sort_keys
                .iter()
                .copied()
                .find(|k| *k == s.as_str())
                .ok_or_else(|| {
                    ApiError::validation(format!(
                        "sort_by must be one of: {}",
                        sort_keys.join(", ")
                    ))
                })?,
            Some(_) => return Err(ApiError::validation("sort_by must be a string")),
        };
        let sort_dir = match req.get("sort_dir") {
            None | Some(Value::Null) => SortDir::Desc,
            Some(Value::String(s)) if s.eq_ignore_ascii_case("asc") => SortDir::Asc,
            Some(Value::String(s)) if s.eq_ignore_ascii_case("desc") => SortDir::Desc,
            Some(_) => return Err(ApiError::validation("sort_dir must be asc or desc")),
        };
        Ok(PageRequest {
            skip,
            limit,
            sort_by,
            sort_dir,
        })
    }
}

/// Accepts an integer or a string of digits, like `request_timestamp`.
fn int_field(req: &Value, name: &str) -> Result<Option<i64>, ApiError> {
    match req.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| ApiError::validation(format!("{name} must be an integer"))),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| ApiError::validation(format!("{name} must be an integer"))),
        Some(_) => Err(ApiError::new(
            ErrorSlug::ValidationError,
            format!("{name} must be an integer"),
        )),
    }
}

/// A page of results: `{success: true, items, total, skip, limit}`.
#[derive(Debug, Clone, Serialize)]
pub struct Page<T> {
    pub success: bool,
    pub items: Vec<T>,
    pub total: i64,
    pub skip: i64,
    pub limit: i64,
}

impl<T> Page<T> {
    pub fn new(items: Vec<T>, total: i64, req: &PageRequest) -> Self {
        Page {
            success: true,
            items,
            total,
            skip: req.skip,
            limit: req.limit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const KEYS: &[&str] = &["user_id", "created_at"];

    #[test]
    fn defaults() {
        let p = PageRequest::parse(&json!({}), KEYS).unwrap();
        assert_eq!(
            (p.skip, p.limit, p.sort_by, p.sort_dir),
            (0, 20, "created_at", SortDir::Desc)
        );
    }

    #[test]
    fn validates() {
        assert!(PageRequest::parse(&json!({"limit": 101}), KEYS).is_err());
        assert!(PageRequest::parse(&json!({"limit": 0}), KEYS).is_err());
        assert!(PageRequest::parse(&json!({"skip": -1}), KEYS).is_err());
        assert!(PageRequest::parse(&json!({"sort_by": "nope"}), KEYS).is_err());
        assert!(PageRequest::parse(&json!({"sort_dir": "up"}), KEYS).is_err());
        let p = PageRequest::parse(
            &json!({"limit": "100", "skip": 5, "sort_by": "user_id", "sort_dir": "ASC"}),
            KEYS,
        )
        .unwrap();
        assert_eq!(
            (p.skip, p.limit, p.sort_by, p.sort_dir),
            (5, 100, "user_id", SortDir::Asc)
        );
    }
}
