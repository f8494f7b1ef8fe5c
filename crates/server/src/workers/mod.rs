//! Background workers. Each runs until the shutdown signal and bounds its batches.

pub(crate) mod replay_gc;
