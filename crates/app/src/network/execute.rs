//! The one executor of network messages: it reads what a message acts on (the card's
//! accounts locked first), and applies a message's plan (rows, ledger moves, event,
//! the network message id, rule results) inside the caller's transaction. Nothing here
//! decides anything.

use super::plan::{Move, Plan, Side, Write};
use super::{view, wrong_state, Applied};
use crate::App;
use issuing_domain::ids::new_id;
use issuing_domain::ledger::{AccountKind, Transfer};
use issuing_store::card_txs::{self, CardTxRecord};
use issuing_store::cards::{self, CardRecord, LockedCard};
use issuing_store::events::{self, NewEvent};
use issuing_store::ledger::{self, TransferMeta};
use issuing_store::writer::AsBatch;
use issuing_store::{controls, Conn, StoreError, Tx};
use issuing_wire::{Amount, ApiError, ErrorSlug};

pub fn card_not_found() -> ApiError {
    ApiError::new(ErrorSlug::CardNotFound, "Card not found")
}

fn tx_not_found() -> ApiError {
    ApiError::new(ErrorSlug::TransactionNotFound, "Transaction not found")
}

/// Reads a card and locks its funds and hold accounts (in that order, the ledger's
/// lock order), so every message on one card is serialised on PostgreSQL before it
/// touches the network account; SQLite's write transaction serialises already. The
/// card's available funds and its project's controls revision come with it.
pub async fn lock_card(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
) -> Result<LockedCard, ApiError> {
    if let Some(found) = cards::get_locking_funds(conn, project_id, card_id).await? {
        return Ok(found);
    }
    // No card, or a card without accounts: answered as before the joined read.
    let card = cards::get(conn, project_id, card_id)
        .await?
        .ok_or_else(card_not_found)?;
    let (available, _) = ledger::lock_card_accounts(conn, project_id, card_id).await?;
    let controls_revision = cards::controls_revision(&mut conn.as_batch(), project_id).await?;
    Ok(LockedCard {
        card,
        available,
        controls_revision,
    })
}

/// Opens the transaction a message names: its card's accounts locked, then the
/// transaction re-read under that lock (the state its update will be conditional on).
pub async fn open_tx(
    state: &App,
    project_id: &str,
    transaction_id: &str,
) -> Result<(Tx, CardRecord, CardTxRecord), ApiError> {
    let mut tx = state.store.begin().await?;
    let (locked, current) = read_tx(&mut tx, project_id, transaction_id).await?;
    Ok((tx, locked.card, current))
}

/// `open_tx` on a transaction the caller began (and may have locked the master
/// account in first); the card's free funds come with it.
pub async fn read_tx(
    conn: &mut Conn,
    project_id: &str,
    transaction_id: &str,
) -> Result<(LockedCard, CardTxRecord), ApiError> {
    let found = card_txs::get(conn, project_id, transaction_id)
        .await?
        .ok_or_else(tx_not_found)?;
    let locked = lock_card(conn, project_id, &found.card_id).await?;
    let current = card_txs::get(conn, project_id, transaction_id)
        .await?
        .ok_or_else(tx_not_found)?;
    Ok((locked, current))
}

/// Opens a card a posting without an authorization lands on (force post, unlinked
/// refund): it must have been issued.
pub async fn open_issued_card(
    state: &App,
    project_id: &str,
    card_id: &str,
) -> Result<(Tx, CardRecord), ApiError> {
    let mut tx = state.store.begin().await?;
    let card = read_issued_card(&mut tx, project_id, card_id).await?.card;
    Ok((tx, card))
}

/// `open_issued_card` on a transaction the caller began; the card's free funds come
/// with it.
pub async fn read_issued_card(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
) -> Result<LockedCard, ApiError> {
    let locked = lock_card(conn, project_id, card_id).await?;
    if locked.card.provider_card_id.is_none() {
        return Err(ApiError::new(
            ErrorSlug::CardNotActive,
            format!("Card is {}: it was never issued", locked.card.status),
        ));
    }
    Ok(locked)
}

/// Applies `plan` on `conn` (the card's accounts already locked by the caller):
/// the rows, then the moves, then the event and the message id, then rule results.
pub async fn execute(
    conn: &mut Conn,
    card: &CardRecord,
    plan: Plan,
    message_id: Option<&str>,
    message_kind: &str,
) -> Result<Applied, ApiError> {
    for write in &plan.writes {
        match write {
            Write::Insert(rec) => card_txs::insert(conn, rec).await.map_err(flow_error)?,
            Write::Update { prev, next } => {
                if !card_txs::update(conn, prev, next).await? {
                    return Err(wrong_state(prev, plan.action));
                }
            }
        }
    }
    for m in &plan.moves {
        post(conn, &plan.subject, *m).await.map_err(flow_error)?;
    }
    if plan.emit {
        emit(conn, card, &plan.subject).await?;
    }
    if let Some(id) = message_id {
        card_txs::record_message(
            conn,
            &plan.subject.project_id,
            id,
            &plan.subject.id,
            message_kind,
            plan.subject.updated_at,
        )
        .await
        .map_err(flow_error)?;
    }
    super::settlements::settled(conn, card, &plan.subject, message_id, message_kind)
        .await
        .map_err(flow_error)?;
    controls::insert_results(conn, &plan.rule_results).await?;
    Ok(Applied {
        tx: plan.subject,
        card: card.clone(),
    })
}

/// Moves money between two accounts of the card of transaction `t`, tagged with the
/// card and the transaction. Zero moves nothing.
async fn post(conn: &mut Conn, t: &CardTxRecord, m: Move) -> Result<(), StoreError> {
    let (project_id, card_id, transaction_id) = (&t.project_id, &t.card_id, &t.id);
    if m.micros == 0 {
        return Ok(());
    }
    async fn account(
        conn: &mut Conn,
        project_id: &str,
        card_id: &str,
        side: Side,
    ) -> Result<String, StoreError> {
        let (kind, of_card) = match side {
            Side::Funds => (AccountKind::Card, true),
            Side::Hold => (AccountKind::CardHold, true),
            Side::Network => (AccountKind::Network, false),
            Side::Master => (AccountKind::Master, false),
            Side::Debt => (AccountKind::Debt, false),
        };
        if of_card {
            ledger::card_account_id(conn, project_id, card_id, kind).await
        } else {
            ledger::project_account(&mut conn.as_batch(), project_id, kind).await
        }
    }
    let from = account(conn, project_id, card_id, m.from).await?;
    let to = account(conn, project_id, card_id, m.to).await?;
    let transfer = Transfer::simple(m.kind, from, to, Amount::from_micros(m.micros))
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    // The reference names the card transaction; one transaction posts several
    // transfers of a kind (a clearing above its hold, partial reversals), and
    // references are unique per kind, so each posting gets its own suffix.
    let reference = format!("{transaction_id}:{}", new_id());
    let meta = TransferMeta {
        project_id,
        order_id: None,
        card_id: Some(card_id),
        reference: Some(&reference),
    };
    ledger::post(conn, &meta, &transfer).await.map(|_| ())
}

/// Writes the `card_transaction` event of a transaction's new state.
async fn emit(conn: &mut Conn, card: &CardRecord, rec: &CardTxRecord) -> Result<(), StoreError> {
    let item = view::item(rec, card);
    events::insert(
        conn,
        &NewEvent {
            project_id: &rec.project_id,
            event_type: "card_transaction",
            card_id: Some(&rec.card_id),
            order_id: None,
            payload: &item,
            now: rec.updated_at,
        },
    )
    .await
    .map(|_| ())
}

pub async fn commit(tx: Tx) -> Result<(), ApiError> {
    tx.commit().await.map_err(StoreError::from)?;
    Ok(())
}

fn insufficient_funds() -> ApiError {
    ApiError::new(ErrorSlug::InsufficientFunds, "Insufficient card funds")
}

/// Maps ledger and message errors of a network flow to API errors.
pub fn flow_error(e: StoreError) -> ApiError {
    match e {
        StoreError::InsufficientFunds { .. } => insufficient_funds(),
        // The same network message committed by a concurrent request.
        StoreError::Conflict => ApiError::new(
            ErrorSlug::InvalidTransactionState,
            "This network message was applied concurrently",
        ),
        other => other.into(),
    }
}
