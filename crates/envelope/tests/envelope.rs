//! Behavioural properties of the envelope: round trips, tamper and truncation
//! rejection, base64 leniency, and nonce freshness.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use issuing_envelope::{
    decode_base64, open, open_bytes, seal, seal_bytes, seal_with_nonce, Key, OpenError,
    MAX_ENCODED_LEN, NONCE_LEN, OVERHEAD, VERSION,
};
use proptest::prelude::*;

fn key() -> impl Strategy<Value = Key> {
    any::<[u8; 32]>().prop_map(Key::from_bytes)
}

fn plaintext() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..300)
}

proptest! {
    #[test]
    fn round_trip(key in key(), pt in plaintext()) {
        let sealed = seal(&key, &pt);
        prop_assert_eq!(open(&key, &sealed).unwrap(), pt.clone());
        prop_assert_eq!(open_bytes(&key, &seal_bytes(&key, &pt)).unwrap(), pt);
    }

    #[test]
    fn round_trip_from_secret(secret in ".*", pt in plaintext()) {
        let key = Key::from_secret(&secret);
        prop_assert_eq!(open(&key, &seal(&key, &pt)).unwrap(), pt);
    }

    #[test]
    fn encoding_is_standard_padded(key in key(), pt in plaintext()) {
        let sealed = seal(&key, &pt);
        let bytes = STANDARD.decode(&sealed).unwrap();
        prop_assert_eq!(STANDARD.encode(&bytes), sealed);
        prop_assert_eq!(bytes.len(), OVERHEAD + pt.len());
        prop_assert_eq!(bytes[0], VERSION);
    }

    #[test]
    fn any_single_tampered_byte_is_rejected(
        key in key(),
        pt in plaintext(),
        pos in any::<prop::sample::Index>(),
        flip in 1u8..=255,
    ) {
        let mut sealed = seal_bytes(&key, &pt);
        let i = pos.index(sealed.len());
        sealed[i] ^= flip;
        let expected = if i == 0 {
            OpenError::UnknownVersion(VERSION ^ flip)
        } else {
            OpenError::Authentication
        };
        prop_assert_eq!(open_bytes(&key, &sealed), Err(expected));
        prop_assert_eq!(open(&key, &STANDARD.encode(&sealed)), Err(expected));
    }

    #[test]
    fn wrong_key_is_rejected(k1 in key(), k2 in key(), pt in plaintext()) {
        prop_assume!(k1.as_bytes() != k2.as_bytes());
        prop_assert_eq!(open(&k2, &seal(&k1, &pt)), Err(OpenError::Authentication));
    }

    #[test]
    fn wrong_version_is_rejected(key in key(), pt in plaintext(), version in any::<u8>()) {
        prop_assume!(version != VERSION);
        let mut sealed = seal_bytes(&key, &pt);
        sealed[0] = version;
        prop_assert_eq!(open_bytes(&key, &sealed), Err(OpenError::UnknownVersion(version)));
        prop_assert_eq!(
            open(&key, &STANDARD.encode(&sealed)),
            Err(OpenError::UnknownVersion(version))
        );
    }

    #[test]
    fn truncated_bytes_are_rejected(key in key(), pt in plaintext(), cut in any::<prop::sample::Index>()) {
        let sealed = seal_bytes(&key, &pt);
        let len = cut.index(sealed.len()); // strictly shorter than the full envelope
        let result = open_bytes(&key, &sealed[..len]);
        if len < OVERHEAD {
            prop_assert_eq!(result, Err(OpenError::TooShort));
        } else {
            prop_assert_eq!(result, Err(OpenError::Authentication));
        }
    }

    #[test]
    fn truncated_base64_is_rejected(key in key(), pt in plaintext(), cut in any::<prop::sample::Index>()) {
        // Dropping only padding leaves valid unpadded base64, so cut into the data.
        let sealed = seal(&key, &pt);
        let data = sealed.trim_end_matches('=');
        let truncated = &data[..cut.index(data.len())];
        prop_assert!(open(&key, truncated).is_err());
    }

    #[test]
    fn all_base64_flavours_are_accepted(key in key(), pt in plaintext()) {
        let bytes = seal_bytes(&key, &pt);
        for engine in [&STANDARD, &STANDARD_NO_PAD, &URL_SAFE, &URL_SAFE_NO_PAD] {
            let encoded = engine.encode(&bytes);
            prop_assert_eq!(decode_base64(&encoded).unwrap(), bytes.clone());
            prop_assert_eq!(open(&key, &encoded).unwrap(), pt.clone());
            let padded = format!(" \t\r\n{encoded}\n ");
            prop_assert_eq!(open(&key, &padded).unwrap(), pt.clone());
        }
    }

    #[test]
    fn fresh_nonce_every_seal(key in key(), pt in plaintext()) {
        let a = seal_bytes(&key, &pt);
        let b = seal_bytes(&key, &pt);
        prop_assert_ne!(&a[1..1 + NONCE_LEN], &b[1..1 + NONCE_LEN]);
        prop_assert_ne!(a, b);
    }
}

#[test]
fn seal_differs_each_time() {
    let key = Key::from_secret("secret");
    let a = seal(&key, b"same plaintext");
    let b = seal(&key, b"same plaintext");
    assert_ne!(a, b);
    assert_eq!(open(&key, &a).unwrap(), open(&key, &b).unwrap());
}

#[test]
fn seal_with_nonce_is_deterministic() {
    let key = Key::from_secret("secret");
    let nonce = [42u8; NONCE_LEN];
    assert_eq!(
        seal_with_nonce(&key, &nonce, b"pt"),
        seal_with_nonce(&key, &nonce, b"pt")
    );
    let bytes = STANDARD
        .decode(seal_with_nonce(&key, &nonce, b"pt"))
        .unwrap();
    assert_eq!(&bytes[1..1 + NONCE_LEN], &nonce);
}

#[test]
fn malformed_base64_is_rejected() {
    let key = Key::from_secret("secret");
    let good = seal(&key, b"hello world");
    assert_eq!(open(&key, ""), Err(OpenError::TooShort));
    assert_eq!(open(&key, "   "), Err(OpenError::TooShort));
    assert_eq!(open(&key, "not base64!"), Err(OpenError::Base64));
    assert_eq!(open(&key, "A"), Err(OpenError::Base64));
    // Whitespace is only stripped from the ends.
    let (left, right) = good.split_at(8);
    assert_eq!(
        open(&key, &format!("{left} {right}")),
        Err(OpenError::Base64)
    );
    assert_eq!(
        open(&key, &format!("{left}\n{right}")),
        Err(OpenError::Base64)
    );
    // Mixing alphabets is not a flavour any encoder produces.
    assert_eq!(decode_base64("+-=="), Err(OpenError::Base64));
    assert_eq!(decode_base64("ab/_"), Err(OpenError::Base64));
}

#[test]
fn oversized_input_is_rejected_before_decoding() {
    let key = Key::from_secret("secret");
    let huge = "A".repeat(MAX_ENCODED_LEN + 4);
    assert_eq!(open(&key, &huge), Err(OpenError::TooLong));
    assert_eq!(decode_base64(&huge), Err(OpenError::TooLong));
    // Exactly at the limit is decoded (and then fails on content, not size).
    let at_limit = "A".repeat(MAX_ENCODED_LEN);
    assert_eq!(open(&key, &at_limit), Err(OpenError::UnknownVersion(0)));
}

#[test]
fn errors_display() {
    assert_eq!(
        OpenError::UnknownVersion(1).to_string(),
        "unknown envelope version 0x01"
    );
    assert_eq!(
        OpenError::Authentication.to_string(),
        "envelope failed authentication"
    );
}
