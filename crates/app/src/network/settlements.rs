//! Recording a settlement as it is applied (for settlement reconciliation, CONTRACT
//! §17): in the transaction that moves its money,
//! so `applied_settlements` holds a row exactly when the ledger holds the change.

use issuing_domain::ids::new_id;
use issuing_domain::time::utc_date;
use issuing_store::card_txs::CardTxRecord;
use issuing_store::cards::CardRecord;
use issuing_store::reconciliation::{self, Settlement};
use issuing_store::{Conn, StoreError};

/// The prefix of the network message id of a Lithic event (`provider/lithic/events.rs`).
const LITHIC_EVENT: &str = "lithic:event:";

/// The settlement kind of a network message kind; None when it settles nothing.
fn kind(message_kind: &str) -> Option<&'static str> {
    match message_kind {
        "clearing" | "force_post" => Some("clearing"),
        "refund" | "unlinked_refund" => Some("refund"),
        _ => None,
    }
}

/// Records `subject` (a clearing's, force post's or refund's transaction, as applied)
/// as a settlement. A Lithic event's settlement is named by its event token, the one
/// Lithic's settlement details list. Any other is the sandbox provider's: it names the
/// settlement with a token of its own and keeps it in its books too.
pub async fn settled(
    conn: &mut Conn,
    card: &CardRecord,
    subject: &CardTxRecord,
    message_id: Option<&str>,
    message_kind: &str,
) -> Result<(), StoreError> {
    let Some(kind) = kind(message_kind) else {
        return Ok(());
    };
    let lithic_token = message_id.and_then(|m| m.strip_prefix(LITHIC_EVENT));
    let s = Settlement {
        subprovider_code: card.subprovider_code.clone(),
        event_token: lithic_token.map_or_else(|| format!("sbx_{}", new_id()), str::to_owned),
        project_id: subject.project_id.clone(),
        transaction_id: subject.id.clone(),
        card_id: subject.card_id.clone(),
        kind: kind.to_owned(),
        amount: subject.card_amount.abs(),
        settled_at: subject.updated_at,
        settled_on: utc_date(subject.updated_at),
    };
    reconciliation::record_applied(conn, &s).await?;
    if lithic_token.is_none() {
        reconciliation::record_sandbox(conn, &s).await?;
    }
    Ok(())
}
