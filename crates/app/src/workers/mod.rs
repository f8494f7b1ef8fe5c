//! Background workers. Each runs until the shutdown signal and bounds its batches.

pub mod chain;
pub mod cleanup;
pub mod deliveries;
pub mod holds;
pub mod issued;
pub mod orders;
pub mod outcomes;
pub mod reconcile;
pub mod wakeup;
