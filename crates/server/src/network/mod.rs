//! The card network's side of a card: the one entry point for authorization requests,
//! clearings, reversals and refunds. A real provider adapter calls `apply` when the
//! network sends a message; the sandbox's `simulate/cards/*` endpoints are thin callers
//! of the same function, and the hold expiry worker and `cards/close` use the release
//! path here too.
//!
//! Every message is applied in one database transaction: the transaction's state change
//! (conditional on the state it was read in), its ledger transfers and its
//! `card_transaction` event commit together. A message that carries a network message
//! id is applied at most once: a replay answers the transaction as it is now.

mod authorize;
mod refund;
pub(crate) mod release;
mod settle;
pub(crate) mod view;

use crate::state::AppState;
use issuing_domain::card_tx::{TxKind, TxStatus};
use issuing_domain::ids::new_id;
use issuing_domain::ledger::{AccountKind, Transfer, TransferKind};
use issuing_store::card_txs::{self, CardTxRecord};
use issuing_store::cards::{self, CardRecord};
use issuing_store::events::{self, NewEvent};
use issuing_store::ledger::{self, TransferMeta};
use issuing_store::{Conn, StoreError, Tx};
use issuing_wire::{Amount, ApiError, ErrorSlug};

/// The longest network message id kept (the same bound as an idempotency key).
const MAX_MESSAGE_ID_LEN: usize = 255;

/// The merchant of a card transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Merchant {
    pub name: String,
    pub mcc: String,
    pub country: String,
}

impl Merchant {
    fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "name": self.name, "mcc": self.mcc, "country": self.country })
    }
}

/// Where the money was spent, in the merchant's currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Purchase {
    pub merchant: Merchant,
    /// ISO 4217, upper case.
    pub merchant_currency: String,
    pub merchant_amount: Amount,
}

/// A message from the card network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Message {
    /// Asks to hold `amount` on the card: approved (held) or declined.
    Authorization {
        card_id: String,
        amount: Amount,
        purchase: Purchase,
    },
    /// Settles a pending authorization at `bill_amount` (default: the held amount).
    Clearing {
        transaction_id: String,
        bill_amount: Option<Amount>,
    },
    /// A posting without an authorization.
    ForcePost {
        card_id: String,
        bill_amount: Amount,
        purchase: Purchase,
    },
    /// Cancels a pending authorization, wholly or (`amount`) in part.
    Reversal {
        transaction_id: String,
        amount: Option<Amount>,
    },
    /// Returns money of a cleared authorization (default: what remains refundable).
    Refund {
        transaction_id: String,
        amount: Option<Amount>,
    },
    /// Returns money to a card without naming a transaction.
    UnlinkedRefund {
        card_id: String,
        amount: Amount,
        purchase: Purchase,
    },
}

impl Message {
    fn kind(&self) -> &'static str {
        match self {
            Message::Authorization { .. } => "authorization",
            Message::Clearing { .. } => "clearing",
            Message::ForcePost { .. } => "force_post",
            Message::Reversal { .. } => "reversal",
            Message::Refund { .. } => "refund",
            Message::UnlinkedRefund { .. } => "unlinked_refund",
        }
    }
}

/// A transaction as a message left it, with its card.
#[derive(Debug, Clone)]
pub(crate) struct Applied {
    pub tx: CardTxRecord,
    pub card: CardRecord,
}

/// Applies one network message for a project's card. `message_id` is the network's id
/// of the message: a message already applied is not applied again, and its transaction
/// is answered as it is now.
pub(crate) async fn apply(
    state: &AppState,
    project_id: &str,
    message_id: Option<&str>,
    message: Message,
) -> Result<Applied, ApiError> {
    if let Some(id) = message_id {
        // Stored in a primary key: PostgreSQL refuses index entries above ~2.7 KB.
        if id.len() > MAX_MESSAGE_ID_LEN {
            return Err(ApiError::validation(format!(
                "network_message_id must be at most {MAX_MESSAGE_ID_LEN} bytes"
            )));
        }
        if let Some(applied) = already_applied(state, project_id, id).await? {
            return Ok(applied);
        }
    }
    let kind = message.kind();
    let result = match message {
        Message::Authorization {
            card_id,
            amount,
            purchase,
        } => authorize::authorize(state, project_id, &card_id, amount, &purchase, message_id).await,
        Message::Clearing {
            transaction_id,
            bill_amount,
        } => settle::clear(state, project_id, &transaction_id, bill_amount, message_id).await,
        Message::ForcePost {
            card_id,
            bill_amount,
            purchase,
        } => {
            settle::force_post(
                state,
                project_id,
                &card_id,
                bill_amount,
                &purchase,
                message_id,
            )
            .await
        }
        Message::Reversal {
            transaction_id,
            amount,
        } => release::reverse(state, project_id, &transaction_id, amount, message_id).await,
        Message::Refund {
            transaction_id,
            amount,
        } => refund::refund(state, project_id, &transaction_id, amount, message_id).await,
        Message::UnlinkedRefund {
            card_id,
            amount,
            purchase,
        } => refund::unlinked(state, project_id, &card_id, amount, &purchase, message_id).await,
    };
    match (result, message_id) {
        // A copy of this message committed first: answer as the replay would.
        (Err(e), Some(id)) if e.slug == ErrorSlug::InvalidTransactionState => {
            match already_applied(state, project_id, id).await? {
                Some(applied) => Ok(applied),
                None => Err(e),
            }
        }
        (result, _) => {
            if let Err(e) = &result {
                tracing::debug!(message = kind, slug = %e.slug, "network message refused");
            } else {
                state.deliveries_wakeup.notify_one();
            }
            result
        }
    }
}

async fn already_applied(
    state: &AppState,
    project_id: &str,
    message_id: &str,
) -> Result<Option<Applied>, ApiError> {
    let mut conn = state.store.conn().await?;
    applied_on(&mut conn, project_id, message_id).await
}

/// The transaction a network message already made, as `conn` sees it (inside a group
/// commit batch, that includes copies applied earlier in the same batch).
pub(crate) async fn applied_on(
    conn: &mut Conn,
    project_id: &str,
    message_id: &str,
) -> Result<Option<Applied>, ApiError> {
    let Some(tx_id) = card_txs::message_applied(conn, project_id, message_id).await? else {
        return Ok(None);
    };
    let tx = card_txs::get(conn, project_id, &tx_id)
        .await?
        .ok_or_else(ApiError::internal)?;
    let card = cards::get(conn, project_id, &tx.card_id)
        .await?
        .ok_or_else(ApiError::internal)?;
    Ok(Some(Applied { tx, card }))
}

pub(crate) fn card_not_found() -> ApiError {
    ApiError::new(ErrorSlug::CardNotFound, "Card not found")
}

fn tx_not_found() -> ApiError {
    ApiError::new(ErrorSlug::TransactionNotFound, "Transaction not found")
}

fn wrong_state(tx: &CardTxRecord, action: &str) -> ApiError {
    ApiError::new(
        ErrorSlug::InvalidTransactionState,
        format!(
            "Cannot {action} a transaction that is {} {}",
            tx.tx_kind, tx.status
        ),
    )
}

fn insufficient_funds() -> ApiError {
    ApiError::new(ErrorSlug::InsufficientFunds, "Insufficient card funds")
}

pub(crate) fn kind_of(tx: &CardTxRecord) -> Result<(TxKind, TxStatus), ApiError> {
    match (TxKind::parse(&tx.tx_kind), TxStatus::parse(&tx.status)) {
        (Some(k), Some(s)) => Ok((k, s)),
        _ => {
            tracing::error!(transaction_id = %tx.id, "card transaction has an unknown kind or status");
            Err(ApiError::internal())
        }
    }
}

/// Reads a card and locks its funds and hold accounts (in that order, the ledger's
/// lock order), so every message on one card is serialised on PostgreSQL before it
/// touches the network account; SQLite's write transaction serialises already.
pub(crate) async fn lock_card(
    conn: &mut Conn,
    _state: &AppState,
    project_id: &str,
    card_id: &str,
) -> Result<CardRecord, ApiError> {
    Ok(lock_card_with_funds(conn, project_id, card_id).await?.0)
}

/// `lock_card`, also answering the card's available funds as read under the lock.
pub(crate) async fn lock_card_with_funds(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
) -> Result<(CardRecord, Amount), ApiError> {
    if let Some(found) = cards::get_locking_funds(conn, project_id, card_id).await? {
        return Ok(found);
    }
    // No card, or a card without accounts: answered as before the joined read.
    let card = cards::get(conn, project_id, card_id)
        .await?
        .ok_or_else(card_not_found)?;
    let (available, _) = ledger::lock_card_accounts(conn, project_id, card_id).await?;
    Ok((card, available))
}

/// Opens the transaction a message names: its card's accounts locked, then the
/// transaction re-read under that lock (the state its update will be conditional on).
pub(crate) async fn open_tx(
    state: &AppState,
    project_id: &str,
    transaction_id: &str,
) -> Result<(Tx, CardRecord, CardTxRecord), ApiError> {
    let mut tx = state.store.begin().await?;
    let found = card_txs::get(&mut tx, project_id, transaction_id)
        .await?
        .ok_or_else(tx_not_found)?;
    let card = lock_card(&mut tx, state, project_id, &found.card_id).await?;
    let current = card_txs::get(&mut tx, project_id, transaction_id)
        .await?
        .ok_or_else(tx_not_found)?;
    Ok((tx, card, current))
}

/// Opens a card a posting without an authorization lands on (force post, unlinked
/// refund): it must have been issued.
pub(crate) async fn open_issued_card(
    state: &AppState,
    project_id: &str,
    card_id: &str,
) -> Result<(Tx, CardRecord), ApiError> {
    let mut tx = state.store.begin().await?;
    let card = lock_card(&mut tx, state, project_id, card_id).await?;
    if card.provider_card_id.is_none() {
        return Err(ApiError::new(
            ErrorSlug::CardNotActive,
            format!("Card is {}: it was never issued", card.status),
        ));
    }
    Ok((tx, card))
}

/// Which account of the card a move touches.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Side {
    Funds,
    Hold,
    Network,
}

/// Moves `micros` between two accounts of the card of transaction `t`, tagged with
/// the card and the transaction. Zero moves nothing.
pub(crate) async fn post(
    conn: &mut Conn,
    t: &CardTxRecord,
    kind: TransferKind,
    from: Side,
    to: Side,
    micros: i64,
) -> Result<(), StoreError> {
    let (project_id, card_id, transaction_id) = (&t.project_id, &t.card_id, &t.id);
    if micros == 0 {
        return Ok(());
    }
    async fn account(
        conn: &mut Conn,
        project_id: &str,
        card_id: &str,
        side: Side,
    ) -> Result<String, StoreError> {
        let kind = match side {
            Side::Funds => AccountKind::Card,
            Side::Hold => AccountKind::CardHold,
            Side::Network => {
                return ledger::project_account(conn, project_id, AccountKind::Network).await
            }
        };
        ledger::card_account_id(conn, project_id, card_id, kind).await
    }
    let from = account(conn, project_id, card_id, from).await?;
    let to = account(conn, project_id, card_id, to).await?;
    let t = Transfer::simple(kind, from, to, Amount::from_micros(micros))
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
    ledger::post(conn, &meta, &t).await.map(|_| ())
}

/// Writes the `card_transaction` event of a transaction's new state, and records the
/// network message that caused it.
pub(crate) async fn emit(
    tx: &mut Conn,
    card: &CardRecord,
    rec: &CardTxRecord,
    message_id: Option<&str>,
    message_kind: &str,
) -> Result<(), StoreError> {
    let item = view::item(rec, card);
    events::insert(
        tx,
        &NewEvent {
            project_id: &rec.project_id,
            event_type: "card_transaction",
            card_id: Some(&rec.card_id),
            order_id: None,
            payload: &item,
            now: rec.updated_at,
        },
    )
    .await?;
    if let Some(id) = message_id {
        card_txs::record_message(
            tx,
            &rec.project_id,
            id,
            &rec.id,
            message_kind,
            rec.updated_at,
        )
        .await?;
    }
    Ok(())
}

/// A fresh transaction record on `card` (ids and times filled in).
pub(crate) fn new_tx(
    card: &CardRecord,
    kind: TxKind,
    status: TxStatus,
    amount: i64,
    purchase: &Purchase,
    now: i64,
) -> CardTxRecord {
    CardTxRecord {
        id: new_id(),
        project_id: card.project_id.clone(),
        card_id: card.id.clone(),
        tx_kind: kind.as_str().into(),
        status: status.as_str().into(),
        tx_type: issuing_domain::card_tx::tx_type(true, kind, status),
        auth_amount: amount,
        held: 0,
        card_amount: amount,
        cleared: 0,
        refunded: 0,
        original_transaction_id: None,
        merchant: purchase.merchant.to_json(),
        merchant_currency: purchase.merchant_currency.clone(),
        merchant_amount: purchase.merchant_amount.micros(),
        failure_reason: None,
        hold_expires_at: None,
        created_at: now,
        updated_at: now,
    }
}

pub(crate) async fn commit(tx: Tx) -> Result<(), ApiError> {
    tx.commit().await.map_err(StoreError::from)?;
    Ok(())
}

/// Maps ledger and message errors of a network flow to API errors.
pub(crate) fn flow_error(e: StoreError) -> ApiError {
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
