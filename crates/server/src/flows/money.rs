//! Ledger moves used by the flows. Every move is a balanced transfer between two of the
//! project's accounts, tagged with its order and card for the project's history.

use issuing_domain::ledger::{AccountKind, Transfer, TransferKind};
use issuing_store::ledger::{self, Posted, TransferMeta};
use issuing_store::{Conn, StoreError};
use issuing_wire::Amount;

/// Which account of the project: one of its own, or a card's.
pub(crate) enum Acct<'a> {
    Project(AccountKind),
    Card(&'a str),
}

async fn resolve(conn: &mut Conn, project_id: &str, acct: &Acct<'_>) -> Result<String, StoreError> {
    match acct {
        Acct::Project(kind) => ledger::project_account(conn, project_id, *kind).await,
        Acct::Card(card_id) => {
            ledger::card_account_id(conn, project_id, card_id, AccountKind::Card).await
        }
    }
}

/// Whose money and why: every move is tagged with its order and card.
#[derive(Clone, Copy)]
pub(crate) struct Tag<'a> {
    pub project_id: &'a str,
    pub order_id: &'a str,
    pub card_id: &'a str,
}

/// Moves `amount` between two accounts; a zero amount moves nothing (`None`).
pub(crate) async fn transfer(
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
pub(crate) async fn master_balance(
    conn: &mut Conn,
    project_id: &str,
) -> Result<Amount, StoreError> {
    ledger::master_balance(conn, project_id).await
}

/// Refuses a charge-free order (a card issue with no fee and no initial topup) while
/// the project owes debt. Orders that charge anything need no check: a project in
/// debt has a master account at zero, so their debit is refused as `insufficient_funds`.
pub(crate) async fn refuse_if_in_debt(conn: &mut Conn, project_id: &str) -> Result<(), StoreError> {
    let debt = ledger::lock_master_read_debt(conn, project_id).await?;
    if debt.micros() < 0 {
        let master = ledger::project_account(conn, project_id, AccountKind::Master).await?;
        return Err(StoreError::InsufficientFunds { account_id: master });
    }
    Ok(())
}

/// The master balance after a flow's debits, as the last of them that moved it
/// answered (its update returns the balance under the row's lock, so no query is
/// needed); read when none of them moved it. A debit that succeeded found money on the
/// master account, so the project owes no debt and the master account is all of it.
pub(crate) async fn master_balance_after(
    conn: &mut Conn,
    project_id: &str,
    posted: &[Option<Posted>],
) -> Result<Amount, StoreError> {
    let master = ledger::project_account(conn, project_id, AccountKind::Master).await?;
    let last = posted.iter().rev().flatten().find_map(|p| {
        p.balances_after
            .iter()
            .rev()
            .find(|(account, _)| *account == master)
            .map(|(_, balance)| *balance)
    });
    match last {
        Some(balance) => Ok(balance),
        None => master_balance(conn, project_id).await,
    }
}
