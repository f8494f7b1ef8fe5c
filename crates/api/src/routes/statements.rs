//! `cards/statement` and `project/statement` (CONTRACT §17); the sums and what they
//! mean are the core's (`issuing_app::statements`).

use crate::pipeline::{reply, ApiResult, Caller, Payload};
use axum::extract::State;
use issuing_app::{statements, App};
use issuing_wire::api::{
    CardStatement, CardsStatement, ProjectStatement, ProjectStatementResponse,
};

pub(crate) async fn card(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<CardsStatement>,
) -> ApiResult<CardStatement> {
    Ok(reply(
        statements::card(&state, &caller.project_id, &r).await?,
    ))
}

pub(crate) async fn project(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<ProjectStatement>,
) -> ApiResult<ProjectStatementResponse> {
    Ok(reply(
        statements::project(&state, &caller.project_id, &r).await?,
    ))
}
