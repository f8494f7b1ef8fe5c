//! Disputes (CONTRACT §15): create (idempotent), get, find, withdraw, evidence, and the
//! sandbox's `simulate/disputes/advance`. What a dispute may do and its money are the
//! core's (`issuing_app::disputes`).

use super::filters;
use crate::pipeline::idempotency;
use crate::pipeline::{reply, ApiResult, Caller, HttpError, Payload, RawRequest};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use issuing_app::disputes::{self, evidence, CreateRequest};
use issuing_app::App;
use issuing_store::disputes::{DisputeFilter, SORT_KEYS};
use issuing_wire::api::{
    Dispute, DisputeRef, DisputesEvidenceAdd, DisputesEvidenceGet, Evidence, EvidenceFile, Page,
    SimulateDisputesAdvance,
};
use issuing_wire::PageRequest;

pub(crate) async fn create(
    State(state): State<App>,
    caller: Caller,
    headers: HeaderMap,
    RawRequest(raw): RawRequest,
    Payload(req): Payload<CreateRequest>,
) -> Result<Response, HttpError> {
    let key = idempotency::key_from(&headers, &raw)?;
    idempotency::run(
        &state.store,
        &caller.project_id,
        disputes::CREATE_ENDPOINT,
        key,
        &raw,
        |token| disputes::create(&state, &caller.project_id, req, token),
    )
    .await
}

pub(crate) async fn get(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<DisputeRef>,
) -> ApiResult<Dispute> {
    Ok(reply(
        disputes::get(&state.store, &caller.project_id, &r.dispute_id).await?,
    ))
}

pub(crate) async fn find(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Page<Dispute>> {
    let page = PageRequest::parse(&req, SORT_KEYS)?;
    let filter = DisputeFilter {
        dispute_ids: filters::strings(&req, "dispute_id", "dispute_ids")?,
        card_ids: filters::strings(&req, "card_id", "card_ids")?,
        transaction_ids: filters::strings(&req, "transaction_id", "transaction_ids")?,
        statuses: filters::strings(&req, "status", "statuses")?,
        created_from: filters::instant(&req, "created_from")?,
        created_to: filters::instant(&req, "created_to")?,
    };
    Ok(reply(
        disputes::find(&state.store, &caller.project_id, &filter, &page).await?,
    ))
}

pub(crate) async fn withdraw(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<DisputeRef>,
) -> ApiResult<Dispute> {
    Ok(reply(
        disputes::withdraw(&state, &caller.project_id, &r.dispute_id).await?,
    ))
}

pub(crate) async fn evidence_add(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<DisputesEvidenceAdd>,
) -> ApiResult<Evidence> {
    Ok(reply(evidence::add(&state, &caller.project_id, &r).await?))
}

pub(crate) async fn evidence_get(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<DisputesEvidenceGet>,
) -> ApiResult<EvidenceFile> {
    Ok(reply(
        evidence::get(&state, &caller.project_id, &r.dispute_id, &r.evidence_id).await?,
    ))
}

/// The sandbox's network deciding (CONTRACT §15).
pub(crate) async fn simulate_advance(
    State(state): State<App>,
    caller: Caller,
    Payload(r): Payload<SimulateDisputesAdvance>,
) -> ApiResult<Dispute> {
    Ok(reply(
        disputes::advance(
            &state,
            &caller.project_id,
            &r.dispute_id,
            &r.to,
            r.resolution_reason.as_deref(),
        )
        .await?,
    ))
}
