//! Disputes, their timelines and their evidence (CONTRACT §15). Every query is scoped
//! by project. A status change is conditional on the status it was read in, so two
//! moves racing on one dispute never both apply. Evidence content is stored only
//! sealed; this module never sees it plain.

use crate::ledger::Mismatch;
use crate::query::{find_page, Filter, Source};
use crate::{Backend, Conn, StoreError};
use issuing_wire::PageRequest;
use sqlx::any::AnyRow;
use sqlx::Row;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisputeRecord {
    pub id: String,
    pub project_id: String,
    pub transaction_id: String,
    pub card_id: String,
    pub external_user_id: String,
    /// Micro-units, positive.
    pub amount: i64,
    pub reason: String,
    pub customer_note: Option<String>,
    pub status: String,
    pub resolution_reason: Option<String>,
    pub provisional_credit: bool,
    pub provider_dispute_id: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub resolved_at: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimelineRow {
    pub at: i64,
    pub status: String,
    pub note: Option<String>,
}

/// An evidence file's metadata; `sealed` is its content sealed with the master key.
#[derive(Clone, PartialEq, Eq)]
pub struct EvidenceRecord {
    pub id: String,
    pub dispute_id: String,
    pub project_id: String,
    pub filename: String,
    pub content_type: String,
    pub size: i64,
    pub sha256: String,
    pub sealed: String,
    pub created_at: i64,
}

impl std::fmt::Debug for EvidenceRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvidenceRecord")
            .field("id", &self.id)
            .field("dispute_id", &self.dispute_id)
            .field("filename", &self.filename)
            .field("size", &self.size)
            .finish()
    }
}

/// The statuses of an open dispute (the partial unique index `disputes_one_open`
/// names the same four).
pub const OPEN: &[&str] = &[
    "submitted",
    "representment",
    "prearbitration",
    "arbitration",
];

pub(crate) fn from_row(r: &AnyRow) -> Result<DisputeRecord, StoreError> {
    Ok(DisputeRecord {
        id: r.try_get("id")?,
        project_id: r.try_get("project_id")?,
        transaction_id: r.try_get("transaction_id")?,
        card_id: r.try_get("card_id")?,
        external_user_id: r.try_get("external_user_id")?,
        amount: r.try_get("amount")?,
        reason: r.try_get("reason")?,
        customer_note: r.try_get("customer_note")?,
        status: r.try_get("status")?,
        resolution_reason: r.try_get("resolution_reason")?,
        provisional_credit: r.try_get::<i64, _>("provisional_credit")? != 0,
        provider_dispute_id: r.try_get("provider_dispute_id")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
        resolved_at: r.try_get("resolved_at")?,
    })
}

/// Writes a new dispute and its first timeline row. A second open dispute on the same
/// transaction fails with `Conflict` (the partial unique index).
pub async fn insert(
    conn: &mut Conn,
    d: &DisputeRecord,
    note: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO disputes (id, project_id, transaction_id, card_id, external_user_id, amount, \
         reason, customer_note, status, resolution_reason, provisional_credit, provider_dispute_id, \
         created_at, updated_at, resolved_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
    )
    .bind(&d.id)
    .bind(&d.project_id)
    .bind(&d.transaction_id)
    .bind(&d.card_id)
    .bind(&d.external_user_id)
    .bind(d.amount)
    .bind(&d.reason)
    .bind(&d.customer_note)
    .bind(&d.status)
    .bind(&d.resolution_reason)
    .bind(i64::from(d.provisional_credit))
    .bind(&d.provider_dispute_id)
    .bind(d.created_at)
    .bind(d.updated_at)
    .bind(d.resolved_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    append_timeline(conn, &d.id, d.created_at, &d.status, note).await
}

async fn append_timeline(
    conn: &mut Conn,
    dispute_id: &str,
    at: i64,
    status: &str,
    note: Option<&str>,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO dispute_timeline (dispute_id, seq, at, status, note) \
         SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3, $4 FROM dispute_timeline WHERE dispute_id = $1",
    )
    .bind(dispute_id)
    .bind(at)
    .bind(status)
    .bind(note)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// One of the project's disputes; with `lock` (`Store::for_update`) its row stays
/// locked until the caller's transaction ends.
pub async fn get(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
    lock: &str,
) -> Result<Option<DisputeRecord>, StoreError> {
    let sql = format!("SELECT * FROM disputes WHERE project_id = $1 AND id = $2{lock}");
    let row = sqlx::query(&sql)
        .bind(project_id)
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// A dispute by the provider's id for it (Lithic's token), whatever its project.
pub async fn by_provider_id(
    conn: &mut Conn,
    provider_dispute_id: &str,
    lock: &str,
) -> Result<Option<DisputeRecord>, StoreError> {
    let sql = format!("SELECT * FROM disputes WHERE provider_dispute_id = $1{lock}");
    let row = sqlx::query(&sql)
        .bind(provider_dispute_id)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// A dispute by its id, whatever its project (the console checks the scope).
pub async fn by_id(conn: &mut Conn, id: &str) -> Result<Option<DisputeRecord>, StoreError> {
    let row = sqlx::query("SELECT * FROM disputes WHERE id = $1")
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
    row.as_ref().map(from_row).transpose()
}

/// Records the provider's id of a dispute created there.
pub async fn set_provider_id(
    conn: &mut Conn,
    project_id: &str,
    id: &str,
    provider_dispute_id: &str,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE disputes SET provider_dispute_id = $1 WHERE project_id = $2 AND id = $3")
        .bind(provider_dispute_id)
        .bind(project_id)
        .bind(id)
        .execute(&mut *conn)
        .await
        .map_err(StoreError::from_write)?;
    Ok(())
}

/// Moves `prev` to `next`'s status (and resolution), only if it is still in `prev`'s
/// status; appends the timeline row. False when another move came first.
pub async fn update_status(
    conn: &mut Conn,
    prev: &DisputeRecord,
    next: &DisputeRecord,
    note: Option<&str>,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE disputes SET status = $1, resolution_reason = $2, updated_at = $3, resolved_at = $4 \
         WHERE project_id = $5 AND id = $6 AND status = $7",
    )
    .bind(&next.status)
    .bind(&next.resolution_reason)
    .bind(next.updated_at)
    .bind(next.resolved_at)
    .bind(&prev.project_id)
    .bind(&prev.id)
    .bind(&prev.status)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() != 1 {
        return Ok(false);
    }
    append_timeline(conn, &next.id, next.updated_at, &next.status, note).await?;
    Ok(true)
}

/// What the transaction's other disputes hold of its amount: those open or won.
pub async fn claimed(
    conn: &mut Conn,
    project_id: &str,
    transaction_id: &str,
) -> Result<i64, StoreError> {
    let total: Option<i64> = sqlx::query_scalar(
        "SELECT CAST(SUM(amount) AS BIGINT) FROM disputes WHERE project_id = $1 AND transaction_id = $2 \
         AND status IN ('submitted', 'representment', 'prearbitration', 'arbitration', 'won')",
    )
    .bind(project_id)
    .bind(transaction_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok(total.unwrap_or(0))
}

/// Whether the transaction has an open dispute.
pub async fn has_open(
    conn: &mut Conn,
    project_id: &str,
    transaction_id: &str,
) -> Result<bool, StoreError> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM disputes WHERE project_id = $1 AND transaction_id = $2 \
         AND status IN ('submitted', 'representment', 'prearbitration', 'arbitration')",
    )
    .bind(project_id)
    .bind(transaction_id)
    .fetch_one(&mut *conn)
    .await?;
    Ok(n > 0)
}

pub async fn timeline(conn: &mut Conn, dispute_id: &str) -> Result<Vec<TimelineRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT at, status, note FROM dispute_timeline WHERE dispute_id = $1 ORDER BY seq",
    )
    .bind(dispute_id)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(TimelineRow {
                at: r.try_get("at")?,
                status: r.try_get("status")?,
                note: r.try_get("note")?,
            })
        })
        .collect()
}

#[derive(Debug, Default, Clone)]
pub struct DisputeFilter {
    pub dispute_ids: Vec<String>,
    pub card_ids: Vec<String>,
    pub transaction_ids: Vec<String>,
    pub statuses: Vec<String>,
    pub created_from: Option<i64>,
    pub created_to: Option<i64>,
}

pub const SORT_KEYS: &[&str] = &["created_at", "updated_at", "amount", "status"];

pub async fn find(
    conn: &mut Conn,
    backend: Backend,
    project_id: &str,
    filter: &DisputeFilter,
    page: &PageRequest,
) -> Result<(Vec<DisputeRecord>, i64), StoreError> {
    let mut f = Filter::for_project("project_id", project_id);
    f.texts("id", &filter.dispute_ids);
    f.texts("card_id", &filter.card_ids);
    f.texts("transaction_id", &filter.transaction_ids);
    f.texts("status", &filter.statuses);
    f.at_least("created_at", filter.created_from);
    f.at_most("created_at", filter.created_to);
    let sort = match page.sort_by {
        "updated_at" => ("updated_at", false),
        "amount" => ("amount", false),
        "status" => ("status", true),
        _ => ("created_at", false),
    };
    let (rows, total) = find_page(conn, backend, f, Source::table("disputes"), sort, page).await?;
    Ok((rows.iter().map(from_row).collect::<Result<_, _>>()?, total))
}

fn evidence_from_row(r: &AnyRow) -> Result<EvidenceRecord, StoreError> {
    Ok(EvidenceRecord {
        id: r.try_get("id")?,
        dispute_id: r.try_get("dispute_id")?,
        project_id: r.try_get("project_id")?,
        filename: r.try_get("filename")?,
        content_type: r.try_get("content_type")?,
        size: r.try_get("size")?,
        sha256: r.try_get("sha256")?,
        sealed: r.try_get("sealed")?,
        created_at: r.try_get("created_at")?,
    })
}

pub async fn insert_evidence(conn: &mut Conn, e: &EvidenceRecord) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO dispute_evidence (id, dispute_id, project_id, filename, content_type, size, \
         sha256, sealed, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(&e.id)
    .bind(&e.dispute_id)
    .bind(&e.project_id)
    .bind(&e.filename)
    .bind(&e.content_type)
    .bind(e.size)
    .bind(&e.sha256)
    .bind(&e.sealed)
    .bind(e.created_at)
    .execute(&mut *conn)
    .await
    .map_err(StoreError::from_write)?;
    Ok(())
}

/// A dispute's evidence metadata (the sealed content left out), oldest first.
pub async fn evidence_list(
    conn: &mut Conn,
    project_id: &str,
    dispute_id: &str,
) -> Result<Vec<EvidenceRecord>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, dispute_id, project_id, filename, content_type, size, sha256, '' AS sealed, \
         created_at FROM dispute_evidence WHERE project_id = $1 AND dispute_id = $2 \
         ORDER BY created_at, id",
    )
    .bind(project_id)
    .bind(dispute_id)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(evidence_from_row).collect()
}

/// One evidence file, sealed content included.
pub async fn evidence_get(
    conn: &mut Conn,
    project_id: &str,
    dispute_id: &str,
    evidence_id: &str,
) -> Result<Option<EvidenceRecord>, StoreError> {
    let row = sqlx::query(
        "SELECT * FROM dispute_evidence WHERE project_id = $1 AND dispute_id = $2 AND id = $3",
    )
    .bind(project_id)
    .bind(dispute_id)
    .bind(evidence_id)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(evidence_from_row).transpose()
}

/// The reference of a dispute's ledger transfer of one step (`credit`, `won`, `debit`,
/// `shortfall`): unique per kind, so no step posts twice.
pub fn reference(dispute_id: &str, step: &str) -> String {
    format!("{dispute_id}:{step}")
}

/// Every dispute's movements must match its state (CONTRACT §15): a provisional credit
/// or a won dispute credited its amount once; a won dispute with a provisional credit
/// was paid back to the dispute account; a lost or withdrawn one with a provisional
/// credit took its amount back (from the card, the master balance and debt). And each
/// project's dispute account holds minus its open provisional credits.
pub(crate) async fn verify(conn: &mut Conn, found: &mut Vec<Mismatch>) -> Result<(), StoreError> {
    let moved = |kind: &str, step: &str| {
        format!(
            "CAST(COALESCE((SELECT SUM(e.amount) FROM transfers t JOIN entries e ON e.transfer_id = t.id \
             WHERE t.project_id = d.project_id AND t.kind = '{kind}' AND t.reference = d.id || ':{step}' \
             AND e.amount > 0), 0) AS BIGINT)"
        )
    };
    let sql = format!(
        "SELECT d.id, d.status, d.amount, d.provisional_credit, {} AS credited, {} AS won, \
         {} + {} AS taken FROM disputes d",
        moved("dispute_credit", "credit"),
        moved("dispute_won", "won"),
        moved("dispute_debit", "debit"),
        moved("dispute_shortfall", "shortfall"),
    );
    let rows = sqlx::query(&sql).fetch_all(&mut *conn).await?;
    for r in rows {
        let status: String = r.try_get("status")?;
        let amount: i64 = r.try_get("amount")?;
        let provisional = r.try_get::<i64, _>("provisional_credit")? != 0;
        let actual = (
            r.try_get::<i64, _>("credited")?,
            r.try_get::<i64, _>("won")?,
            r.try_get::<i64, _>("taken")?,
        );
        let expected = expected_movements(&status, provisional, amount);
        if actual != expected {
            found.push(Mismatch::DisputeDiffers {
                dispute_id: r.try_get("id")?,
                status,
                expected,
                actual,
            });
        }
    }
    let rows = sqlx::query(
        "SELECT a.project_id, a.balance, \
         CAST(COALESCE((SELECT SUM(d.amount) FROM disputes d WHERE d.project_id = a.project_id \
           AND d.provisional_credit = 1 \
           AND d.status IN ('submitted', 'representment', 'prearbitration', 'arbitration')), 0) AS BIGINT) AS fronted \
         FROM accounts a WHERE a.kind = 'dispute' AND a.card_id IS NULL",
    )
    .fetch_all(&mut *conn)
    .await?;
    for r in rows {
        let balance: i64 = r.try_get("balance")?;
        let fronted: i64 = r.try_get("fronted")?;
        if balance != -fronted {
            found.push(Mismatch::DisputeAccountDiffers {
                project_id: r.try_get("project_id")?,
                balance,
                fronted,
            });
        }
    }
    Ok(())
}

/// What a dispute in `status` must have moved: (credited, paid back to the dispute
/// account, taken back), in micro-units.
pub fn expected_movements(status: &str, provisional: bool, amount: i64) -> (i64, i64, i64) {
    let won = status == "won";
    let given_back = matches!(status, "lost" | "withdrawn");
    let credited = if provisional || won { amount } else { 0 };
    let repaid = if provisional && won { amount } else { 0 };
    let taken = if provisional && given_back { amount } else { 0 };
    (credited, repaid, taken)
}

#[cfg(test)]
mod tests {
    use super::expected_movements;

    #[test]
    fn each_outcome_expects_its_movements() {
        assert_eq!(expected_movements("submitted", true, 5), (5, 0, 0));
        assert_eq!(expected_movements("submitted", false, 5), (0, 0, 0));
        assert_eq!(expected_movements("won", true, 5), (5, 5, 0));
        assert_eq!(expected_movements("won", false, 5), (5, 0, 0));
        assert_eq!(expected_movements("lost", true, 5), (5, 0, 5));
        assert_eq!(expected_movements("withdrawn", true, 5), (5, 0, 5));
        assert_eq!(expected_movements("lost", false, 5), (0, 0, 0));
    }
}
