//! Disputes (CONTRACT §15): a project contests a settled card transaction for its
//! cardholder; the network decides. `create.rs` opens one (and its provisional credit),
//! `moves.rs` changes its status (withdraw, the sandbox's advance) with the money the
//! new status brings (`money.rs`), `evidence.rs` keeps its files sealed, `view.rs`
//! answers it. Which moves are allowed is the domain's (`issuing_domain::dispute`).
//!
//! Every change of a dispute, its money, its card transactions and its events commit in
//! one database transaction, which locks the project's master account first, then the
//! card's accounts (the ledger's lock order), then the dispute's row: a crash leaves a
//! dispute either wholly before or wholly after a move.

pub mod create;
pub mod evidence;
mod money;
pub mod moves;
pub mod view;

use issuing_store::disputes::{self, DisputeRecord};
use issuing_store::{Conn, Store};
use issuing_wire::{ApiError, ErrorSlug};

pub use create::{create, CreateRequest, ENDPOINT as CREATE_ENDPOINT};
pub use moves::{advance, withdraw};
pub use view::{find, get};

/// A dispute to file with the card's provider (Lithic), as `disputes/create` checked
/// it.
pub struct Filing<'a> {
    pub project_id: &'a str,
    pub card_id: &'a str,
    /// Our card transaction disputed.
    pub transaction_id: &'a str,
    /// Micro-units.
    pub amount: i64,
    pub reason: issuing_domain::dispute::DisputeReason,
    pub customer_note: Option<&'a str>,
}

pub fn not_found() -> ApiError {
    ApiError::new(ErrorSlug::DisputeNotFound, "Dispute not found")
}

/// The dispute named by a request's `dispute_id`, of this project.
pub(crate) async fn load(
    conn: &mut Conn,
    store: &Store,
    project_id: &str,
    dispute_id: &str,
    lock: bool,
) -> Result<DisputeRecord, ApiError> {
    let id = dispute_id.trim();
    if id.is_empty() {
        return Err(ApiError::validation("dispute_id is required"));
    }
    let lock = if lock { store.for_update() } else { "" };
    disputes::get(conn, project_id, id, lock)
        .await?
        .ok_or_else(not_found)
}
