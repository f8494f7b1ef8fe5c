//! Project credentials. The API key names the project on every request; the API secret
//! derives the envelope key and is shown once, then kept only encrypted at rest.

use rand::RngCore;
use std::fmt;

fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut buf);
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

pub fn new_api_key() -> String {
    format!("pk_{}", random_hex(16))
}

/// An API secret. CONTRACT §1 asks for at least 32 random bytes printed as text.
/// Debug never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiSecret(String);

impl ApiSecret {
    pub fn generate() -> Self {
        ApiSecret(format!("sk_{}", random_hex(32)))
    }

    pub fn from_plaintext(secret: String) -> Self {
        ApiSecret(secret)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiSecret(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_is_masked_and_long() {
        let s = ApiSecret::generate();
        assert!(s.expose().len() >= 64);
        assert_eq!(format!("{s:?}"), "ApiSecret(***)");
        assert!(!format!("{s:?}").contains(s.expose()));
        assert_ne!(new_api_key(), new_api_key());
    }
}
