//! A dispute's status changes: `disputes/withdraw` (the project gives up) and the
//! sandbox's `simulate/disputes/advance` (the network's move). Each asks the domain's
//! state machine, then writes the new status, its timeline row, the money the new
//! status brings and `dispute.updated`, in one transaction.

use super::create::{begin_on, emit};
use super::money::{self, CreditFrom};
use super::view;
use crate::App;
use issuing_domain::dispute::{Dispute, DisputeStatus, ResolutionReason, TransitionError};
use issuing_domain::time::now_micros;
use issuing_store::disputes::{self, DisputeRecord};
use issuing_store::StoreError;
use issuing_wire::api::Dispute as DisputeView;
use issuing_wire::{ApiError, ErrorSlug};

/// What is asked of a dispute.
#[derive(Debug, Clone, Copy)]
pub enum Change {
    Withdraw,
    /// To a status, with a resolution reason or the final state's default.
    To(DisputeStatus, Option<ResolutionReason>),
}

fn refused(e: TransitionError) -> ApiError {
    ApiError::new(e.slug(), format!("Cannot move the dispute: {e}"))
}

/// The stored dispute as the state machine sees it.
fn restore(d: &DisputeRecord) -> Result<Dispute, ApiError> {
    let status = DisputeStatus::parse(&d.status);
    let reason = d
        .resolution_reason
        .as_deref()
        .map(|r| ResolutionReason::parse(r).ok_or(()))
        .transpose();
    match (status, reason) {
        (Some(s), Ok(r)) => Dispute::restore(s, r),
        _ => None,
    }
    .ok_or_else(|| {
        tracing::error!(dispute_id = %d.id, status = %d.status, "stored dispute is inconsistent");
        ApiError::internal()
    })
}

/// `disputes/withdraw`.
pub async fn withdraw(
    state: &App,
    project_id: &str,
    dispute_id: &str,
) -> Result<DisputeView, ApiError> {
    apply(state, project_id, dispute_id, Change::Withdraw, None).await
}

/// `simulate/disputes/advance` (the sandbox's network).
pub async fn advance(
    state: &App,
    project_id: &str,
    dispute_id: &str,
    to: &str,
    resolution_reason: Option<&str>,
) -> Result<DisputeView, ApiError> {
    let to = DisputeStatus::parse(to.trim()).ok_or_else(|| {
        let known: Vec<&str> = DisputeStatus::ALL.iter().map(|s| s.as_str()).collect();
        ApiError::validation(format!("to must be one of {}", known.join(", ")))
    })?;
    let reason = match resolution_reason.map(str::trim).filter(|r| !r.is_empty()) {
        None => None,
        Some(r) => Some(ResolutionReason::parse(r).ok_or_else(|| {
            let known: Vec<&str> = ResolutionReason::ALL.iter().map(|r| r.as_str()).collect();
            ApiError::validation(format!(
                "resolution_reason must be one of {}",
                known.join(", ")
            ))
        })?),
    };
    apply(
        state,
        project_id,
        dispute_id,
        Change::To(to, reason),
        Some("sandbox: the network's decision"),
    )
    .await
}

/// Moves one dispute as `change` asks, with its money; `note` goes on the timeline.
pub async fn apply(
    state: &App,
    project_id: &str,
    dispute_id: &str,
    change: Change,
    note: Option<&str>,
) -> Result<DisputeView, ApiError> {
    let found = {
        let mut conn = state.store.conn().await?;
        super::load(&mut conn, &state.store, project_id, dispute_id, false).await?
    };
    let (mut tx, locked, disputed) = begin_on(state, project_id, &found.transaction_id).await?;
    let prev = super::load(&mut tx, &state.store, project_id, &found.id, true).await?;
    let current = restore(&prev)?;
    let next_state = match change {
        Change::Withdraw => current.withdraw(),
        Change::To(to, reason) => current.advance(to, reason),
    }
    .map_err(refused)?;
    let now = now_micros();
    let to = next_state.status();
    let next = DisputeRecord {
        status: to.as_str().into(),
        resolution_reason: next_state.resolution_reason().map(|r| r.as_str().into()),
        updated_at: now,
        resolved_at: to.is_final().then_some(now),
        ..prev.clone()
    };
    if !disputes::update_status(&mut tx, &prev, &next, note).await? {
        return Err(ApiError::new(
            ErrorSlug::InvalidStatusTransition,
            "The dispute changed meanwhile; read it again",
        ));
    }
    match (to, next.provisional_credit) {
        (DisputeStatus::Won, true) => money::won(&mut tx, &next).await?,
        (DisputeStatus::Won, false) => {
            money::credit(
                &mut tx,
                &next,
                &locked.card,
                &disputed,
                CreditFrom::Network,
                now,
            )
            .await?;
        }
        (DisputeStatus::Lost | DisputeStatus::Withdrawn, true) => {
            money::take_back(
                &mut tx,
                &next,
                &locked.card,
                &disputed,
                locked.available,
                now,
            )
            .await?;
        }
        _ => {}
    }
    emit(&mut tx, &next).await?;
    let answer = view::full(&mut tx, &next).await?;
    tx.commit().await.map_err(StoreError::from)?;
    state.deliveries_wakeup.notify_one();
    Ok(answer)
}
