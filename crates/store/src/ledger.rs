//! The double-entry ledger in storage. A transfer's legs are applied with conditional
//! updates (`balance + amount >= 0` unless the account is a contra account), each
//! writing an immutable entry with the balance after it, all inside the caller's
//! transaction: either every leg lands or none does. A CHECK constraint backs the rule.

use crate::account_cache;
use crate::query::{find_page, Filter, Source};
use crate::writer::{AsBatch, BatchConn, RowRead};
use crate::{Backend, Conn, StoreError};
use issuing_domain::ids::new_id;
use issuing_domain::ledger::{AccountKind, Leg, Transfer, TransferKind};
use issuing_wire::{Amount, PageRequest};
use sqlx::Row;

pub const CURRENCY: &str = "usdt";

/// The largest balance, of either sign, any account may hold: 4×10^12 USDT. Every leg
/// is bounded by it too, so `balance + amount` stays inside an i64 on both backends
/// (PostgreSQL fails on an overflowing BIGINT, SQLite turns the sum into a float). A
/// transfer that would cross it is refused with `StoreError::BalanceLimit`.
pub const MAX_BALANCE: Amount =
    Amount::from_micros(4_000_000_000_000 * issuing_wire::MICROS_PER_UNIT);

/// The accounts every project has from the start.
const PROJECT_ACCOUNTS: &[AccountKind] = &[
    AccountKind::Master,
    AccountKind::InFlight,
    AccountKind::FeeIncome,
    AccountKind::DepositSource,
    AccountKind::Network,
    AccountKind::Debt,
    AccountKind::Dispute,
];

pub async fn open_project_accounts(
    conn: &mut Conn,
    project_id: &str,
    now: i64,
) -> Result<(), StoreError> {
    for kind in PROJECT_ACCOUNTS {
        open_account(conn, project_id, *kind, None, now).await?;
    }
    Ok(())
}

/// Adds a new card's accounts (its funds and its holds) to `inserts` (a batch
/// writer's), as `open_account` opens each.
pub fn open_card_accounts(
    inserts: &mut crate::query::Inserts,
    project_id: &str,
    card_id: &str,
    now: i64,
) {
    use crate::query::Cell;
    let rows = [AccountKind::Card, AccountKind::CardHold]
        .into_iter()
        .map(|kind| {
            vec![
                Cell::text(new_id()),
                Cell::text(project_id),
                Cell::text(kind.as_str()),
                Cell::text(card_id),
                Cell::text(CURRENCY),
                Cell::int(0),
                Cell::int(i64::from(kind.may_go_negative())),
                Cell::int(now),
            ]
        })
        .collect();
    inserts.add(
        "INSERT INTO accounts (id, project_id, kind, card_id, currency, balance, allow_negative, created_at)",
        rows,
    );
}

pub async fn open_account(
    conn: &mut Conn,
    project_id: &str,
    kind: AccountKind,
    card_id: Option<&str>,
    now: i64,
) -> Result<String, StoreError> {
    let id = new_id();
    sqlx::query(
        "INSERT INTO accounts (id, project_id, kind, card_id, currency, balance, allow_negative, created_at) \
         VALUES ($1, $2, $3, $4, $5, 0, $6, $7)",
    )
    .bind(&id)
    .bind(project_id)
    .bind(kind.as_str())
    .bind(card_id)
    .bind(CURRENCY)
    .bind(i64::from(kind.may_go_negative()))
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(id)
}

/// The id of one of the project's own (non-card) accounts.
pub async fn project_account(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    kind: AccountKind,
) -> Result<String, StoreError> {
    if let Some(id) = account_cache::id(project_id, None, kind) {
        return Ok(id);
    }
    let row = conn
        .row(
            "SELECT id FROM accounts WHERE project_id = $1 AND kind = $2 AND card_id IS NULL",
            &[project_id.into(), kind.as_str().into()],
        )
        .await?
        .ok_or(StoreError::NotFound("account"))?;
    let id = row.text("id")?;
    account_cache::remember(project_id, None, kind, &id);
    Ok(id)
}

pub async fn project_balance(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    kind: AccountKind,
) -> Result<Amount, StoreError> {
    let row = conn
        .row(
            "SELECT balance FROM accounts WHERE project_id = $1 AND kind = $2 AND card_id IS NULL",
            &[project_id.into(), kind.as_str().into()],
        )
        .await?
        .ok_or(StoreError::NotFound("account"))?;
    Ok(Amount::from_micros(row.int("balance")?))
}

/// The master balance as the project sees it (`project/balance`, orders, the console):
/// the master account plus the debt account, so negative while the project owes what a
/// real network's clearings took beyond its funds. At most one of the two is non-zero
/// after any transaction (`credit_master` repays debt first; a shortfall empties the
/// master balance before it adds debt).
pub async fn master_balance(conn: &mut Conn, project_id: &str) -> Result<Amount, StoreError> {
    let total: Option<i64> = sqlx::query_scalar(
        "SELECT CAST(SUM(balance) AS BIGINT) FROM accounts \
         WHERE project_id = $1 AND card_id IS NULL AND kind IN ('master', 'debt')",
    )
    .bind(project_id)
    .fetch_one(&mut *conn)
    .await?;
    total
        .map(Amount::from_micros)
        .ok_or(StoreError::NotFound("account"))
}

/// Locks the master account and answers the project's debt (zero or negative) as it is
/// under that lock. Every change of the debt account starts here or holds the lock
/// already, so a debt read here stays true until the caller's transaction ends.
pub async fn lock_master_read_debt(
    conn: &mut BatchConn<'_>,
    project_id: &str,
) -> Result<Amount, StoreError> {
    lock_project_account(conn, project_id, AccountKind::Master).await?;
    project_balance(conn, project_id, AccountKind::Debt).await
}

/// Credits the master balance with `amount` from `from` (an account id of the project),
/// paying the project's debt first: the part the debt takes goes to the debt account, the
/// rest to the master account, in one transfer of `kind`. So money reaching a project
/// in debt (a deposit, a refund of a failed order, a completed withdrawal) covers the
/// debt before it can be spent again, and a project in debt always has a master account
/// at zero.
pub async fn credit_master(
    conn: &mut Conn,
    meta: &TransferMeta<'_>,
    kind: TransferKind,
    from: String,
    amount: Amount,
) -> Result<Posted, StoreError> {
    let debt = lock_master_read_debt(&mut conn.as_batch(), meta.project_id).await?;
    let master =
        project_account(&mut conn.as_batch(), meta.project_id, AccountKind::Master).await?;
    let repaid = amount.micros().min(-debt.micros()).max(0);
    let mut legs = vec![
        Leg {
            account: from,
            amount: Amount::from_micros(-amount.micros()),
        },
        Leg {
            account: master,
            amount: Amount::from_micros(amount.micros() - repaid),
        },
    ];
    if repaid > 0 {
        legs.push(Leg {
            account: project_account(&mut conn.as_batch(), meta.project_id, AccountKind::Debt)
                .await?,
            amount: Amount::from_micros(repaid),
        });
    }
    let transfer = Transfer::new(kind, legs).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    post(conn, meta, &transfer).await
}

/// The id and balance of a card's account (its free funds).
pub async fn card_account(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
) -> Result<(String, Amount), StoreError> {
    card_account_of_kind(conn, project_id, card_id, AccountKind::Card).await
}

/// The id of a card's funds or hold account.
pub async fn card_account_id(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
    kind: AccountKind,
) -> Result<String, StoreError> {
    if let Some(id) = account_cache::id(project_id, Some(card_id), kind) {
        return Ok(id);
    }
    Ok(card_account_of_kind(conn, project_id, card_id, kind)
        .await?
        .0)
}

/// The (funds, hold) account ids of each of the project's `cards` that has both, from
/// the account cache, or read once (two queries) for the cards it does not know.
pub async fn card_accounts(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    cards: &[&str],
) -> Result<std::collections::HashMap<String, (String, String)>, StoreError> {
    let mut found = std::collections::HashMap::with_capacity(cards.len());
    let mut unknown = Vec::new();
    for card in cards {
        match (
            account_cache::id(project_id, Some(card), AccountKind::Card),
            account_cache::id(project_id, Some(card), AccountKind::CardHold),
        ) {
            (Some(funds), Some(hold)) => {
                found.insert((*card).to_owned(), (funds, hold));
            }
            _ => unknown.push(*card),
        }
    }
    if unknown.is_empty() {
        return Ok(found);
    }
    let mut ids: std::collections::HashMap<&str, [Option<String>; 2]> =
        unknown.iter().map(|c| (*c, [None, None])).collect();
    for (slot, kind) in [AccountKind::Card, AccountKind::CardHold]
        .into_iter()
        .enumerate()
    {
        let rows = conn
            .rows_by_keys(
                "accounts",
                "id, card_id",
                "card_id",
                "project_id = $1 AND kind = $2",
                &[project_id.into(), kind.as_str().into()],
                &unknown,
                false,
            )
            .await?;
        for r in rows {
            let (id, card) = (r.text("id")?, r.text("card_id")?);
            account_cache::remember(project_id, Some(&card), kind, &id);
            if let Some(pair) = ids.get_mut(card.as_str()) {
                pair[slot] = Some(id);
            }
        }
    }
    for (card, [funds, hold]) in ids {
        if let (Some(funds), Some(hold)) = (funds, hold) {
            found.insert(card.to_owned(), (funds, hold));
        }
    }
    Ok(found)
}

/// Locks a card's accounts (funds, then hold: the ledger's lock order) until the
/// caller's transaction ends, so every card network message on one card is applied one
/// after another on PostgreSQL; SQLite's write transaction already serialises them.
/// Answers the card's available and held funds as read under that lock.
pub async fn lock_card_accounts(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
) -> Result<(Amount, Amount), StoreError> {
    let lock = if conn.backend_name() == "PostgreSQL" {
        " FOR UPDATE"
    } else {
        ""
    };
    let sql = format!(
        "SELECT {FUNDS_COLUMNS} FROM accounts WHERE project_id = $1 AND card_id = $2 \
         ORDER BY kind{lock}"
    );
    let rows = sqlx::query(&sql)
        .bind(project_id)
        .bind(card_id)
        .fetch_all(&mut *conn)
        .await?;
    funds_of(project_id, card_id, &rows)
}

/// Locks one of the project's own accounts until the caller's transaction ends (on
/// PostgreSQL), for flows that must take it before a card's accounts to keep the lock
/// order (`in_flight` before a card).
pub async fn lock_project_account(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    kind: AccountKind,
) -> Result<(), StoreError> {
    let sql = match conn.backend() {
        Backend::Postgres => {
            "SELECT id FROM accounts WHERE project_id = $1 AND kind = $2 AND card_id IS NULL FOR UPDATE"
        }
        Backend::Sqlite => {
            "SELECT id FROM accounts WHERE project_id = $1 AND kind = $2 AND card_id IS NULL"
        }
    };
    conn.rows(sql, &[project_id.into(), kind.as_str().into()])
        .await?;
    Ok(())
}

/// A card's available and held funds, read together.
pub async fn card_funds(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
) -> Result<(Amount, Amount), StoreError> {
    let sql =
        format!("SELECT {FUNDS_COLUMNS} FROM accounts WHERE project_id = $1 AND card_id = $2");
    let rows = sqlx::query(&sql)
        .bind(project_id)
        .bind(card_id)
        .fetch_all(&mut *conn)
        .await?;
    funds_of(project_id, card_id, &rows)
}

/// A card account's columns as `funds_of` reads them; named apart from the card's own
/// columns so one query can answer both (`cards::get_locking_funds`).
pub(crate) const FUNDS_COLUMNS: &str =
    "accounts.id AS account_id, accounts.kind AS account_kind, accounts.balance AS account_balance";

/// A card's available and held funds from its accounts' rows (`FUNDS_COLUMNS`).
pub(crate) fn funds_of(
    project_id: &str,
    card_id: &str,
    rows: &[sqlx::any::AnyRow],
) -> Result<(Amount, Amount), StoreError> {
    let (mut available, mut held) = (None, Amount::ZERO);
    for r in rows {
        let kind: String = r.try_get("account_kind")?;
        let id: String = r.try_get("account_id")?;
        let balance = Amount::from_micros(r.try_get("account_balance")?);
        let kind = AccountKind::parse(&kind);
        if let Some(kind) = kind {
            account_cache::remember(project_id, Some(card_id), kind, &id);
        }
        match kind {
            Some(AccountKind::Card) => available = Some(balance),
            Some(AccountKind::CardHold) => held = balance,
            _ => {}
        }
    }
    Ok((available.ok_or(StoreError::NotFound("card account"))?, held))
}

async fn card_account_of_kind(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
    kind: AccountKind,
) -> Result<(String, Amount), StoreError> {
    let row = sqlx::query(
        "SELECT id, balance FROM accounts WHERE project_id = $1 AND card_id = $2 AND kind = $3",
    )
    .bind(project_id)
    .bind(card_id)
    .bind(kind.as_str())
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(StoreError::NotFound("card account"))?;
    let id: String = row.try_get("id")?;
    account_cache::remember(project_id, Some(card_id), kind, &id);
    Ok((id, Amount::from_micros(row.try_get("balance")?)))
}

/// What a transfer is about, for the history a project reconciles against.
#[derive(Debug, Clone, Default)]
pub struct TransferMeta<'a> {
    pub project_id: &'a str,
    pub order_id: Option<&'a str>,
    pub card_id: Option<&'a str>,
    /// An external reference (e.g. a chain transaction hash): unique per project and
    /// kind, so the same deposit can never be credited twice.
    pub reference: Option<&'a str>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Posted {
    pub transfer_id: String,
    /// (account id, balance after) for each leg, in the order the legs were applied.
    pub balances_after: Vec<(String, Amount)>,
}

/// Applies a balanced transfer. `InsufficientFunds` names the account that would have
/// gone negative, `BalanceLimit` one that would pass `MAX_BALANCE`; `Conflict` means
/// the reference was already used. On error the caller must roll back (dropping the
/// transaction does): rows written before the refused leg stay until then.
pub async fn post(
    conn: &mut Conn,
    meta: &TransferMeta<'_>,
    transfer: &Transfer<String>,
) -> Result<Posted, StoreError> {
    let now = issuing_domain::time::now_micros();
    let transfer_id = new_id();
    // One lock order for every transfer keeps concurrent transactions from deadlocking
    // on PostgreSQL, also those that post several transfers: by account kind (the
    // master account first, card accounts last), then by id. Sorting by id alone is not
    // enough: ids need not sort by account kind (another process, an older id format),
    // so a topup (master → in-flight, then master → fees) and an issue (master → fees)
    // could take the master and fee rows in opposite orders. With the master first, every transaction that touches it
    // takes it before anything else, and the others only ever lock in-flight, then a card.
    let accounts: Vec<&String> = transfer.legs().iter().map(|leg| &leg.account).collect();
    let ranks = lock_ranks(&mut conn.as_batch(), meta.project_id, &accounts).await?;
    let rank = |account: &String| ranks.get(account).copied().unwrap_or(u8::MAX);
    let mut legs: Vec<_> = transfer.legs().iter().collect();
    legs.sort_by(|a, b| (rank(&a.account), &a.account).cmp(&(rank(&b.account), &b.account)));
    if legs.is_empty() {
        return Err(StoreError::Corrupt("a transfer without legs".into()));
    }
    // One statement updates every leg on PostgreSQL, and a statement cannot update one
    // row twice; no flow moves money from an account to itself.
    if legs.windows(2).any(|w| w[0].account == w[1].account) {
        return Err(StoreError::Corrupt(
            "a transfer with two legs on one account".into(),
        ));
    }
    let limit = MAX_BALANCE.micros();
    if let Some(leg) = legs
        .iter()
        .find(|leg| leg.amount.micros().unsigned_abs() > limit.unsigned_abs())
    {
        return Err(StoreError::BalanceLimit {
            account_id: leg.account.clone(),
        });
    }
    let new = NewTransfer {
        id: &transfer_id,
        meta,
        kind: transfer.kind(),
        legs: &legs,
        now,
    };
    let after = if conn.backend_name() == "PostgreSQL" {
        post_in_one(conn, &new).await?
    } else {
        post_at_once(conn, &new).await?
    };
    let mut balances_after = Vec::with_capacity(legs.len());
    for (leg, balance) in legs.iter().zip(after) {
        let Some(balance) = balance else {
            return Err(refused_leg(conn, meta.project_id, &leg.account, leg.amount).await);
        };
        balances_after.push((leg.account.clone(), Amount::from_micros(balance)));
    }
    Ok(Posted {
        transfer_id,
        balances_after,
    })
}

/// A transfer about to be written, its legs in lock order.
struct NewTransfer<'a> {
    id: &'a str,
    meta: &'a TransferMeta<'a>,
    kind: TransferKind,
    legs: &'a [&'a issuing_domain::ledger::Leg<String>],
    now: i64,
}

const INSERT_TRANSFER: &str =
    "INSERT INTO transfers (id, project_id, kind, order_id, card_id, reference, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// The conditional update of one leg: no row when the balance would go negative (for
/// an account that may not) or pass the limit. The numbers are the parameters' places.
struct LegParams<'a> {
    leg: usize,
    amount: usize,
    account: usize,
    project: usize,
    limit: usize,
    /// Only if this CTE returned a row (PostgreSQL's chain of legs).
    after: Option<&'a str>,
}

fn leg_update(p: &LegParams<'_>) -> String {
    let LegParams {
        leg,
        amount,
        account,
        project,
        limit,
        after,
    } = *p;
    let after = after
        .map(|cte| format!(" AND EXISTS (SELECT 1 FROM {cte})"))
        .unwrap_or_default();
    format!(
        "UPDATE accounts SET balance = balance + ${amount} \
         WHERE id = ${account} AND project_id = ${project} \
         AND (allow_negative = 1 OR balance + ${amount} >= 0) \
         AND balance + ${amount} <= ${limit} AND balance + ${amount} >= -${limit}{after} \
         RETURNING {leg} AS leg, balance"
    )
}

type AnyQuery<'q> = sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>;

/// Binds `INSERT_TRANSFER`'s seven parameters.
fn bind_transfer<'q>(query: AnyQuery<'q>, t: &NewTransfer<'q>) -> AnyQuery<'q> {
    query
        .bind(t.id)
        .bind(t.meta.project_id)
        .bind(t.kind.as_str())
        .bind(t.meta.order_id)
        .bind(t.meta.card_id)
        .bind(t.meta.reference)
        .bind(t.now)
}

/// SQLite: the transfer, every leg's update and its entry in one multi-statement query,
/// so one hand-over to the connection's thread instead of one per statement (the
/// profile in docs/benchmarks.md shows that hand-over is what SQLite writes cost). An
/// entry is written only if its leg's update changed a row (`changes()` reads the count
/// of the statement just before it). Answers each leg's balance after it, `None` for a
/// refused leg.
async fn post_at_once(
    conn: &mut Conn,
    t: &NewTransfer<'_>,
) -> Result<Vec<Option<i64>>, StoreError> {
    let mut sql = String::from(INSERT_TRANSFER);
    for i in 0..t.legs.len() {
        let (amount, account) = (9 + 2 * i, 10 + 2 * i);
        sql.push_str(";\n");
        sql.push_str(&leg_update(&LegParams {
            leg: i,
            amount,
            account,
            project: 2,
            limit: 8,
            after: None,
        }));
        sql.push_str(&format!(
            ";\nINSERT INTO entries (transfer_id, account_id, amount, balance_after, created_at) \
             SELECT $1, id, ${amount}, balance, $7 FROM accounts \
             WHERE id = ${account} AND project_id = $2 AND changes() = 1"
        ));
    }
    run_post(conn, &sql, t).await
}

/// PostgreSQL: the transfer, every leg's update and every entry in one statement of
/// data-modifying CTEs, so one round trip inside the caller's locks instead of one per
/// statement. Such CTEs run in no defined order; each leg's update therefore waits for
/// the one before it (`EXISTS (SELECT 1 FROM leg{i-1})`), which keeps the lock order and
/// stops at a refused leg as one statement per leg did. Answers each leg's balance after
/// it, `None` for a refused leg and every leg after it.
async fn post_in_one(conn: &mut Conn, t: &NewTransfer<'_>) -> Result<Vec<Option<i64>>, StoreError> {
    let mut sql = format!("WITH transfer AS ({INSERT_TRANSFER} RETURNING id)");
    let mut legs = Vec::with_capacity(t.legs.len());
    for i in 0..t.legs.len() {
        let (amount, account) = (9 + 2 * i, 10 + 2 * i);
        let before = if i == 0 {
            "transfer".to_owned()
        } else {
            format!("leg{}", i - 1)
        };
        let update = leg_update(&LegParams {
            leg: i,
            amount,
            account,
            project: 2,
            limit: 8,
            after: Some(&before),
        });
        sql.push_str(&format!(", leg{i} AS ({update}, id, ${amount} AS amount)"));
        legs.push(format!("SELECT leg, id, balance, amount FROM leg{i}"));
    }
    let applied = legs.join(" UNION ALL ");
    sql.push_str(&format!(
        ", entries_written AS (INSERT INTO entries (transfer_id, account_id, amount, balance_after, created_at) \
         SELECT $1, id, amount, balance, $7 FROM ({applied}) AS applied ORDER BY leg RETURNING 1) \
         SELECT leg, balance FROM ({applied}) AS applied"
    ));
    run_post(conn, &sql, t).await
}

/// Runs a transfer's query (either backend's): `$1`–`$7` the transfer, `$8` the limit,
/// then each leg's amount and account. Answers each leg's balance after it.
async fn run_post(
    conn: &mut Conn,
    sql: &str,
    t: &NewTransfer<'_>,
) -> Result<Vec<Option<i64>>, StoreError> {
    let mut query = bind_transfer(sqlx::query(sql), t).bind(MAX_BALANCE.micros());
    for leg in t.legs {
        query = query.bind(leg.amount.micros()).bind(&leg.account);
    }
    let rows = query
        .fetch_all(&mut *conn)
        .await
        .map_err(StoreError::from_write)?;
    balances_by_leg(t.legs.len(), rows)
}

/// Each leg's balance after it from rows of `(leg, balance)`; `None` for a leg with none.
fn balances_by_leg(
    legs: usize,
    rows: Vec<sqlx::any::AnyRow>,
) -> Result<Vec<Option<i64>>, StoreError> {
    let mut after = vec![None; legs];
    for row in rows {
        let leg: i64 = row.try_get("leg")?;
        let balance: i64 = row.try_get("balance")?;
        let slot = usize::try_from(leg)
            .ok()
            .and_then(|i| after.get_mut(i))
            .ok_or_else(|| StoreError::Corrupt(format!("a leg {leg} that was not posted")))?;
        *slot = Some(balance);
    }
    Ok(after)
}

/// Why a leg's conditional update matched no row: the balance limit, or (also for an
/// account that does not exist) insufficient funds.
async fn refused_leg(
    conn: &mut Conn,
    project_id: &str,
    account: &str,
    amount: Amount,
) -> StoreError {
    let balance: Option<i64> =
        sqlx::query_scalar("SELECT balance FROM accounts WHERE id = $1 AND project_id = $2")
            .bind(account)
            .bind(project_id)
            .fetch_optional(&mut *conn)
            .await
            .ok()
            .flatten();
    let after = balance.map(|b| i128::from(b) + i128::from(amount.micros()));
    if after.is_some_and(|a| a.unsigned_abs() > MAX_BALANCE.micros().unsigned_abs().into()) {
        StoreError::BalanceLimit {
            account_id: account.to_owned(),
        }
    } else {
        StoreError::InsufficientFunds {
            account_id: account.to_owned(),
        }
    }
}

/// Where an account kind comes in the lock order of `post`. The debt account comes
/// before the master account only within a transfer, so that a credit which repays
/// debt writes its debt entry before its master entry (`project/txs` reads them in that
/// order); every transaction that touches the debt account has locked the master
/// account first (`credit_master`, a shortfall's settlement), so the master row is
/// still the first lock of any transaction that takes both.
pub(crate) fn lock_rank(kind: AccountKind) -> u8 {
    match kind {
        AccountKind::Debt => 0,
        AccountKind::Master => 1,
        AccountKind::InFlight => 2,
        AccountKind::FeeIncome => 3,
        AccountKind::DepositSource => 4,
        // Contra accounts, like the network's: taken after the card's in practice (a
        // dispute's transaction locks master, then the card, then posts).
        AccountKind::Network | AccountKind::Dispute => 5,
        AccountKind::Card => 6,
        AccountKind::CardHold => 7,
    }
}

/// The lock rank of each of the project's `accounts` (accounts not found are left out).
pub(crate) async fn lock_ranks(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    accounts: &[&String],
) -> Result<std::collections::HashMap<String, u8>, StoreError> {
    let mut ranks = std::collections::HashMap::new();
    let mut unknown = Vec::new();
    for account in accounts {
        match account_cache::kind(account) {
            Some(kind) => {
                ranks.insert((*account).clone(), lock_rank(kind));
            }
            None => unknown.push(account.as_str()),
        }
    }
    if unknown.is_empty() {
        return Ok(ranks);
    }
    let rows =
        crate::query::project_rows_by_id(conn, "accounts", "id, kind", project_id, &unknown, false)
            .await?;
    for r in rows {
        let id = r.text("id")?;
        let Some(kind) = AccountKind::parse(&r.text("kind")?) else {
            ranks.insert(id, u8::MAX);
            continue;
        };
        account_cache::remember_kind(&id, kind);
        ranks.insert(id, lock_rank(kind));
    }
    Ok(ranks)
}

/// One movement of a project's master balance, as `project/txs` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterEntry {
    pub entry_id: i64,
    pub transfer_id: String,
    pub kind: String,
    pub amount: Amount,
    pub balance_after: Amount,
    pub order_id: Option<String>,
    pub card_id: Option<String>,
    pub reference: Option<String>,
    pub created_at: i64,
}

pub const HISTORY_SORT_KEYS: &[&str] = &["created_at", "amount"];

#[derive(Debug, Default, Clone)]
pub struct HistoryFilter {
    pub kinds: Vec<String>,
    pub order_ids: Vec<String>,
    pub card_ids: Vec<String>,
    pub created_from: Option<i64>,
    pub created_to: Option<i64>,
}

pub async fn master_history(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    filter: &HistoryFilter,
    page: &PageRequest,
) -> Result<(Vec<MasterEntry>, i64), StoreError> {
    // The debt account's entries are movements of the master balance as the project
    // sees it (master + debt). At most one of the two is non-zero between transfers,
    // and a transfer writes the debt entry of a repayment before the master entry of
    // the rest, so each entry's own balance after it is the project's balance then.
    let master = project_account(&mut conn.as_batch(), project_id, AccountKind::Master).await?;
    let debt = project_account(&mut conn.as_batch(), project_id, AccountKind::Debt).await?;
    let mut f = Filter::for_project("t.project_id", project_id);
    f.texts("e.account_id", &[master, debt]);
    f.texts("t.kind", &filter.kinds);
    f.texts("t.order_id", &filter.order_ids);
    f.texts("t.card_id", &filter.card_ids);
    f.at_least("e.created_at", filter.created_from);
    f.at_most("e.created_at", filter.created_to);
    let column = if page.sort_by == "amount" {
        "e.amount"
    } else {
        "e.created_at"
    };
    let select = "e.id AS entry_id, t.id AS transfer_id, t.kind, e.amount, e.balance_after, \
                  t.order_id, t.card_id, t.reference, e.created_at";
    let from = "entries e JOIN transfers t ON t.id = e.transfer_id";
    let src = Source {
        select,
        from,
        id: "e.id",
    };
    let (rows, total) = find_page(conn, backend, f, src, (column, false), page).await?;
    let items = rows
        .iter()
        .map(|r| {
            Ok(MasterEntry {
                entry_id: r.try_get("entry_id")?,
                transfer_id: r.try_get("transfer_id")?,
                kind: r.try_get("kind")?,
                amount: Amount::from_micros(r.try_get("amount")?),
                balance_after: Amount::from_micros(r.try_get("balance_after")?),
                order_id: r.try_get("order_id")?,
                card_id: r.try_get("card_id")?,
                reference: r.try_get("reference")?,
                created_at: r.try_get("created_at")?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()?;
    Ok((items, total))
}

/// Deposit of confirmed funds into the master balance, paying any debt first.
/// `reference` (e.g. the chain
/// transaction id) makes a repeated credit of the same deposit a `Conflict`.
pub async fn deposit(
    conn: &mut Conn,
    project_id: &str,
    amount: Amount,
    reference: Option<&str>,
) -> Result<Posted, StoreError> {
    let source =
        project_account(&mut conn.as_batch(), project_id, AccountKind::DepositSource).await?;
    let meta = TransferMeta {
        project_id,
        reference,
        ..Default::default()
    };
    credit_master(conn, &meta, TransferKind::Deposit, source, amount).await
}

pub use crate::mismatch::Mismatch;

/// Checks every invariant of the ledger over the whole database: each transfer sums to
/// zero, each balance equals the sum of its entries, no customer balance is negative,
/// and each card's held funds equal what its open authorizations hold.
/// Reads in aggregate queries so it works on large ledgers without loading them.
pub async fn verify(conn: &mut Conn) -> Result<Vec<Mismatch>, StoreError> {
    let mut found = Vec::new();
    let rows = sqlx::query(
        "SELECT transfer_id, CAST(SUM(amount) AS BIGINT) AS total FROM entries \
         GROUP BY transfer_id HAVING SUM(amount) <> 0",
    )
    .fetch_all(&mut *conn)
    .await?;
    for r in rows {
        found.push(Mismatch::UnbalancedTransfer {
            transfer_id: r.try_get("transfer_id")?,
            sum: r.try_get("total")?,
        });
    }
    // One pass over the entries, summed per account: a sum per account as a correlated
    // subquery let PostgreSQL plan a scan of every entry for each account once a few
    // accounts (the network's, a busy card's) hold most entries (seen at the bench's
    // console scale: 200,000 accounts, hours).
    let rows = sqlx::query(
        "SELECT a.id, a.kind, a.balance, a.allow_negative, CAST(COALESCE(s.total, 0) AS BIGINT) AS total \
         FROM accounts a LEFT JOIN (SELECT account_id, SUM(amount) AS total FROM entries \
         GROUP BY account_id) s ON s.account_id = a.id",
    )
    .fetch_all(&mut *conn)
    .await?;
    for r in rows {
        let account_id: String = r.try_get("id")?;
        let kind: String = r.try_get("kind")?;
        let balance: i64 = r.try_get("balance")?;
        let entries_sum: i64 = r.try_get("total")?;
        let allow_negative: i64 = r.try_get("allow_negative")?;
        if balance != entries_sum {
            found.push(Mismatch::BalanceDiffers {
                account_id: account_id.clone(),
                kind: kind.clone(),
                balance,
                entries_sum,
            });
        }
        if allow_negative == 0 && balance < 0 {
            found.push(Mismatch::Negative {
                account_id,
                kind,
                balance,
            });
        }
    }
    let rows = sqlx::query(
        "SELECT a.card_id, a.balance, \
         CAST(COALESCE((SELECT SUM(t.held) FROM card_transactions t WHERE t.card_id = a.card_id), 0) AS BIGINT) AS open_auths \
         FROM accounts a WHERE a.kind = 'card_hold'",
    )
    .fetch_all(&mut *conn)
    .await?;
    for r in rows {
        let held: i64 = r.try_get("balance")?;
        let open_auths: i64 = r.try_get("open_auths")?;
        if held != open_auths {
            found.push(Mismatch::HeldDiffers {
                card_id: r.try_get("card_id")?,
                held,
                open_auths,
            });
        }
    }
    verify_debts(conn, &mut found).await?;
    verify_usage(conn, &mut found).await?;
    verify_references(conn, &mut found).await?;
    crate::disputes::verify(conn, &mut found).await?;
    Ok(found)
}

/// At most this many mismatches of one check (usage, or one reference's orphans) are
/// reported: one is enough to fail, and a corrupted table could differ on every row.
const REPORTED: i64 = 1_000;

/// The references PostgreSQL no longer checks on insert (migration 0020): (table, its
/// id column, the referring column, the table referred to). Each is an anti-join
/// through the referred table's primary key.
const REFERENCES: &[(&str, &str, &str, &str)] = &[
    ("entries", "id", "transfer_id", "transfers"),
    ("entries", "id", "account_id", "accounts"),
    ("transfers", "id", "project_id", "projects"),
    ("events", "id", "project_id", "projects"),
];

/// Every row of `REFERENCES` must find the row it points at.
async fn verify_references(conn: &mut Conn, found: &mut Vec<Mismatch>) -> Result<(), StoreError> {
    for (table, id, column, target) in REFERENCES {
        let sql = format!(
            "SELECT CAST(r.{id} AS TEXT) AS id, r.{column} AS missing FROM {table} r \
             WHERE NOT EXISTS (SELECT 1 FROM {target} t WHERE t.id = r.{column}) \
             ORDER BY r.{id} LIMIT $1"
        );
        let rows = sqlx::query(&sql)
            .bind(REPORTED)
            .fetch_all(&mut *conn)
            .await?;
        for r in rows {
            found.push(Mismatch::Orphan {
                table: (*table).to_owned(),
                id: r.try_get("id")?,
                column: (*column).to_owned(),
                missing: r.try_get("missing")?,
            });
        }
    }
    Ok(())
}

/// Limits read a card's whole days and hours from `card_usage`, kept by triggers: each
/// row must equal what its bucket's counted transactions sum to, and every such bucket
/// must have its row. Both sides are grouped in one pass per width.
async fn verify_usage(conn: &mut Conn, found: &mut Vec<Mismatch>) -> Result<(), StoreError> {
    let counted = |span: i64| {
        format!(
            "SELECT project_id, card_id, CAST({span} AS BIGINT) AS span, \
             created_at - created_at % {span} AS bucket, COALESCE(mcc, '') AS mcc, \
             CAST(0 AS BIGINT) AS ks, CAST(0 AS BIGINT) AS kc, counted_amount AS cs, \
             CAST(1 AS BIGINT) AS cc FROM card_transactions WHERE counts = 1"
        )
    };
    let sql = format!(
        "SELECT card_id, span, bucket, mcc, CAST(SUM(ks) AS BIGINT) AS ks, \
         CAST(SUM(kc) AS BIGINT) AS kc, CAST(SUM(cs) AS BIGINT) AS cs, \
         CAST(SUM(cc) AS BIGINT) AS cc FROM ( \
           SELECT project_id, card_id, span, bucket, mcc, spent AS ks, used_count AS kc, \
             CAST(0 AS BIGINT) AS cs, CAST(0 AS BIGINT) AS cc FROM card_usage \
           UNION ALL {} UNION ALL {} \
         ) u GROUP BY project_id, card_id, span, bucket, mcc \
         HAVING SUM(ks) <> SUM(cs) OR SUM(kc) <> SUM(cc) \
         ORDER BY card_id, span, bucket, mcc LIMIT $1",
        counted(86_400_000_000),
        counted(3_600_000_000),
    );
    let rows = sqlx::query(&sql)
        .bind(REPORTED)
        .fetch_all(&mut *conn)
        .await?;
    for r in rows {
        found.push(Mismatch::UsageDiffers {
            card_id: r.try_get("card_id")?,
            span: r.try_get("span")?,
            bucket: r.try_get("bucket")?,
            mcc: r.try_get("mcc")?,
            kept: (r.try_get("ks")?, r.try_get("kc")?),
            counted: (r.try_get("cs")?, r.try_get("cc")?),
        });
    }
    Ok(())
}

/// A negative master balance (as the wire shows it) is accepted only as recorded debt:
/// each project's debt account must equal what its `card_shortfall` entries took less
/// what credits repaid, never be positive, and leave the master account at zero. One
/// row per project; the sums read the debt account's own entries by index.
async fn verify_debts(conn: &mut Conn, found: &mut Vec<Mismatch>) -> Result<(), StoreError> {
    let rows = sqlx::query(
        "SELECT a.project_id, a.balance, \
         CAST(COALESCE((SELECT SUM(e.amount) FROM entries e JOIN transfers t ON t.id = e.transfer_id \
           WHERE e.account_id = a.id AND t.project_id = a.project_id \
           AND ((t.kind IN ('card_shortfall', 'dispute_shortfall') AND e.amount < 0) \
             OR (t.kind IN ('deposit', 'refund', 'card_withdraw', 'dispute_credit') AND e.amount > 0))), 0) AS BIGINT) AS recorded, \
         CAST(COALESCE((SELECT m.balance FROM accounts m WHERE m.project_id = a.project_id \
           AND m.kind = 'master' AND m.card_id IS NULL), 0) AS BIGINT) AS master \
         FROM accounts a WHERE a.kind = 'debt' AND a.card_id IS NULL",
    )
    .fetch_all(&mut *conn)
    .await?;
    for r in rows {
        let project_id: String = r.try_get("project_id")?;
        let debt: i64 = r.try_get("balance")?;
        let recorded: i64 = r.try_get("recorded")?;
        let master: i64 = r.try_get("master")?;
        if debt != recorded || debt > 0 {
            found.push(Mismatch::DebtDiffers {
                project_id: project_id.clone(),
                debt,
                recorded,
            });
        }
        if debt < 0 && master > 0 {
            found.push(Mismatch::DebtBesideFunds {
                project_id,
                debt,
                master,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
pub(crate) mod tests {
    use super::*;
    use crate::Store;
    use sqlx::Connection;

    /// A project with its accounts; answers the ids of those of `kinds`, in order.
    pub(crate) async fn project_with_accounts(
        conn: &mut Conn,
        project: &str,
        kinds: &[AccountKind],
    ) -> Vec<String> {
        sqlx::query("INSERT INTO projects (id, name, created_at) VALUES ($1, $1, 0)")
            .bind(project)
            .execute(&mut *conn)
            .await
            .unwrap();
        open_project_accounts(conn, project, 0).await.unwrap();
        let mut ids = Vec::new();
        for kind in kinds {
            ids.push(
                project_account(&mut conn.as_batch(), project, *kind)
                    .await
                    .unwrap(),
            );
        }
        ids
    }

    /// Every entry, oldest first: (account, amount, balance after).
    pub(crate) async fn entries(conn: &mut Conn) -> Vec<(String, i64, i64)> {
        sqlx::query("SELECT account_id, amount, balance_after FROM entries ORDER BY id")
            .fetch_all(&mut *conn)
            .await
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r.try_get("account_id").unwrap(),
                    r.try_get("amount").unwrap(),
                    r.try_get("balance_after").unwrap(),
                )
            })
            .collect()
    }

    /// SQLite posts a transfer in one multi-statement query, PostgreSQL in one statement
    /// of CTEs: on both, every leg's entry carries its balance after, and a refused leg
    /// writes no entry, stops the legs after it on PostgreSQL, and names its account.
    #[tokio::test]
    async fn one_query_posts_every_leg_or_names_the_refused_one() {
        let dir = std::env::temp_dir().join(format!("ledger-post-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let store = Store::connect(dir.join("db.sqlite").to_str().unwrap())
            .await
            .unwrap();
        posts_every_leg_or_names_the_refused_one(&store, false).await;
        debt_is_repaid_first_and_verified(&store, false).await;
        drifted_usage_is_found(&store).await;
        crate::card_usage::tests::usage_equals_the_transactions_sum(&store).await;
        crate::ledger_batch::tests::batches_match_a_model(&store, false).await;
        crate::ledger_batch::tests::a_balance_changed_meanwhile_fails_the_batch(&store, false)
            .await;
        crate::writer::together::tests::parts_come_back_in_place(&store).await;
        crate::sandbox::tests::ops_keep_the_first_of_each_key(&store).await;
        orphans_are_found(&store, false).await;
        store.close().await;
        std::fs::remove_dir_all(&dir).unwrap();

        if std::env::var("ISSUING_TEST_POSTGRES").is_ok_and(|v| v == "off") {
            return;
        }
        let admin = std::env::var("ISSUING_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
        // Named by process: test runs from several checkouts may share one server. A run
        // that panicked leaves its database behind (`DROP DATABASE issuing_ledger_post_test_*`).
        let name = format!("issuing_ledger_post_test_{}", std::process::id());
        let mut maintenance = sqlx::PgConnection::connect(&admin).await.unwrap();
        sqlx::query(&format!("DROP DATABASE IF EXISTS {name}"))
            .execute(&mut maintenance)
            .await
            .unwrap();
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut maintenance)
            .await
            .unwrap();
        let url = match admin.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{name}"),
            None => panic!("ISSUING_TEST_POSTGRES_URL names no database: {admin}"),
        };
        let store = Store::connect(&url).await.unwrap();
        posts_every_leg_or_names_the_refused_one(&store, true).await;
        debt_is_repaid_first_and_verified(&store, true).await;
        drifted_usage_is_found(&store).await;
        crate::card_usage::tests::usage_equals_the_transactions_sum(&store).await;
        crate::ledger_batch::tests::batches_match_a_model(&store, true).await;
        crate::ledger_batch::tests::a_balance_changed_meanwhile_fails_the_batch(&store, true).await;
        crate::writer::together::tests::parts_come_back_in_place(&store).await;
        crate::writer::lane::tests::batches_commit_or_leave_nothing(&store).await;
        crate::sandbox::tests::ops_keep_the_first_of_each_key(&store).await;
        crate::replay::tests::a_barrier_flushes_what_committed_before_it(&store).await;
        orphans_are_found(&store, true).await;
        store.close().await;
        sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
            .execute(&mut maintenance)
            .await
            .unwrap();
    }

    async fn posts_every_leg_or_names_the_refused_one(store: &Store, postgres: bool) {
        // Account ids are cached for the whole process: each database gets a project
        // of its own.
        let project = if postgres { "p-pg" } else { "p-sqlite" };
        store.migrate().await.unwrap();
        let mut conn = store.conn().await.unwrap();
        let ids = project_with_accounts(
            &mut conn,
            project,
            &[
                AccountKind::DepositSource,
                AccountKind::Master,
                AccountKind::FeeIncome,
            ],
        )
        .await;
        let [source, master, fees] = <[String; 3]>::try_from(ids).unwrap();
        let meta = TransferMeta {
            project_id: project,
            order_id: None,
            card_id: None,
            reference: None,
        };
        let move_ = |from: &String, to: &String, units: i64| {
            Transfer::simple(
                TransferKind::Deposit,
                from.clone(),
                to.clone(),
                Amount::from_micros(units * issuing_wire::MICROS_PER_UNIT),
            )
            .unwrap()
        };
        let unit = issuing_wire::MICROS_PER_UNIT;

        let posted = post(&mut conn, &meta, &move_(&source, &master, 10))
            .await
            .unwrap();
        assert_eq!(posted.balances_after.len(), 2);
        assert_eq!(
            entries(&mut conn).await,
            vec![
                (master.clone(), 10 * unit, 10 * unit),
                (source.clone(), -10 * unit, -10 * unit),
            ]
        );

        let before = entries(&mut conn).await;
        drop(conn);
        let mut tx = store.begin().await.unwrap();
        match post(&mut tx, &meta, &move_(&master, &fees, 11)).await {
            Err(StoreError::InsufficientFunds { account_id }) => assert_eq!(account_id, master),
            other => panic!("expected insufficient funds, got {other:?}"),
        }
        // The master leg is refused and writes no entry. On SQLite the fee leg after it
        // in lock order is applied until the caller rolls back; on PostgreSQL every leg
        // waits for the one before it, so it is not.
        let mut inside = before.clone();
        if !postgres {
            inside.push((fees.clone(), 11 * unit, 11 * unit));
        }
        assert_eq!(entries(&mut tx).await, inside);
        tx.rollback().await.unwrap();
        let mut conn = store.conn().await.unwrap();
        assert_eq!(entries(&mut conn).await, before);
        assert_eq!(
            project_balance(&mut conn.as_batch(), project, AccountKind::Master)
                .await
                .unwrap(),
            Amount::from_micros(10 * unit)
        );
    }

    /// A shortfall beyond the master balance becomes debt; a credit repays it before
    /// the master account gets anything; `verify` accepts that and finds a debt
    /// balance that its entries do not explain.
    async fn debt_is_repaid_first_and_verified(store: &Store, postgres: bool) {
        let project = if postgres { "d-pg" } else { "d-sqlite" };
        let unit = issuing_wire::MICROS_PER_UNIT;
        let mut conn = store.conn().await.unwrap();
        let ids = project_with_accounts(
            &mut conn,
            project,
            &[AccountKind::Master, AccountKind::Debt, AccountKind::Network],
        )
        .await;
        let [master, debt, network] = <[String; 3]>::try_from(ids).unwrap();
        deposit(&mut conn, project, Amount::from_micros(10 * unit), None)
            .await
            .unwrap();
        let meta = TransferMeta {
            project_id: project,
            ..Default::default()
        };
        // A shortfall of 25 with 10 on the master balance: 10 from it, 15 owed.
        for (from, units) in [(&master, 10), (&debt, 15)] {
            let t = Transfer::simple(
                TransferKind::CardShortfall,
                from.clone(),
                network.clone(),
                Amount::from_micros(units * unit),
            )
            .unwrap();
            post(&mut conn, &meta, &t).await.unwrap();
        }
        assert_eq!(
            master_balance(&mut conn, project).await.unwrap(),
            Amount::from_micros(-15 * unit)
        );
        assert_eq!(verify(&mut conn).await.unwrap(), vec![]);
        // 20 arrive: 15 repay the debt, 5 reach the master account.
        deposit(
            &mut conn,
            project,
            Amount::from_micros(20 * unit),
            Some("r"),
        )
        .await
        .unwrap();
        assert_eq!(
            project_balance(&mut conn.as_batch(), project, AccountKind::Debt)
                .await
                .unwrap(),
            Amount::ZERO
        );
        assert_eq!(
            project_balance(&mut conn.as_batch(), project, AccountKind::Master)
                .await
                .unwrap(),
            Amount::from_micros(5 * unit)
        );
        // The history reads the repayment before the rest, each with the balance then.
        let (items, total) = master_history(
            &mut conn,
            if postgres {
                Backend::Postgres
            } else {
                Backend::Sqlite
            },
            project,
            &HistoryFilter::default(),
            &PageRequest {
                skip: 0,
                limit: 100,
                sort_by: "created_at",
                sort_dir: issuing_wire::SortDir::Asc,
            },
        )
        .await
        .unwrap();
        assert_eq!(total, 5);
        let lines: Vec<(i64, i64)> = items
            .iter()
            .map(|e| (e.amount.micros() / unit, e.balance_after.micros() / unit))
            .collect();
        assert_eq!(lines, vec![(10, 10), (-10, 0), (-15, -15), (15, 0), (5, 5)]);

        // Tampered: the debt account says the project owes 7, no entry says so.
        sqlx::query("UPDATE accounts SET balance = -7000000 WHERE id = $1")
            .bind(&debt)
            .execute(&mut *conn)
            .await
            .unwrap();
        let found = verify(&mut conn).await.unwrap();
        assert!(
            found.contains(&Mismatch::DebtDiffers {
                project_id: project.into(),
                debt: -7 * unit,
                recorded: 0,
            }),
            "{found:?}"
        );
        assert!(
            found.contains(&Mismatch::DebtBesideFunds {
                project_id: project.into(),
                debt: -7 * unit,
                master: 5 * unit,
            }),
            "{found:?}"
        );
        sqlx::query("UPDATE accounts SET balance = 0 WHERE id = $1")
            .bind(&debt)
            .execute(&mut *conn)
            .await
            .unwrap();
        assert_eq!(verify(&mut conn).await.unwrap(), vec![]);
    }

    /// A day's usage kept without the transactions that would count it (or kept wrong)
    /// is found; the check reads both sides, so a row that matches is not reported.
    async fn drifted_usage_is_found(store: &Store) {
        let mut conn = store.conn().await.unwrap();
        assert_eq!(verify(&mut conn).await.unwrap(), vec![]);
        sqlx::query(
            "INSERT INTO card_usage (project_id, card_id, span, bucket, mcc, spent, used_count) \
             VALUES ('p', 'c', 3600000000, 7200000000, '5411', 5, 1), \
             ('p', 'c', 86400000000, 0, '', 0, 0)",
        )
        .execute(&mut *conn)
        .await
        .unwrap();
        assert_eq!(
            verify(&mut conn).await.unwrap(),
            vec![Mismatch::UsageDiffers {
                card_id: "c".into(),
                span: 3_600_000_000,
                bucket: 7_200_000_000,
                mcc: "5411".into(),
                kept: (5, 1),
                counted: (0, 0),
            }]
        );
        sqlx::query("DELETE FROM card_usage WHERE card_id = 'c'")
            .execute(&mut *conn)
            .await
            .unwrap();
        assert_eq!(verify(&mut conn).await.unwrap(), vec![]);
    }

    /// PostgreSQL no longer refuses an entry, transfer or event that points at nothing
    /// (migration 0020); verify-ledger must find each such row. SQLite still refuses
    /// them, so there the rows go in with its foreign keys off for the one connection.
    /// Entries cannot be deleted: this runs last on its database.
    async fn orphans_are_found(store: &Store, postgres: bool) {
        let mut conn = store.conn().await.unwrap();
        assert_eq!(verify(&mut conn).await.unwrap(), vec![]);
        if !postgres {
            let refused = sqlx::query(
                "INSERT INTO events (id, project_id, event_type, payload, created_at) \
                 VALUES ('ev-orphan', 'p-gone', 'card.created', '{}', 1)",
            )
            .execute(&mut *conn)
            .await;
            assert!(refused.is_err(), "SQLite keeps its foreign keys");
            sqlx::query("PRAGMA foreign_keys = OFF")
                .execute(&mut *conn)
                .await
                .unwrap();
        }
        sqlx::query(
            "INSERT INTO entries (transfer_id, account_id, amount, balance_after, created_at) \
             VALUES ('tr-gone', 'acct-gone', 0, 0, 1)",
        )
        .execute(&mut *conn)
        .await
        .unwrap();
        sqlx::query(
            "INSERT INTO events (id, project_id, event_type, payload, created_at) \
             VALUES ('ev-orphan', 'p-gone', 'card.created', '{}', 1)",
        )
        .execute(&mut *conn)
        .await
        .unwrap();
        if !postgres {
            sqlx::query("PRAGMA foreign_keys = ON")
                .execute(&mut *conn)
                .await
                .unwrap();
        }
        let (entry,): (i64,) =
            sqlx::query_as("SELECT id FROM entries WHERE transfer_id = 'tr-gone'")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
        let orphan = |table: &str, id: &str, column: &str, missing: &str| Mismatch::Orphan {
            table: table.into(),
            id: id.into(),
            column: column.into(),
            missing: missing.into(),
        };
        assert_eq!(
            verify(&mut conn).await.unwrap(),
            vec![
                orphan("entries", &entry.to_string(), "transfer_id", "tr-gone"),
                orphan("entries", &entry.to_string(), "account_id", "acct-gone"),
                orphan("events", "ev-orphan", "project_id", "p-gone"),
            ]
        );
    }
}
