//! Users are the project's end customers, named by the project's own id.

use issuing_wire::ApiError;

/// Long enough for any UUID, email or composite key a project might use.
pub const MAX_EXTERNAL_USER_ID_LEN: usize = 256;

/// A validated `external_user_id`: not empty, bounded, no control characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalUserId(String);

impl ExternalUserId {
    pub fn parse(raw: &str) -> Result<Self, ApiError> {
        if raw.trim().is_empty() {
            return Err(ApiError::validation("external_user_id must not be empty"));
        }
        if raw.len() > MAX_EXTERNAL_USER_ID_LEN {
            return Err(ApiError::validation(format!(
                "external_user_id must be at most {MAX_EXTERNAL_USER_ID_LEN} bytes"
            )));
        }
        if raw.chars().any(char::is_control) {
            return Err(ApiError::validation(
                "external_user_id must not contain control characters",
            ));
        }
        Ok(ExternalUserId(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates() {
        assert!(ExternalUserId::parse("").is_err());
        assert!(ExternalUserId::parse("   ").is_err());
        assert!(ExternalUserId::parse("a\nb").is_err());
        assert!(ExternalUserId::parse(&"x".repeat(257)).is_err());
        assert_eq!(ExternalUserId::parse("u-1").unwrap().as_str(), "u-1");
    }
}
