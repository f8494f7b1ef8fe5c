//! Storage: one interface over embedded SQLite and PostgreSQL.
//!
//! Both backends run the same SQL (sqlx's `Any` driver, `$N` placeholders, integer
//! micro-units and integer microsecond timestamps); only the schema files differ. Every
//! repository function takes a connection, so callers decide what shares a transaction:
//! a state change, its ledger transfer and its outbox event always commit together.
//! Every query on project data is scoped by `project_id`.
//!
//! It may use the domain and the wire types, never the core or anything above it.

mod account_cache;
pub mod audit;
pub mod backup;
pub mod card_txs;
pub mod card_usage;
pub mod cardholders;
pub mod cards;
pub mod chain_deposits;
pub mod chain_watch;
mod commits;
pub mod console;
pub mod controls;
mod db;
pub mod deliveries;
pub mod deposit_addresses;
pub mod disputes;
mod error;
pub mod events;
pub mod group_commit;
pub mod idempotency;
pub mod ledger;
pub mod ledger_batch;
pub mod lithic;
mod migrate;
mod mismatch;
pub mod operators;
pub mod orders;
pub mod projects;
pub mod query;
pub mod reconciliation;
pub mod replay;
pub mod reports;
pub mod retention;
pub mod reveal_sessions;
pub mod sandbox;
pub mod securements;
pub mod settings;
pub mod statements;
pub mod stats;
pub mod subscriptions;
pub mod users;
pub mod wakeup;
mod wal_sync;

pub use commits::Commits;
pub use db::{pg_url, writer, Availability, Backend, Conn, Durable, Store, Tx};
pub use error::StoreError;
pub use wal_sync::Writing;
