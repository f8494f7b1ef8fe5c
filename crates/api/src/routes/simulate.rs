//! simulate/cards/* (sandbox only): the card network simulator. Each endpoint turns
//! its request into one network message (`issuing_app::network::simulate`) and hands it
//! to `network::apply`, the entry point a real provider adapter calls; the answer is the
//! transaction as it is now.

use crate::pipeline::{reply, ApiResult, Caller, Payload};
use axum::extract::State;
use issuing_app::network::simulate::{self, SimRequest};
use issuing_app::network::{self, view, Message};
use issuing_app::App;
use serde_json::{json, Value};

async fn run(state: &App, caller: &Caller, req: &SimRequest, message: Message) -> ApiResult<Value> {
    let message_id = simulate::message_id(req);
    let applied = network::apply(state, &caller.project_id, message_id.as_deref(), message).await?;
    Ok(reply(json!({
        "transactionId": applied.tx.id,
        "transaction": view::item(&applied.tx, &applied.card),
    })))
}

pub(crate) async fn auth(
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<SimRequest>,
) -> ApiResult<Value> {
    let message = simulate::authorization(&req)?;
    run(&state, &caller, &req, message).await
}

pub(crate) async fn clear(
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<SimRequest>,
) -> ApiResult<Value> {
    let message = simulate::clearing(&req)?;
    run(&state, &caller, &req, message).await
}

pub(crate) async fn reversal(
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<SimRequest>,
) -> ApiResult<Value> {
    let message = simulate::reversal(&req)?;
    run(&state, &caller, &req, message).await
}

pub(crate) async fn refund(
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<SimRequest>,
) -> ApiResult<Value> {
    let message = simulate::refund(&req)?;
    run(&state, &caller, &req, message).await
}
