//! cards/limits/set and cards/limits/get (CONTRACT §11): a card's spending limits, each
//! with what its current window has counted.

use crate::pipeline::{reply, ApiResult, Caller, RawRequest};
use axum::extract::State;
use issuing_app::flows::card_for_user;
use issuing_app::network::execute;
use issuing_app::network::limits::view;
use issuing_app::App;
use issuing_domain::controls::limits::{self, Limit, LimitInput};
use issuing_domain::time::now_micros;
use issuing_store::cards::{self, CardRecord};
use issuing_store::{Conn, StoreError};
use issuing_wire::api::CardLimits;
use issuing_wire::{ApiError, ErrorSlug};
use serde_json::Value;

fn text<'a>(req: &'a Value, field: &str) -> Result<Option<&'a str>, ApiError> {
    match req.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim())),
        Some(_) => Err(ApiError::validation(format!("{field} must be a string"))),
    }
}

/// The limits of a request, validated.
fn parse(req: &Value) -> Result<(Vec<Limit>, String), ApiError> {
    let list = match req.get("limits") {
        Some(Value::Array(l)) => l,
        None | Some(Value::Null) => return Err(ApiError::validation("limits is required")),
        Some(_) => return Err(ApiError::validation("limits must be a list")),
    };
    let mut mccs = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let obj = item
            .as_object()
            .ok_or_else(|| ApiError::validation(format!("limits[{i}] must be an object")))?;
        let codes = match obj.get("mccs") {
            None | Some(Value::Null) => None,
            Some(Value::Array(a)) => Some(
                a.iter()
                    .map(|m| m.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| {
                        ApiError::validation(format!("limits[{i}].mccs must be a list of strings"))
                    })?,
            ),
            Some(_) => {
                return Err(ApiError::validation(format!(
                    "limits[{i}].mccs must be a list of strings"
                )))
            }
        };
        mccs.push(codes);
    }
    let inputs = list
        .iter()
        .zip(&mccs)
        .enumerate()
        .map(|(i, (item, codes))| {
            Ok(LimitInput {
                interval: item
                    .get("interval")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        ApiError::validation(format!("limits[{i}].interval is required"))
                    })?,
                amount: item.get("amount"),
                count: item.get("count"),
                window_seconds: item.get("window_seconds"),
                mccs: codes.as_deref(),
            })
        })
        .collect::<Result<Vec<_>, ApiError>>()?;
    limits::parse_limits(&inputs, text(req, "timezone")?)
}

async fn card_of(conn: &mut Conn, caller: &Caller, req: &Value) -> Result<CardRecord, ApiError> {
    card_for_user(
        conn,
        &caller.project_id,
        text(req, "card_id")?,
        text(req, "external_user_id")?.filter(|u| !u.is_empty()),
    )
    .await
}

pub(crate) async fn set(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<CardLimits> {
    let (list, zone) = parse(&req)?;
    let now = now_micros();
    let mut tx = state.store.begin().await?;
    let card = card_of(&mut tx, &caller, &req).await?;
    // Under the card's lock: an authorization in flight decides by the old limits or the
    // new ones, never by a mix.
    let card = execute::lock_card(&mut tx, &caller.project_id, &card.id)
        .await?
        .card;
    if card.status == "closed" {
        return Err(ApiError::new(ErrorSlug::CardNotActive, "Card is closed").into());
    }
    let stored = (!list.is_empty()).then(|| limits::to_stored(&list));
    cards::set_limits(
        &mut tx,
        &caller.project_id,
        &card.id,
        stored.as_deref(),
        &zone,
        now,
    )
    .await?;
    let card = cards::get(&mut tx, &caller.project_id, &card.id)
        .await?
        .ok_or_else(ApiError::internal)?;
    let answer = view(&mut tx, &card, now).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(reply(answer))
}

pub(crate) async fn get(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<CardLimits> {
    let mut conn = state.store.conn().await?;
    let card = card_of(&mut conn, &caller, &req).await?;
    Ok(reply(view(&mut conn, &card, now_micros()).await?))
}
