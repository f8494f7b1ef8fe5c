//! Holds released: a reversal from the network (whole or partial), an expiry, or the
//! card being closed. The held money returns to the card's free funds.

use super::{emit, flow_error, kind_of, lock_card, post, wrong_state, Applied, Side};
use crate::state::AppState;
use issuing_domain::card_tx::{is_open_auth, tx_type, TxKind, TxStatus};
use issuing_domain::ledger::TransferKind;
use issuing_domain::time::now_micros;
use issuing_store::card_txs::{self, CardTxRecord};
use issuing_store::cards::CardRecord;
use issuing_store::Tx;
use issuing_wire::{Amount, ApiError, ErrorSlug};

pub(super) async fn reverse(
    state: &AppState,
    project_id: &str,
    transaction_id: &str,
    amount: Option<Amount>,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    let (mut tx, card, prev) = super::open_tx(state, project_id, transaction_id).await?;
    let (kind, status) = kind_of(&prev)?;
    if !is_open_auth(kind, status) {
        return Err(wrong_state(&prev, "reverse"));
    }
    let amount = amount.map_or(prev.held, Amount::micros);
    if amount > prev.held {
        return Err(ApiError::new(
            ErrorSlug::InvalidAmount,
            format!(
                "A reversal can release at most the held {}",
                Amount::from_micros(prev.held)
            ),
        ));
    }
    let next = release(&mut tx, &card, &prev, amount, None, message_id, "reversal").await?;
    super::commit(tx).await?;
    Ok(Applied { tx: next, card })
}

/// Releases `amount` of an open authorization's hold inside the caller's transaction
/// (the card's accounts already locked). Releasing all of it turns the transaction into
/// an approved reversal; less leaves it a pending authorization holding the rest.
pub(crate) async fn release(
    tx: &mut Tx,
    card: &CardRecord,
    prev: &CardTxRecord,
    amount: i64,
    reason: Option<&str>,
    message_id: Option<&str>,
    message_kind: &str,
) -> Result<CardTxRecord, ApiError> {
    let now = now_micros();
    let mut next = prev.clone();
    next.held = prev.held - amount;
    next.updated_at = now;
    next.failure_reason = reason.map(str::to_owned);
    if next.held == 0 {
        next.tx_kind = TxKind::Reversal.as_str().into();
        next.status = TxStatus::Approved.as_str().into();
        next.tx_type = tx_type(false, TxKind::Reversal, TxStatus::Approved);
        next.card_amount = prev.held;
        next.hold_expires_at = None;
    } else {
        next.tx_type = tx_type(false, TxKind::Auth, TxStatus::Pending);
        next.card_amount = next.held;
    }
    if !card_txs::update(tx, prev, &next).await? {
        return Err(wrong_state(prev, "reverse"));
    }
    post(
        tx,
        prev,
        TransferKind::CardHoldRelease,
        Side::Hold,
        Side::Funds,
        amount,
    )
    .await
    .map_err(flow_error)?;
    emit(tx, card, &next, message_id, message_kind)
        .await
        .map_err(flow_error)?;
    Ok(next)
}

/// Expires one hold whose time has passed. False when it was settled or released
/// meanwhile (nothing to do).
pub(crate) async fn expire(state: &AppState, stale: &CardTxRecord) -> Result<bool, ApiError> {
    let mut tx = state.store.begin().await?;
    let card = lock_card(&mut tx, state, &stale.project_id, &stale.card_id).await?;
    let Some(prev) = card_txs::get(&mut tx, &stale.project_id, &stale.id).await? else {
        return Ok(false);
    };
    let (kind, status) = kind_of(&prev)?;
    let due = prev.hold_expires_at.is_some_and(|at| at <= now_micros());
    if !is_open_auth(kind, status) || !due {
        return Ok(false);
    }
    release(
        &mut tx,
        &card,
        &prev,
        prev.held,
        Some(issuing_domain::card_tx::REASON_EXPIRED),
        None,
        "expiry",
    )
    .await?;
    super::commit(tx).await?;
    Ok(true)
}
