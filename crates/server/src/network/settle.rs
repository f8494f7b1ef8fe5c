//! Clearings (an authorization settles, at its held amount or another) and force posts
//! (a settlement with no authorization): money leaves the card to the network. Neither
//! is ever declined by a limit (CONTRACT §11); only the card's funds can refuse one.

use super::execute::{commit, execute, open_issued_card, open_tx};
use super::plan::{counted, new_tx, set_counted, Move, Plan, Side};
use super::{kind_of, wrong_state, Applied, Purchase};
use crate::state::AppState;
use issuing_domain::card_tx::{clearing, is_open_auth, tx_type, TxKind, TxStatus};
use issuing_domain::controls::limits::Counted;
use issuing_domain::ledger::TransferKind;
use issuing_domain::time::now_micros;
use issuing_store::card_txs::CardTxRecord;
use issuing_store::cards::CardRecord;
use issuing_wire::{Amount, ApiError};

pub(super) async fn clear(
    state: &AppState,
    project_id: &str,
    transaction_id: &str,
    bill_amount: Option<Amount>,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    let (mut tx, card, prev) = open_tx(state, project_id, transaction_id).await?;
    let plan = plan_clear(&prev, bill_amount, now_micros())?;
    let applied = execute(&mut tx, &card, plan, message_id, "clearing").await?;
    commit(tx).await?;
    Ok(applied)
}

/// Settles an open authorization at `bill_amount` (default: its hold). Beyond the hold
/// the bill uses the card's free funds; without them the posting fails and nothing
/// changes (403 insufficient_funds).
fn plan_clear(
    prev: &CardTxRecord,
    bill_amount: Option<Amount>,
    now: i64,
) -> Result<Plan, ApiError> {
    let (kind, status) = kind_of(prev)?;
    if !is_open_auth(kind, status) || prev.awaiting_decision() {
        return Err(wrong_state(prev, "clear"));
    }
    let bill = bill_amount.map_or(prev.held, Amount::micros);
    let moves = clearing(prev.held, bill);
    let mut next = prev.clone();
    next.status = TxStatus::Approved.as_str().into();
    next.tx_type = tx_type(false, TxKind::Auth, TxStatus::Approved);
    next.held = 0;
    next.cleared = bill;
    next.card_amount = bill;
    next.hold_expires_at = None;
    next.updated_at = now;
    set_counted(&mut next, counted(prev).cleared(prev.held, bill));
    Ok(Plan::update(
        prev,
        next,
        vec![
            Move::new(
                TransferKind::CardSpend,
                Side::Hold,
                Side::Network,
                moves.from_hold,
            ),
            Move::new(
                TransferKind::CardHoldRelease,
                Side::Hold,
                Side::Funds,
                moves.released,
            ),
            Move::new(
                TransferKind::CardSpend,
                Side::Funds,
                Side::Network,
                moves.from_card,
            ),
        ],
        "clear",
    ))
}

pub(super) async fn force_post(
    state: &AppState,
    project_id: &str,
    card_id: &str,
    bill_amount: Amount,
    purchase: &Purchase,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    let (mut tx, card) = open_issued_card(state, project_id, card_id).await?;
    let plan = plan_force_post(&card, bill_amount, purchase, now_micros());
    let applied = execute(&mut tx, &card, plan, message_id, "force_post").await?;
    commit(tx).await?;
    Ok(applied)
}

/// A posting with no authorization before it: it counts its amount and one toward the
/// card's limits, in the window of its own time.
fn plan_force_post(card: &CardRecord, bill: Amount, purchase: &Purchase, now: i64) -> Plan {
    let mut rec = new_tx(
        card,
        TxKind::Auth,
        TxStatus::Approved,
        bill.micros(),
        purchase,
        now,
    );
    // No authorization preceded it: nothing was ever held.
    rec.auth_amount = 0;
    rec.cleared = bill.micros();
    set_counted(&mut rec, Counted::approved(bill.micros()));
    let spend = Move::new(
        TransferKind::CardSpend,
        Side::Funds,
        Side::Network,
        rec.cleared,
    );
    Plan::insert(rec, vec![spend])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::plan::new_tx;
    use crate::network::tests::{card, purchase};

    fn pending(held: i64) -> CardTxRecord {
        let mut t = new_tx(
            &card(),
            TxKind::Auth,
            TxStatus::Pending,
            held,
            &purchase(),
            1,
        );
        t.held = held;
        set_counted(&mut t, Counted::approved(held));
        t
    }

    #[test]
    fn clearing_counts_the_bill() {
        for (bill, counted_after, moves) in [
            (60, 60, [60, 40, 0]),
            (100, 100, [100, 0, 0]),
            (130, 130, [100, 0, 30]),
        ] {
            let plan = plan_clear(&pending(100), Some(Amount::from_micros(bill)), 2)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(plan.subject.counted_amount, counted_after, "bill {bill}");
            assert!(plan.subject.counts);
            let got: Vec<i64> = plan.moves.iter().map(|m| m.micros).collect();
            assert_eq!(got, moves, "bill {bill}");
        }
    }

    #[test]
    fn an_awaited_decision_cannot_be_cleared() {
        let mut t = pending(100);
        t.decision_state = Some(issuing_store::card_txs::AWAITING.into());
        assert!(plan_clear(&t, None, 2).is_err());
    }

    #[test]
    fn force_posts_count() {
        let plan = plan_force_post(&card(), Amount::from_micros(70), &purchase(), 3);
        assert_eq!(
            (plan.subject.counted_amount, plan.subject.counts),
            (70, true)
        );
        assert_eq!(plan.subject.auth_amount, 0);
    }
}
