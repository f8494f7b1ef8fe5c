//! The server master key encrypts secrets at rest (API secrets today, card data later).
//! It lives outside the database (a file in the data directory or an environment
//! variable), so a copy of the database alone reveals no secret.

use base64::Engine as _;
use issuing_domain::credentials::ApiSecret;
use issuing_envelope::Key;
use issuing_store::{settings, Store, StoreError};

const CHECK_SETTING: &str = "master_key_check";
const CHECK_PLAINTEXT: &[u8] = b"issuing master key check v1";

#[derive(Clone)]
pub struct MasterKey(Key);

impl std::fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MasterKey(***)")
    }
}

#[derive(Debug, thiserror::Error)]
pub enum MasterKeyError {
    #[error("master key must be 32 bytes, base64 encoded")]
    Malformed,
    #[error(
        "the master key does not match this database (wrong data directory or ISSUING_MASTER_KEY?)"
    )]
    Mismatch,
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl MasterKey {
    pub fn generate() -> Self {
        MasterKey(Key::generate())
    }

    pub fn from_base64(text: &str) -> Result<Self, MasterKeyError> {
        let bytes =
            issuing_envelope::decode_base64(text.trim()).map_err(|_| MasterKeyError::Malformed)?;
        let bytes: [u8; 32] = bytes.try_into().map_err(|_| MasterKeyError::Malformed)?;
        Ok(MasterKey(Key::from_bytes(bytes)))
    }

    pub fn to_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.0.as_bytes())
    }

    pub fn seal(&self, plaintext: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD
            .encode(issuing_envelope::seal_bytes(&self.0, plaintext))
    }

    pub fn open(&self, sealed: &str) -> Option<Vec<u8>> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .ok()?;
        issuing_envelope::open_bytes(&self.0, &bytes).ok()
    }

    pub fn seal_secret(&self, secret: &ApiSecret) -> String {
        self.seal(secret.expose().as_bytes())
    }

    pub fn open_secret(&self, sealed: &str) -> Option<ApiSecret> {
        let bytes = self.open(sealed)?;
        String::from_utf8(bytes).ok().map(ApiSecret::from_plaintext)
    }

    /// Whether this key opens the check value of the database behind `conn` (false when
    /// it has none: not bound to any key yet, or not a database of this service).
    pub async fn opens_check_of(
        &self,
        conn: &mut issuing_store::Conn,
    ) -> Result<bool, MasterKeyError> {
        let stored = settings::get(conn, CHECK_SETTING).await?;
        Ok(stored
            .and_then(|s| self.open(&s))
            .is_some_and(|p| p == CHECK_PLAINTEXT))
    }

    /// Binds the key to the database on first use and refuses a different key later,
    /// so a misconfigured server fails at start instead of answering every request 403.
    pub async fn bind_to(&self, store: &Store) -> Result<(), MasterKeyError> {
        let mut conn = store.conn().await?;
        settings::insert_if_absent(&mut conn, CHECK_SETTING, &self.seal(CHECK_PLAINTEXT)).await?;
        let stored = settings::get(&mut conn, CHECK_SETTING)
            .await?
            .ok_or(MasterKeyError::Mismatch)?;
        match self.open(&stored) {
            Some(p) if p == CHECK_PLAINTEXT => Ok(()),
            _ => Err(MasterKeyError::Mismatch),
        }
    }
}
