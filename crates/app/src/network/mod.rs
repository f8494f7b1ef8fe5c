//! The card network's side of a card: the one entry point for authorization requests,
//! clearings, reversals and refunds. A real provider adapter calls `apply` when the
//! network sends a message; the sandbox's `simulate/cards/*` endpoints are thin callers
//! of the same function, and the hold expiry worker and `cards/close` use the release
//! path here too.
//!
//! Every message reads in one direction: its file (`authorize.rs`, `settle.rs`,
//! `release.rs`, `refund.rs`) reads what it acts on with the card's accounts locked,
//! decides a plan from it with pure code (`plan.rs`; an authorization's decision runs
//! the stages of `decide/`), and the one executor (`execute.rs`) applies the plan in one
//! database transaction: the state change (conditional on the state it was read in),
//! its ledger transfers and its `card_transaction` event commit together. A message
//! that carries a network message id is applied at most once: a replay answers the
//! transaction as it is now (once its decision webhook, if any, has answered).

pub mod auth_writer;
pub mod authorize;
pub mod controls;
pub mod decide;
pub mod decision;
pub mod execute;
pub mod limits;
pub mod plan;
mod refund;
pub mod release;
mod settle;
pub mod settlements;
pub mod simulate;
pub mod usage;
pub mod view;

use crate::App;
use issuing_domain::card_tx::{TxKind, TxStatus};
use issuing_store::card_txs::{self, CardTxRecord};
use issuing_store::cards::{self, CardRecord};
use issuing_store::Conn;
use issuing_wire::{Amount, ApiError, ErrorSlug};
use std::time::Instant;

/// The longest network message id kept (the same bound as an idempotency key).
const MAX_MESSAGE_ID_LEN: usize = 255;

/// The merchant of a card transaction.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Merchant {
    pub name: String,
    pub mcc: String,
    pub country: String,
}

impl Merchant {
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "name": self.name, "mcc": self.mcc, "country": self.country })
    }
}

/// Where the money was spent, in the merchant's currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Purchase {
    pub merchant: Merchant,
    /// ISO 4217, upper case.
    pub merchant_currency: String,
    pub merchant_amount: Amount,
}

/// Where a message that takes money out of a card comes from, which decides what
/// happens when the card cannot pay it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The sandbox's simulator (`simulate/cards/*`, the console): a settlement beyond
    /// the card's funds is refused (403 `insufficient_funds`) and nothing changes.
    Sandbox,
    /// A real card network (a provider's events): the settlement already happened
    /// there and is never refused; what the card lacks is the project's shortfall
    /// (`docs/money.md`, Shortfalls).
    Network,
}

/// A message from the card network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
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
        origin: Origin,
    },
    /// A posting without an authorization.
    ForcePost {
        card_id: String,
        bill_amount: Amount,
        purchase: Purchase,
        origin: Origin,
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
pub struct Applied {
    pub tx: CardTxRecord,
    pub card: CardRecord,
}

/// Applies one network message for a project's card. `message_id` is the network's id
/// of the message: a message already applied is not applied again, and its transaction
/// is answered as it is now. An authorization waits for the project's decision webhook
/// (within its own `timeout_ms`).
pub async fn apply(
    state: &App,
    project_id: &str,
    message_id: Option<&str>,
    message: Message,
) -> Result<Applied, ApiError> {
    apply_within(state, project_id, message_id, message, None).await
}

/// `apply` for a caller with a deadline of its own (a provider's ASA budget): an
/// authorization's decision webhook must have answered by `decision_deadline`. What
/// remains is measured when the authorization is decided, after its wait for the
/// writer; less than `MIN_CALL` decides by `on_timeout` without a call.
pub async fn apply_within(
    state: &App,
    project_id: &str,
    message_id: Option<&str>,
    message: Message,
    decision_deadline: Option<Instant>,
) -> Result<Applied, ApiError> {
    if let Some(id) = message_id {
        // Stored in a primary key: PostgreSQL refuses index entries above ~2.7 KB.
        if id.len() > MAX_MESSAGE_ID_LEN {
            return Err(ApiError::validation(format!(
                "network_message_id must be at most {MAX_MESSAGE_ID_LEN} bytes"
            )));
        }
        // An authorization's writer looks its message up in its batch, with the copies
        // queued beside it; a read here first would cost every authorization a query.
        let authorization = matches!(message, Message::Authorization { .. });
        if !authorization {
            if let Some(applied) = already_applied(state, project_id, id).await? {
                return decision::settled(state, applied).await;
            }
        }
    }
    let kind = message.kind();
    let result = match message {
        Message::Authorization {
            card_id,
            amount,
            purchase,
        } => {
            let authorized = authorize::authorize(
                state,
                project_id,
                &card_id,
                amount,
                &purchase,
                message_id,
                decision_deadline,
            )
            .await;
            match authorized {
                Ok(authorize::Authorized::Done(applied)) => decision::settled(state, applied).await,
                Ok(authorize::Authorized::Awaiting(applied, ask)) => {
                    decision::ask(state, applied, ask).await
                }
                Ok(authorize::Authorized::Replayed { message_id }) => {
                    match already_applied(state, project_id, &message_id).await? {
                        Some(applied) => decision::settled(state, applied).await,
                        None => Err(ApiError::internal()),
                    }
                }
                Err(e) => Err(e),
            }
        }
        Message::Clearing {
            transaction_id,
            bill_amount,
            origin,
        } => {
            let clearing = settle::Clearing {
                transaction_id: &transaction_id,
                bill_amount,
            };
            settle::clear(state, project_id, clearing, origin, message_id).await
        }
        Message::ForcePost {
            card_id,
            bill_amount,
            purchase,
            origin,
        } => {
            let post = settle::ForcePost {
                card_id: &card_id,
                bill_amount,
                purchase: &purchase,
            };
            settle::force_post(state, project_id, post, origin, message_id).await
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
                Some(applied) => decision::settled(state, applied).await,
                None => Err(e),
            }
        }
        (result, _) => {
            if let Err(e) = &result {
                tracing::debug!(message = kind, slug = %e.slug, "network message refused");
            } else if kind != "authorization" {
                // An authorization's writer wakes the worker when it queued deliveries.
                state.deliveries_wakeup.notify_one();
            }
            result
        }
    }
}

async fn already_applied(
    state: &App,
    project_id: &str,
    message_id: &str,
) -> Result<Option<Applied>, ApiError> {
    let mut conn = state.store.conn().await?;
    applied_on(&mut conn, project_id, message_id).await
}

/// The transaction a network message already made, as `conn` sees it (inside a group
/// commit batch, that includes copies applied earlier in the same batch).
pub async fn applied_on(
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

fn wrong_state(tx: &CardTxRecord, action: &str) -> ApiError {
    let awaiting = if tx.awaiting_decision() {
        " awaiting its decision webhook"
    } else {
        ""
    };
    ApiError::new(
        ErrorSlug::InvalidTransactionState,
        format!(
            "Cannot {action} a transaction that is {} {}{awaiting}",
            tx.tx_kind, tx.status
        ),
    )
}

pub fn kind_of(tx: &CardTxRecord) -> Result<(TxKind, TxStatus), ApiError> {
    match (TxKind::parse(&tx.tx_kind), TxStatus::parse(&tx.status)) {
        (Some(k), Some(s)) => Ok((k, s)),
        _ => {
            tracing::error!(transaction_id = %tx.id, "card transaction has an unknown kind or status");
            Err(ApiError::internal())
        }
    }
}

#[cfg(test)]
pub mod tests {
    //! Fixtures for the unit tests of the plans and stages.
    use super::*;

    pub fn card() -> CardRecord {
        CardRecord {
            id: "card".into(),
            project_id: "project".into(),
            user_id: "user".into(),
            external_user_id: "ext".into(),
            cardholder_id: "holder".into(),
            product_code: "virtual_usd".into(),
            subprovider_code: "sandbox".into(),
            card_currency: "USD".into(),
            status: "active".into(),
            label: Some("1234".into()),
            provider_card_id: Some("p".into()),
            secrets_enc: None,
            expiry_month: None,
            expiry_year: None,
            created_at: 0,
            updated_at: 0,
            issued_at: None,
            activated_at: None,
            frozen_at: None,
            closed_at: None,
            limits: None,
            limits_timezone: None,
        }
    }

    pub fn purchase() -> Purchase {
        Purchase {
            merchant: Merchant {
                name: "Shop".into(),
                mcc: "5411".into(),
                country: "US".into(),
            },
            merchant_currency: "USD".into(),
            merchant_amount: Amount::from_micros(1),
        }
    }
}
