//! Tron (TRC20) deposit addresses: version byte 0x41 followed by 20 bytes, encoded in
//! base58check (4-byte double-SHA-256 checksum). That always yields 34 characters
//! starting with `T`.

use rand::RngCore;

const TRON_VERSION: u8 = 0x41;
pub const ADDRESS_LEN: usize = 34;

/// A random, valid-looking address whose key nobody holds. Only for stand-ins (the
/// sender of a simulated sandbox deposit); deposit addresses come from `tron_hd`.
pub fn new_address() -> String {
    let mut body = [0u8; 20];
    rand::thread_rng().fill_bytes(&mut body);
    encode(&body)
}

/// The address of a 20-byte account id: base58check of the version byte and the id.
pub fn encode(body: &[u8; 20]) -> String {
    let mut payload = [0u8; 21];
    payload[0] = TRON_VERSION;
    payload[1..].copy_from_slice(body);
    bs58::encode(payload).with_check().into_string()
}

pub fn is_valid(address: &str) -> bool {
    if address.len() != ADDRESS_LEN || !address.starts_with('T') {
        return false;
    }
    match bs58::decode(address).with_check(None).into_vec() {
        Ok(bytes) => bytes.len() == 21 && bytes[0] == TRON_VERSION,
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_addresses_are_valid() {
        for _ in 0..200 {
            let a = new_address();
            assert!(is_valid(&a), "{a}");
        }
    }

    #[test]
    fn known_address_is_valid_and_tampering_is_not() {
        // The USDT TRC20 contract address, a well-known valid base58check string.
        assert!(is_valid("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t"));
        assert!(!is_valid("TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u"));
        assert!(!is_valid("short"));
    }
}
