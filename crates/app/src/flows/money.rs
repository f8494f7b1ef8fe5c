//! Ledger moves used by the flows. Every move is a balanced transfer between two of the
//! project's accounts, tagged with its order and card for the project's history.

use issuing_domain::ledger::{AccountKind, Transfer, TransferKind};
use issuing_store::ledger::{self, Posted, TransferMeta};
use issuing_store::writer::AsBatch;
use issuing_store::{Conn, StoreError};
use issuing_wire::Amount;

/// Which account of the project: one of its own, or a card's.
pub enum Acct<'a> {
    Project(AccountKind),
    Card(&'a str),
}

async fn resolve(conn: &mut Conn, project_id: &str, acct: &Acct<'_>) -> Result<String, StoreError> {
    match acct {
        Acct::Project(kind) => {
            ledger::project_account(&mut conn.as_batch(), project_id, *kind).await
        }
        Acct::Card(card_id) => {
            ledger::card_account_id(conn, project_id, card_id, AccountKind::Card).await
        }
    }
}

/// Whose money and why: every move is tagged with its order and card.
#[derive(Clone, Copy)]
pub struct Tag<'a> {
    pub project_id: &'a str,
    pub order_id: &'a str,
    pub card_id: &'a str,
}

/// Moves `amount` between two accounts; a zero amount moves nothing (`None`).
pub async fn transfer(
    conn: &mut Conn,
    tag: &Tag<'_>,
    kind: TransferKind,
    from: Acct<'_>,
    to: Acct<'_>,
    amount: Amount,
) -> Result<Option<Posted>, StoreError> {
    let Tag {
        project_id,
        order_id,
        card_id,
    } = *tag;
    if amount.micros() == 0 {
        return Ok(None);
    }
    let meta = TransferMeta {
        project_id,
        order_id: Some(order_id),
        card_id: Some(card_id),
        reference: None,
    };
    let from = resolve(conn, project_id, &from).await?;
    // Money reaching the master balance pays the project's debt first.
    if matches!(to, Acct::Project(AccountKind::Master)) {
        return ledger::credit_master(conn, &meta, kind, from, amount)
            .await
            .map(Some);
    }
    let to = resolve(conn, project_id, &to).await?;
    let t =
        Transfer::simple(kind, from, to, amount).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    ledger::post(conn, &meta, &t).await.map(Some)
}

/// The master balance as the project sees it: negative while it owes debt.
pub async fn master_balance(conn: &mut Conn, project_id: &str) -> Result<Amount, StoreError> {
    ledger::master_balance(conn, project_id).await
}
