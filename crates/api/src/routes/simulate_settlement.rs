//! simulate/settlement/break (sandbox only): plants a settlement reconciliation break
//! in the sandbox provider's settlement records (CONTRACT §17).

use crate::pipeline::{reply, ApiResult, Caller, Payload};
use axum::extract::State;
use issuing_app::reconcile::simulate;
use issuing_app::App;
use issuing_wire::api::{SettlementBreak, SimulateSettlementBreak};

pub(crate) async fn settlement_break(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<SimulateSettlementBreak>,
) -> ApiResult<SettlementBreak> {
    Ok(reply(
        simulate::plant(&state, &caller.project_id, &r.transaction_id, &r.kind).await?,
    ))
}
