//! Holds released: a reversal from the network (whole or partial), an expiry, or the
//! card being closed. The held money returns to the card's free funds, and the
//! released amount stops counting toward limits (the authorization still counts as
//! one: CONTRACT §11).

use super::execute::{commit, execute, lock_card, open_tx};
use super::plan::{counted, set_counted, Move, Plan, Side};
use super::{kind_of, wrong_state, Applied};
use crate::App;
use issuing_domain::card_tx::{is_open_auth, tx_type, TxKind, TxStatus};
use issuing_domain::ledger::TransferKind;
use issuing_domain::time::now_micros;
use issuing_store::card_txs::{self, CardTxRecord};
use issuing_store::cards::CardRecord;
use issuing_store::Conn;
use issuing_wire::{Amount, ApiError, ErrorSlug};

pub(super) async fn reverse(
    state: &App,
    project_id: &str,
    transaction_id: &str,
    amount: Option<Amount>,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    let (mut tx, card, prev) = open_tx(state, project_id, transaction_id).await?;
    let amount = amount.map_or(prev.held, Amount::micros);
    let plan = plan_release(&prev, amount, None, now_micros())?;
    let applied = execute(&mut tx, &card, plan, message_id, "reversal").await?;
    commit(tx).await?;
    Ok(applied)
}

/// Releases `amount` of an open authorization's hold. Releasing all of it turns the
/// transaction into an approved reversal; less leaves it a pending authorization
/// holding the rest.
fn plan_release(
    prev: &CardTxRecord,
    amount: i64,
    reason: Option<&str>,
    now: i64,
) -> Result<Plan, ApiError> {
    let (kind, status) = kind_of(prev)?;
    if !is_open_auth(kind, status) || prev.awaiting_decision() {
        return Err(wrong_state(prev, "reverse"));
    }
    if amount > prev.held {
        return Err(ApiError::new(
            ErrorSlug::InvalidAmount,
            format!(
                "A reversal can release at most the held {}",
                Amount::from_micros(prev.held)
            ),
        ));
    }
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
    set_counted(&mut next, counted(prev).released(amount));
    let back = Move::new(
        TransferKind::CardHoldRelease,
        Side::Hold,
        Side::Funds,
        amount,
    );
    Ok(Plan::update(prev, next, vec![back], "reverse"))
}

/// Releases all of an open authorization's hold inside the caller's transaction (the
/// card's accounts already locked): an expiry or cards/close.
pub async fn release_all(
    conn: &mut Conn,
    card: &CardRecord,
    prev: &CardTxRecord,
    reason: &str,
    message_kind: &str,
) -> Result<CardTxRecord, ApiError> {
    let plan = plan_release(prev, prev.held, Some(reason), now_micros())?;
    Ok(execute(conn, card, plan, None, message_kind).await?.tx)
}

/// Expires one hold whose time has passed. False when it was settled or released
/// meanwhile, or its decision is still awaited (nothing to do yet).
pub async fn expire(state: &App, stale: &CardTxRecord) -> Result<bool, ApiError> {
    let mut tx = state.store.begin().await?;
    let card = lock_card(&mut tx, &stale.project_id, &stale.card_id)
        .await?
        .card;
    let Some(prev) = card_txs::get(&mut tx, &stale.project_id, &stale.id).await? else {
        return Ok(false);
    };
    let (kind, status) = kind_of(&prev)?;
    let due = prev.hold_expires_at.is_some_and(|at| at <= now_micros());
    if !is_open_auth(kind, status) || !due || prev.awaiting_decision() {
        return Ok(false);
    }
    release_all(
        &mut tx,
        &card,
        &prev,
        issuing_domain::card_tx::REASON_EXPIRED,
        "expiry",
    )
    .await?;
    commit(tx).await?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::plan::new_tx;
    use crate::network::tests::{card, purchase};
    use issuing_domain::controls::limits::Counted;

    #[test]
    fn releases_give_back_the_amount_never_the_count() {
        let mut t = new_tx(
            &card(),
            TxKind::Auth,
            TxStatus::Pending,
            100,
            &purchase(),
            1,
        );
        t.held = 100;
        set_counted(&mut t, Counted::approved(100));
        let partial = plan_release(&t, 30, None, 2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (partial.subject.counted_amount, partial.subject.counts),
            (70, true)
        );
        assert_eq!(partial.subject.tx_kind, "auth");
        let all = plan_release(&partial.subject, 70, Some("expired"), 3)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((all.subject.counted_amount, all.subject.counts), (0, true));
        assert_eq!(all.subject.tx_kind, "reversal");
        assert!(plan_release(&t, 101, None, 2).is_err());
    }
}
