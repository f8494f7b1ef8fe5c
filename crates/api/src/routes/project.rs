use super::filters;
use crate::pipeline::{reply, ApiResult, Caller, RawRequest};
use axum::extract::State;
use issuing_app::App;
use issuing_domain::time::to_rfc3339;
use issuing_store::ledger::{self, HistoryFilter, MasterEntry, HISTORY_SORT_KEYS};
use issuing_wire::api::{Page, ProjectBalance, ProjectTx, Wallet};
use issuing_wire::{ApiError, ErrorSlug, PageRequest};

pub(crate) async fn balance(State(state): State<App>, caller: Caller) -> ApiResult<ProjectBalance> {
    let mut conn = state.store.conn().await?;
    let available = ledger::master_balance(&mut conn, &caller.project_id)
        .await
        .map_err(|e| match e {
            issuing_store::StoreError::NotFound(_) => {
                ApiError::new(ErrorSlug::ProjectNotFound, "Project not found")
            }
            other => other.into(),
        })?;
    Ok(reply(ProjectBalance {
        available: available.into(),
        currency: ledger::CURRENCY.into(),
    }))
}

pub(crate) async fn wallet_trc20(State(state): State<App>, caller: Caller) -> ApiResult<Wallet> {
    // The derived address; none without a deposit key (production without an xpub).
    let address = issuing_app::deposits::wallet_address(&state, &caller.project_id)
        .await?
        .ok_or_else(|| ApiError::new(ErrorSlug::WalletNotFound, "Wallet not found"))?;
    Ok(reply(Wallet {
        usdt_trc20: address,
    }))
}

/// One master-account movement. `amount` is signed: credits positive, debits negative.
fn tx_view(e: MasterEntry) -> ProjectTx {
    ProjectTx {
        id: e.entry_id.to_string(),
        kind: e.kind,
        amount: e.amount.into(),
        balance_after: e.balance_after.into(),
        currency: ledger::CURRENCY.into(),
        transfer_id: e.transfer_id,
        order_id: e.order_id,
        card_id: e.card_id,
        reference: e.reference,
        created_at: to_rfc3339(e.created_at),
    }
}

pub(crate) async fn txs(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Page<ProjectTx>> {
    let page = PageRequest::parse(&req, HISTORY_SORT_KEYS)?;
    let filter = HistoryFilter {
        kinds: filters::strings(&req, "type", "types")?,
        order_ids: filters::strings(&req, "order_id", "order_ids")?,
        card_ids: filters::strings(&req, "card_id", "card_ids")?,
        created_from: filters::instant(&req, "created_from")?,
        created_to: filters::instant(&req, "created_to")?,
    };
    let mut conn = state.store.conn().await?;
    let (items, total) = ledger::master_history(
        &mut conn,
        state.store.backend(),
        &caller.project_id,
        &filter,
        &page,
    )
    .await?;
    Ok(reply(Page::new(
        items.into_iter().map(tx_view).collect(),
        total,
        &page,
    )))
}
