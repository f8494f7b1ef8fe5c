//! `cards/reveal/create`: a single-use page that shows a card's details to the
//! cardholder's browser, framed by the project's page, without the details passing
//! through the project's server (CONTRACT §16).

use super::or_default;
use serde::{Deserialize, Serialize};

/// `cards/reveal/create`. The server checks `external_user_id` only when given.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardsRevealCreate {
    #[serde(default, deserialize_with = "or_default")]
    pub card_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
    /// The origin of the page that frames the reveal page, `https://host[:port]` (in the
    /// sandbox also `http://localhost[:port]` and `http://127.0.0.1[:port]`).
    #[serde(default, deserialize_with = "or_default")]
    pub target_origin: String,
    /// Seconds the session lives, 10 to 300 (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<i64>,
}

/// The answer of `cards/reveal/create`. `url` (and `urls`) are credentials for the
/// cardholder's browser alone: hand them to it, never log them. `Debug` hides them.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevealSession {
    pub reveal_id: String,
    /// The page to frame (`<iframe src>`); usable once, until `expires_at`.
    pub url: String,
    pub expires_at: String,
    /// A provider's embed (Lithic): one page per detail, each usable once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub urls: Option<RevealUrls>,
}

/// One page per card detail (a provider's embed session).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevealUrls {
    pub pan: String,
    pub cvv: String,
    pub exp_month: String,
    pub exp_year: String,
}

impl std::fmt::Debug for RevealSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RevealSession")
            .field("reveal_id", &self.reveal_id)
            .field("url", &"***")
            .field("expires_at", &self.expires_at)
            .field("urls", &self.urls.as_ref().map(|_| "***"))
            .finish()
    }
}

impl std::fmt::Debug for RevealUrls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RevealUrls(***)")
    }
}
