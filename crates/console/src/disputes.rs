//! Disputes (CONTRACT §15): the list (`status` and `project` filters), one dispute's
//! page (the object, its timeline, its evidence files by name, type and size, and the
//! ledger transfers of its money), and in the sandbox Advance, the network's move, for
//! operators and admins: `moves::apply`, the code of `simulate/disputes/advance`, with
//! its money, card transactions and `dispute.updated`, audited as `dispute.advance`.
//!
//! Evidence content is never read here: the store's list leaves the sealed content out.
//! The card and transaction pages list their disputes with `dispute_row`.

use super::audit::finish;
use super::session::Act;
use super::view::{self, render, transfer_view, Ctx, PageResult, TransferView};
use super::{Console, ConsoleError, Op, PAGE_SIZE};
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::Extension;
use issuing_app::disputes::moves::{self, Change};
use issuing_domain::dispute::{DisputeStatus, ResolutionReason};
use issuing_store::console::{self as reads, DisputeQuery};
use issuing_store::disputes::{self, DisputeRecord};
use serde::Deserialize;
use serde_json::json;

/// Longest form value an audit row keeps as it was posted (a status name is shorter).
const MAX_ECHOED: usize = 40;

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    status: Option<String>,
    project: Option<String>,
    before: Option<String>,
}

pub(crate) struct DisputeRow {
    pub id: String,
    pub project_id: String,
    pub card_id: String,
    pub transaction_id: String,
    pub external_user_id: String,
    pub amount: String,
    pub reason: String,
    pub status: String,
    pub badge: &'static str,
    pub resolution_reason: String,
    pub provisional_credit: bool,
    pub created_at: String,
    pub updated_at: String,
    pub resolved_at: String,
}

pub(crate) fn dispute_row(d: DisputeRecord) -> DisputeRow {
    DisputeRow {
        amount: view::money(d.amount),
        badge: view::badge(&d.status),
        resolution_reason: view::opt(d.resolution_reason.as_deref()),
        created_at: view::time(d.created_at),
        updated_at: view::time(d.updated_at),
        resolved_at: view::opt_time(d.resolved_at),
        provisional_credit: d.provisional_credit,
        id: d.id,
        project_id: d.project_id,
        card_id: d.card_id,
        transaction_id: d.transaction_id,
        external_user_id: d.external_user_id,
        reason: d.reason,
        status: d.status,
    }
}

/// The statuses of the list filter: every status, open stages first.
fn statuses() -> Vec<&'static str> {
    DisputeStatus::ALL.iter().map(|s| s.as_str()).collect()
}

#[derive(Template)]
#[template(path = "console/disputes.html")]
struct DisputesPage {
    ctx: Ctx,
    project: String,
    statuses: Vec<(&'static str, bool)>,
    disputes: Vec<DisputeRow>,
    next: Option<String>,
    here: String,
}

pub(crate) async fn list(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Query(query): Query<ListQuery>,
) -> PageResult {
    let project = view::filter(&query.project)?;
    let status = view::filter(&query.status)?;
    let before = view::cursor(&query.before)?;
    let mut conn = console.app.store.reader().conn().await?;
    let records = reads::disputes_page(
        &mut conn,
        &op.scope,
        &DisputeQuery {
            project_id: project.clone(),
            status: status.clone(),
        },
        before.as_ref(),
        PAGE_SIZE + 1,
    )
    .await?;
    let (records, next) = view::split_page(records, PAGE_SIZE, |d| (d.created_at, &d.id));
    let link = |before: Option<&str>| {
        view::link(
            "/console/disputes",
            &[
                ("status", status.as_deref()),
                ("project", project.as_deref()),
                ("before", before),
            ],
        )
    };
    render(&DisputesPage {
        ctx: op.ctx(&console, "disputes"),
        here: link(query.before.as_deref()),
        next: next.map(|n| link(Some(&n))),
        disputes: records.into_iter().map(dispute_row).collect(),
        statuses: view::options(&statuses(), status.as_deref()),
        project: project.unwrap_or_default(),
    })
}

pub(crate) struct TimelineView {
    pub at: String,
    pub status: String,
    pub badge: &'static str,
    pub note: String,
}

pub(crate) struct EvidenceView {
    pub id: String,
    pub filename: String,
    pub content_type: String,
    pub size: i64,
    pub sha256: String,
    pub created_at: String,
}

#[derive(Template)]
#[template(path = "console/dispute.html")]
struct DisputePage {
    ctx: Ctx,
    d: DisputeRow,
    customer_note: String,
    provider_dispute_id: String,
    timeline: Vec<TimelineView>,
    evidence: Vec<EvidenceView>,
    transfers: Vec<TransferView>,
    /// Where Advance may move it (none once final).
    moves: Vec<&'static str>,
    reasons: Vec<&'static str>,
}

/// A dispute the operator may see, or 404. Read from the primary, like a card before
/// its actions, so the page after Advance shows the move.
async fn visible_dispute(
    console: &Console,
    op: &Op,
    dispute_id: &str,
) -> Result<DisputeRecord, ConsoleError> {
    let mut conn = console.app.store.conn().await?;
    let d = disputes::by_id(&mut conn, dispute_id)
        .await?
        .ok_or(ConsoleError::NotFound)?;
    op.may_see(&d.project_id)?;
    Ok(d)
}

pub(crate) async fn show(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Path(dispute_id): Path<String>,
) -> PageResult {
    let d = visible_dispute(&console, &op, &dispute_id).await?;
    let mut conn = console.app.store.reader().conn().await?;
    // One store call per section.
    let timeline = disputes::timeline(&mut conn, &d.id).await?;
    let evidence = disputes::evidence_list(&mut conn, &d.project_id, &d.id).await?;
    let transfers = reads::dispute_transfers(&mut conn, &d.project_id, &d.id).await?;
    let moves = DisputeStatus::parse(&d.status)
        .map(|s| s.next().map(DisputeStatus::as_str).collect())
        .unwrap_or_default();
    render(&DisputePage {
        ctx: op.ctx(&console, "disputes"),
        customer_note: view::opt(d.customer_note.as_deref()),
        provider_dispute_id: view::opt(d.provider_dispute_id.as_deref()),
        timeline: timeline
            .into_iter()
            .map(|t| TimelineView {
                at: view::time(t.at),
                badge: view::badge(&t.status),
                note: view::opt(t.note.as_deref()),
                status: t.status,
            })
            .collect(),
        evidence: evidence
            .into_iter()
            .map(|e| EvidenceView {
                created_at: view::time(e.created_at),
                size: e.size,
                id: e.id,
                filename: e.filename,
                content_type: e.content_type,
                sha256: e.sha256,
            })
            .collect(),
        transfers: transfers.into_iter().map(transfer_view).collect(),
        moves,
        reasons: ResolutionReason::ALL.iter().map(|r| r.as_str()).collect(),
        d: dispute_row(d),
    })
}

#[derive(Deserialize)]
pub(crate) struct AdvanceForm {
    #[serde(default)]
    to: String,
    /// Empty for the default of the final status (none for an open one).
    #[serde(default)]
    resolution_reason: String,
}

/// The change the form asks for, or why it names none.
fn change_of(form: &AdvanceForm) -> Result<Change, String> {
    let to = DisputeStatus::parse(form.to.trim())
        .ok_or_else(|| format!("Choose one of {} to move to.", statuses().join(", ")))?;
    let reason = match form.resolution_reason.trim() {
        "" => None,
        r => Some(ResolutionReason::parse(r).ok_or_else(|| {
            let known: Vec<&str> = ResolutionReason::ALL.iter().map(|r| r.as_str()).collect();
            format!("The resolution reason must be one of {}.", known.join(", "))
        })?),
    };
    Ok(Change::To(to, reason))
}

fn echoed(value: &str) -> String {
    value.trim().chars().take(MAX_ECHOED).collect()
}

/// Sandbox: the network's move of a dispute, through the code of
/// `simulate/disputes/advance`. The project is the dispute's own, never the form's; the
/// timeline's note names the operator.
pub(crate) async fn advance(
    State(console): State<Console>,
    Path(dispute_id): Path<String>,
    Act(op, form): Act<AdvanceForm>,
) -> PageResult {
    let d = visible_dispute(&console, &op, &dispute_id).await?;
    let note = format!("sandbox: advanced from the console by {}", op.email);
    let result = match change_of(&form) {
        Ok(change) => moves::apply(&console.app, &d.project_id, &d.id, change, Some(&note))
            .await
            .map(|v| match v.resolution_reason {
                Some(r) => format!("Dispute {} is {} ({r}).", v.dispute_id, v.status),
                None => format!("Dispute {} is {}.", v.dispute_id, v.status),
            })
            .map_err(|e| e.message),
        Err(why) => Err(why),
    };
    let mut targets = json!({
        "dispute_id": d.id,
        "from": d.status,
        "to": echoed(&form.to),
    });
    if !form.resolution_reason.trim().is_empty() {
        targets["resolution_reason"] = json!(echoed(&form.resolution_reason));
    }
    let back = format!("/console/disputes/{}", d.id);
    finish(
        &console,
        &op,
        "dispute.advance",
        Some(&d.project_id),
        targets,
        result,
        &back,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(to: &str, reason: &str) -> AdvanceForm {
        AdvanceForm {
            to: to.into(),
            resolution_reason: reason.into(),
        }
    }

    #[test]
    fn reads_the_move_asked_for() {
        assert!(matches!(
            change_of(&form(" won ", "")),
            Ok(Change::To(DisputeStatus::Won, None))
        ));
        assert!(matches!(
            change_of(&form("lost", "network_rejected")),
            Ok(Change::To(
                DisputeStatus::Lost,
                Some(ResolutionReason::NetworkRejected)
            ))
        ));
        assert!(change_of(&form("", "")).is_err());
        assert!(change_of(&form("won", "maybe")).is_err());
        assert_eq!(echoed(&"x".repeat(100)).len(), MAX_ECHOED);
    }
}
