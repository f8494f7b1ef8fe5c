//! Statements from the ledger (CONTRACT §17): a set of accounts' movements over
//! `[start, close)`, with the balances at both ends. A balance at an instant is the sum
//! of the accounts' entries before it (not an entry's `balance_after`: entries of one
//! account are chained by id, and two transactions may take their timestamps in the
//! other order), so opening + every movement = closing holds to the micro-unit by
//! construction. The index `entries_account_time` (account, time, amount) answers each
//! sum from the index alone.

use crate::writer::{AsBatch, RowRead};
use crate::{Conn, StoreError};
use sqlx::Row;

/// One movement of the accounts: a transfer's net effect on them (the card's funds,
/// or the master balance), never zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Movement {
    /// The entry (project statements) or the transfer's first entry (card statements).
    pub entry_id: i64,
    pub transfer_id: String,
    pub at: i64,
    pub kind: String,
    pub amount: i64,
    /// The sum of the period's movements up to and including this one.
    pub running: i64,
    pub order_id: Option<String>,
    pub card_id: Option<String>,
    pub reference: Option<String>,
}

/// What a period's movements of one kind add up to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KindTotal {
    pub kind: String,
    /// A card withdrawal made by `cards/close` (its order's reason).
    pub closing: bool,
    pub amount: i64,
    pub count: i64,
}

fn in_list(first: usize, n: usize) -> String {
    (first..first + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The sum of `accounts`' entries before `at`.
pub async fn balance_before(
    conn: &mut Conn,
    accounts: &[String],
    at: i64,
) -> Result<i64, StoreError> {
    let sql = format!(
        "SELECT CAST(COALESCE(SUM(amount), 0) AS BIGINT) FROM entries \
         WHERE account_id IN ({}) AND created_at < ${}",
        in_list(1, accounts.len()),
        accounts.len() + 1
    );
    let mut q = sqlx::query_scalar::<_, i64>(&sql);
    for a in accounts {
        q = q.bind(a);
    }
    Ok(q.bind(at).fetch_one(&mut *conn).await?)
}

/// How movements are grouped: by transfer (a card's funds are two accounts, and an
/// authorization's hold moves money between them without changing the funds) or one
/// per entry (the master balance, as `project/txs` lists it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    ByTransfer,
    ByEntry,
}

/// The movements of the period as rows `m(transfer_id, at, first_id, net)`, with the
/// placeholders `$1..$n` the accounts, `$n+1` start and `$n+2` close.
fn movements(accounts: usize, grouping: Grouping) -> String {
    let list = in_list(1, accounts);
    let (start, close) = (accounts + 1, accounts + 2);
    match grouping {
        Grouping::ByTransfer => format!(
            "SELECT transfer_id, MIN(created_at) AS at, MIN(id) AS first_id, CAST(SUM(amount) AS BIGINT) AS net \
             FROM entries WHERE account_id IN ({list}) AND created_at >= ${start} \
             AND created_at < ${close} GROUP BY transfer_id HAVING SUM(amount) <> 0"
        ),
        Grouping::ByEntry => format!(
            "SELECT transfer_id, created_at AS at, id AS first_id, amount AS net \
             FROM entries WHERE account_id IN ({list}) AND created_at >= ${start} \
             AND created_at < ${close} AND amount <> 0"
        ),
    }
}

/// Whether a `card_withdraw` transfer's order came from `cards/close`.
const CLOSING: &str = "(t.kind = 'card_withdraw' AND EXISTS (SELECT 1 FROM orders o \
     WHERE o.id = t.order_id AND o.project_id = t.project_id \
     AND o.data LIKE '%\"reason\":\"card_close\"%'))";

/// The period's totals per kind (and closing flag), over every movement.
pub async fn totals(
    conn: &mut Conn,
    project_id: &str,
    accounts: &[String],
    (start, close): (i64, i64),
    grouping: Grouping,
) -> Result<Vec<KindTotal>, StoreError> {
    let n = accounts.len();
    let sql = format!(
        "SELECT t.kind, CASE WHEN {CLOSING} THEN 1 ELSE 0 END AS closing, \
         CAST(SUM(m.net) AS BIGINT) AS total, CAST(COUNT(*) AS BIGINT) AS n \
         FROM ({}) m JOIN transfers t ON t.id = m.transfer_id WHERE t.project_id = ${} \
         GROUP BY t.kind, CASE WHEN {CLOSING} THEN 1 ELSE 0 END",
        movements(n, grouping),
        n + 3
    );
    let mut q = sqlx::query(&sql);
    for a in accounts {
        q = q.bind(a);
    }
    let rows = q
        .bind(start)
        .bind(close)
        .bind(project_id)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|r| {
            Ok(KindTotal {
                kind: r.try_get("kind")?,
                closing: r
                    .try_get::<i32, _>("closing")
                    .map(|c| c != 0)
                    .or_else(|_| r.try_get::<i64, _>("closing").map(|c| c != 0))?,
                amount: r.try_get("total")?,
                count: r.try_get("n")?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(Into::into)
}

/// One page of the period's movements in order, each with the running sum.
pub async fn page(
    conn: &mut Conn,
    project_id: &str,
    accounts: &[String],
    (start, close): (i64, i64),
    grouping: Grouping,
    (skip, limit): (i64, i64),
) -> Result<Vec<Movement>, StoreError> {
    let n = accounts.len();
    let sql = format!(
        "SELECT m.transfer_id, m.at, m.first_id, m.net, t.kind, t.order_id, t.card_id, t.reference, \
         CAST(SUM(m.net) OVER (ORDER BY m.at, m.first_id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS BIGINT) AS running \
         FROM ({}) m JOIN transfers t ON t.id = m.transfer_id WHERE t.project_id = ${} \
         ORDER BY m.at, m.first_id LIMIT ${} OFFSET ${}",
        movements(n, grouping),
        n + 3,
        n + 4,
        n + 5
    );
    let mut q = sqlx::query(&sql);
    for a in accounts {
        q = q.bind(a);
    }
    let rows = q
        .bind(start)
        .bind(close)
        .bind(project_id)
        .bind(limit)
        .bind(skip)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|r| {
            Ok(Movement {
                entry_id: r.try_get("first_id")?,
                transfer_id: r.try_get("transfer_id")?,
                at: r.try_get("at")?,
                kind: r.try_get("kind")?,
                amount: r.try_get("net")?,
                running: r.try_get("running")?,
                order_id: r.try_get("order_id")?,
                card_id: r.try_get("card_id")?,
                reference: r.try_get("reference")?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(Into::into)
}

/// The merchant names of the project's card transactions `ids`, for descriptions.
pub async fn merchant_names(
    conn: &mut Conn,
    project_id: &str,
    ids: &[&str],
) -> Result<std::collections::HashMap<String, String>, StoreError> {
    if ids.is_empty() {
        return Ok(std::collections::HashMap::new());
    }
    let rows = crate::query::project_rows_by_id(
        &mut conn.as_batch(),
        "card_transactions",
        "id, merchant",
        project_id,
        ids,
        false,
    )
    .await?;
    let mut out = std::collections::HashMap::new();
    for r in rows {
        let merchant: serde_json::Value =
            serde_json::from_str(&r.text("merchant")?).unwrap_or_default();
        if let Some(name) = merchant["name"].as_str().filter(|n| !n.is_empty()) {
            out.insert(r.text("id")?, name.to_owned());
        }
    }
    Ok(out)
}
