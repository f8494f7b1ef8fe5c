//! Lithic's event deliveries (CONTRACT §14), signed like ASA requests with the event
//! subscription's secret: `card_transaction.updated` carries the transaction with all
//! its `events[]` so far, and each event is applied once, in `created` order, keyed by
//! its token (`lithic:event:<token>` as the network message id). Deliveries may repeat
//! and arrive out of order; each one is applied alone. `account_holder.*` events update
//! KYC; `dispute.updated` moves our dispute (`disputes.rs`). Other event types are
//! acknowledged and ignored.
//!
//! Our answer is 200 when every event of the delivery is applied or ignored. An event
//! that could not be applied answers 500 so that Lithic delivers the transaction again;
//! the events after it wait for that delivery. A delivery that is not a message we can
//! apply (`inbound`: a field missing, of the wrong form or out of range) would fail the
//! same way every time: it is acknowledged (200, `"applied": false`), logged and
//! counted, and nothing of it is applied.

use super::asa::message_id as asa_message_id;
use super::inbound::{self, nested, BadMessage, Token};
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
fn event_message_id(token: &Token) -> String {
    format!("lithic:event:{token}")
}

/// `POST /provider/lithic/{subprovider_code}/events`: the answer to one signed delivery.
pub async fn events(state: &App, code: &str, signed: &Signed<'_>, body: &[u8]) -> Reply {
    let lithic = match verified(state, code, signed, body, Which::Events).await {
        Ok(v) => v,
        Err(refused) => return refused,
    };
    let value = match inbound::body(body) {
        Ok(v) => v,
        Err(e) => return malformed(state, code, "", &e.to_string()),
    };
    // Free of control characters (`inbound::body`); a type we do not handle is ignored.
    let event_type = value
        .get("event_type")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let outcome = match event_type {
        "card_transaction.updated" => match Delivery::parse(&value) {
            Ok(delivery) => on_transaction(state, &lithic, &delivery).await,
            Err(e) => return malformed(state, code, event_type, &e.to_string()),
        },
        "account_holder.created" | "account_holder.verification" => {
            match Token::at(&value, "token") {
                Ok(_) => lithic.on_holder_event(state, event_type, &value).await,
                Err(e) => return malformed(state, code, event_type, &e.to_string()),
            }
        }
        "dispute.updated" => match super::disputes::DisputeUpdated::parse(&value) {
            Ok(u) => match super::disputes::on_updated(state, &lithic, &u).await {
                Ok(reply) => return reply,
                Err(e) => Err(e),
            },
            Err(e) => return malformed(state, code, event_type, &e.to_string()),
        },
        "embed.viewed" => match EmbedViewed::parse(&value) {
            Ok(viewed) => on_embed_viewed(state, &lithic, signed.id, &viewed).await,
            Err(e) => return malformed(state, code, event_type, &e.to_string()),
        },
        _ => Ok(()),
    };
    match outcome {
        Ok(()) => Reply::ok(json!({"received": true})),
        // Refused for what the delivery holds: delivered again, it would be again.
        Err(e) if e.slug == ErrorSlug::ValidationError => {
            malformed(state, code, event_type, &e.message)
        }
        Err(e) => {
            tracing::error!(subprovider = %code, event_type, slug = %e.slug, error = %e.message, "Lithic event not applied; Lithic will deliver it again");
            Reply::error(500, "not applied; deliver again")
        }
    }
}

/// A delivery we cannot apply as it is, acknowledged so that Lithic does not send it
/// again (its event subscription retries anything but a 2xx): nothing of it is applied.
/// The warning names the field, for an operator to take up with Lithic.
fn malformed(state: &App, code: &str, event_type: &str, why: &str) -> Reply {
    tracing::warn!(subprovider = %code, event_type, reason = %why, "malformed Lithic event delivery acknowledged and not applied");
    if event_type == "card_transaction.updated" {
        state.metrics.provider.event(code, "OTHER", "malformed");
    }
    Reply::ok(json!({"received": true, "applied": false, "error": why}))
}

/// The fields of an `embed.viewed` event we use, parsed.
struct EmbedViewed {
    card_token: Token,
    embed_type: String,
    session_id: String,
    ip_address: Option<String>,
}

impl EmbedViewed {
    fn parse(v: &Value) -> Result<EmbedViewed, BadMessage> {
        let device = inbound::object(v, "device_details")?;
        let ip_address = match device {
            Some(d) => inbound::text(d, "ip_address").map_err(|e| nested("device_details", e))?,
            None => None,
        };
        Ok(EmbedViewed {
            card_token: Token::at(v, "card_token")?,
            embed_type: inbound::text(v, "embed_type")?
                .unwrap_or_default()
                .to_owned(),
            session_id: inbound::text(v, "session_id")?
                .unwrap_or_default()
                .to_owned(),
            ip_address: ip_address.map(str::to_owned),
        })
    }
}

/// `embed.viewed`: a cardholder saw one of a card's details in Lithic's embed
/// (CONTRACT §16). Recorded in the audit log once per delivery (keyed by its
/// `webhook-id`); a card we do not know is acknowledged and ignored.
async fn on_embed_viewed(
    state: &App,
    lithic: &Arc<LithicProvider>,
    webhook_id: Option<&str>,
    v: &EmbedViewed,
) -> Result<(), ApiError> {
    let code = lithic.code();
    let Some(webhook_id) = webhook_id.filter(|id| !id.is_empty() && id.len() <= 128) else {
        return Err(ApiError::validation("the delivery has no webhook-id"));
    };
    let key = format!("embed.viewed:{webhook_id}");
    let now = now_micros();
    let mut tx = state.store.begin().await?;
    if records::event_outcome(&mut tx, code, &key).await?.is_some() {
        return Ok(());
    }
    let card = cards::by_provider_card(&mut tx, code, v.card_token.as_str()).await?;
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
                        "embed_type": v.embed_type,
                        "session_id": v.session_id,
                        "ip_address": v.ip_address,
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

/// One event of a transaction, as we use it, parsed (`inbound`).
struct Event {
    token: Token,
    kind: String,
    result: String,
    /// Cents of the card's currency (`amounts.cardholder.amount`), within our bound.
    amount_cents: i64,
    created: Option<chrono::DateTime<chrono::Utc>>,
    /// The transaction's merchant with this event's merchant amount.
    purchase: Purchase,
}

impl Event {
    /// The event `v` of the transaction `tx`.
    fn parse(tx: &Value, v: &Value) -> Result<Event, BadMessage> {
        if !v.is_object() {
            return Err(BadMessage::new("", "must be an object"));
        }
        Ok(Event {
            token: Token::at(v, "token")?,
            kind: inbound::required_text(v, "type")?.to_owned(),
            result: inbound::text(v, "result")?.unwrap_or("APPROVED").to_owned(),
            amount_cents: inbound::cardholder_cents(v)?,
            // Only orders the events: a time we cannot read sorts first, as before.
            created: inbound::text(v, "created")?
                .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                .map(|t| t.with_timezone(&chrono::Utc)),
            purchase: inbound::purchase(tx, v)?,
        })
    }
}

/// A `card_transaction.updated` delivery, parsed: its events in `created` order (the
/// list order breaks ties).
struct Delivery {
    token: Token,
    card_token: Token,
    events: Vec<Event>,
}

impl Delivery {
    fn parse(tx: &Value) -> Result<Delivery, BadMessage> {
        let token = Token::at(tx, "token")?;
        let card_token = Token::at(tx, "card_token")?;
        let raw = match tx.get("events") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(list)) => list.as_slice(),
            Some(_) => return Err(BadMessage::new("events", "must be a list")),
        };
        if raw.len() > MAX_EVENTS {
            return Err(BadMessage::new("events", "holds too many events"));
        }
        let mut events = raw
            .iter()
            .enumerate()
            .map(|(i, v)| Event::parse(tx, v).map_err(|e| nested(&format!("events[{i}]"), e)))
            .collect::<Result<Vec<_>, _>>()?;
        events.sort_by_key(|e| e.created);
        Ok(Delivery {
            token,
            card_token,
            events,
        })
    }
}

async fn on_transaction(
    state: &App,
    lithic: &Arc<LithicProvider>,
    delivery: &Delivery,
) -> Result<(), ApiError> {
    let code = lithic.code();
    let card = {
        let mut conn = state.store.conn().await?;
        cards::by_provider_card(&mut conn, code, delivery.card_token.as_str()).await?
    };
    let Some(card) = card else {
        tracing::warn!(subprovider = %code, "transaction of a card we do not know; ignored");
        return Ok(());
    };
    for event in &delivery.events {
        let kind = static_kind(&event.kind);
        match apply_event(state, code, &card, &delivery.token, event).await {
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
    tx_token: &Token,
    event: &Event,
) -> Result<&'static str, ApiError> {
    let project_id = card.project_id.as_str();
    let id = event_message_id(&event.token);
    {
        let mut conn = state.store.conn().await?;
        if records::event_outcome(&mut conn, code, event.token.as_str())
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
    let action = event_action(&event.kind, &event.result, known);
    let Some(message) = message_for(action, card, ours.as_ref(), event) else {
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
            tx_token.as_str(),
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
    event: &Event,
) -> Option<Message> {
    // Debits arrive positive; a RETURN's sign depends on how it is reported, its
    // direction does not.
    let cents = if action == EventAction::Refund {
        event.amount_cents.checked_abs()?
    } else {
        event.amount_cents
    };
    let amount = cents_to_amount(cents).filter(|a| a.micros() >= 0)?;
    let purchase = || event.purchase.clone();
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
    tx_token: &Token,
) -> Result<Option<CardTxRecord>, ApiError> {
    let mut conn = state.store.conn().await?;
    let id =
        match card_txs::message_applied(&mut conn, project_id, &asa_message_id(tx_token)).await? {
            Some(id) => Some(id),
            None => match records::transaction_of(&mut conn, code, tx_token.as_str()).await? {
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
    event: &Event,
    tx_token: &Token,
    outcome: &str,
) -> Result<(), ApiError> {
    let mut conn = state.store.conn().await?;
    records::record_event(
        &mut conn,
        &SeenEvent {
            subprovider_code: code,
            token: event.token.as_str(),
            event_type: &event.kind,
            transaction_token: tx_token.as_str(),
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

    fn token(c: char) -> String {
        format!("{}-0000-4000-8000-000000000000", c.to_string().repeat(8))
    }

    fn delivery(events: Value) -> Value {
        json!({"token": token('1'), "card_token": token('2'), "events": events,
               "merchant": {"descriptor": "SHOP", "mcc": "5999", "country": "USA"}})
    }

    #[test]
    fn events_sort_by_created_then_list_order() {
        let list = json!([
            {"token": token('b'), "type": "CLEARING", "amount": 5, "created": "2024-01-01T00:00:02Z"},
            {"token": token('a'), "type": "AUTHORIZATION", "amount": 5, "created": "2024-01-01T00:00:01Z"},
            {"token": token('c'), "type": "RETURN", "amount": 5, "created": "2024-01-01T00:00:02Z",
             "amounts": {"cardholder": {"amount": -7}}},
        ]);
        let d = Delivery::parse(&delivery(list)).unwrap();
        let order: Vec<String> = d.events.iter().map(|e| e.token.to_string()).collect();
        assert_eq!(order, [token('a'), token('b'), token('c')]);
        assert_eq!(d.events[2].amount_cents, -7);
        assert_eq!(d.events[0].result, "APPROVED");
        assert_eq!(d.events[0].purchase.merchant.country, "US");
        assert_eq!(static_kind("CLEARING"), "CLEARING");
        assert_eq!(static_kind("SOMETHING"), "OTHER");
        assert_eq!(
            event_message_id(&d.events[0].token),
            format!("lithic:event:{}", token('a'))
        );
        assert!(
            Delivery::parse(&json!({"token": token('1'), "card_token": token('2')}))
                .unwrap()
                .events
                .is_empty()
        );
    }

    #[test]
    fn refuses_deliveries_it_cannot_apply_naming_the_field() {
        let good = json!({"token": token('e'), "type": "CLEARING", "amount": 5});
        let field = |v: Value| Delivery::parse(&v).err().map(|e| e.field);
        let mut d = delivery(json!([good]));
        d["token"] = json!("x".repeat(245));
        assert_eq!(field(d).as_deref(), Some("token"));
        let mut d = delivery(json!([good]));
        d["card_token"] = json!(format!("{}\u{0}", &token('2')[..35]));
        assert_eq!(field(d).as_deref(), Some("card_token"));
        let mut bad_type = good.clone();
        bad_type["type"] = json!(1);
        assert_eq!(
            field(delivery(json!([good, bad_type]))).as_deref(),
            Some("events[1].type")
        );
        let mut bad_amount = good.clone();
        bad_amount["amount"] = json!(922_337_203_685_478_i64);
        assert_eq!(
            field(delivery(json!([bad_amount]))).as_deref(),
            Some("events[0].amount")
        );
        assert_eq!(field(delivery(json!([1]))).as_deref(), Some("events[0]"));
        assert_eq!(field(delivery(json!({"a": 1}))).as_deref(), Some("events"));
        let many: Vec<Value> = (0..=MAX_EVENTS).map(|_| good.clone()).collect();
        assert_eq!(field(delivery(json!(many))).as_deref(), Some("events"));
    }
}
