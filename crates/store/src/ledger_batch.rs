//! Many operations' transfers on one project's accounts, posted in one pass: the hot
//! account's writer (issue 21, docs/money.md "One writer per hot account").
//!
//! Every account the batch touches is read once (locked on PostgreSQL, in the ledger's
//! lock order), each operation's transfers are checked in arrival order against the
//! running balances, exactly as `ledger::post` checks one transfer against the stored
//! balance, and then the accepted operations' transfers and entries are inserted a few
//! statements at a time and every touched account is written once with its final
//! balance. An operation whose transfers would take an account below zero or past the
//! limit writes nothing and answers its own error; the others of the batch stand.
//!
//! The caller must own the accounts for the whole transaction: on SQLite the write lock
//! does that, on PostgreSQL the row locks taken here. The final write checks that each
//! balance is still the one read, so a writer that broke that rule fails its batch
//! instead of losing money.

use crate::ledger::{lock_ranks, Posted, MAX_BALANCE};
use crate::query::{Cell, Inserts};
use crate::{Backend, Conn, StoreError};
use issuing_domain::ids::new_id;
use issuing_domain::ledger::Transfer;
use issuing_wire::Amount;
use sqlx::Row;
use std::collections::HashMap;

/// A transfer of one operation, tagged for the project's history.
#[derive(Debug, Clone)]
pub struct Planned {
    pub order_id: Option<String>,
    pub card_id: Option<String>,
    pub transfer: Transfer<String>,
}

/// An account as the batch found it, and as its operations have left it so far.
struct Account {
    read: i64,
    now: i64,
    allow_negative: bool,
}

/// Posts every operation's transfers (an operation's transfers land together or not at
/// all). Answers, per operation in order, its transfers as posted or why it was refused
/// (`InsufficientFunds`, `BalanceLimit`). The accounts are written here, the transfers
/// and entries added to `inserts` for the caller to write in the same transaction. An
/// `Err` of the whole call means the batch must be rolled back.
pub async fn post_batch(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    operations: &[Vec<Planned>],
    now: i64,
    inserts: &mut Inserts,
) -> Result<Vec<Result<Vec<Posted>, StoreError>>, StoreError> {
    let mut accounts = read_accounts(conn, backend, project_id, operations).await?;
    let mut answers = Vec::with_capacity(operations.len());
    let (mut transfers, mut entries) = (Vec::new(), Vec::new());
    for operation in operations {
        let answer = apply(&mut accounts, operation);
        if let Ok(posted) = &answer {
            for (planned, posted) in operation.iter().zip(posted) {
                transfers.push(vec![
                    Cell::text(&posted.transfer_id),
                    Cell::text(project_id),
                    Cell::text(planned.transfer.kind().as_str()),
                    Cell::Text(planned.order_id.clone()),
                    Cell::Text(planned.card_id.clone()),
                    Cell::Text(None),
                    Cell::int(now),
                ]);
                // `apply` answers one balance per leg, in the legs' order.
                for (leg, (account, balance)) in
                    planned.transfer.legs().iter().zip(&posted.balances_after)
                {
                    entries.push(vec![
                        Cell::text(&posted.transfer_id),
                        Cell::text(account),
                        Cell::int(leg.amount.micros()),
                        Cell::int(balance.micros()),
                        Cell::int(now),
                    ]);
                }
            }
        }
        answers.push(answer);
    }
    inserts.add(
        "INSERT INTO transfers (id, project_id, kind, order_id, card_id, reference, created_at)",
        transfers,
    );
    inserts.add(
        "INSERT INTO entries (transfer_id, account_id, amount, balance_after, created_at)",
        entries,
    );
    write_balances(conn, backend, project_id, &accounts).await?;
    Ok(answers)
}

/// Reads (PostgreSQL: locks) every account the operations touch, in the ledger's lock
/// order, so a batch never deadlocks with the single transfers of other transactions.
async fn read_accounts(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    operations: &[Vec<Planned>],
) -> Result<HashMap<String, Account>, StoreError> {
    let mut ids: Vec<&String> = operations
        .iter()
        .flatten()
        .flat_map(|p| p.transfer.legs().iter().map(|leg| &leg.account))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    let ranks = lock_ranks(conn, project_id, &ids).await?;
    let rank = |id: &String| ranks.get(id).copied().unwrap_or(u8::MAX);
    ids.sort_by(|a, b| (rank(a), *a).cmp(&(rank(b), *b)));
    // One query, its rows locked in the order it returns them (PostgreSQL locks rows
    // as they leave the sort): the ledger's lock order.
    let mut places = Vec::with_capacity(ids.len());
    for i in 0..ids.len() {
        places.push(format!("WHEN ${} THEN {i}", i + 2));
    }
    let listed: Vec<String> = (0..ids.len()).map(|i| format!("${}", i + 2)).collect();
    let lock = match backend {
        Backend::Postgres => " FOR UPDATE",
        Backend::Sqlite => "",
    };
    let sql = format!(
        "SELECT id, balance, allow_negative FROM accounts WHERE project_id = $1 AND id IN ({}) \
         ORDER BY CASE id {} END{lock}",
        listed.join(", "),
        places.join(" ")
    );
    let mut query = sqlx::query(&sql).persistent(false).bind(project_id);
    for id in &ids {
        query = query.bind(*id);
    }
    let mut accounts = HashMap::with_capacity(ids.len());
    for row in query.fetch_all(&mut *conn).await? {
        let balance: i64 = row.try_get("balance")?;
        let allow_negative: i64 = row.try_get("allow_negative")?;
        accounts.insert(
            row.try_get("id")?,
            Account {
                read: balance,
                now: balance,
                allow_negative: allow_negative == 1,
            },
        );
    }
    if accounts.len() != ids.len() {
        return Err(StoreError::NotFound("account"));
    }
    Ok(accounts)
}

/// Writes every changed account's final balance in one statement, each only if it
/// still holds the balance the batch read.
async fn write_balances(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    accounts: &HashMap<String, Account>,
) -> Result<(), StoreError> {
    let changed: Vec<serde_json::Value> = accounts
        .iter()
        .filter(|(_, a)| a.now != a.read)
        .map(|(id, a)| serde_json::json!([id, a.now, a.read]))
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    let rows = match backend {
        Backend::Postgres => {
            "SELECT r ->> 0 AS id, (r ->> 1)::bigint AS new, (r ->> 2)::bigint AS read \
             FROM jsonb_array_elements($1::jsonb) AS r"
        }
        Backend::Sqlite => {
            "SELECT value ->> 0 AS id, value ->> 1 AS new, value ->> 2 AS read FROM json_each($1)"
        }
    };
    let sql = format!(
        "UPDATE accounts SET balance = x.new FROM ({rows}) AS x \
         WHERE accounts.id = x.id AND accounts.project_id = $2 AND accounts.balance = x.read"
    );
    let written = sqlx::query(&sql)
        .bind(serde_json::Value::from(changed.clone()).to_string())
        .bind(project_id)
        .execute(&mut *conn)
        .await
        .map_err(StoreError::from_write)?
        .rows_affected();
    if written != changed.len() as u64 {
        return Err(StoreError::Corrupt(
            "an account changed while a batch owned it".into(),
        ));
    }
    Ok(())
}

/// One operation against the running balances: every leg of every transfer, or none.
fn apply(
    accounts: &mut HashMap<String, Account>,
    operation: &[Planned],
) -> Result<Vec<Posted>, StoreError> {
    let limit = MAX_BALANCE.micros();
    let mut trial: HashMap<&str, i64> = HashMap::new();
    let mut posted = Vec::with_capacity(operation.len());
    for planned in operation {
        let legs = planned.transfer.legs();
        if legs
            .iter()
            .enumerate()
            .any(|(i, leg)| legs[..i].iter().any(|l| l.account == leg.account))
        {
            // As `ledger::post`: no flow moves money from an account to itself.
            return Err(StoreError::Corrupt(
                "a transfer with two legs on one account".into(),
            ));
        }
        let mut balances_after = Vec::with_capacity(planned.transfer.legs().len());
        for leg in planned.transfer.legs() {
            let account = accounts
                .get(&leg.account)
                .ok_or(StoreError::NotFound("account"))?;
            let before = trial
                .get(leg.account.as_str())
                .copied()
                .unwrap_or(account.now);
            let amount = leg.amount.micros();
            if amount.unsigned_abs() > limit.unsigned_abs() {
                return Err(StoreError::BalanceLimit {
                    account_id: leg.account.clone(),
                });
            }
            let after = before + amount;
            if !account.allow_negative && after < 0 {
                return Err(StoreError::InsufficientFunds {
                    account_id: leg.account.clone(),
                });
            }
            if after.unsigned_abs() > limit.unsigned_abs() {
                return Err(StoreError::BalanceLimit {
                    account_id: leg.account.clone(),
                });
            }
            trial.insert(&leg.account, after);
            balances_after.push((leg.account.clone(), Amount::from_micros(after)));
        }
        posted.push(Posted {
            transfer_id: new_id(),
            balances_after,
        });
    }
    for (id, balance) in trial {
        if let Some(account) = accounts.get_mut(id) {
            account.now = balance;
        }
    }
    Ok(posted)
}
