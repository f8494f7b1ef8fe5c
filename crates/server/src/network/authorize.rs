//! Authorization requests: approve and hold, or decline (CONTRACT §9).

use super::{emit, flow_error, lock_card, new_tx, post, Applied, Purchase, Side};
use crate::state::AppState;
use issuing_domain::card_tx::{
    TxKind, TxStatus, DECLINE_CARD_NOT_ACTIVE, DECLINE_INSUFFICIENT_FUNDS,
};
use issuing_domain::ledger::TransferKind;
use issuing_domain::time::now_micros;
use issuing_store::{card_txs, ledger};
use issuing_wire::{Amount, ApiError};

/// Decides and records one authorization. The card's funds are locked before they are
/// read, so concurrent authorizations on one card are decided one after another and
/// can never hold the same money twice.
pub(super) async fn authorize(
    state: &AppState,
    project_id: &str,
    card_id: &str,
    amount: Amount,
    purchase: &Purchase,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    let mut tx = state.store.begin().await?;
    let card = lock_card(&mut tx, state, project_id, card_id).await?;
    let now = now_micros();
    let (_, available) = ledger::card_account(&mut tx, project_id, card_id).await?;
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
    card_txs::insert(&mut tx, &rec).await?;
    if rec.held > 0 {
        post(
            &mut tx,
            &rec,
            TransferKind::CardAuthHold,
            Side::Funds,
            Side::Hold,
            rec.held,
        )
        .await
        .map_err(flow_error)?;
    }
    emit(&mut tx, &card, &rec, message_id, "authorization")
        .await
        .map_err(flow_error)?;
    super::commit(tx).await?;
    Ok(Applied { tx: rec, card })
}
