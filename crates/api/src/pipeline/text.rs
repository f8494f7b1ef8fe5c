//! Text rules every request obeys, checked once for the whole decrypted request: no
//! string value and no object key may hold a control character. The rule itself is
//! `issuing_wire::text` (the Lithic routes apply the same one); this file turns a
//! failure into the API's error.

use issuing_wire::text::find_control_char;
pub(crate) use issuing_wire::text::has_control;
use issuing_wire::ApiError;
use serde_json::Value;

/// 400 `validation_error` naming the field, or nothing when the request is clean.
pub(crate) fn check_request(request: &Value) -> Result<(), ApiError> {
    match find_control_char(request) {
        None => Ok(()),
        Some(path) => {
            // The path is built from the client's own keys; show it printable.
            let shown: String = if path.is_empty() {
                "request".to_owned()
            } else {
                path.escape_debug().collect()
            };
            Err(ApiError::validation(format!(
                "{shown} must not contain control characters"
            )))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_the_field_printably() {
        assert!(check_request(&json!({"name": "x", "items": [1, "y"]})).is_ok());
        let e = check_request(&json!({"name": "x\u{0}"})).unwrap_err();
        assert_eq!(e.slug.as_str(), "validation_error");
        assert!(e.message.contains("name"), "{}", e.message);
        let e = check_request(&json!({"kyc_data": {"li\u{0}ne1": "x"}})).unwrap_err();
        assert!(e.message.contains("kyc_data.li\\0ne1"), "{}", e.message);
        let e = check_request(&json!("\u{85}")).unwrap_err();
        assert!(e.message.starts_with("request "), "{}", e.message);
    }
}
