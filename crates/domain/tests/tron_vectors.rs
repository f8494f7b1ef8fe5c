//! Our deposit-address derivation against an independent implementation: the vectors in
//! `tron_vectors.json` were made by `scripts/tron_vectors.py` with bip_utils.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use issuing_domain::trc20;
use issuing_domain::tron_hd::{account_from_seed, address_of_public_key, AccountXpub};
use serde_json::Value;

fn vectors() -> Vec<Value> {
    let v: Value = serde_json::from_str(include_str!("tron_vectors.json")).unwrap();
    v["vectors"].as_array().unwrap().clone()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn addresses_from_the_xpub_match_bip_utils() {
    let vectors = vectors();
    assert!(vectors.len() >= 2);
    for v in &vectors {
        let account = AccountXpub::parse(v["account_xpub"].as_str().unwrap()).unwrap();
        let children = v["children"].as_array().unwrap();
        assert!(children.len() >= 10);
        for c in children {
            let index = c["index"].as_i64().unwrap();
            let expected = c["address"].as_str().unwrap();
            assert_eq!(
                account.address(index).unwrap(),
                expected,
                "{} index {index}",
                v["name"]
            );
            assert!(trc20::is_valid(expected));
        }
    }
}

#[test]
fn public_keys_hash_to_the_same_addresses() {
    for v in vectors() {
        for c in v["children"].as_array().unwrap() {
            let key: [u8; 65] = unhex(c["public_key_uncompressed"].as_str().unwrap())
                .try_into()
                .unwrap();
            assert_eq!(address_of_public_key(&key), c["address"].as_str().unwrap());
        }
    }
}

#[test]
fn the_sandbox_seed_path_gives_the_same_account_xpub() {
    for v in vectors() {
        let seed = unhex(v["seed_hex"].as_str().unwrap());
        let account = account_from_seed(&seed).unwrap();
        assert_eq!(
            account.to_xpub_string(),
            v["account_xpub"].as_str().unwrap()
        );
    }
}
