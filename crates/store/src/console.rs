//! What the operator console reads. Unlike the API, these reads cross projects: an
//! operator sees every project, a viewer the projects of its `Scope`. Every list is
//! paged by keyset (`created_at`, `id`) newest first, on an index that has both
//! columns, so a page costs the same on the millionth row as on the first; nothing
//! here counts or skips over a large table.

use crate::card_txs::CardTxRecord;
use crate::cards::CardRecord;
use crate::deliveries::DeliveryRecord;
use crate::disputes::DisputeRecord;
use crate::orders::OrderRecord;
use crate::projects::ProjectRecord;
use crate::query::{Arg, Filter};
use crate::subscriptions::SubscriptionRecord;
use crate::users::UserRecord;
use crate::{Conn, StoreError};
use sqlx::any::AnyRow;
use sqlx::Row;

/// The projects a reader may see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    All,
    /// Only these (never empty: an operator naming no project reads all).
    Projects(Vec<String>),
}

impl Scope {
    pub fn of(projects: &[String]) -> Scope {
        if projects.is_empty() {
            Scope::All
        } else {
            Scope::Projects(projects.to_vec())
        }
    }

    pub fn allows(&self, project_id: &str) -> bool {
        match self {
            Scope::All => true,
            Scope::Projects(ids) => ids.iter().any(|p| p == project_id),
        }
    }

    /// Limits `f` to rows whose `column` names a project of the scope.
    pub fn restrict(&self, f: &mut Filter, column: &str) {
        match self {
            Scope::All => {}
            Scope::Projects(ids) if ids.is_empty() => f.nothing(),
            Scope::Projects(ids) => f.texts(column, ids),
        }
    }
}

/// Where a page starts: strictly after this row in newest-first order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub at: i64,
    pub id: String,
}

/// One page of a list: `limit` rows at most, newest first.
fn page_sql(f: &mut Filter, select: &str, from: &str, at: &str, id: &str, limit: i64) -> String {
    let limit = f.push(Arg::Int(limit));
    format!(
        "SELECT {select} FROM {from}{} ORDER BY {at} DESC, {id} DESC LIMIT {limit}",
        f.where_sql()
    )
}

fn keyset(f: &mut Filter, at: &str, id: &str, before: Option<&Cursor>) {
    if let Some(c) = before {
        f.before(at, id, c.at, &c.id);
    }
}

#[derive(Debug, Default, Clone)]
pub struct CardQuery {
    /// A card id, the last 4 digits, or an external_user_id.
    pub q: Option<String>,
    pub project_id: Option<String>,
    pub status: Option<String>,
}

pub async fn cards_page(
    conn: &mut Conn,
    scope: &Scope,
    query: &CardQuery,
    before: Option<&Cursor>,
    limit: i64,
) -> Result<Vec<CardRecord>, StoreError> {
    let mut f = Filter::default();
    scope.restrict(&mut f, "project_id");
    if let Some(q) = &query.q {
        // Each column has its own index (`label` holds the last 4 digits).
        f.any_column(&["id", "label", "external_user_id"], q);
    }
    if let Some(p) = &query.project_id {
        f.eq("project_id", Arg::Text(p.clone()));
    }
    if let Some(s) = &query.status {
        f.eq("status", Arg::Text(s.clone()));
    }
    keyset(&mut f, "created_at", "id", before);
    let sql = page_sql(&mut f, "*", "cards", "created_at", "id", limit);
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(crate::cards::from_row).collect()
}

async fn one<T>(
    conn: &mut Conn,
    sql: &str,
    id: &str,
    read: fn(&AnyRow) -> Result<T, StoreError>,
) -> Result<Option<T>, StoreError> {
    let row = sqlx::query(sql).bind(id).fetch_optional(&mut *conn).await?;
    row.as_ref().map(read).transpose()
}

/// A card by its id, whatever its project (the caller checks the scope).
pub async fn card(conn: &mut Conn, id: &str) -> Result<Option<CardRecord>, StoreError> {
    one(conn, "SELECT * FROM cards WHERE id = $1", id, |r| {
        crate::cards::from_row(r)
    })
    .await
}

pub async fn card_tx(conn: &mut Conn, id: &str) -> Result<Option<CardTxRecord>, StoreError> {
    one(
        conn,
        "SELECT * FROM card_transactions WHERE id = $1",
        id,
        crate::card_txs::from_row,
    )
    .await
}

pub async fn order(conn: &mut Conn, id: &str) -> Result<Option<OrderRecord>, StoreError> {
    one(
        conn,
        "SELECT * FROM orders WHERE id = $1",
        id,
        crate::orders::from_row,
    )
    .await
}

pub async fn delivery(conn: &mut Conn, id: &str) -> Result<Option<DeliveryRecord>, StoreError> {
    one(
        conn,
        "SELECT * FROM webhook_deliveries WHERE id = $1",
        id,
        crate::deliveries::from_row,
    )
    .await
}

/// A card's transactions, newest first.
pub async fn card_txs_page(
    conn: &mut Conn,
    card_id: &str,
    before: Option<&Cursor>,
    limit: i64,
) -> Result<Vec<CardTxRecord>, StoreError> {
    let mut f = Filter::default();
    f.eq_planned_as_typical("card_id", Arg::Text(card_id.to_owned()));
    keyset(&mut f, "created_at", "id", before);
    let sql = page_sql(&mut f, "*", "card_transactions", "created_at", "id", limit);
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(crate::card_txs::from_row).collect()
}

/// A card's newest orders.
pub async fn card_orders(
    conn: &mut Conn,
    card_id: &str,
    limit: i64,
) -> Result<Vec<OrderRecord>, StoreError> {
    let mut f = Filter::default();
    f.eq("card_id", Arg::Text(card_id.to_owned()));
    let sql = page_sql(&mut f, "*", "orders", "created_at", "id", limit);
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(crate::orders::from_row).collect()
}

#[derive(Debug, Default, Clone)]
pub struct DeliveryQuery {
    /// `pending`, `succeeded` or `failed`.
    pub state: Option<String>,
    pub project_id: Option<String>,
}

pub async fn deliveries_page(
    conn: &mut Conn,
    scope: &Scope,
    query: &DeliveryQuery,
    before: Option<&Cursor>,
    limit: i64,
) -> Result<Vec<DeliveryRecord>, StoreError> {
    let mut f = Filter::default();
    scope.restrict(&mut f, "project_id");
    if let Some(s) = &query.state {
        f.eq("state", Arg::Text(s.clone()));
    }
    if let Some(p) = &query.project_id {
        f.eq("project_id", Arg::Text(p.clone()));
    }
    keyset(&mut f, "created_at", "id", before);
    let sql = page_sql(&mut f, "*", "webhook_deliveries", "created_at", "id", limit);
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(crate::deliveries::from_row).collect()
}

/// Pending deliveries whose last attempt failed (they are being retried now), soonest
/// retry first.
pub async fn failing_deliveries(
    conn: &mut Conn,
    scope: &Scope,
    limit: i64,
) -> Result<Vec<DeliveryRecord>, StoreError> {
    let mut f = Filter::default();
    scope.restrict(&mut f, "project_id");
    let limit = f.push(Arg::Int(limit));
    let and_scope = f.where_sql().replacen(" WHERE ", " AND ", 1);
    // The partial index on next_attempt_at holds only pending deliveries.
    let sql = format!(
        "SELECT * FROM webhook_deliveries WHERE next_attempt_at IS NOT NULL AND attempts > 0\
         {and_scope} ORDER BY next_attempt_at, id LIMIT {limit}"
    );
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(crate::deliveries::from_row).collect()
}

/// A ledger transfer with the amount it moved (the sum of its credit legs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferRow {
    pub id: String,
    pub project_id: String,
    pub kind: String,
    pub order_id: Option<String>,
    pub card_id: Option<String>,
    pub reference: Option<String>,
    pub amount: i64,
    pub created_at: i64,
}

const TRANSFER_COLUMNS: &str = "t.id, t.project_id, t.kind, t.order_id, t.card_id, t.reference, \
     t.created_at, CAST(COALESCE((SELECT SUM(e.amount) FROM entries e \
     WHERE e.transfer_id = t.id AND e.amount > 0), 0) AS BIGINT) AS amount";

fn transfer_from_row(r: &AnyRow) -> Result<TransferRow, StoreError> {
    Ok(TransferRow {
        id: r.try_get("id")?,
        project_id: r.try_get("project_id")?,
        kind: r.try_get("kind")?,
        order_id: r.try_get("order_id")?,
        card_id: r.try_get("card_id")?,
        reference: r.try_get("reference")?,
        amount: r.try_get("amount")?,
        created_at: r.try_get("created_at")?,
    })
}

#[derive(Debug, Default, Clone)]
pub struct TransferQuery {
    pub kind: Option<String>,
    pub project_id: Option<String>,
}

pub async fn transfers_page(
    conn: &mut Conn,
    scope: &Scope,
    query: &TransferQuery,
    before: Option<&Cursor>,
    limit: i64,
) -> Result<Vec<TransferRow>, StoreError> {
    let mut f = Filter::default();
    scope.restrict(&mut f, "t.project_id");
    if let Some(k) = &query.kind {
        f.eq("t.kind", Arg::Text(k.clone()));
    }
    if let Some(p) = &query.project_id {
        f.eq("t.project_id", Arg::Text(p.clone()));
    }
    keyset(&mut f, "t.created_at", "t.id", before);
    let sql = page_sql(
        &mut f,
        TRANSFER_COLUMNS,
        "transfers t",
        "t.created_at",
        "t.id",
        limit,
    );
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(transfer_from_row).collect()
}

/// The transfers an order made, oldest first.
pub async fn order_transfers(
    conn: &mut Conn,
    order_id: &str,
    limit: i64,
) -> Result<Vec<TransferRow>, StoreError> {
    let sql = format!(
        "SELECT {TRANSFER_COLUMNS} FROM transfers t WHERE t.order_id = $1 \
         ORDER BY t.created_at, t.id LIMIT $2"
    );
    let rows = sqlx::query(&sql)
        .bind(order_id)
        .bind(limit)
        .fetch_all(&mut *conn)
        .await?;
    rows.iter().map(transfer_from_row).collect()
}

#[derive(Debug, Default, Clone)]
pub struct DisputeQuery {
    pub project_id: Option<String>,
    pub status: Option<String>,
}

/// Disputes newest first (`disputes_created`, `disputes_status_created`,
/// `disputes_project_created`).
pub async fn disputes_page(
    conn: &mut Conn,
    scope: &Scope,
    query: &DisputeQuery,
    before: Option<&Cursor>,
    limit: i64,
) -> Result<Vec<DisputeRecord>, StoreError> {
    let mut f = Filter::default();
    scope.restrict(&mut f, "project_id");
    if let Some(p) = &query.project_id {
        f.eq("project_id", Arg::Text(p.clone()));
    }
    if let Some(s) = &query.status {
        f.eq("status", Arg::Text(s.clone()));
    }
    keyset(&mut f, "created_at", "id", before);
    let sql = page_sql(&mut f, "*", "disputes", "created_at", "id", limit);
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(crate::disputes::from_row).collect()
}

/// A card's newest disputes (`disputes_card`).
pub async fn card_disputes(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
    limit: i64,
) -> Result<Vec<DisputeRecord>, StoreError> {
    let mut f = Filter::default();
    f.eq("project_id", Arg::Text(project_id.to_owned()));
    f.eq("card_id", Arg::Text(card_id.to_owned()));
    let sql = page_sql(&mut f, "*", "disputes", "created_at", "id", limit);
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(crate::disputes::from_row).collect()
}

/// The disputes filed on one transaction, newest first (`disputes_transaction`).
pub async fn transaction_disputes(
    conn: &mut Conn,
    project_id: &str,
    transaction_id: &str,
    limit: i64,
) -> Result<Vec<DisputeRecord>, StoreError> {
    let mut f = Filter::default();
    f.eq("project_id", Arg::Text(project_id.to_owned()));
    f.eq("transaction_id", Arg::Text(transaction_id.to_owned()));
    let sql = page_sql(&mut f, "*", "disputes", "created_at", "id", limit);
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(crate::disputes::from_row).collect()
}

/// The ledger kind of each step of a dispute's money, as `disputes::reference` names
/// the step.
const DISPUTE_STEPS: &[(&str, &str)] = &[
    ("dispute_credit", "credit"),
    ("dispute_won", "won"),
    ("dispute_debit", "debit"),
    ("dispute_shortfall", "shortfall"),
];

/// A dispute's ledger transfers, oldest first: found by their references
/// (`{dispute_id}:{step}`) through the unique `transfers_reference` index.
pub async fn dispute_transfers(
    conn: &mut Conn,
    project_id: &str,
    dispute_id: &str,
) -> Result<Vec<TransferRow>, StoreError> {
    let mut f = Filter::default();
    f.eq("t.project_id", Arg::Text(project_id.to_owned()));
    let kinds: Vec<String> = DISPUTE_STEPS.iter().map(|(k, _)| (*k).to_owned()).collect();
    let references: Vec<String> = DISPUTE_STEPS
        .iter()
        .map(|(_, step)| crate::disputes::reference(dispute_id, step))
        .collect();
    f.texts("t.kind", &kinds);
    f.texts("t.reference", &references);
    let sql = format!(
        "SELECT {TRANSFER_COLUMNS} FROM transfers t{} ORDER BY t.created_at, t.id",
        f.where_sql()
    );
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(transfer_from_row).collect()
}

/// A project with its master balance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectRow {
    pub project: ProjectRecord,
    pub balance: i64,
}

pub async fn projects_page(
    conn: &mut Conn,
    scope: &Scope,
    before: Option<&Cursor>,
    limit: i64,
) -> Result<Vec<ProjectRow>, StoreError> {
    let mut f = Filter::default();
    scope.restrict(&mut f, "p.id");
    keyset(&mut f, "p.created_at", "p.id", before);
    let sql = page_sql(
        &mut f,
        "p.*, COALESCE(a.balance, 0) AS master_balance",
        "projects p LEFT JOIN accounts a ON a.project_id = p.id AND a.kind = 'master' \
         AND a.card_id IS NULL",
        "p.created_at",
        "p.id",
        limit,
    );
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|r| {
            Ok(ProjectRow {
                project: crate::projects::project_from_row(r)?,
                balance: r.try_get("master_balance")?,
            })
        })
        .collect()
}

/// A project's newest users.
pub async fn project_users(
    conn: &mut Conn,
    project_id: &str,
    limit: i64,
) -> Result<Vec<UserRecord>, StoreError> {
    let mut f = Filter::default();
    f.eq("project_id", Arg::Text(project_id.to_owned()));
    let sql = page_sql(&mut f, "*", "users", "created_at", "id", limit);
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    Ok(rows
        .iter()
        .map(crate::users::from_row)
        .collect::<Result<_, _>>()?)
}

/// A project's newest webhook subscriptions.
pub async fn project_subscriptions(
    conn: &mut Conn,
    project_id: &str,
    limit: i64,
) -> Result<Vec<SubscriptionRecord>, StoreError> {
    let mut f = Filter::default();
    f.eq("project_id", Arg::Text(project_id.to_owned()));
    let sql = page_sql(
        &mut f,
        "*",
        "webhook_subscriptions",
        "created_at",
        "id",
        limit,
    );
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(crate::subscriptions::from_row).collect()
}

/// Cards per status.
pub async fn card_counts(conn: &mut Conn, scope: &Scope) -> Result<Vec<(String, i64)>, StoreError> {
    let mut f = Filter::default();
    scope.restrict(&mut f, "project_id");
    let sql = format!(
        "SELECT status, COUNT(*) AS n FROM cards{} GROUP BY status ORDER BY status",
        f.where_sql()
    );
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|r| Ok((r.try_get("status")?, r.try_get("n")?)))
        .collect()
}

/// Orders an operator should look at: failed since `since`, and orders the worker is
/// retrying (more than one attempt and not finished), newest first.
pub async fn orders_needing_attention(
    conn: &mut Conn,
    scope: &Scope,
    since: i64,
    limit: i64,
) -> Result<Vec<OrderRecord>, StoreError> {
    let mut f = Filter::default();
    scope.restrict(&mut f, "project_id");
    let since = f.push(Arg::Int(since));
    let limit = f.push(Arg::Int(limit));
    let and_scope = f.where_sql().replacen(" WHERE ", " AND ", 1);
    let sql = format!(
        "SELECT * FROM (\
           SELECT * FROM orders WHERE status = 'failed' AND created_at >= {since}{and_scope} \
           UNION \
           SELECT * FROM orders WHERE next_attempt_at IS NOT NULL AND attempts > 1{and_scope}\
         ) o ORDER BY created_at DESC, id DESC LIMIT {limit}"
    );
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter().map(crate::orders::from_row).collect()
}

/// Authorization decisions per minute since `since`: (minute as micros since the epoch
/// divided by 60 s, approved, declined). An authorization counts in the minute it was
/// made; a reversed one still counts as approved.
pub async fn auth_decisions_by_minute(
    conn: &mut Conn,
    scope: &Scope,
    since: i64,
) -> Result<Vec<(i64, i64, i64)>, StoreError> {
    let mut f = Filter::default();
    scope.restrict(&mut f, "project_id");
    f.at_least("created_at", Some(since));
    let sql = format!(
        "SELECT CAST(created_at / 60000000 AS BIGINT) AS minute, \
         CAST(SUM(CASE WHEN status = 'declined' THEN 0 ELSE 1 END) AS BIGINT) AS approved, \
         CAST(SUM(CASE WHEN status = 'declined' THEN 1 ELSE 0 END) AS BIGINT) AS declined \
         FROM card_transactions{} AND tx_kind IN ('auth', 'reversal') \
         GROUP BY CAST(created_at / 60000000 AS BIGINT)",
        f.where_sql()
    );
    let rows = f.bind(&sql).fetch_all(&mut *conn).await?;
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get("minute")?,
                r.try_get("approved")?,
                r.try_get("declined")?,
            ))
        })
        .collect()
}
