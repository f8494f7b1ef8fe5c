//! The decision of an authorization (CONTRACT §11), as stages in the contract's order:
//! the card's status (`status.rs`), active rules (`rules.rs`), limits (`limits.rs`),
//! funds (`funds.rs`), then the project's decision webhook (`webhook.rs`). Each stage
//! is pure: it looks at what the authorization read (the card under its lock, its
//! limits and usage, its project's rules and endpoint) and answers a decline or
//! passes. `authorize.rs` runs them in order and hands the result to the executor.

pub mod funds;
pub mod limits;
pub mod rules;
pub mod status;
pub mod webhook;

use serde_json::Value;

/// A declined authorization: its `failure_reason` and, for rules and limits, the
/// `decline` object of `card_tx_data`.
#[derive(Debug, Clone, PartialEq)]
pub struct Decline {
    pub reason: &'static str,
    pub detail: Option<Value>,
}

impl Decline {
    pub fn plain(reason: &'static str) -> Decline {
        Decline {
            reason,
            detail: None,
        }
    }
}
