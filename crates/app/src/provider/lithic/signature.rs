//! Standard Webhooks signatures, as Lithic signs ASA requests and event deliveries:
//! `webhook-signature` holds space-separated `v1,<base64 HMAC-SHA256>` entries over
//! `<webhook-id>.<webhook-timestamp>.<body>`, keyed by the base64 part of the `whsec_`
//! secret. Timestamps more than 5 minutes from our clock are refused (replays of old
//! messages). The comparison is constant-time (`Mac::verify_slice`).

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// CONTRACT §14: timestamps more than this far from now are refused.
pub const TOLERANCE_SECS: i64 = 5 * 60;
/// Far above what Lithic sends (one or two entries during a secret rotation).
const MAX_SIGNATURES: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    #[error("missing header {0}")]
    Missing(&'static str),
    #[error("webhook-timestamp is not a number of seconds")]
    BadTimestamp,
    #[error("webhook-timestamp is more than 5 minutes from now")]
    Stale,
    #[error("no matching signature")]
    NoMatch,
    #[error("the signing secret is not a whsec_ base64 secret")]
    BadSecret,
}

/// The three headers of a signed message.
pub struct Signed<'a> {
    pub id: Option<&'a str>,
    pub timestamp: Option<&'a str>,
    pub signature: Option<&'a str>,
}

/// The key bytes of a `whsec_…` secret (the prefix is optional, as in the SDKs).
fn key_of(secret: &str) -> Result<Vec<u8>, SignatureError> {
    let b64 = secret.trim();
    let b64 = b64.strip_prefix("whsec_").unwrap_or(b64);
    base64::engine::general_purpose::STANDARD
        .decode(b64)
        .ok()
        .filter(|k| !k.is_empty())
        .ok_or(SignatureError::BadSecret)
}

/// Checks a message against `secret` at `now_secs`; answers its `webhook-id`.
pub fn verify<'a>(
    secret: &str,
    signed: &Signed<'a>,
    body: &[u8],
    now_secs: i64,
) -> Result<&'a str, SignatureError> {
    let id = signed.id.ok_or(SignatureError::Missing("webhook-id"))?;
    let timestamp = signed
        .timestamp
        .ok_or(SignatureError::Missing("webhook-timestamp"))?;
    let signature = signed
        .signature
        .ok_or(SignatureError::Missing("webhook-signature"))?;
    let ts: i64 = timestamp
        .trim()
        .parse()
        .map_err(|_| SignatureError::BadTimestamp)?;
    if (now_secs - ts).abs() > TOLERANCE_SECS {
        return Err(SignatureError::Stale);
    }
    let key = key_of(secret)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).map_err(|_| SignatureError::BadSecret)?;
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.as_bytes());
    mac.update(b".");
    mac.update(body);
    let matched = signature
        .split(' ')
        .filter(|s| !s.is_empty())
        .take(MAX_SIGNATURES)
        .filter_map(|entry| entry.split_once(','))
        .filter(|(version, _)| *version == "v1")
        .filter_map(|(_, sig)| base64::engine::general_purpose::STANDARD.decode(sig).ok())
        .any(|sig| mac.clone().verify_slice(&sig).is_ok());
    if matched {
        Ok(id)
    } else {
        Err(SignatureError::NoMatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector of Lithic's own SDK tests (lithic-python
    /// `tests/api_resources/test_webhooks.py`, v0.128.0): a payload, its headers, the
    /// secret, and the time they were made at.
    const PAYLOAD: &str = r#"{"card_token":"sit Lorem ipsum, accusantium repellendus possimus","created_at":"elit. placeat libero architecto molestias, sit","account_token":"elit.","issuer_decision":"magnam, libero esse Lorem ipsum magnam, magnam,","tokenization_attempt_id":"illum dolor repellendus libero esse accusantium","wallet_decisioning_info":{"device_score":"placeat architecto"},"digital_wallet_token_metadata":{"status":"reprehenderit dolor","token_requestor_id":"possimus","payment_account_info":{"account_holder_data":{"phone_number":"libero","email_address":"nobis molestias, veniam culpa! quas elit. quas libero esse architecto placeat"},"pan_unique_reference":"adipisicing odit magnam, odit"}}}"#;
    const SIGNATURE: &str = "Dwa0AHInLL3XFo2sxcHamOQDrJNi7F654S3L6skMAOI=";
    const ID: &str = "msg_2Lh9KRb0pzN4LePd3XiA4v12Axj";
    const TIMESTAMP: &str = "1676312382";
    const SECRET: &str = "whsec_zlFsbBZ8Xcodlpcu6NDTdSzZRLSdhkst";
    const NOW: i64 = 1_676_312_382;

    fn check(signature: &str, secret: &str, now: i64) -> Result<(), SignatureError> {
        let signed = Signed {
            id: Some(ID),
            timestamp: Some(TIMESTAMP),
            signature: Some(signature),
        };
        verify(secret, &signed, PAYLOAD.as_bytes(), now).map(|_| ())
    }

    #[test]
    fn lithic_sdk_vector() {
        let v1 = format!("v1,{SIGNATURE}");
        assert_eq!(check(&v1, SECRET, NOW), Ok(()));
        // Without the prefix, as the SDKs also accept.
        assert_eq!(check(&v1, &SECRET["whsec_".len()..], NOW), Ok(()));
        // The window is 5 minutes either way.
        assert_eq!(check(&v1, SECRET, NOW + 300), Ok(()));
        assert_eq!(check(&v1, SECRET, NOW + 6 * 60), Err(SignatureError::Stale));
        assert_eq!(check(&v1, SECRET, NOW - 6 * 60), Err(SignatureError::Stale));
        // Wrong secrets.
        let wrong = format!(
            "whsec_{}",
            base64::engine::general_purpose::STANDARD.encode(b"wrong")
        );
        assert_eq!(check(&v1, &wrong, NOW), Err(SignatureError::NoMatch));
        assert_eq!(check(&v1, "whsec_***", NOW), Err(SignatureError::BadSecret));
        // Several signatures: one match is enough.
        let other = base64::engine::general_purpose::STANDARD.encode(b"my_sig");
        assert_eq!(
            check(&format!("v1,{other} v1,{SIGNATURE}"), SECRET, NOW),
            Ok(())
        );
        // Another version is not v1.
        assert_eq!(
            check(&format!("v2,{SIGNATURE}"), SECRET, NOW),
            Err(SignatureError::NoMatch)
        );
        assert_eq!(
            check(&format!("v2,{SIGNATURE} v1,{SIGNATURE}"), SECRET, NOW),
            Ok(())
        );
        // No version at all.
        assert_eq!(check(SIGNATURE, SECRET, NOW), Err(SignatureError::NoMatch));
        // A changed body.
        let signed = Signed {
            id: Some(ID),
            timestamp: Some(TIMESTAMP),
            signature: Some(&v1),
        };
        let tampered = PAYLOAD.replace("libero", "Libero");
        assert_eq!(
            verify(SECRET, &signed, tampered.as_bytes(), NOW),
            Err(SignatureError::NoMatch)
        );
        // Missing headers.
        let unsigned = Signed {
            id: Some(ID),
            timestamp: Some(TIMESTAMP),
            signature: None,
        };
        assert_eq!(
            verify(SECRET, &unsigned, PAYLOAD.as_bytes(), NOW),
            Err(SignatureError::Missing("webhook-signature"))
        );
        let bad_ts = Signed {
            id: Some(ID),
            timestamp: Some("soon"),
            signature: Some(&v1),
        };
        assert_eq!(
            verify(SECRET, &bad_ts, PAYLOAD.as_bytes(), NOW),
            Err(SignatureError::BadTimestamp)
        );
    }
}
