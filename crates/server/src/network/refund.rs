//! Refunds: money returns from the network to the card, against a cleared
//! authorization (never more than it cleared, over all its refunds) or unlinked.

use super::{emit, flow_error, kind_of, new_tx, post, wrong_state, Applied, Purchase, Side};
use crate::state::AppState;
use issuing_domain::card_tx::{is_refundable, TxKind, TxStatus};
use issuing_domain::ledger::TransferKind;
use issuing_domain::time::now_micros;
use issuing_store::card_txs;
use issuing_wire::{Amount, ApiError, ErrorSlug};

pub(super) async fn refund(
    state: &AppState,
    project_id: &str,
    transaction_id: &str,
    amount: Option<Amount>,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    let (mut tx, card, prev) = super::open_tx(state, project_id, transaction_id).await?;
    let (kind, status) = kind_of(&prev)?;
    if !is_refundable(kind, status) {
        return Err(wrong_state(&prev, "refund"));
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
    if !card_txs::update(&mut tx, &prev, &original).await? {
        return Err(wrong_state(&prev, "refund"));
    }
    let purchase = Purchase {
        merchant: super::Merchant {
            name: prev.merchant["name"].as_str().unwrap_or_default().into(),
            mcc: prev.merchant["mcc"].as_str().unwrap_or_default().into(),
            country: prev.merchant["country"].as_str().unwrap_or_default().into(),
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
        &card,
        TxKind::Refund,
        TxStatus::Approved,
        amount,
        &purchase,
        now_micros(),
    );
    rec.original_transaction_id = Some(prev.id.clone());
    card_txs::insert(&mut tx, &rec).await?;
    post(
        &mut tx,
        &rec,
        TransferKind::CardRefund,
        Side::Network,
        Side::Funds,
        amount,
    )
    .await
    .map_err(flow_error)?;
    emit(&mut tx, &card, &rec, message_id, "refund")
        .await
        .map_err(flow_error)?;
    super::commit(tx).await?;
    Ok(Applied { tx: rec, card })
}

/// `part / whole` of `value`, in integer arithmetic.
fn proportional(value: i64, part: i64, whole: i64) -> i64 {
    if whole <= 0 {
        return part;
    }
    i64::try_from(i128::from(value) * i128::from(part) / i128::from(whole)).unwrap_or(part)
}

pub(super) async fn unlinked(
    state: &AppState,
    project_id: &str,
    card_id: &str,
    amount: Amount,
    purchase: &Purchase,
    message_id: Option<&str>,
) -> Result<Applied, ApiError> {
    let (mut tx, card) = super::open_issued_card(state, project_id, card_id).await?;
    let rec = new_tx(
        &card,
        TxKind::Refund,
        TxStatus::Approved,
        amount.micros(),
        purchase,
        now_micros(),
    );
    card_txs::insert(&mut tx, &rec).await?;
    post(
        &mut tx,
        &rec,
        TransferKind::CardRefund,
        Side::Network,
        Side::Funds,
        rec.card_amount,
    )
    .await
    .map_err(flow_error)?;
    emit(&mut tx, &card, &rec, message_id, "unlinked_refund")
        .await
        .map_err(flow_error)?;
    super::commit(tx).await?;
    Ok(Applied { tx: rec, card })
}

#[cfg(test)]
mod tests {
    #[test]
    fn proportional_refunds() {
        assert_eq!(super::proportional(2_000, 50, 100), 1_000);
        assert_eq!(super::proportional(7, 1, 0), 1);
    }
}
