//! cards/freeze and cards/unfreeze, following the spec's transition table: freeze only
//! from `active`, unfreeze only from `frozen`; anything else is 422
//! `invalid_status_transition`. Each success is a completed `card_status_change` order
//! with its `card.freeze` / `card.unfreeze` event, written together.

use super::card_for_user;
use crate::App;
use issuing_domain::ids::new_id;
use issuing_domain::time::now_micros;
use issuing_store::cards;
use issuing_store::events::{self, NewEvent};
use issuing_store::orders::{self, OrderRecord};
use issuing_wire::{ApiError, ErrorSlug};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Freeze,
    Unfreeze,
}

impl Change {
    fn states(self) -> (&'static str, &'static str) {
        match self {
            Change::Freeze => ("active", "frozen"),
            Change::Unfreeze => ("frozen", "active"),
        }
    }

    fn event_type(self) -> &'static str {
        match self {
            Change::Freeze => "card.freeze",
            Change::Unfreeze => "card.unfreeze",
        }
    }
}

fn refused(change: Change, current: &str) -> ApiError {
    let verb = match change {
        Change::Freeze => "freeze",
        Change::Unfreeze => "unfreeze",
    };
    ApiError::new(
        ErrorSlug::InvalidStatusTransition,
        format!("Cannot {verb} a card whose status is {current}"),
    )
}

/// Returns the card id and its new status.
pub async fn change(
    state: &App,
    project_id: &str,
    card_id: Option<&str>,
    external_user_id: Option<&str>,
    change: Change,
) -> Result<(String, &'static str), ApiError> {
    let (from, to) = change.states();
    let card = {
        let mut conn = state.store.conn().await?;
        card_for_user(&mut conn, project_id, card_id, external_user_id).await?
    };
    if card.status != from {
        return Err(refused(change, &card.status));
    }
    let provider_card_id = card
        .provider_card_id
        .clone()
        .ok_or_else(|| refused(change, &card.status))?;
    let order_id = new_id();
    crate::provider::bounded(state.providers.get(&card.subprovider_code).set_frozen(
        &order_id,
        &provider_card_id,
        change == Change::Freeze,
    ))
    .await
    .map_err(|e| crate::provider::failed_call(&card.id, "status change", &e))?;

    let now = now_micros();
    let mut tx = state.store.begin().await?;
    let stamp = (change == Change::Freeze).then_some("frozen_at");
    if !cards::transition(&mut tx, project_id, &card.id, from, to, stamp, now).await? {
        // Another request changed the card between our read and this write.
        let current = cards::get(&mut tx, project_id, &card.id)
            .await?
            .map(|c| c.status)
            .unwrap_or_default();
        return Err(refused(change, &current));
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
        data: json!({ "from": from, "to": to }),
        issue_status: None,
        topup_status: None,
        is_issued: None,
        provider_card_status: Some(if to == "frozen" { "FROZEN" } else { "ACTIVE" }.into()),
        attempts: 1,
        next_attempt_at: None,
        created_at: now,
        updated_at: now,
        completed_at: Some(now),
        failed_at: None,
    };
    orders::insert(&mut tx, &order).await?;
    events::insert(
        &mut tx,
        &NewEvent {
            project_id,
            event_type: change.event_type(),
            card_id: Some(&card.id),
            order_id: Some(&order_id),
            payload: &json!({ "card_id": card.id, "order_id": order_id, "status": to }),
            now,
        },
    )
    .await?;
    tx.commit().await.map_err(issuing_store::StoreError::from)?;
    state.deliveries_wakeup.notify_one();
    Ok((card.id, to))
}
