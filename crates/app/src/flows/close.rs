//! cards/close (beyond the spec, which names the `closed` status but not how a card
//! gets there). A card that is `active` or `frozen` is closed at the provider, then in
//! one transaction: its open holds are released (approved reversals with
//! `failure_reason` `card_closed`; an authorization still awaiting its decision webhook
//! is declined `card_not_active`), it becomes `closed`, its remaining funds start
//! their way back to the master balance through a `card_withdraw` order, and a
//! completed `card_status_change` order with its `card.close` event is written.
//! `closed` is final: auths are declined, topups refused (`card_not_active`), freeze
//! and unfreeze refused (`invalid_status_transition`); clearings and refunds of
//! earlier authorizations still land on it, and what they bring back can be taken
//! with `cards/withdraw`, which accepts closed cards.

use super::card_for_user;
use super::money::{self, Acct};
use super::orders::answer as order_answer;
use crate::idempotency::IdempotencyToken;
use crate::network::{decision, execute, release};
use crate::App;
use issuing_domain::card_tx::{DECLINE_CARD_NOT_ACTIVE, REASON_CARD_CLOSED};
use issuing_domain::ids::new_id;
use issuing_domain::ledger::{AccountKind, TransferKind};
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_store::events::{self, NewEvent};
use issuing_store::orders::{self, OrderRecord};
use issuing_store::writer::AsBatch;
use issuing_store::{card_txs, cards, ledger, StoreError};
use issuing_wire::{Amount, ApiError, ErrorSlug};
use serde::Deserialize;
use serde_json::{json, Value};

/// Open holds released per query while closing; a card with more takes more rounds.
const RELEASE_BATCH: i64 = 500;
/// Rounds of `RELEASE_BATCH`: a card with more open holds than this cannot be closed
/// in one request (it is refused, and nothing changes).
const MAX_RELEASE_ROUNDS: usize = 20;
const MAX_REASON_LEN: usize = 256;

#[derive(Deserialize)]
pub struct CloseRequest {
    #[serde(default)]
    card_id: Option<String>,
    #[serde(default)]
    external_user_id: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

fn no_withdraw() -> ApiError {
    ApiError::new(
        ErrorSlug::ProviderWithdrawNotSupported,
        "The card holds funds and its provider does not support withdrawals",
    )
}

fn refused(current: &str) -> ApiError {
    ApiError::new(
        ErrorSlug::InvalidStatusTransition,
        format!("Cannot close a card whose status is {current}"),
    )
}

pub async fn close(
    state: &App,
    project_id: &str,
    req: CloseRequest,
    token: IdempotencyToken,
) -> Result<Value, ApiError> {
    let reason = req.reason.as_deref().map(str::trim).unwrap_or("");
    if reason.chars().count() > MAX_REASON_LEN || reason.chars().any(char::is_control) {
        return Err(ApiError::validation(format!(
            "reason must be at most {MAX_REASON_LEN} characters without control characters"
        )));
    }
    let card = {
        let mut conn = state.store.conn().await?;
        card_for_user(
            &mut conn,
            project_id,
            req.card_id.as_deref(),
            req.external_user_id.as_deref(),
        )
        .await?
    };
    if card.status != "active" && card.status != "frozen" {
        return Err(refused(&card.status));
    }
    let withdraw_supported = state
        .catalog()
        .subprovider(&card.subprovider_code)
        .is_some_and(|s| s.withdraw_supported);
    let provider_card_id = card
        .provider_card_id
        .clone()
        .ok_or_else(|| refused(&card.status))?;
    // Refuse before the provider is asked to close anything; checked again below.
    if !withdraw_supported {
        let mut conn = state.store.conn().await?;
        let (available, held) = ledger::card_funds(&mut conn, project_id, &card.id).await?;
        if available.micros() + held.micros() > 0 {
            return Err(no_withdraw());
        }
    }
    let order_id = new_id();
    crate::provider::bounded(
        state
            .providers
            .get(&card.subprovider_code)
            .close_card(&order_id, &provider_card_id),
    )
    .await
    .map_err(|e| crate::provider::failed_call(&card.id, "close", &e))?;

    let now = now_micros();
    let mut tx = state.store.begin().await?;
    // The lock order: in-flight before the card's accounts, as topups settle.
    ledger::lock_project_account(&mut tx.as_batch(), project_id, AccountKind::InFlight).await?;
    let card = execute::lock_card(&mut tx, project_id, &card.id)
        .await?
        .card;
    let from = card.status.clone();
    if from != "active" && from != "frozen" {
        return Err(refused(&from));
    }
    for round in 0.. {
        let open =
            card_txs::open_auths_of_card(&mut tx, project_id, &card.id, RELEASE_BATCH).await?;
        if open.is_empty() {
            break;
        }
        if round >= MAX_RELEASE_ROUNDS {
            return Err(ApiError::validation(
                "the card has too many open authorizations to close at once",
            ));
        }
        for auth in &open {
            if auth.awaiting_decision() {
                // Its decision can no longer approve it on a closed card: declined now,
                // and the decision webhook's answer, when it comes, changes nothing.
                decision::decline_awaiting(&mut tx, &card, auth, DECLINE_CARD_NOT_ACTIVE).await?;
            } else {
                release::release_all(&mut tx, &card, auth, REASON_CARD_CLOSED, "close").await?;
            }
        }
    }
    let (_, funds) = ledger::card_account(&mut tx, project_id, &card.id).await?;
    if funds.micros() > 0 && !withdraw_supported {
        return Err(no_withdraw());
    }
    if !cards::transition(
        &mut tx,
        project_id,
        &card.id,
        &from,
        "closed",
        Some("closed_at"),
        now,
    )
    .await?
    {
        return Err(refused("changing"));
    }
    let withdraw = if funds.micros() > 0 {
        Some(withdraw_funds(&mut tx, project_id, &card.id, funds, now).await?)
    } else {
        None
    };
    let mut data = json!({ "from": from, "to": "closed" });
    if !reason.is_empty() {
        data["reason"] = json!(reason);
    }
    if let Some(w) = &withdraw {
        data["withdraw_order_id"] = json!(w.id);
    }
    let order = OrderRecord {
        id: order_id.clone(),
        project_id: project_id.to_owned(),
        order_type: "card_status_change".into(),
        status: "completed".into(),
        card_id: Some(card.id.clone()),
        balance_before: None,
        balance_after: None,
        last_error: None,
        last_error_slug: None,
        data,
        issue_status: None,
        topup_status: None,
        is_issued: None,
        provider_card_status: Some("CLOSED".into()),
        attempts: 1,
        next_attempt_at: None,
        created_at: now,
        updated_at: now,
        completed_at: Some(now),
        failed_at: None,
    };
    orders::insert(&mut tx, &order).await?;
    let mut payload = json!({ "card_id": card.id, "order_id": order_id, "status": "closed" });
    if let Some(w) = &withdraw {
        payload["withdraw_order_id"] = json!(w.id);
        payload["amount"] = json!(funds);
    }
    events::insert(
        &mut tx,
        &NewEvent {
            project_id,
            event_type: "card.close",
            card_id: Some(&card.id),
            order_id: Some(&order_id),
            payload: &payload,
            now,
        },
    )
    .await?;
    let mut body = json!({
        "success": true,
        "card_id": card.id,
        "status": "closed",
        "closed_at": to_rfc3339(now),
        "order": order_answer(order),
    });
    if let Some(w) = withdraw {
        body["withdraw_order"] =
            serde_json::to_value(order_answer(w)).map_err(|_| ApiError::internal())?;
        issuing_store::wakeup::announce(&mut tx.as_batch(), issuing_store::wakeup::Queue::Orders)
            .await?;
    }
    token.complete(&mut tx, &body).await?;
    tx.commit().await.map_err(StoreError::from)?;
    state.orders_wakeup.notify_one();
    state.deliveries_wakeup.notify_one();
    Ok(body)
}

/// The card's remaining funds leave for the master balance: into in-flight now, on to
/// the master balance when the provider confirms the withdrawal (the order worker).
async fn withdraw_funds(
    tx: &mut issuing_store::Tx,
    project_id: &str,
    card_id: &str,
    funds: Amount,
    now: i64,
) -> Result<OrderRecord, ApiError> {
    let order_id = new_id();
    let balance = money::master_balance(tx, project_id).await?;
    money::transfer(
        tx,
        &money::Tag {
            project_id,
            order_id: &order_id,
            card_id,
        },
        TransferKind::CardWithdraw,
        Acct::Card(card_id),
        Acct::Project(AccountKind::InFlight),
        funds,
    )
    .await?;
    let mut order = super::topup::new_order(
        project_id,
        &order_id,
        "card_withdraw",
        card_id,
        now,
        json!({ "amount": funds, "currency": "usdt", "reason": "card_close" }),
    );
    order.balance_before = Some(balance.micros());
    order.balance_after = Some(balance.micros());
    orders::insert(tx, &order).await?;
    Ok(order)
}
