//! The wire envelope: NaCl secretbox sealing of JSON bodies. No I/O.
//!
//! An envelope is `VERSION ‖ nonce (24 bytes) ‖ secretbox(plaintext)`, where
//! `secretbox` is NaCl's XSalsa20-Poly1305 in combined form (16-byte MAC
//! first, then ciphertext) — byte-for-byte what libsodium's
//! `crypto_secretbox_easy` and PyNaCl's `SecretBox.encrypt(..).ciphertext`
//! produce. Over HTTP it travels as standard padded base64 in
//! `{"encrypted": "..."}`.
//!
//! It uses no crate of ours: the server's API layer, the Rust client and the binary use it.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod encoding;
mod key;

use crypto_secretbox::aead::{AeadInPlace, KeyInit};
use crypto_secretbox::{Nonce, Tag, XSalsa20Poly1305};
use rand::rngs::OsRng;
use rand::RngCore;

pub use encoding::{decode_base64, MAX_ENCODED_LEN};
pub use key::{Key, KEY_LEN};

/// First byte of every envelope; lets the format change without ambiguity.
pub const VERSION: u8 = 0x02;
/// XSalsa20 nonce length.
pub const NONCE_LEN: usize = 24;
/// Poly1305 tag length.
pub const MAC_LEN: usize = 16;
/// Bytes an envelope adds around the plaintext.
pub const OVERHEAD: usize = 1 + NONCE_LEN + MAC_LEN;

const HEADER_LEN: usize = 1 + NONCE_LEN;

/// Why an envelope could not be opened.
///
/// Deliberately coarse: callers should answer all of these with the same
/// client-facing error, and `Authentication` covers both a wrong key and
/// tampering because the two are indistinguishable by design.
#[derive(Debug, Clone, Copy, thiserror::Error, PartialEq, Eq)]
pub enum OpenError {
    #[error("envelope is not valid base64")]
    Base64,
    #[error("envelope is too short")]
    TooShort,
    #[error("envelope exceeds {MAX_ENCODED_LEN} encoded bytes")]
    TooLong,
    #[error("unknown envelope version {0:#04x}")]
    UnknownVersion(u8),
    #[error("envelope failed authentication")]
    Authentication,
}

/// Seals `plaintext` under a fresh random nonce; returns standard padded base64.
pub fn seal(key: &Key, plaintext: &[u8]) -> String {
    encoding::encode(&seal_bytes(key, plaintext))
}

/// Like [`seal`] but with a caller-chosen nonce.
///
/// Only for test vectors: reusing a nonce under the same key breaks both
/// confidentiality and authenticity.
pub fn seal_with_nonce(key: &Key, nonce: &[u8; NONCE_LEN], plaintext: &[u8]) -> String {
    encoding::encode(&seal_bytes_with_nonce(key, nonce, plaintext))
}

/// Seals `plaintext` under a fresh random nonce; returns raw envelope bytes.
pub fn seal_bytes(key: &Key, plaintext: &[u8]) -> Vec<u8> {
    let mut nonce = [0u8; NONCE_LEN];
    OsRng.fill_bytes(&mut nonce);
    seal_bytes_with_nonce(key, &nonce, plaintext)
}

fn seal_bytes_with_nonce(key: &Key, nonce: &[u8; NONCE_LEN], plaintext: &[u8]) -> Vec<u8> {
    // Build the envelope in one allocation and encrypt the body in place.
    let mut out = Vec::with_capacity(OVERHEAD + plaintext.len());
    out.push(VERSION);
    out.extend_from_slice(nonce);
    out.extend_from_slice(&[0u8; MAC_LEN]);
    out.extend_from_slice(plaintext);

    let cipher = XSalsa20Poly1305::new(key.as_bytes().into());
    let (head, body) = out.split_at_mut(OVERHEAD);
    // crypto_secretbox only fails here when given associated data, which
    // NaCl's secretbox has no notion of and we never pass.
    let tag = match cipher.encrypt_in_place_detached(Nonce::from_slice(nonce), b"", body) {
        Ok(tag) => tag,
        Err(_) => unreachable!("secretbox encryption without associated data cannot fail"),
    };
    head[HEADER_LEN..].copy_from_slice(&tag);
    out
}

/// Opens raw envelope bytes produced by [`seal_bytes`] (or any NaCl peer).
pub fn open_bytes(key: &Key, sealed: &[u8]) -> Result<Vec<u8>, OpenError> {
    // Check the version before the length so that a future format with a
    // different layout is reported as such rather than as truncated.
    match sealed.first() {
        None => return Err(OpenError::TooShort),
        Some(&VERSION) => {}
        Some(&other) => return Err(OpenError::UnknownVersion(other)),
    }
    if sealed.len() < OVERHEAD {
        return Err(OpenError::TooShort);
    }
    let nonce = Nonce::from_slice(&sealed[1..HEADER_LEN]);
    let tag = Tag::from_slice(&sealed[HEADER_LEN..OVERHEAD]);
    let mut plaintext = sealed[OVERHEAD..].to_vec();

    let cipher = XSalsa20Poly1305::new(key.as_bytes().into());
    cipher
        .decrypt_in_place_detached(nonce, b"", &mut plaintext, tag)
        .map_err(|_| OpenError::Authentication)?;
    Ok(plaintext)
}

/// Opens a base64 envelope (any alphabet/padding accepted by [`decode_base64`]).
pub fn open(key: &Key, encoded: &str) -> Result<Vec<u8>, OpenError> {
    open_bytes(key, &decode_base64(encoded)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout() {
        let key = Key::from_bytes([7; 32]);
        let nonce = [9u8; NONCE_LEN];
        let sealed = seal_bytes_with_nonce(&key, &nonce, b"hello");
        assert_eq!(sealed.len(), OVERHEAD + 5);
        assert_eq!(sealed[0], VERSION);
        assert_eq!(&sealed[1..HEADER_LEN], &nonce);
        assert_eq!(open_bytes(&key, &sealed).unwrap(), b"hello");
    }

    #[test]
    fn short_inputs() {
        let key = Key::from_bytes([7; 32]);
        assert_eq!(open_bytes(&key, &[]), Err(OpenError::TooShort));
        assert_eq!(open_bytes(&key, &[VERSION]), Err(OpenError::TooShort));
        assert_eq!(
            open_bytes(&key, &[VERSION; OVERHEAD - 1]),
            Err(OpenError::TooShort)
        );
        assert_eq!(open_bytes(&key, &[1]), Err(OpenError::UnknownVersion(1)));
    }
}
