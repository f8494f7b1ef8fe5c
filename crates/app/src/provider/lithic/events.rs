//! Lithic's event deliveries (CONTRACT §14), signed like ASA requests with the event
//! subscription's secret: `card_transaction.updated` carries the transaction with all
//! its `events[]` so far, and each event is applied once, in `created` order, keyed by
//! its token (`lithic:event:<token>` as the network message id). Deliveries may repeat
//! and arrive out of order; each one is applied alone. `account_holder.*` events update
//! KYC. Other event types are acknowledged and ignored.
//!
//! Our answer is 200 when every event of the delivery is applied or ignored. An event
//! that could not be applied answers 500 so that Lithic delivers the transaction again;
//! the events after it wait for that delivery.

use super::asa::{message_id as asa_message_id, purchase_of};
use super::{verified, LithicProvider, Reply, Signed, Which};
use crate::network::{self, Message, Origin, Purchase};
use crate::App;
use issuing_domain::card_tx::{is_open_auth, TxKind, TxStatus};
use issuing_domain::lithic::{cents_to_amount, event_action, EventAction, Known};
use issuing_domain::time::now_micros;
use issuing_store::card_txs::{self, CardTxRecord};
use issuing_store::cards::{self, CardRecord};
use issuing_store::lithic::{self as records, SeenEvent};
use issuing_wire::{ApiError, ErrorSlug};
use serde_json::{json, Value};
use std::sync::Arc;

/// A transaction carries a handful of events; far more is not a card transaction.
const MAX_EVENTS: usize = 1000;

/// The network message id of a transaction event: its token.
fn event_message_id(token: &str) -> String {
    format!("lithic:event:{token}")
}

/// `POST /provider/lithic/{subprovider_code}/events`: the answer to one signed delivery.
pub async fn events(state: &App, code: &str, signed: &Signed<'_>, body: &[u8]) -> Reply {
    let (lithic, value) = match verified(state, code, signed, body, Which::Events).await {
        Ok(v) => v,
        Err(refused) => return refused,
    };
    let event_type = value
        .get("event_type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let outcome = match event_type {
        "card_transaction.updated" => on_transaction(state, &lithic, &value).await,
        "account_holder.created" | "account_holder.verification" => {
            lithic.on_holder_event(state, event_type, &value).await
        }
        "embed.viewed" => on_embed_viewed(state, &lithic, signed.id, &value).await,
        _ => Ok(()),
    };
    match outcome {
        Ok(()) => Reply::ok(json!({"received": true})),
        Err(e) if e.slug == ErrorSlug::ValidationError => Reply::error(400, &e.message),
        Err(e) => {
            tracing::error!(subprovider = %code, event_type, slug = %e.slug, error = %e.message, "Lithic event not applied; Lithic will deliver it again");
            Reply::error(500, "not applied; deliver again")
        }
    }
}

/// `embed.viewed`: a cardholder saw one of a card's details in Lithic's embed
/// (CONTRACT §16). Recorded in the audit log once per delivery (keyed by its
/// `webhook-id`); a card we do not know is acknowledged and ignored.
async fn on_embed_viewed(
    state: &App,
    lithic: &Arc<LithicProvider>,
    webhook_id: Option<&str>,
    v: &Value,
) -> Result<(), ApiError> {
    let code = lithic.code();
    let field = |name: &str| v.get(name).and_then(Value::as_str).unwrap_or_default();
    let card_token = field("card_token");
    let Some(webhook_id) = webhook_id.filter(|id| !id.is_empty() && id.len() <= 128) else {
        return Err(ApiError::validation("the delivery has no webhook-id"));
    };
    let key = format!("embed.viewed:{webhook_id}");
    let now = now_micros();
    let mut tx = state.store.begin().await?;
    if records::event_outcome(&mut tx, code, &key).await?.is_some() {
        return Ok(());
    }
    let card = cards::by_provider_card(&mut tx, code, card_token).await?;
    let outcome = match &card {
        Some(card) => {
            issuing_store::audit::append(
                &mut tx,
                &issuing_store::audit::NewAudit {
                    at: now,
                    actor: "lithic",
                    action: issuing_domain::reveal::VIEWED_EVENT,
                    project_id: Some(&card.project_id),
                    targets: &json!({
                        "card_id": card.id,
                        "embed_type": field("embed_type"),
                        "session_id": field("session_id"),
                        "ip_address": v.pointer("/device_details/ip_address").and_then(Value::as_str),
                    }),
                    result: "viewed in Lithic's embed",
                },
            )
            .await?;
            "applied"
        }
        None => {
            tracing::warn!(subprovider = %code, "embed.viewed of a card we do not know; ignored");
            "ignored"
        }
    };
    records::record_event(
        &mut tx,
        &SeenEvent {
            subprovider_code: code,
            token: &key,
            event_type: "embed.viewed",
            transaction_token: "",
            outcome,
            now,
        },
    )
    .await?;
    tx.commit().await.map_err(issuing_store::StoreError::from)?;
    Ok(())
}

/// One event of a transaction, as we use it.
struct Event<'a> {
    token: &'a str,
    kind: &'a str,
    result: &'a str,
    /// Cents of the card's currency (`amounts.cardholder.amount`).
    amount_cents: i64,
    created: Option<chrono::DateTime<chrono::Utc>>,
    raw: &'a Value,
}

fn parse_event(v: &Value) -> Option<Event<'_>> {
    let amount_cents = v
        .get("amounts")
        .and_then(|a| a.get("cardholder"))
        .and_then(|c| c.get("amount"))
        .or_else(|| v.get("amount"))
        .and_then(Value::as_i64)?;
    Some(Event {
        token: v.get("token")?.as_str()?,
        kind: v.get("type")?.as_str()?,
        result: v
            .get("result")
            .and_then(Value::as_str)
            .unwrap_or("APPROVED"),
        amount_cents,
        created: v
            .get("created")
            .and_then(Value::as_str)
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
            .map(|t| t.with_timezone(&chrono::Utc)),
        raw: v,
    })
}

async fn on_transaction(
    state: &App,
    lithic: &Arc<LithicProvider>,
    tx: &Value,
) -> Result<(), ApiError> {
    let code = lithic.code();
    let (Some(tx_token), Some(card_token)) = (
        tx.get("token").and_then(Value::as_str),
        tx.get("card_token").and_then(Value::as_str),
    ) else {
        return Err(ApiError::validation(
            "the transaction has no token or card_token",
        ));
    };
    let raw_events = tx
        .get("events")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    if raw_events.len() > MAX_EVENTS {
        return Err(ApiError::validation("too many events in one transaction"));
    }
    let mut events = raw_events
        .iter()
        .map(parse_event)
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| ApiError::validation("an event has no token, type or amount"))?;
    // In `created` order; the list order breaks ties (a stable sort).
    events.sort_by_key(|e| e.created);
    let card = {
        let mut conn = state.store.conn().await?;
        cards::by_provider_card(&mut conn, code, card_token).await?
    };
    let Some(card) = card else {
        tracing::warn!(subprovider = %code, "transaction of a card we do not know; ignored");
        return Ok(());
    };
    for event in &events {
        let kind = static_kind(event.kind);
        match apply_event(state, code, &card, tx, tx_token, event).await {
            Ok(outcome) => state.metrics.provider.event(code, kind, outcome),
            Err(e) => {
                state.metrics.provider.event(code, kind, "failed");
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Applies one event once; answers its outcome for the metrics.
async fn apply_event(
    state: &App,
    code: &str,
    card: &CardRecord,
    tx: &Value,
    tx_token: &str,
    event: &Event<'_>,
) -> Result<&'static str, ApiError> {
    let project_id = card.project_id.as_str();
    let id = event_message_id(event.token);
    {
        let mut conn = state.store.conn().await?;
        if records::event_outcome(&mut conn, code, event.token)
            .await?
            .is_some()
        {
            return Ok("duplicate");
        }
        // Applied before a crash left it unrecorded.
        if card_txs::message_applied(&mut conn, project_id, &id)
            .await?
            .is_some()
        {
            record(state, code, event, tx_token, "applied").await?;
            return Ok("duplicate");
        }
    }
    let ours = our_transaction(state, code, project_id, tx_token).await?;
    let known = match &ours {
        None => Known::Unknown,
        Some(t) => match (TxKind::parse(&t.tx_kind), TxStatus::parse(&t.status)) {
            (Some(k), Some(s)) if is_open_auth(k, s) => Known::OpenAuth,
            _ => Known::Settled,
        },
    };
    let action = event_action(event.kind, event.result, known);
    let Some(message) = message_for(action, card, ours.as_ref(), tx, event) else {
        record(state, code, event, tx_token, "ignored").await?;
        return Ok("ignored");
    };
    let applied = match network::apply(state, project_id, Some(&id), message).await {
        Ok(applied) => applied,
        // A card that was never issued takes no posting.
        Err(e) if e.slug == ErrorSlug::CardNotActive => {
            record(state, code, event, tx_token, "ignored").await?;
            return Ok("ignored");
        }
        // Anything else (a clearing or force post is never refused for funds: its
        // shortfall is the project's) answers 500, and Lithic delivers it again.
        Err(e) => return Err(e),
    };
    {
        let mut conn = state.store.conn().await?;
        records::map_transaction(
            &mut conn,
            code,
            tx_token,
            project_id,
            &applied.tx.id,
            now_micros(),
        )
        .await?;
    }
    record(state, code, event, tx_token, "applied").await?;
    Ok("applied")
}

/// The network message of an event's action; None when it changes nothing.
fn message_for(
    action: EventAction,
    card: &CardRecord,
    ours: Option<&CardTxRecord>,
    tx: &Value,
    event: &Event<'_>,
) -> Option<Message> {
    // Debits arrive positive; a RETURN's sign depends on how it is reported, its
    // direction does not.
    let cents = if action == EventAction::Refund {
        event.amount_cents.checked_abs()?
    } else {
        event.amount_cents
    };
    let amount = cents_to_amount(cents).filter(|a| a.micros() >= 0)?;
    let purchase = || -> Purchase {
        purchase_of(
            tx.get("merchant"),
            event.raw.get("amounts").and_then(|a| a.get("merchant")),
        )
    };
    let positive = amount.micros() > 0;
    match (action, ours) {
        (EventAction::Clear, Some(t)) => Some(Message::Clearing {
            transaction_id: t.id.clone(),
            bill_amount: Some(amount),
            origin: Origin::Network,
        }),
        (EventAction::ForcePost, _) if positive => Some(Message::ForcePost {
            card_id: card.id.clone(),
            bill_amount: amount,
            purchase: purchase(),
            origin: Origin::Network,
        }),
        (EventAction::ReleasePart, Some(t)) if positive => Some(Message::Reversal {
            transaction_id: t.id.clone(),
            // Never more than is held.
            amount: (amount.micros() < t.held).then_some(amount),
        }),
        (EventAction::ReleaseAll, Some(t)) => Some(Message::Reversal {
            transaction_id: t.id.clone(),
            amount: None,
        }),
        (EventAction::Refund, _) if positive => Some(Message::UnlinkedRefund {
            card_id: card.id.clone(),
            amount,
            purchase: purchase(),
        }),
        _ => None,
    }
}

/// Our transaction of a Lithic transaction: the one its ASA request made (keyed by the
/// request's message id, so the ASA path writes no mapping of its own), else the one an
/// earlier event of it made (a force post), as mapped then.
async fn our_transaction(
    state: &App,
    code: &str,
    project_id: &str,
    tx_token: &str,
) -> Result<Option<CardTxRecord>, ApiError> {
    let mut conn = state.store.conn().await?;
    let id =
        match card_txs::message_applied(&mut conn, project_id, &asa_message_id(tx_token)).await? {
            Some(id) => Some(id),
            None => match records::transaction_of(&mut conn, code, tx_token).await? {
                Some((p, id)) if p == project_id => Some(id),
                _ => None,
            },
        };
    match id {
        Some(id) => Ok(card_txs::get(&mut conn, project_id, &id).await?),
        None => Ok(None),
    }
}

async fn record(
    state: &App,
    code: &str,
    event: &Event<'_>,
    tx_token: &str,
    outcome: &str,
) -> Result<(), ApiError> {
    let mut conn = state.store.conn().await?;
    records::record_event(
        &mut conn,
        &SeenEvent {
            subprovider_code: code,
            token: event.token,
            event_type: event.kind,
            transaction_token: tx_token,
            outcome,
            now: now_micros(),
        },
    )
    .await?;
    Ok(())
}

/// Lithic's event types as static names for the metrics (a bounded label).
fn static_kind(kind: &str) -> &'static str {
    const KINDS: [&str; 14] = [
        "AUTHORIZATION",
        "AUTHORIZATION_ADVICE",
        "AUTHORIZATION_EXPIRY",
        "AUTHORIZATION_REVERSAL",
        "BALANCE_INQUIRY",
        "CLEARING",
        "CORRECTION_CREDIT",
        "CORRECTION_DEBIT",
        "CREDIT_AUTHORIZATION",
        "CREDIT_AUTHORIZATION_ADVICE",
        "FINANCIAL_AUTHORIZATION",
        "FINANCIAL_CREDIT_AUTHORIZATION",
        "RETURN",
        "RETURN_REVERSAL",
    ];
    KINDS.into_iter().find(|k| *k == kind).unwrap_or("OTHER")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn events_sort_by_created_then_list_order() {
        let list = json!([
            {"token": "b", "type": "CLEARING", "amount": 5, "created": "2024-01-01T00:00:02Z"},
            {"token": "a", "type": "AUTHORIZATION", "amount": 5, "created": "2024-01-01T00:00:01Z"},
            {"token": "c", "type": "RETURN", "amount": 5, "created": "2024-01-01T00:00:02Z",
             "amounts": {"cardholder": {"amount": -7}}},
        ]);
        let mut events: Vec<Event> = list
            .as_array()
            .unwrap()
            .iter()
            .map(|v| parse_event(v).unwrap())
            .collect();
        events.sort_by_key(|e| e.created);
        let order: Vec<&str> = events.iter().map(|e| e.token).collect();
        assert_eq!(order, ["a", "b", "c"]);
        assert_eq!(events[2].amount_cents, -7);
        assert_eq!(events[0].result, "APPROVED");
        assert_eq!(static_kind("CLEARING"), "CLEARING");
        assert_eq!(static_kind("SOMETHING"), "OTHER");
        assert_eq!(event_message_id("e"), "lithic:event:e");
    }
}
