//! Layers around the router. Errors raised before a project key is known are answered
//! in plain JSON (CONTRACT §1); everything after is sealed with the project's key.

mod envelope;
mod extract;
pub(crate) mod idempotency;
pub(crate) mod key_cache;
pub(crate) mod rate_limit;
mod reply;
mod request_id;
mod text;
pub(crate) mod timeout;

pub(crate) use envelope::envelope_layer;
pub(crate) use extract::{Caller, Payload, RawRequest};
pub(crate) use reply::{reply, ApiResult, HttpError};
pub use request_id::request_id_layer;
