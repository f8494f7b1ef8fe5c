use super::filters;
use crate::pipeline::{reply, ApiResult, Caller, RawRequest};
use crate::state::AppState;
use axum::extract::State;
use issuing_domain::ledger::AccountKind;
use issuing_domain::time::to_rfc3339;
use issuing_store::ledger::{self, HistoryFilter, MasterEntry, HISTORY_SORT_KEYS};
use issuing_store::projects;
use issuing_wire::{Amount, ApiError, ErrorSlug, Page, PageRequest};
use serde::Serialize;

#[derive(Serialize)]
pub(crate) struct Balance {
    available: Amount,
    currency: &'static str,
}

pub(crate) async fn balance(State(state): State<AppState>, caller: Caller) -> ApiResult<Balance> {
    let mut conn = state.store.conn().await?;
    let available = ledger::project_balance(&mut conn, &caller.project_id, AccountKind::Master)
        .await
        .map_err(|e| match e {
            issuing_store::StoreError::NotFound(_) => {
                ApiError::new(ErrorSlug::ProjectNotFound, "Project not found")
            }
            other => other.into(),
        })?;
    Ok(reply(Balance {
        available,
        currency: ledger::CURRENCY,
    }))
}

#[derive(Serialize)]
pub(crate) struct Wallet {
    usdt_trc20: String,
}

pub(crate) async fn wallet_trc20(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<Wallet> {
    let mut conn = state.store.conn().await?;
    let address = projects::get(&mut conn, &caller.project_id)
        .await?
        .and_then(|p| p.deposit_address)
        .ok_or_else(|| ApiError::new(ErrorSlug::WalletNotFound, "Wallet not found"))?;
    Ok(reply(Wallet {
        usdt_trc20: address,
    }))
}

/// One master-account movement. `amount` is signed: credits positive, debits negative.
#[derive(Serialize)]
pub(crate) struct Tx {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    amount: Amount,
    balance_after: Amount,
    currency: &'static str,
    transfer_id: String,
    order_id: Option<String>,
    card_id: Option<String>,
    reference: Option<String>,
    created_at: String,
}

impl From<MasterEntry> for Tx {
    fn from(e: MasterEntry) -> Self {
        Tx {
            id: e.entry_id.to_string(),
            kind: e.kind,
            amount: e.amount,
            balance_after: e.balance_after,
            currency: ledger::CURRENCY,
            transfer_id: e.transfer_id,
            order_id: e.order_id,
            card_id: e.card_id,
            reference: e.reference,
            created_at: to_rfc3339(e.created_at),
        }
    }
}

pub(crate) async fn txs(
    State(state): State<AppState>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> Result<axum::Json<Page<Tx>>, crate::pipeline::HttpError> {
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
    Ok(axum::Json(Page::new(
        items.into_iter().map(Tx::from).collect(),
        total,
        &page,
    )))
}
