//! Background workers. Each runs until the shutdown signal and bounds its batches.

pub(crate) mod orders;
pub(crate) mod replay_gc;
pub(crate) mod wakeup;
