//! Refunds: money returns from the network to the card, against a cleared
//! authorization (never more than it cleared, over all its refunds) or unlinked. A
//! refund gives nothing back to limits (CONTRACT §11).

use super::execute::{commit, execute, open_issued_card, open_tx};
use super::plan::{new_tx, Move, Plan, Side, Write};
use super::{kind_of, wrong_state, Applied, Merchant, Purchase};
use crate::App;
use issuing_domain::card_tx::{is_refundable, TxKind, TxStatus};
use issuing_domain::ledger::TransferKind;
use issuing_domain::time::now_micros;
use issuing_store::card_txs::CardTxRecord;
use issuing_store::cards::CardRecord;
use issuing_wire::{Amount, ApiError, ErrorSlug};

pub(super) async fn refund(
    state: &App,
    project_id: &str,
    transaction_id: &str,
    amount: Option<Amount>,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    let (mut tx, card, prev) = open_tx(state, project_id, transaction_id).await?;
    let plan = plan_refund(&card, &prev, amount, now_micros())?;
    let applied = execute(&mut tx, &card, plan, message_id, "refund").await?;
    commit(tx).await?;
    Ok(applied)
}

fn plan_refund(
    card: &CardRecord,
    prev: &CardTxRecord,
    amount: Option<Amount>,
    now: i64,
) -> Result<Plan, ApiError> {
    let (kind, status) = kind_of(prev)?;
    if !is_refundable(kind, status) {
        return Err(wrong_state(prev, "refund"));
    }
    let remaining = prev.cleared - prev.refunded;
    let amount = amount.map_or(remaining, Amount::micros);
    if amount <= 0 || amount > remaining {
        return Err(ApiError::new(
            ErrorSlug::InvalidAmount,
            format!(
                "Refunds of this transaction may return at most {} more",
                Amount::from_micros(remaining)
            ),
        ));
    }
    let mut original = prev.clone();
    original.refunded += amount;
    let text = |field: &str| prev.merchant[field].as_str().unwrap_or_default().to_owned();
    let purchase = Purchase {
        merchant: Merchant {
            name: text("name"),
            mcc: text("mcc"),
            country: text("country"),
        },
        merchant_currency: prev.merchant_currency.clone(),
        // The merchant amount refunded, in proportion to the card amount.
        merchant_amount: Amount::from_micros(proportional(
            prev.merchant_amount,
            amount,
            prev.cleared,
        )),
    };
    let mut rec = new_tx(
        card,
        TxKind::Refund,
        TxStatus::Approved,
        amount,
        &purchase,
        now,
    );
    rec.original_transaction_id = Some(prev.id.clone());
    let back = Move::new(TransferKind::CardRefund, Side::Network, Side::Funds, amount);
    let mut plan = Plan::insert(rec, vec![back]);
    plan.writes.insert(
        0,
        Write::Update {
            prev: Box::new(prev.clone()),
            next: Box::new(original),
        },
    );
    plan.action = "refund";
    Ok(plan)
}

/// `part / whole` of `value`, in integer arithmetic.
fn proportional(value: i64, part: i64, whole: i64) -> i64 {
    if whole <= 0 {
        return part;
    }
    i64::try_from(i128::from(value) * i128::from(part) / i128::from(whole)).unwrap_or(part)
}

pub(super) async fn unlinked(
    state: &App,
    project_id: &str,
    card_id: &str,
    amount: Amount,
    purchase: &Purchase,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    let (mut tx, card) = open_issued_card(state, project_id, card_id).await?;
    let rec = new_tx(
        &card,
        TxKind::Refund,
        TxStatus::Approved,
        amount.micros(),
        purchase,
        now_micros(),
    );
    let back = Move::new(
        TransferKind::CardRefund,
        Side::Network,
        Side::Funds,
        rec.card_amount,
    );
    let applied = execute(
        &mut tx,
        &card,
        Plan::insert(rec, vec![back]),
        message_id,
        "unlinked_refund",
    )
    .await?;
    commit(tx).await?;
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::plan::set_counted;
    use crate::network::tests::{card, purchase};
    use issuing_domain::controls::limits::Counted;

    #[test]
    fn proportional_refunds() {
        assert_eq!(super::proportional(2_000, 50, 100), 1_000);
        assert_eq!(super::proportional(7, 1, 0), 1);
    }

    #[test]
    fn refunds_count_nothing() {
        let mut t = new_tx(
            &card(),
            TxKind::Auth,
            TxStatus::Approved,
            100,
            &purchase(),
            1,
        );
        t.cleared = 100;
        set_counted(&mut t, Counted::approved(100));
        let plan = plan_refund(&card(), &t, Some(Amount::from_micros(40)), 2)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (plan.subject.counted_amount, plan.subject.counts),
            (0, false)
        );
        let Write::Update { next, .. } = &plan.writes[0] else {
            panic!("the original is updated first")
        };
        assert_eq!(
            (next.refunded, next.counted_amount),
            (40, 100),
            "the original still counts"
        );
    }
}
