//! HD deposit addresses (BIP32, BIP44 coin type 195): project n's TRC20 deposit address
//! is the Tron address of child `0/n` of the operator's account key m/44'/195'/0'.
//!
//! Only the account's extended *public* key (xpub) is needed, so the server derives
//! every address while the private key stays offline with the operator. The one
//! exception is the sandbox test key (`account_from_seed`), a throwaway seed the sandbox
//! generates for itself and that must never receive real funds.

use crate::trc20;
use bip32::{ChildNumber, ExtendedKey, Prefix, XPrv, XPub};
use sha3::{Digest, Keccak256};
use std::str::FromStr;

/// The BIP44 path of the account whose xpub the operator configures.
pub const ACCOUNT_PATH: &str = "m/44'/195'/0'";
/// Depth of m/44'/195'/0' in the BIP32 tree.
const ACCOUNT_DEPTH: u8 = 3;
/// The largest non-hardened child index (2^31 - 1): project indexes stay below it.
pub const MAX_INDEX: u32 = ChildNumber::HARDENED_FLAG - 1;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XpubError {
    // No variant carries the input: a pasted private key must never reach a log.
    #[error("not a BIP32 extended key (expected `xpub…` in base58check)")]
    Malformed,
    #[error("this is an extended private key; configure the account's xpub (never a private key)")]
    Private,
    #[error("expected a mainnet `xpub…` key, got a `{0}…` key")]
    WrongVersion(String),
    #[error("expected the account key m/44'/195'/0' (depth 3), got a key of depth {0}")]
    WrongDepth(u8),
    #[error("expected the account key m/44'/195'/0', whose last step is hardened")]
    NotHardened,
    #[error("derivation index {0} is outside 0..=2147483647")]
    IndexOutOfRange(i64),
    #[error("key derivation failed")]
    Derivation,
}

/// The account key of m/44'/195'/0' and its external chain (`…/0`), from which every
/// deposit address is one non-hardened step away.
#[derive(Clone)]
pub struct AccountXpub {
    account: XPub,
    external: XPub,
}

impl std::fmt::Debug for AccountXpub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The xpub is public but reveals every address; the fingerprint names it enough.
        f.debug_struct("AccountXpub")
            .field("fingerprint", &self.fingerprint())
            .finish()
    }
}

impl AccountXpub {
    /// Parses the operator's `xpub…` of m/44'/195'/0'. Private keys, testnet or other
    /// versions and keys of another depth are refused.
    pub fn parse(text: &str) -> Result<Self, XpubError> {
        let key = ExtendedKey::from_str(text.trim()).map_err(|_| XpubError::Malformed)?;
        if key.prefix.is_private() {
            return Err(XpubError::Private);
        }
        if key.prefix != Prefix::XPUB {
            return Err(XpubError::WrongVersion(key.prefix.as_str().to_owned()));
        }
        if key.attrs.depth != ACCOUNT_DEPTH {
            return Err(XpubError::WrongDepth(key.attrs.depth));
        }
        if !key.attrs.child_number.is_hardened() {
            return Err(XpubError::NotHardened);
        }
        let account = XPub::try_from(key).map_err(|_| XpubError::Malformed)?;
        Self::from_account(account)
    }

    fn from_account(account: XPub) -> Result<Self, XpubError> {
        let external = account
            .derive_child(ChildNumber(0))
            .map_err(|_| XpubError::Derivation)?;
        Ok(AccountXpub { account, external })
    }

    /// The `xpub…` text (what `parse` accepts).
    pub fn to_xpub_string(&self) -> String {
        self.account.to_string(Prefix::XPUB)
    }

    /// The key's BIP32 fingerprint as 8 hex digits: names the key in logs.
    pub fn fingerprint(&self) -> String {
        self.account
            .fingerprint()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The Tron address of child `0/index`.
    pub fn address(&self, index: i64) -> Result<String, XpubError> {
        let n = u32::try_from(index)
            .ok()
            .filter(|n| *n <= MAX_INDEX)
            .ok_or(XpubError::IndexOutOfRange(index))?;
        let child = self
            .external
            .derive_child(ChildNumber(n))
            .map_err(|_| XpubError::Derivation)?;
        let point = child.public_key().to_encoded_point(false);
        let bytes: [u8; 65] = point
            .as_bytes()
            .try_into()
            .map_err(|_| XpubError::Derivation)?;
        Ok(address_of_public_key(&bytes))
    }
}

/// The Tron address of an uncompressed secp256k1 public key (`0x04 ‖ x ‖ y`): base58check
/// of 0x41 followed by the last 20 bytes of keccak256(x ‖ y).
pub fn address_of_public_key(uncompressed: &[u8; 65]) -> String {
    let hash = Keccak256::digest(&uncompressed[1..]);
    let mut body = [0u8; 20];
    body.copy_from_slice(&hash[12..]);
    trc20::encode(&body)
}

/// The account key m/44'/195'/0' of a seed. Only for the sandbox test key: the server
/// never holds an operator's seed.
pub fn account_from_seed(seed: &[u8]) -> Result<AccountXpub, XpubError> {
    let mut key = XPrv::new(seed).map_err(|_| XpubError::Derivation)?;
    for step in [44, 195, 0] {
        let child = ChildNumber::new(step, true).map_err(|_| XpubError::Derivation)?;
        key = key.derive_child(child).map_err(|_| XpubError::Derivation)?;
    }
    AccountXpub::from_account(XPub::from(&key))
}

#[cfg(test)]
mod tests {
    use super::*;

    // BIP32 test vector 1, chain m/0'/1/2'/2 (depth 4) and m (depth 0).
    const DEPTH4: &str = "xpub6FHa3pjLCk84BayeJxFW2SP4XRrFd1JYnxeLeU8EqN3vDfZmbqBqaGJAyiLjTAwm6ZLRQUMv1ZACTj37sR62cfN7fe5JnJ7dh8zL4fiyLHV";
    const MASTER_XPRV: &str = "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi";

    #[test]
    fn refuses_private_keys_and_other_accounts() {
        assert_eq!(
            AccountXpub::parse(MASTER_XPRV).unwrap_err(),
            XpubError::Private
        );
        assert_eq!(
            AccountXpub::parse(DEPTH4).unwrap_err(),
            XpubError::WrongDepth(4)
        );
        assert_eq!(
            AccountXpub::parse("xpub-nope").unwrap_err(),
            XpubError::Malformed
        );
        // The message never repeats what was configured.
        let msg = XpubError::Private.to_string();
        assert!(!msg.contains("xprv9"), "{msg}");
    }

    #[test]
    fn sandbox_keys_round_trip_through_their_xpub() {
        let account = account_from_seed(&[7u8; 32]).unwrap();
        let again = AccountXpub::parse(&account.to_xpub_string()).unwrap();
        assert_eq!(account.address(3).unwrap(), again.address(3).unwrap());
        assert!(trc20::is_valid(&account.address(0).unwrap()));
        assert_ne!(account.address(0).unwrap(), account.address(1).unwrap());
        assert_eq!(account.fingerprint().len(), 8);
    }

    #[test]
    fn indexes_stay_non_hardened() {
        let account = account_from_seed(&[1u8; 32]).unwrap();
        assert!(account.address(i64::from(MAX_INDEX)).is_ok());
        assert_eq!(
            account.address(i64::from(MAX_INDEX) + 1).unwrap_err(),
            XpubError::IndexOutOfRange(i64::from(MAX_INDEX) + 1)
        );
        assert!(account.address(-1).is_err());
    }
}
