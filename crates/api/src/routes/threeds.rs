//! cards/3ds/confirm and the sandbox's simulate/cards/3ds (CONTRACT §10); the rules are
//! in `flows/threeds.rs`.

use crate::pipeline::{reply, ApiResult, Caller, Payload};
use axum::extract::State;
use issuing_app::flows::threeds::{self, ChallengeRequest, ConfirmRequest};
use issuing_app::App;
use serde_json::Value;

pub(crate) async fn confirm(
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<ConfirmRequest>,
) -> ApiResult<Value> {
    Ok(reply(
        threeds::confirm(&state, &caller.project_id, req).await?,
    ))
}

pub(crate) async fn simulate(
    State(state): State<App>,
    caller: Caller,
    Payload(req): Payload<ChallengeRequest>,
) -> ApiResult<Value> {
    Ok(reply(
        threeds::challenge(&state, &caller.project_id, req).await?,
    ))
}
