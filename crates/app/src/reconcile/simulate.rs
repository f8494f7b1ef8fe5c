//! `simulate/settlement/break` (sandbox only): plants a break in the sandbox
//! provider's settlement records, so the next reconciliation of that date finds it.

use crate::App;
use issuing_domain::catalog::ProviderKind;
use issuing_domain::ids::new_id;
use issuing_store::reconciliation::{self, Settlement};
use issuing_wire::api::SettlementBreak;
use issuing_wire::{ApiError, ErrorSlug};

/// The break kinds, as the contract names them.
pub const KINDS: [&str; 3] = ["missing_here", "missing_there", "amount_mismatch"];

/// Plants a break of `kind` on the latest settlement of `transaction_id`: a record the
/// service never applied (`missing_here`), the settlement's record removed
/// (`missing_there`), or its amount one cent more (`amount_mismatch`). Answers what
/// it planted.
pub async fn plant(
    state: &App,
    project_id: &str,
    transaction_id: &str,
    kind: &str,
) -> Result<SettlementBreak, ApiError> {
    if !KINDS.contains(&kind) {
        return Err(ApiError::new(
            ErrorSlug::ValidationError,
            format!("kind must be one of {}", KINDS.join(", ")),
        ));
    }
    let mut tx = state.store.begin().await?;
    let settled = reconciliation::applied_for_tx(&mut tx, project_id, transaction_id).await?;
    let Some(s) = settled.last().cloned() else {
        return Err(ApiError::new(
            ErrorSlug::TransactionNotFound,
            "No settled transaction has this id",
        ));
    };
    let sandbox = matches!(
        state
            .config
            .catalog
            .subprovider(&s.subprovider_code)
            .map(|p| &p.kind),
        Some(ProviderKind::Sandbox)
    );
    if !sandbox {
        return Err(ApiError::new(
            ErrorSlug::InvalidTransactionState,
            "Only the sandbox provider's settlements can be broken",
        ));
    }
    let token = match kind {
        "missing_here" => {
            let planted = Settlement {
                event_token: format!("sbx_{}", new_id()),
                ..s.clone()
            };
            reconciliation::record_sandbox(&mut tx, &planted).await?;
            planted.event_token
        }
        "missing_there" => {
            reconciliation::delete_sandbox(&mut tx, &s.subprovider_code, &s.event_token).await?;
            s.event_token.clone()
        }
        _ => {
            reconciliation::set_sandbox_amount(
                &mut tx,
                &s.subprovider_code,
                &s.event_token,
                s.amount + 10_000,
            )
            .await?;
            s.event_token.clone()
        }
    };
    tx.commit().await.map_err(issuing_store::StoreError::from)?;
    Ok(SettlementBreak {
        transaction_id: s.transaction_id,
        kind: kind.to_owned(),
        event_token: token,
        date: s.settled_on,
        subprovider_code: s.subprovider_code,
    })
}
