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
use crate::writer::{BatchConn, Lookup, Param, Part, Row, RowRead};
use crate::{Backend, StoreError};
use issuing_domain::ids::new_id;
use issuing_domain::ledger::Transfer;
use issuing_wire::Amount;
use std::collections::HashMap;

/// A transfer of one operation, tagged for the project's history.
#[derive(Debug, Clone)]
pub struct Planned {
    pub order_id: Option<String>,
    pub card_id: Option<String>,
    /// Unique per project and transfer kind (a card transaction's moves carry one).
    pub reference: Option<String>,
    pub transfer: Transfer<String>,
}

/// An account as the batch found it, and as its operations have left it so far.
struct Account {
    read: i64,
    now: i64,
    allow_negative: bool,
}

/// The accounts `planned` and `watched` touch, for `lock_order`.
pub fn touched<'a>(
    planned: impl IntoIterator<Item = &'a Planned>,
    watched: &'a str,
) -> Vec<&'a str> {
    let mut touched = vec![watched];
    for planned in planned {
        touched.extend(
            planned
                .transfer
                .legs()
                .iter()
                .map(|leg| leg.account.as_str()),
        );
    }
    touched
}

/// The project's accounts `ids`, once each, in the ledger's lock order (a batch locks
/// them in it, so it never deadlocks with the single transfers of other transactions).
/// Reads the accounts' kinds only where this process does not know them.
pub async fn lock_order(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    mut ids: Vec<&str>,
) -> Result<Vec<String>, StoreError> {
    ids.sort_unstable();
    ids.dedup();
    let owned: Vec<String> = ids.iter().map(|id| (*id).to_owned()).collect();
    let refs: Vec<&String> = owned.iter().collect();
    let ranks = lock_ranks(conn, project_id, &refs).await?;
    let rank = |id: &str| ranks.get(id).copied().unwrap_or(u8::MAX);
    ids.sort_by(|a, b| (rank(a), *a).cmp(&(rank(b), *b)));
    Ok(ids.into_iter().map(str::to_owned).collect())
}

/// The read of the accounts `ids` (in `lock_order`) that `Batch::of_rows` takes, as a
/// part of a batch's statement: on PostgreSQL each row locked as the list reaches it,
/// so in the list's order.
pub fn lock_part<'a>(project_id: &'a str, ids: &'a [String]) -> Part<'a> {
    Part::Locked(Lookup::project_rows(
        "accounts",
        ACCOUNT_COLUMNS,
        project_id,
        ids.iter().map(String::as_str).collect(),
    ))
}

const ACCOUNT_COLUMNS: &str = "id, balance, allow_negative";

/// One project's accounts in a batch: read once (PostgreSQL: locked), then every
/// operation posted against the running balances, then written once (`finish`).
pub struct Batch {
    project_id: String,
    accounts: HashMap<String, Account>,
    transfers: Vec<Vec<Cell>>,
    entries: Vec<Vec<Cell>>,
    now: i64,
}

impl Batch {
    /// Reads (PostgreSQL: locks) the project's accounts `ids`, in the ledger's lock
    /// order, so a batch never deadlocks with the single transfers of other
    /// transactions. Every one must exist.
    pub async fn read(
        conn: &mut BatchConn<'_>,
        project_id: &str,
        ids: Vec<&str>,
        now: i64,
    ) -> Result<Batch, StoreError> {
        let ids = lock_order(conn, project_id, ids).await?;
        let rows = conn.together(&[lock_part(project_id, &ids)]).await?;
        Batch::of_rows(project_id, &ids, rows.into_iter().flatten(), now)
    }

    /// The batch of the accounts `ids` from the rows of their `lock_part`. Every one
    /// must exist.
    pub fn of_rows(
        project_id: &str,
        ids: &[String],
        rows: impl IntoIterator<Item = Row>,
        now: i64,
    ) -> Result<Batch, StoreError> {
        let mut accounts = HashMap::with_capacity(ids.len());
        for row in rows {
            let balance = row.int("balance")?;
            accounts.insert(
                row.text("id")?,
                Account {
                    read: balance,
                    now: balance,
                    allow_negative: row.int("allow_negative")? == 1,
                },
            );
        }
        if accounts.len() != ids.len() || ids.iter().any(|id| !accounts.contains_key(id)) {
            return Err(StoreError::NotFound("account"));
        }
        Ok(Batch {
            project_id: project_id.to_owned(),
            accounts,
            transfers: Vec::new(),
            entries: Vec::new(),
            now,
        })
    }

    /// Posts every operation in order (`post`; an operation's transfers land together or
    /// not at all): each one's transfers as posted or why it was refused
    /// (`InsufficientFunds`, `BalanceLimit`), with `watched`'s balance as the batch stood
    /// after it (an order shows the master balance its debits left, or found).
    pub fn post_all(
        &mut self,
        operations: &[Vec<Planned>],
        watched: &str,
    ) -> Vec<(Result<Vec<Posted>, StoreError>, i64)> {
        let mut answers = Vec::with_capacity(operations.len());
        for operation in operations {
            let answer = self.post(operation);
            answers.push((answer, self.balance(watched).unwrap_or(0)));
        }
        answers
    }

    /// An account's balance as the operations posted so far left it.
    pub fn balance(&self, account: &str) -> Option<i64> {
        self.accounts.get(account).map(|a| a.now)
    }

    /// Posts one operation's transfers against the running balances: every leg of
    /// every transfer, or (refused: `InsufficientFunds`, `BalanceLimit`) none.
    pub fn post(&mut self, operation: &[Planned]) -> Result<Vec<Posted>, StoreError> {
        let posted = apply(&mut self.accounts, operation)?;
        for (planned, posted) in operation.iter().zip(&posted) {
            self.transfers.push(vec![
                Cell::text(&posted.transfer_id),
                Cell::text(&self.project_id),
                Cell::text(planned.transfer.kind().as_str()),
                Cell::Text(planned.order_id.clone()),
                Cell::Text(planned.card_id.clone()),
                Cell::Text(planned.reference.clone()),
                Cell::int(self.now),
            ]);
            // `apply` answers one balance per leg, in the legs' order.
            for (leg, (account, balance)) in
                planned.transfer.legs().iter().zip(&posted.balances_after)
            {
                self.entries.push(vec![
                    Cell::text(&posted.transfer_id),
                    Cell::text(account),
                    Cell::int(leg.amount.micros()),
                    Cell::int(balance.micros()),
                    Cell::int(self.now),
                ]);
            }
        }
        Ok(posted)
    }

    /// Writes every changed account's balance and adds the posted transfers and their
    /// entries to `inserts`, for the caller to write in the same transaction.
    pub async fn finish(
        self,
        conn: &mut BatchConn<'_>,
        inserts: &mut Inserts,
    ) -> Result<(), StoreError> {
        inserts.add(
            "INSERT INTO transfers (id, project_id, kind, order_id, card_id, reference, created_at)",
            self.transfers,
        );
        inserts.add(
            "INSERT INTO entries (transfer_id, account_id, amount, balance_after, created_at)",
            self.entries,
        );
        write_balances(conn, &self.project_id, &self.accounts).await
    }
}

/// Writes every changed account's final balance in one statement, each only if it
/// still holds the balance the batch read. Each account is found by its key, so neither
/// planner can choose to walk the project's accounts (PostgreSQL's generic plan of an
/// `UPDATE … FROM` a JSON list did, seq-scanning them all).
async fn write_balances(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    accounts: &HashMap<String, Account>,
) -> Result<(), StoreError> {
    let changed: Vec<(&String, &Account)> =
        accounts.iter().filter(|(_, a)| a.now != a.read).collect();
    if changed.is_empty() {
        return Ok(());
    }
    if let BatchConn::Sqlite(_) = conn {
        // A cached statement per account costs microseconds on the writer's thread.
        for (id, account) in &changed {
            let written = conn
                .execute(
                    "UPDATE accounts SET balance = $1 WHERE id = $2 AND project_id = $3 AND balance = $4",
                    &[account.now.into(), id.as_str().into(), project_id.into(), account.read.into()],
                )
                .await?;
            if written != 1 {
                return Err(changed_meanwhile());
            }
        }
        return Ok(());
    }
    if conn.backend() == Backend::Postgres {
        return write_balances_postgres(conn, project_id, &changed).await;
    }
    // A pooled SQLite connection (sqlx): one statement. $1 the project, then per
    // account: its id, its new balance, the balance read.
    let place = |i: usize| (3 * i + 2, 3 * i + 3, 3 * i + 4);
    let (mut ids, mut news, mut reads) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..changed.len() {
        let (id, new, read) = place(i);
        ids.push(format!("${id}"));
        news.push(format!("WHEN ${id} THEN ${new}"));
        reads.push(format!("WHEN ${id} THEN balance = ${read}"));
    }
    let sql = format!(
        "UPDATE accounts SET balance = CASE id {} END \
         WHERE project_id = $1 AND id IN ({}) AND CASE id {} END \
         RETURNING 1 AS written",
        news.join(" "),
        ids.join(", "),
        reads.join(" ")
    );
    let mut params: Vec<Param<'_>> = vec![project_id.into()];
    for (id, account) in &changed {
        params.extend([
            Param::from(id.as_str()),
            account.now.into(),
            account.read.into(),
        ]);
    }
    let rows = conn.rows(&sql, &params).await?;
    if rows.len() != changed.len() {
        return Err(changed_meanwhile());
    }
    Ok(())
}

/// PostgreSQL: every changed balance in one statement with one parameter, the same
/// statement whatever their number. Each account is found by its key (a lookup per
/// account, as `query::rows_of_list` does: a join could be planned as a scan of the
/// table) and only if it still holds the balance read, then updated in place of the
/// row found; the batch locked those rows, so they cannot move meanwhile. A statement
/// of one update per account cost a plan per batch size and an update node per account.
async fn write_balances_postgres(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    changed: &[(&String, &Account)],
) -> Result<(), StoreError> {
    let list: Vec<serde_json::Value> = changed
        .iter()
        .map(|(id, a)| serde_json::json!([id, a.now, a.read]))
        .collect();
    let list = serde_json::Value::from(list).to_string();
    let rows = conn
        .rows(
            "UPDATE accounts a SET balance = v.balance FROM (\
               SELECT (item ->> 1)::bigint AS balance, found.ctid AS place \
               FROM jsonb_array_elements($2::jsonb) AS list (item) \
               CROSS JOIN LATERAL (SELECT ctid FROM accounts WHERE id = item ->> 0 \
                 AND project_id = $1 AND balance = (item ->> 2)::bigint LIMIT 1) AS found\
             ) AS v WHERE a.ctid = v.place RETURNING 1 AS written",
            &[project_id.into(), list.as_str().into()],
        )
        .await?;
    if rows.len() != changed.len() {
        return Err(changed_meanwhile());
    }
    Ok(())
}

fn changed_meanwhile() -> StoreError {
    StoreError::Corrupt("an account changed while a batch owned it".into())
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
pub(crate) mod tests {
    use super::*;
    use crate::card_usage::tests::Rng;
    use crate::ledger::tests::{entries, project_with_accounts};
    use crate::ledger::{post, verify, TransferMeta};
    use issuing_domain::ledger::{AccountKind, TransferKind};

    /// A batch as a writer applies it, in one call: read (PostgreSQL: lock) what the
    /// operations touch, post them in order, write the balances and add the transfers
    /// and entries to `inserts`.
    async fn post_batch(
        conn: &mut BatchConn<'_>,
        project_id: &str,
        operations: &[Vec<Planned>],
        watched: &str,
        now: i64,
        inserts: &mut Inserts,
    ) -> Result<Vec<(Result<Vec<Posted>, StoreError>, i64)>, StoreError> {
        let touched = touched(operations.iter().flatten(), watched);
        let mut batch = Batch::read(conn, project_id, touched, now).await?;
        let answers = batch.post_all(operations, watched);
        batch.finish(conn, inserts).await?;
        Ok(answers)
    }

    /// Random batches of random operations (one or two transfers between the master,
    /// in-flight and fee accounts, amounts up to twice what is there) against a model of
    /// the balances: each operation is accepted exactly when the model, applying the
    /// batch's operations in order, keeps every account at or above zero; a refused one
    /// names the account and writes nothing. After every batch the stored balances are
    /// the model's, every entry's balance is its account's running sum, and `verify`
    /// finds nothing. Called by `ledger::tests` on each backend, which owns the databases.
    pub(crate) async fn batches_match_a_model(store: &crate::Store, postgres: bool) {
        let project = if postgres { "b-pg" } else { "b-sqlite" };
        let mut conn = store.conn().await.unwrap();
        let ids = project_with_accounts(
            &mut conn,
            project,
            &[
                AccountKind::DepositSource,
                AccountKind::Master,
                AccountKind::InFlight,
                AccountKind::FeeIncome,
            ],
        )
        .await;
        let (source, accounts) = (ids[0].clone(), &ids[1..]);
        let meta = TransferMeta {
            project_id: project,
            order_id: None,
            card_id: None,
            reference: None,
        };
        let deposit = Transfer::simple(
            TransferKind::Deposit,
            source,
            accounts[0].clone(),
            Amount::from_micros(1_000),
        )
        .unwrap();
        post(&mut conn, &meta, &deposit).await.unwrap();
        drop(conn);
        let mut model: HashMap<String, i64> = accounts.iter().map(|a| (a.clone(), 0)).collect();
        model.insert(accounts[0].clone(), 1_000);

        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let (mut accepted, mut refused) = (0, 0);
        for batch in 0..40 {
            let mut operations = Vec::new();
            for _ in 0..=rng.below(12) {
                let mut operation = Vec::new();
                for _ in 0..=rng.below(2) {
                    let from = rng.below(3) as usize;
                    let to = (from + 1 + rng.below(2) as usize) % 3;
                    let there = model[&accounts[from]].max(10) as u64;
                    let amount = 1 + rng.below(2 * there) as i64;
                    operation.push(Planned {
                        order_id: Some(format!("o{batch}")),
                        card_id: None,
                        reference: None,
                        transfer: Transfer::simple(
                            TransferKind::CardTopup,
                            accounts[from].clone(),
                            accounts[to].clone(),
                            Amount::from_micros(amount),
                        )
                        .unwrap(),
                    });
                }
                operations.push(operation);
            }
            // Through the batch writers' own path: on SQLite the writer's thread.
            let (planned, watched) = (operations.clone(), accounts[0].clone());
            let (answers, durable) = store
                .write_batch(move |mut conn| {
                    Box::pin(async move {
                        let mut inserts = Inserts::default();
                        let answers =
                            post_batch(&mut conn, project, &planned, &watched, batch, &mut inserts)
                                .await?;
                        inserts.write(&mut conn).await?;
                        Ok(answers)
                    })
                })
                .await
                .unwrap();
            durable.wait().await.unwrap();
            for (operation, (answer, master)) in operations.iter().zip(&answers) {
                let mut trial = model.clone();
                let mut short = None;
                for planned in operation {
                    for leg in planned.transfer.legs() {
                        let balance = trial.get_mut(&leg.account).unwrap();
                        *balance += leg.amount.micros();
                        if *balance < 0 && short.is_none() {
                            short = Some(leg.account.clone());
                        }
                    }
                }
                match (short, answer) {
                    (None, Ok(posted)) => {
                        assert_eq!(posted.len(), operation.len());
                        model = trial;
                        accepted += 1;
                    }
                    (Some(account), Err(StoreError::InsufficientFunds { account_id })) => {
                        assert_eq!(*account_id, account);
                        refused += 1;
                    }
                    (short, answer) => panic!("model refuses {short:?}, batch answered {answer:?}"),
                }
                // The watched account as the batch stood after this operation.
                assert_eq!(*master, model[&accounts[0]], "batch {batch}");
            }
            let mut conn = store.conn().await.unwrap();
            let all_entries = entries(&mut conn).await;
            for (account, balance) in &model {
                let stored: i64 = sqlx::query_scalar("SELECT balance FROM accounts WHERE id = $1")
                    .bind(account)
                    .fetch_one(&mut *conn)
                    .await
                    .unwrap();
                assert_eq!(stored, *balance, "batch {batch}");
                let sums: Vec<(i64, i64)> = all_entries
                    .iter()
                    .filter(|(of, _, _)| of == account)
                    .map(|(_, amount, after)| (*amount, *after))
                    .collect();
                let mut running = 0;
                for (amount, after) in sums {
                    running += amount;
                    assert_eq!(after, running, "batch {batch}: an entry's balance after");
                }
            }
            assert_eq!(
                verify(&mut conn).await.unwrap(),
                Vec::new(),
                "batch {batch}"
            );
        }
        assert!(
            accepted > 50 && refused > 20,
            "{accepted} accepted, {refused} refused"
        );
    }

    /// A balance that is not the one the batch read when it writes its balances fails
    /// the batch, which then writes nothing; the same batch on the balance as read
    /// writes every changed account.
    pub(crate) async fn a_balance_changed_meanwhile_fails_the_batch(
        store: &crate::Store,
        postgres: bool,
    ) {
        let project = if postgres { "m-pg" } else { "m-sqlite" };
        let mut conn = store.conn().await.unwrap();
        let ids = project_with_accounts(
            &mut conn,
            project,
            &[
                AccountKind::DepositSource,
                AccountKind::Master,
                AccountKind::InFlight,
            ],
        )
        .await;
        drop(conn);
        let run = |meddle: bool| {
            let ids = ids.clone();
            store.write_batch(move |mut conn| {
                Box::pin(async move {
                    let operation = vec![Planned {
                        order_id: None,
                        card_id: None,
                        reference: None,
                        transfer: Transfer::simple(
                            TransferKind::Deposit,
                            ids[0].clone(),
                            ids[1].clone(),
                            Amount::from_micros(700),
                        )
                        .unwrap(),
                    }];
                    let touched = touched(operation.iter(), &ids[1]);
                    let mut batch = Batch::read(&mut conn, project, touched, 1).await?;
                    batch.post(&operation)?;
                    if meddle {
                        conn.execute(
                            "UPDATE accounts SET balance = balance + 1 WHERE id = $1",
                            &[ids[1].as_str().into()],
                        )
                        .await?;
                    }
                    let mut inserts = Inserts::default();
                    batch.finish(&mut conn, &mut inserts).await?;
                    inserts.write(&mut conn).await
                })
            })
        };
        let failed = run(true).await;
        assert!(
            matches!(failed, Err(StoreError::Corrupt(_))),
            "{:?}",
            failed.err()
        );
        let (_, durable) = run(false).await.unwrap();
        durable.wait().await.unwrap();
        let mut conn = store.conn().await.unwrap();
        for (id, balance) in [(&ids[0], -700), (&ids[1], 700)] {
            let stored: i64 = sqlx::query_scalar("SELECT balance FROM accounts WHERE id = $1")
                .bind(id)
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            assert_eq!(stored, balance);
        }
    }
}
