//! Background workers. Each runs until the shutdown signal and bounds its batches.

pub(crate) mod born;
pub(crate) mod chain;
pub(crate) mod cleanup;
pub(crate) mod deliveries;
pub(crate) mod holds;
pub(crate) mod issued;
pub(crate) mod orders;
pub(crate) mod outcomes;
pub(crate) mod wakeup;
