//! Card transactions and the card network messages already applied to them. Every
//! query is scoped by project. State changes are conditional on the state they were
//! read in, so two messages racing on one transaction never both apply.

use crate::query::{find_page, Filter, Source};
use crate::writer::{BatchConn, RowRead};
use crate::{Backend, Conn, StoreError};
use issuing_wire::PageRequest;
use sqlx::any::AnyRow;
use sqlx::Row;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardTxRecord {
    pub id: String,
    pub project_id: String,
    pub card_id: String,
    /// `auth`, `reversal` or `refund`.
    pub tx_kind: String,
    /// `pending`, `approved` or `declined`.
    pub status: String,
    pub tx_type: String,
    pub auth_amount: i64,
    /// Still held for this transaction; non-zero only while it is an open auth.
    pub held: i64,
    /// `card_tx_data.card_amount` now.
    pub card_amount: i64,
    pub cleared: i64,
    pub refunded: i64,
    pub original_transaction_id: Option<String>,
    /// JSON object: `name`, `mcc`, `country`.
    pub merchant: serde_json::Value,
    pub merchant_currency: String,
    pub merchant_amount: i64,
    pub failure_reason: Option<String>,
    /// When an open hold expires; None once the hold is gone.
    pub hold_expires_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    /// The merchant's MCC, for limits scoped to MCCs.
    pub mcc: Option<String>,
    /// What the transaction counts toward limits now (micro-units), in the window of
    /// `created_at`.
    pub counted_amount: i64,
    /// Whether it counts as one authorization.
    pub counts: bool,
    /// A declined authorization's `decline` object.
    pub decline: Option<serde_json::Value>,
    /// The decision webhook's `reason`, when it gave one.
    pub decision_reason: Option<String>,
    /// `awaiting` while the decision webhook is asked, `decided` after, None when no
    /// webhook was involved.
    pub decision_state: Option<String>,
    /// When an awaited decision is due; past it (and a margin) the worker applies
    /// `decision_on_timeout`.
    pub decision_deadline: Option<i64>,
    pub decision_on_timeout: Option<String>,
    /// The dispute a card-side dispute movement (`tx_kind` `other`) belongs to.
    pub dispute_id: Option<String>,
    /// When the transaction first settled (its clearing, or a force post's creation);
    /// written by the store, never by a flow.
    pub settled_at: Option<i64>,
}

/// `decision_state` while the decision webhook is being asked.
pub const AWAITING: &str = "awaiting";
/// `decision_state` once the decision is made.
pub const DECIDED: &str = "decided";

impl CardTxRecord {
    /// Whether its decision webhook has not answered yet: it holds funds and counts,
    /// but nothing may clear, reverse or expire it until it is decided.
    pub fn awaiting_decision(&self) -> bool {
        self.decision_state.as_deref() == Some(AWAITING)
    }
}

pub(crate) fn from_row(r: &AnyRow) -> Result<CardTxRecord, StoreError> {
    let merchant: String = r.try_get("merchant")?;
    Ok(CardTxRecord {
        id: r.try_get("id")?,
        project_id: r.try_get("project_id")?,
        card_id: r.try_get("card_id")?,
        tx_kind: r.try_get("tx_kind")?,
        status: r.try_get("status")?,
        tx_type: r.try_get("tx_type")?,
        auth_amount: r.try_get("auth_amount")?,
        held: r.try_get("held")?,
        card_amount: r.try_get("card_amount")?,
        cleared: r.try_get("cleared")?,
        refunded: r.try_get("refunded")?,
        original_transaction_id: r.try_get("original_transaction_id")?,
        merchant: serde_json::from_str(&merchant)
            .map_err(|e| StoreError::Corrupt(format!("card transaction merchant: {e}")))?,
        merchant_currency: r.try_get("merchant_currency")?,
        merchant_amount: r.try_get("merchant_amount")?,
        failure_reason: r.try_get("failure_reason")?,
        hold_expires_at: r.try_get("hold_expires_at")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
        mcc: r.try_get("mcc")?,
        counted_amount: r.try_get("counted_amount")?,
        counts: r.try_get::<i64, _>("counts")? != 0,
        decline: r
            .try_get::<Option<String>, _>("decline")?
            .map(|d| serde_json::from_str(&d))
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("card transaction decline: {e}")))?,
        decision_reason: r.try_get("decision_reason")?,
        decision_state: r.try_get("decision_state")?,
        decision_deadline: r.try_get("decision_deadline")?,
        decision_on_timeout: r.try_get("decision_on_timeout")?,
        dispute_id: r.try_get("dispute_id")?,
        settled_at: r.try_get("settled_at")?,
    })
}

pub async fn insert(conn: &mut Conn, t: &CardTxRecord) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO card_transactions (id, project_id, card_id, tx_kind, status, tx_type, auth_amount, \
         held, card_amount, cleared, refunded, original_transaction_id, merchant, merchant_currency, \
         merchant_amount, failure_reason, hold_expires_at, created_at, updated_at, mcc, counted_amount, \
         counts, decline, decision_reason, decision_state, decision_deadline, decision_on_timeout, \
         dispute_id, settled_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, \
         $20, $21, $22, $23, $24, $25, $26, $27, $28, $29)",
    )
    .bind(&t.id)
    .bind(&t.project_id)
    .bind(&t.card_id)
    .bind(&t.tx_kind)
    .bind(&t.status)
    .bind(&t.tx_type)
    .bind(t.auth_amount)
    .bind(t.held)
    .bind(t.card_amount)
    .bind(t.cleared)
    .bind(t.refunded)
    .bind(&t.original_transaction_id)
    .bind(t.merchant.to_string())
    .bind(&t.merchant_currency)
    .bind(t.merchant_amount)
    .bind(&t.failure_reason)
    .bind(t.hold_expires_at)
    .bind(t.created_at)
    .bind(t.updated_at)
    .bind(&t.mcc)
    .bind(t.counted_amount)
    .bind(i64::from(t.counts))
    .bind(t.decline.as_ref().map(ToString::to_string))
    .bind(&t.decision_reason)
    .bind(&t.decision_state)
    .bind(t.decision_deadline)
    .bind(&t.decision_on_timeout)
    .bind(&t.dispute_id)
    .bind(settled_at(t))
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// A new row settled at birth (a force post) settled when it was created.
fn settled_at(t: &CardTxRecord) -> Option<i64> {
    (t.cleared > 0).then_some(t.created_at)
}

/// The `INSERT` head of `insert_many`'s rows, in `row`'s order.
const INSERT_HEAD: &str = "INSERT INTO card_transactions (id, project_id, card_id, tx_kind, status, \
     tx_type, auth_amount, held, card_amount, cleared, refunded, original_transaction_id, merchant, \
     merchant_currency, merchant_amount, failure_reason, hold_expires_at, created_at, updated_at, mcc, \
     counted_amount, counts, decline, decision_reason, decision_state, decision_deadline, \
     decision_on_timeout, dispute_id, settled_at)";

/// Adds new transactions to `inserts` (a batch writer's), as `insert` writes one.
pub fn insert_many(inserts: &mut crate::query::Inserts, txs: &[CardTxRecord]) {
    use crate::query::Cell;
    let rows = txs
        .iter()
        .map(|t| {
            vec![
                Cell::text(&t.id),
                Cell::text(&t.project_id),
                Cell::text(&t.card_id),
                Cell::text(&t.tx_kind),
                Cell::text(&t.status),
                Cell::text(&t.tx_type),
                Cell::int(t.auth_amount),
                Cell::int(t.held),
                Cell::int(t.card_amount),
                Cell::int(t.cleared),
                Cell::int(t.refunded),
                Cell::Text(t.original_transaction_id.clone()),
                Cell::text(t.merchant.to_string()),
                Cell::text(&t.merchant_currency),
                Cell::int(t.merchant_amount),
                Cell::Text(t.failure_reason.clone()),
                Cell::Int(t.hold_expires_at),
                Cell::int(t.created_at),
                Cell::int(t.updated_at),
                Cell::Text(t.mcc.clone()),
                Cell::int(t.counted_amount),
                Cell::int(i64::from(t.counts)),
                Cell::Text(t.decline.as_ref().map(ToString::to_string)),
                Cell::Text(t.decision_reason.clone()),
                Cell::Text(t.decision_state.clone()),
                Cell::Int(t.decision_deadline),
                Cell::Text(t.decision_on_timeout.clone()),
                Cell::Text(t.dispute_id.clone()),
                Cell::Int(settled_at(t)),
            ]
        })
        .collect();
    inserts.add(INSERT_HEAD, rows);
}

/// A network message applied to a transaction, for `record_messages`.
pub struct AppliedMessage<'a> {
    pub project_id: &'a str,
    pub message_id: &'a str,
    pub transaction_id: &'a str,
    pub kind: &'a str,
    pub now: i64,
}

/// Adds applied messages to `inserts` (a batch writer's), as `record_message` records
/// one. A message recorded meanwhile by a request outside the writer makes the insert,
/// and the batch, fail with `Conflict`.
pub fn record_messages(inserts: &mut crate::query::Inserts, messages: &[AppliedMessage<'_>]) {
    use crate::query::Cell;
    let rows = messages
        .iter()
        .map(|m| {
            vec![
                Cell::text(m.project_id),
                Cell::text(m.message_id),
                Cell::text(m.transaction_id),
                Cell::text(m.kind),
                Cell::int(m.now),
            ]
        })
        .collect();
    inserts.add(
        "INSERT INTO card_network_messages (project_id, message_id, transaction_id, kind, created_at)",
        rows,
    );
}

/// Which of the project's network messages `ids` were applied already, and to which
/// transaction.
pub async fn messages_applied(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    ids: &[&str],
) -> Result<std::collections::HashMap<String, String>, StoreError> {
    if ids.is_empty() {
        return Ok(std::collections::HashMap::new());
    }
    let rows = conn
        .rows_by_keys(
            "card_network_messages",
            "message_id, transaction_id",
            "message_id",
            "project_id = $1",
            &[project_id.into()],
            ids,
            false,
        )
        .await?;
    rows.iter()
        .map(|r| Ok((r.text("message_id")?, r.text("transaction_id")?)))
        .collect()
}

pub async fn get(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
) -> Result<Option<CardTxRecord>, StoreError> {
    let row = sqlx::query("SELECT * FROM card_transactions WHERE project_id = $1 AND id = $2")
        .bind(project_id)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// Writes `next` over `prev` only if the row still is `prev` (same kind, status, held,
/// cleared and refunded amounts, same decision state). False means another message
/// changed it first.
pub async fn update(
    conn: &mut Conn,
    prev: &CardTxRecord,
    next: &CardTxRecord,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE card_transactions SET tx_kind = $1, status = $2, tx_type = $3, held = $4, \
         card_amount = $5, cleared = $6, refunded = $7, failure_reason = $8, hold_expires_at = $9, \
         updated_at = $10, counted_amount = $18, counts = $19, decline = $20, decision_reason = $21, \
         decision_state = $22, \
         settled_at = CASE WHEN settled_at IS NULL AND $6 > 0 THEN $10 ELSE settled_at END \
         WHERE id = $11 AND project_id = $12 AND tx_kind = $13 AND status = $14 AND held = $15 \
         AND cleared = $16 AND refunded = $17 AND COALESCE(decision_state, '') = $23",
    )
    .bind(&next.tx_kind)
    .bind(&next.status)
    .bind(&next.tx_type)
    .bind(next.held)
    .bind(next.card_amount)
    .bind(next.cleared)
    .bind(next.refunded)
    .bind(&next.failure_reason)
    .bind(next.hold_expires_at)
    .bind(next.updated_at)
    .bind(&prev.id)
    .bind(&prev.project_id)
    .bind(&prev.tx_kind)
    .bind(&prev.status)
    .bind(prev.held)
    .bind(prev.cleared)
    .bind(prev.refunded)
    .bind(next.counted_amount)
    .bind(i64::from(next.counts))
    .bind(next.decline.as_ref().map(ToString::to_string))
    .bind(&next.decision_reason)
    .bind(&next.decision_state)
    .bind(prev.decision_state.as_deref().unwrap_or(""))
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Authorizations whose decision was due before `before` and is still awaited (across
/// projects: the recovery worker), oldest first.
pub async fn overdue_decisions(
    conn: &mut Conn,
    before: i64,
    limit: i64,
) -> Result<Vec<CardTxRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT * FROM card_transactions WHERE decision_state = 'awaiting' AND decision_deadline <= $1 \
         ORDER BY decision_deadline, id LIMIT $2",
    )
    .bind(before)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(from_row).collect()
}

/// A card's open authorizations (funds held), oldest first, bounded.
pub async fn open_auths_of_card(
    conn: &mut Conn,
    project_id: &str,
    card_id: &str,
    limit: i64,
) -> Result<Vec<CardTxRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT * FROM card_transactions WHERE project_id = $1 AND card_id = $2 AND held > 0 \
         ORDER BY created_at, id LIMIT $3",
    )
    .bind(project_id)
    .bind(card_id)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(from_row).collect()
}

/// Holds whose expiry has passed, oldest first (across projects: the expiry worker).
pub async fn expired_holds(
    conn: &mut Conn,
    now: i64,
    limit: i64,
) -> Result<Vec<CardTxRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT * FROM card_transactions WHERE hold_expires_at IS NOT NULL AND hold_expires_at <= $1 \
         ORDER BY hold_expires_at, id LIMIT $2",
    )
    .bind(now)
    .bind(limit)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(from_row).collect()
}

/// A card's transactions as `cards/txs` lists them: newest change first, optionally of
/// one `card_tx_data.type`.
pub async fn for_card(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    card_id: &str,
    kinds: &[String],
    page: &PageRequest,
) -> Result<(Vec<CardTxRecord>, i64), StoreError> {
    let mut f = Filter::for_project("project_id", project_id);
    f.eq("card_id", crate::query::Arg::Text(card_id.to_owned()));
    f.texts("tx_kind", kinds);
    let (rows, total) = find_page(
        conn,
        backend,
        f,
        Source::table("card_transactions"),
        ("updated_at", false),
        page,
    )
    .await?;
    let items = rows.iter().map(from_row).collect::<Result<_, _>>()?;
    Ok((items, total))
}

/// The transaction a network message was already applied to, if it was.
pub async fn message_applied(
    conn: &mut Conn,
    project_id: &str,
    message_id: &str,
) -> Result<Option<String>, StoreError> {
    let row = sqlx::query(
        "SELECT transaction_id FROM card_network_messages WHERE project_id = $1 AND message_id = $2",
    )
    .bind(project_id)
    .bind(message_id)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(row.map(|r| r.try_get("transaction_id")).transpose()?)
}

/// Records a network message as applied, in the transaction that applies it. A
/// concurrent copy of the same message fails here with `Conflict` and rolls back.
pub async fn record_message(
    conn: &mut Conn,
    project_id: &str,
    message_id: &str,
    transaction_id: &str,
    kind: &str,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO card_network_messages (project_id, message_id, transaction_id, kind, created_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(project_id)
    .bind(message_id)
    .bind(transaction_id)
    .bind(kind)
    .bind(now)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}
