//! Wire types shared by the server and its clients: the error slugs with their HTTP
//! statuses (decided in one place), USDT amounts as decimal strings, and list pages.
//!
//! Nothing here does I/O or knows about HTTP frameworks; statuses are plain `u16`.

mod amount;
mod error;
mod page;

pub use amount::{Amount, AmountError, MICROS_PER_UNIT};
pub use error::{ApiError, ErrorSlug};
pub use page::{Page, PageRequest, SortDir, DEFAULT_LIMIT, MAX_LIMIT};
