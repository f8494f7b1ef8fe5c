//! Clearings (an authorization settles, at its held amount or another) and force posts
//! (a settlement with no authorization): money leaves the card to the network.

use super::{emit, flow_error, kind_of, new_tx, post, wrong_state, Applied, Purchase, Side};
use crate::state::AppState;
use issuing_domain::card_tx::{clearing, is_open_auth, tx_type, TxKind, TxStatus};
use issuing_domain::ledger::TransferKind;
use issuing_domain::time::now_micros;
use issuing_store::card_txs;
use issuing_wire::{Amount, ApiError};

pub(super) async fn clear(
    state: &AppState,
    project_id: &str,
    transaction_id: &str,
    bill_amount: Option<Amount>,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    let (mut tx, card, prev) = super::open_tx(state, project_id, transaction_id).await?;
    let (kind, status) = kind_of(&prev)?;
    if !is_open_auth(kind, status) {
        return Err(wrong_state(&prev, "clear"));
    }
    let bill = bill_amount.map_or(prev.held, Amount::micros);
    let moves = clearing(prev.held, bill);
    let now = now_micros();
    let mut next = prev.clone();
    next.status = TxStatus::Approved.as_str().into();
    next.tx_type = tx_type(false, TxKind::Auth, TxStatus::Approved);
    next.held = 0;
    next.cleared = bill;
    next.card_amount = bill;
    next.hold_expires_at = None;
    next.updated_at = now;
    if !card_txs::update(&mut tx, &prev, &next).await? {
        return Err(wrong_state(&prev, "clear"));
    }
    post(
        &mut tx,
        &prev,
        TransferKind::CardSpend,
        Side::Hold,
        Side::Network,
        moves.from_hold,
    )
    .await
    .map_err(flow_error)?;
    post(
        &mut tx,
        &prev,
        TransferKind::CardHoldRelease,
        Side::Hold,
        Side::Funds,
        moves.released,
    )
    .await
    .map_err(flow_error)?;
    // Beyond the hold the bill uses the card's free funds; without them the whole
    // clearing rolls back (403 insufficient_funds) and nothing changes.
    post(
        &mut tx,
        &prev,
        TransferKind::CardSpend,
        Side::Funds,
        Side::Network,
        moves.from_card,
    )
    .await
    .map_err(flow_error)?;
    emit(&mut tx, &card, &next, message_id, "clearing")
        .await
        .map_err(flow_error)?;
    super::commit(tx).await?;
    Ok(Applied { tx: next, card })
}

pub(super) async fn force_post(
    state: &AppState,
    project_id: &str,
    card_id: &str,
    bill_amount: Amount,
    purchase: &Purchase,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    let (mut tx, card) = super::open_issued_card(state, project_id, card_id).await?;
    let now = now_micros();
    let mut rec = new_tx(
        &card,
        TxKind::Auth,
        TxStatus::Approved,
        bill_amount.micros(),
        purchase,
        now,
    );
    // No authorization preceded it: nothing was ever held.
    rec.auth_amount = 0;
    rec.cleared = bill_amount.micros();
    card_txs::insert(&mut tx, &rec).await?;
    post(
        &mut tx,
        &rec,
        TransferKind::CardSpend,
        Side::Funds,
        Side::Network,
        rec.cleared,
    )
    .await
    .map_err(flow_error)?;
    emit(&mut tx, &card, &rec, message_id, "force_post")
        .await
        .map_err(flow_error)?;
    super::commit(tx).await?;
    Ok(Applied { tx: rec, card })
}
