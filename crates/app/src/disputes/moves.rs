//! A dispute's status changes: `disputes/withdraw` (the project gives up), the
//! sandbox's `simulate/disputes/advance` (the network's move) and a provider's event
//! (Lithic's `dispute.updated`). Each asks the domain's
//! state machine, then writes the new status, its timeline row, the money the new
//! status brings and `dispute.updated`, in one transaction.

use super::create::{begin_on, emit};
use super::money::{self, CreditFrom};
use super::view;
use crate::App;
use issuing_domain::dispute::{Dispute, DisputeStatus, ResolutionReason, TransitionError};
use issuing_domain::time::now_micros;
use issuing_store::cards;
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
    /// The provider's network tells the status it has (Lithic's `dispute.updated`):
    /// like `To`, except that the status the dispute has already changes nothing.
    Provider(DisputeStatus, Option<ResolutionReason>),
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

/// `disputes/withdraw`. A dispute filed with Lithic is withdrawn there first (when our
/// state machine allows it): a refusal there leaves ours open, and Lithic's
/// `dispute.updated` for the withdrawal then finds it withdrawn already.
pub async fn withdraw(
    state: &App,
    project_id: &str,
    dispute_id: &str,
) -> Result<DisputeView, ApiError> {
    let (d, card) = {
        let mut conn = state.store.conn().await?;
        let d = super::load(&mut conn, &state.store, project_id, dispute_id, false).await?;
        let card = cards::get(&mut conn, project_id, &d.card_id).await?;
        (d, card)
    };
    let lithic = card.and_then(|c| state.providers.lithic(&c.subprovider_code).cloned());
    if let (Some(lithic), Some(token)) = (lithic, d.provider_dispute_id.as_deref()) {
        restore(&d)?.withdraw().map_err(refused)?;
        lithic.withdraw_dispute(&d.card_id, token).await?;
    }
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
        Change::Provider(to, _) if to == current.status() => {
            return view::full(&mut tx, &prev).await;
        }
        Change::To(to, reason) | Change::Provider(to, reason) => current.advance(to, reason),
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
