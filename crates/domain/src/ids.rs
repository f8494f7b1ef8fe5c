//! Identifiers are ObjectId-style strings (24 lowercase hex characters), as the spec's
//! migration notes describe card ids: 4 bytes of seconds since the epoch, then 8 random
//! bytes. The time prefix keeps ids roughly ordered by creation, which helps indexes.

use rand::RngCore;

pub const ID_LEN: usize = 24;

pub fn new_id() -> String {
    let secs = u32::try_from(chrono::Utc::now().timestamp()).unwrap_or(u32::MAX);
    let mut bytes = [0u8; 12];
    bytes[..4].copy_from_slice(&secs.to_be_bytes());
    rand::thread_rng().fill_bytes(&mut bytes[4..]);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// True for strings that could be one of our ids; lets lookups skip the database for junk.
pub fn looks_like_id(s: &str) -> bool {
    s.len() == ID_LEN && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_well_formed() {
        let a = new_id();
        let b = new_id();
        assert_ne!(a, b);
        assert!(looks_like_id(&a), "{a}");
        assert!(!looks_like_id("xyz"));
    }
}
