//! The domain of the issuing service, free of HTTP and SQL: identifiers, time, project
//! credentials, deposit addresses, users and the ledger's posting rules.

pub mod credentials;
pub mod ids;
pub mod ledger;
pub mod time;
pub mod trc20;
pub mod user;

pub use issuing_wire::{Amount, ApiError, ErrorSlug};
