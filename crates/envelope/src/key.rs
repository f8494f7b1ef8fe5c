use rand::rngs::OsRng;
use rand::RngCore;
use sha2::{Digest, Sha256};

/// Length of a [`Key`] in bytes.
pub const KEY_LEN: usize = 32;

/// 32-byte symmetric secretbox key.
///
/// `Debug` is redacted so that keys cannot leak through logs or error
/// reports that happen to format a struct holding one.
#[derive(Clone)]
pub struct Key([u8; KEY_LEN]);

impl Key {
    /// Derives the key for a project from its API secret: `SHA-256(secret)`.
    ///
    /// Clients derive the same key from the secret they were issued, so this
    /// must stay byte-for-byte what the client libraries do.
    pub fn from_secret(secret: &str) -> Key {
        Key(Sha256::digest(secret.as_bytes()).into())
    }

    /// Wraps raw key bytes, e.g. a master key loaded from configuration.
    pub fn from_bytes(bytes: [u8; KEY_LEN]) -> Key {
        Key(bytes)
    }

    /// Generates a fresh random key from the operating system's CSPRNG.
    pub fn generate() -> Key {
        let mut bytes = [0u8; KEY_LEN];
        OsRng.fill_bytes(&mut bytes);
        Key(bytes)
    }

    /// The raw key bytes.
    pub fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_redacted() {
        let key = Key::from_bytes([0xab; KEY_LEN]);
        let shown = format!("{key:?} {:?}", Some(key.clone()));
        assert_eq!(shown, "Key(***) Some(Key(***))");
        assert!(!shown.to_lowercase().contains("ab"));
    }

    #[test]
    fn from_secret_is_sha256() {
        // SHA-256("") is a well-known constant.
        let key = Key::from_secret("");
        assert_eq!(
            key.as_bytes()[..4],
            [0xe3, 0xb0, 0xc4, 0x42],
            "SHA-256 of the empty string starts e3b0c442"
        );
    }

    #[test]
    fn generated_keys_differ() {
        assert_ne!(Key::generate().as_bytes(), Key::generate().as_bytes());
    }
}
