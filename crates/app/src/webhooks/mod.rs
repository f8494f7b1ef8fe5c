//! Webhook delivery: the sealed payload of an event, the HTTP client that sends it
//! (no redirects, bounded time and body, and in production an address guard against
//! SSRF), and the rules that turn a response into an outcome.

pub mod guard;
pub mod http;
pub mod payload;
pub mod redeliver;
