//! The domain of the issuing service, free of HTTP and SQL: identifiers, time, project
//! credentials, deposit addresses (HD-derived) and which chain transfers are deposits,
//! users, KYC data and cardholder states, country codes, the card catalog, the Lithic
//! provider's rules, the ledger's posting rules, reveal sessions' rules, a dispute's
//! states and moves, and webhook subscriptions.
//!
//! It may use the wire types (`issuing-wire`) and nothing else of ours: no storage and no
//! HTTP, so its rules are tested without a database or a server.

pub mod card_tx;
pub mod catalog;
pub mod chain_deposit;
pub mod controls;
pub mod country;
pub mod credentials;
pub mod dispute;
pub mod ids;
pub mod kyc;
pub mod ledger;
pub mod lithic;
pub mod reveal;
pub mod statement;
pub mod time;
pub mod trc20;
pub mod tron_hd;
pub mod user;
pub mod webhooks;

pub use issuing_wire::{Amount, ApiError, ErrorSlug};
