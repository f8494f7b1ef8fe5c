//! Spend controls (CONTRACT §11), free of HTTP and SQL: spending windows in a card's
//! time zone (`window.rs`), card limits and how transactions count toward them
//! (`limits.rs`), authorization rules (`rules.rs`) and the settings of a project's
//! real-time decision webhook (`decision.rs`).

pub mod decision;
pub mod limits;
pub mod rules;
pub mod window;
