//! Authorization requests: approve and hold, or decline (CONTRACT §9).

use super::{
    applied_on, emit, flow_error, lock_card_with_funds, new_tx, post, Applied, Purchase, Side,
};
use crate::state::AppState;
use issuing_domain::card_tx::{
    TxKind, TxStatus, DECLINE_CARD_NOT_ACTIVE, DECLINE_INSUFFICIENT_FUNDS,
};
use issuing_domain::ledger::TransferKind;
use issuing_domain::time::now_micros;
use issuing_store::{card_txs, Conn};
use issuing_wire::{Amount, ApiError};

/// One authorization request, owned: it waits in the writer's queue.
struct Request {
    project_id: String,
    card_id: String,
    amount: Amount,
    purchase: Purchase,
    message_id: Option<String>,
}

/// Decides and records one authorization as one operation of the authorizations writer
/// (`group_commit.rs`): batched on SQLite, its own transaction on PostgreSQL.
pub(super) async fn authorize(
    state: &AppState,
    project_id: &str,
    card_id: &str,
    amount: Amount,
    purchase: &Purchase,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    let shared = state.clone();
    let req = Request {
        project_id: project_id.to_owned(),
        card_id: card_id.to_owned(),
        amount,
        purchase: purchase.clone(),
        message_id: message_id.map(str::to_owned),
    };
    state
        .authorizations
        .run(move |conn| Box::pin(async move { decide(conn, &shared, &req).await }))
        .await
}

/// The card's funds are locked before they are read, so concurrent authorizations on
/// one card are decided one after another and can never hold the same money twice.
async fn decide(conn: &mut Conn, state: &AppState, req: &Request) -> Result<Applied, ApiError> {
    let Request {
        project_id,
        card_id,
        amount,
        purchase,
        message_id,
    } = req;
    let (amount, message_id) = (*amount, message_id.as_deref());
    // A copy of this message earlier in the same batch is not committed yet, so the
    // check `apply` made before queueing could not see it.
    if let Some(id) = message_id {
        if let Some(applied) = applied_on(conn, project_id, id).await? {
            return Ok(applied);
        }
    }
    let (card, available) = lock_card_with_funds(conn, project_id, card_id).await?;
    let now = now_micros();
    let decline = if card.status != "active" {
        Some(DECLINE_CARD_NOT_ACTIVE)
    } else if available.micros() < amount.micros() {
        Some(DECLINE_INSUFFICIENT_FUNDS)
    } else {
        None
    };
    let rec = match decline {
        Some(reason) => {
            let mut rec = new_tx(
                &card,
                TxKind::Auth,
                TxStatus::Declined,
                amount.micros(),
                purchase,
                now,
            );
            rec.failure_reason = Some(reason.into());
            rec
        }
        None => {
            let mut rec = new_tx(
                &card,
                TxKind::Auth,
                TxStatus::Pending,
                amount.micros(),
                purchase,
                now,
            );
            rec.held = amount.micros();
            let expiry = i64::try_from(state.config.hold_expiry.as_micros()).unwrap_or(i64::MAX);
            rec.hold_expires_at = Some(now.saturating_add(expiry));
            rec
        }
    };
    card_txs::insert(conn, &rec).await?;
    if rec.held > 0 {
        post(
            conn,
            &rec,
            TransferKind::CardAuthHold,
            Side::Funds,
            Side::Hold,
            rec.held,
        )
        .await
        .map_err(flow_error)?;
    }
    emit(conn, &card, &rec, message_id, "authorization")
        .await
        .map_err(flow_error)?;
    Ok(Applied { tx: rec, card })
}
