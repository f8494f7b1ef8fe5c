//! A dispute's money (CONTRACT §15, docs/money.md "Disputes"), posted inside the
//! caller's transaction, which has locked the master account and then the card's
//! accounts. Each step is one ledger transfer whose reference is
//! `{dispute_id}:{step}`, unique per kind: a step can never be posted twice.
//!
//! - `credit`: the card gets the amount, from the project's dispute account (a
//!   provisional credit: the project fronts it) or from the network (a won dispute
//!   without one). A closed card's credit goes to the master balance instead.
//! - `won`: the network pays a provisionally credited dispute back to the dispute
//!   account.
//! - `take_back`: a lost or withdrawn dispute's provisional credit returns to the
//!   dispute account, from the card's free funds, then the master balance, then the
//!   project's debt (a shortfall, as a real network's clearing takes it).
//!
//! The card-side movements (`credit`, `take_back`) are card transactions of type
//! `other` with their `card_transaction` events.

use crate::network::view;
use issuing_domain::card_tx::TxStatus;
use issuing_domain::ids::new_id;
use issuing_domain::ledger::{shortfall, AccountKind, Leg, Transfer, TransferKind};
use issuing_store::card_txs::{self, CardTxRecord};
use issuing_store::cards::CardRecord;
use issuing_store::disputes::{reference, DisputeRecord};
use issuing_store::events::{self, NewEvent};
use issuing_store::ledger::{self, TransferMeta};
use issuing_store::writer::AsBatch;
use issuing_store::{Conn, StoreError};
use issuing_wire::{Amount, ApiError};

pub const CREDIT_TX_TYPE: &str = "transaction_created_dispute_credit_approved";
pub const DEBIT_TX_TYPE: &str = "transaction_created_dispute_debit_approved";

/// Where a credit comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreditFrom {
    /// A provisional credit: the project's dispute account fronts it.
    DisputeAccount,
    /// A won dispute without a provisional credit: the network pays it.
    Network,
}

fn corrupt(e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(e.to_string())
}

async fn post(
    conn: &mut Conn,
    d: &DisputeRecord,
    step: &str,
    transfer: &Transfer<String>,
) -> Result<(), StoreError> {
    let reference = reference(&d.id, step);
    let meta = TransferMeta {
        project_id: &d.project_id,
        order_id: None,
        card_id: Some(&d.card_id),
        reference: Some(&reference),
    };
    ledger::post(conn, &meta, transfer).await.map(|_| ())
}

async fn project_account(
    conn: &mut Conn,
    project_id: &str,
    kind: AccountKind,
) -> Result<String, StoreError> {
    ledger::project_account(&mut conn.as_batch(), project_id, kind).await
}

/// Credits the dispute's amount to its card (the master balance for a closed card).
pub async fn credit(
    conn: &mut Conn,
    d: &DisputeRecord,
    card: &CardRecord,
    disputed: &CardTxRecord,
    from: CreditFrom,
    now: i64,
) -> Result<(), ApiError> {
    let source = match from {
        CreditFrom::DisputeAccount => AccountKind::Dispute,
        CreditFrom::Network => AccountKind::Network,
    };
    let source = project_account(conn, &d.project_id, source).await?;
    let amount = Amount::from_micros(d.amount);
    if card.status == "closed" {
        // As cards/close does with what a card holds: back to the master balance,
        // which pays the project's debt first.
        let reference = reference(&d.id, "credit");
        let meta = TransferMeta {
            project_id: &d.project_id,
            order_id: None,
            card_id: Some(&d.card_id),
            reference: Some(&reference),
        };
        ledger::credit_master(conn, &meta, TransferKind::DisputeCredit, source, amount).await?;
    } else {
        let funds =
            ledger::card_account_id(conn, &d.project_id, &d.card_id, AccountKind::Card).await?;
        let t = Transfer::simple(TransferKind::DisputeCredit, source, funds, amount)
            .map_err(corrupt)?;
        post(conn, d, "credit", &t).await?;
    }
    card_movement(conn, d, card, disputed, CREDIT_TX_TYPE, now).await
}

/// The network pays a provisionally credited dispute back to the dispute account.
pub async fn won(conn: &mut Conn, d: &DisputeRecord) -> Result<(), ApiError> {
    let network = project_account(conn, &d.project_id, AccountKind::Network).await?;
    let dispute = project_account(conn, &d.project_id, AccountKind::Dispute).await?;
    let t = Transfer::simple(
        TransferKind::DisputeWon,
        network,
        dispute,
        Amount::from_micros(d.amount),
    )
    .map_err(corrupt)?;
    post(conn, d, "won", &t).await?;
    Ok(())
}

/// Takes a provisional credit back: the card's free funds (`available`, read under
/// the card's lock) first, then the master balance, then debt.
pub async fn take_back(
    conn: &mut Conn,
    d: &DisputeRecord,
    card: &CardRecord,
    disputed: &CardTxRecord,
    available: Amount,
    now: i64,
) -> Result<(), ApiError> {
    let dispute = project_account(conn, &d.project_id, AccountKind::Dispute).await?;
    let from_card = d.amount.min(available.micros().max(0));
    if from_card > 0 {
        let funds =
            ledger::card_account_id(conn, &d.project_id, &d.card_id, AccountKind::Card).await?;
        let t = Transfer::simple(
            TransferKind::DisputeDebit,
            funds,
            dispute.clone(),
            Amount::from_micros(from_card),
        )
        .map_err(corrupt)?;
        post(conn, d, "debit", &t).await?;
    }
    let rest = d.amount - from_card;
    if rest > 0 {
        let master =
            ledger::project_balance(&mut conn.as_batch(), &d.project_id, AccountKind::Master)
                .await?
                .micros();
        let s = shortfall(rest, 0, master);
        let master_id = project_account(conn, &d.project_id, AccountKind::Master).await?;
        let debt_id = project_account(conn, &d.project_id, AccountKind::Debt).await?;
        let t = Transfer::new(
            TransferKind::DisputeShortfall,
            vec![
                Leg {
                    account: master_id,
                    amount: Amount::from_micros(-s.from_master),
                },
                Leg {
                    account: debt_id,
                    amount: Amount::from_micros(-s.from_debt),
                },
                Leg {
                    account: dispute,
                    amount: Amount::from_micros(rest),
                },
            ],
        )
        .map_err(corrupt)?;
        post(conn, d, "shortfall", &t).await?;
    }
    card_movement(conn, d, card, disputed, DEBIT_TX_TYPE, now).await
}

/// The card transaction of a card-side movement, and its `card_transaction` event.
async fn card_movement(
    conn: &mut Conn,
    d: &DisputeRecord,
    card: &CardRecord,
    disputed: &CardTxRecord,
    tx_type: &str,
    now: i64,
) -> Result<(), ApiError> {
    let rec = CardTxRecord {
        id: new_id(),
        project_id: d.project_id.clone(),
        card_id: d.card_id.clone(),
        tx_kind: "other".into(),
        status: TxStatus::Approved.as_str().into(),
        tx_type: tx_type.into(),
        auth_amount: 0,
        held: 0,
        card_amount: d.amount,
        cleared: 0,
        refunded: 0,
        original_transaction_id: Some(disputed.id.clone()),
        merchant: disputed.merchant.clone(),
        merchant_currency: disputed.merchant_currency.clone(),
        merchant_amount: proportional(disputed.merchant_amount, d.amount, disputed.cleared),
        failure_reason: None,
        hold_expires_at: None,
        created_at: now,
        updated_at: now,
        mcc: disputed.mcc.clone(),
        counted_amount: 0,
        counts: false,
        decline: None,
        decision_reason: None,
        decision_state: None,
        decision_deadline: None,
        decision_on_timeout: None,
        dispute_id: Some(d.id.clone()),
        settled_at: None,
    };
    card_txs::insert(conn, &rec).await?;
    let item = view::item(&rec, card);
    events::insert(
        conn,
        &NewEvent {
            project_id: &d.project_id,
            event_type: "card_transaction",
            card_id: Some(&d.card_id),
            order_id: None,
            payload: &item,
            now,
        },
    )
    .await?;
    Ok(())
}

/// `part / whole` of `value`, in integer arithmetic (the merchant amount disputed).
fn proportional(value: i64, part: i64, whole: i64) -> i64 {
    if whole <= 0 {
        return part;
    }
    i64::try_from(i128::from(value) * i128::from(part) / i128::from(whole)).unwrap_or(part)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_merchant_amount_follows_the_share_disputed() {
        assert_eq!(super::proportional(9_000, 50, 100), 4_500);
        assert_eq!(super::proportional(9_000, 100, 100), 9_000);
        assert_eq!(super::proportional(3, 7, 0), 7);
    }
}
