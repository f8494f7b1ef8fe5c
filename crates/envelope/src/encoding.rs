use base64::alphabet;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::{DecodePaddingMode, Engine};

use crate::OpenError;

/// Largest encoded envelope `open` / `decode_base64` will look at.
///
/// The input comes straight from untrusted HTTP bodies; bounding it here keeps
/// a single request from forcing a large allocation and a long decrypt before
/// it can be rejected. The largest envelopes are a dispute's evidence file (4 MiB,
/// base64 in JSON, sealed, base64 again: under 7.5 MiB) going in and coming back;
/// every other endpoint's body limit is far below this one.
pub const MAX_ENCODED_LEN: usize = 8 * 1024 * 1024;

// Clients in the wild send padded and unpadded, standard and URL-safe base64;
// being lenient here costs nothing because authenticity comes from the MAC.
const INDIFFERENT: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
const STANDARD_ANY_PAD: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, INDIFFERENT);
const URL_SAFE_ANY_PAD: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, INDIFFERENT);

pub(crate) fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes base64 in the standard or URL-safe alphabet, padded or not.
///
/// Surrounding ASCII whitespace is ignored (it is easy to pick up a trailing
/// newline from a shell or a config file); whitespace inside the string, or a
/// mix of both alphabets, is rejected.
pub fn decode_base64(s: &str) -> Result<Vec<u8>, OpenError> {
    if s.len() > MAX_ENCODED_LEN {
        return Err(OpenError::TooLong);
    }
    let s = s.trim_matches(|c: char| c.is_ascii_whitespace());
    // The two alphabets only differ in `+/` vs `-_`, so the presence of a
    // URL-safe character tells us which one to use without decoding twice.
    let engine = if s.bytes().any(|b| b == b'-' || b == b'_') {
        &URL_SAFE_ANY_PAD
    } else {
        &STANDARD_ANY_PAD
    };
    engine.decode(s).map_err(|_| OpenError::Base64)
}
