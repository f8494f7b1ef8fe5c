//! The request and answer models of every endpoint, shared by the server (which parses
//! requests into them and builds its answers from them) and issuing-client (which sends
//! and reads them), so the OpenAPI document generated from them describes the very types
//! the server serialises. `docs/api.md` has the meaning of each field.
//!
//! Requests serialize to the endpoint's fields; optional fields that are `None` (and
//! empty filter lists) are left out. On the server side they deserialize leniently
//! (a missing or null field is its default) so the handler, not serde, names what is
//! missing with the endpoint's own error slug. Answers serialize exactly as the server
//! always has (a field the server writes as `null` stays `null`, one it leaves out stays
//! out) and deserialize ignoring fields they do not know, so a server that adds fields
//! does not break a client. Amounts are [`Decimal`] strings as on the wire, never floats;
//! the one exception is [`CardTxData`], whose amounts the API sends as JSON numbers.
//!
//! With the feature `openapi`, every model implements `schemars::JsonSchema`.

mod cardholders;
mod cards;
mod common;
mod decision;
mod deposits;
mod disputes;
mod limits;
mod orders;
mod project;
mod reports;
mod reveal;
mod rules;
mod simulate;
mod statements;
mod system;
mod transactions;
mod users;
mod webhooks;

pub use cardholders::*;
pub use cards::*;
pub use common::*;
pub use decision::*;
pub use deposits::*;
pub use disputes::*;
pub use limits::*;
pub use orders::*;
pub use project::*;
pub use reports::*;
pub use reveal::*;
pub use rules::*;
pub use simulate::*;
pub use statements::*;
pub use system::*;
pub use transactions::*;
pub use users::*;
pub use webhooks::*;

#[cfg(test)]
mod tests;
