//! The HTTP layer and background workers of the issuing service.
//!
//! A request passes, in order: the body limit, the envelope layer (API key lookup,
//! envelope open, timestamp window, replay guard; seals the response), then the router.
//! Handlers receive the authenticated project and typed plaintext requests and return
//! typed results or an `ApiError`; they never see ciphertext.

mod batch_writer;
pub mod config;
mod connections;
pub mod console;
pub mod deposits;
mod flows;
pub mod ledger_check;
pub mod master_key;
mod metrics;
mod network;
mod pipeline;
pub mod projects;
pub mod provider;
mod replay;
mod routes;
mod server;
mod state;
mod webhooks;
mod workers;

pub use config::{Mode, ServerConfig};
pub use master_key::MasterKey;
pub use server::{start, RunningServer, StopSignal};
