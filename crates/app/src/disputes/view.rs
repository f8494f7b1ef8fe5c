//! A dispute as the API answers it, and as `dispute.updated` carries it (without its
//! timeline and evidence).

use issuing_domain::time::to_rfc3339;
use issuing_store::disputes::{self, DisputeFilter, DisputeRecord, EvidenceRecord};
use issuing_store::{Conn, Store};
use issuing_wire::api::{Decimal, Dispute, Evidence, Page, TimelineEntry};
use issuing_wire::{Amount, ApiError, PageRequest};

pub fn evidence(e: &EvidenceRecord) -> Evidence {
    Evidence {
        evidence_id: e.id.clone(),
        filename: e.filename.clone(),
        content_type: e.content_type.clone(),
        size: u64::try_from(e.size).unwrap_or(0),
        sha256: e.sha256.clone(),
        created_at: to_rfc3339(e.created_at),
    }
}

/// The object without `timeline` and `evidence` (empty lists).
pub fn bare(d: &DisputeRecord) -> Dispute {
    Dispute {
        dispute_id: d.id.clone(),
        transaction_id: d.transaction_id.clone(),
        card_id: d.card_id.clone(),
        external_user_id: d.external_user_id.clone(),
        amount: Decimal::from(Amount::from_micros(d.amount)),
        currency: issuing_store::ledger::CURRENCY.into(),
        reason: d.reason.clone(),
        customer_note: d.customer_note.clone(),
        status: d.status.clone(),
        resolution_reason: d.resolution_reason.clone(),
        provisional_credit: d.provisional_credit,
        evidence: Vec::new(),
        timeline: Vec::new(),
        created_at: to_rfc3339(d.created_at),
        updated_at: to_rfc3339(d.updated_at),
        resolved_at: d.resolved_at.map(to_rfc3339),
    }
}

/// `dispute.updated`'s `data`: the object without `timeline` and `evidence`.
pub fn event_data(d: &DisputeRecord) -> Result<serde_json::Value, ApiError> {
    let mut v = serde_json::to_value(bare(d)).map_err(|_| ApiError::internal())?;
    if let Some(o) = v.as_object_mut() {
        o.remove("timeline");
        o.remove("evidence");
    }
    Ok(v)
}

/// The whole object, timeline and evidence metadata read.
pub async fn full(conn: &mut Conn, d: &DisputeRecord) -> Result<Dispute, ApiError> {
    let mut out = bare(d);
    out.timeline = disputes::timeline(conn, &d.id)
        .await?
        .into_iter()
        .map(|t| TimelineEntry {
            at: to_rfc3339(t.at),
            status: t.status,
            note: t.note,
        })
        .collect();
    out.evidence = disputes::evidence_list(conn, &d.project_id, &d.id)
        .await?
        .iter()
        .map(evidence)
        .collect();
    Ok(out)
}

/// `disputes/get`.
pub async fn get(store: &Store, project_id: &str, dispute_id: &str) -> Result<Dispute, ApiError> {
    let mut conn = store.conn().await?;
    let d = super::load(&mut conn, store, project_id, dispute_id, false).await?;
    full(&mut conn, &d).await
}

/// `disputes/find`: the list shape, newest first by default.
pub async fn find(
    store: &Store,
    project_id: &str,
    filter: &DisputeFilter,
    page: &PageRequest,
) -> Result<Page<Dispute>, ApiError> {
    let mut conn = store.conn().await?;
    let (records, total) =
        disputes::find(&mut conn, store.backend(), project_id, filter, page).await?;
    let mut items = Vec::with_capacity(records.len());
    for d in &records {
        items.push(full(&mut conn, d).await?);
    }
    Ok(Page::new(items, total, page))
}
