//! Storage: one interface over embedded SQLite and PostgreSQL.
//!
//! Both backends run the same SQL (sqlx's `Any` driver, `$N` placeholders, integer
//! micro-units and integer microsecond timestamps); only the schema files differ. Every
//! repository function takes a connection, so callers decide what shares a transaction:
//! a state change, its ledger transfer and its outbox event always commit together.
//! Every query on project data is scoped by `project_id`.

mod db;
mod error;
pub mod ledger;
mod migrate;
pub mod projects;
pub mod query;
pub mod replay;
pub mod settings;
pub mod users;

pub use db::{Backend, Conn, Store, Tx};
pub use error::StoreError;
