//! Wire types shared by the server and its clients: the error slugs with their HTTP
//! statuses (decided in one place), USDT amounts as decimal strings, list pages, the
//! text rule every request obeys (`text`), and the request and answer models of every
//! endpoint (`api`).
//!
//! Nothing here does I/O or knows about HTTP frameworks; statuses are plain `u16`.
//!
//! It uses no crate of ours; every other crate may use it.

mod amount;
pub mod api;
mod error;
mod page;
pub mod text;

pub use amount::{Amount, AmountError, MICROS_PER_UNIT};
pub use error::{ApiError, ErrorSlug};
pub use page::{Page, PageRequest, SortDir, DEFAULT_LIMIT, MAX_LIMIT};
