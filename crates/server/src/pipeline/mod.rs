//! Layers around the router. Errors raised before a project key is known are answered
//! in plain JSON (CONTRACT §1); everything after is sealed with the project's key.

mod envelope;
mod extract;
pub(crate) mod idempotency;
mod reply;

pub(crate) use envelope::envelope_layer;
pub(crate) use extract::{Caller, Payload, RawRequest};
pub(crate) use reply::{reply, ApiResult, HttpError};
