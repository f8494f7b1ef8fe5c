//! One `issuing serve` process, assembled: the core's services and background workers
//! (`issuing-app`), the HTTP API (`issuing-api`), the operator console
//! (`issuing-console`) and the metrics, each on its own listener, and the order in which
//! they stop.
//!
//! It holds no behaviour of its own beyond starting and stopping them; the CLI
//! (`crates/cli`) fills a `ServerConfig` and calls `start`.

mod start;

pub use issuing_app::{MasterKey, Mode, ServerConfig};
pub use start::{start, RunningServer, StopSignal};
