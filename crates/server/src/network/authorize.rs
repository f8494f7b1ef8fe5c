//! Authorization requests (CONTRACT §9, §11): the card read under its lock, the
//! decision stages in order, one plan applied by the executor. All of it is one
//! operation of the authorizations writer (`group_commit.rs`), so the limit check and
//! the hold are one atomic step: concurrent authorizations on one card are decided one
//! after another and never pass a limit, or hold the same money, together.
//!
//! When the project has a live decision webhook, the authorization is held tentatively
//! here (funds and limit usage, no event yet) and `decision.rs` asks the endpoint
//! outside any transaction, then settles it in a second writer operation.

use super::controls::Endpoint;
use super::decide::{self, webhook::Route, Decline};
use super::execute::{execute, lock_card};
use super::plan::{new_tx, set_counted, Move, Plan, Side};
use super::{applied_on, usage, Applied, Purchase};
use crate::state::AppState;
use issuing_domain::card_tx::{TxKind, TxStatus};
use issuing_domain::controls::decision::Outcome;
use issuing_domain::controls::limits::Counted;
use issuing_domain::controls::rules::Attributes;
use issuing_domain::ledger::TransferKind;
use issuing_domain::time::now_micros;
use issuing_store::card_txs::{CardTxRecord, AWAITING, DECIDED};
use issuing_store::controls::RuleResult;
use issuing_store::Conn;
use issuing_wire::{Amount, ApiError};
use std::time::{Duration, Instant};

/// One authorization request, owned: it waits in the writer's queue.
struct Request {
    project_id: String,
    card_id: String,
    amount: Amount,
    purchase: Purchase,
    message_id: Option<String>,
    /// When the decision webhook must have answered (the Lithic budget); None: its
    /// own `timeout_ms` alone bounds it.
    deadline: Option<Instant>,
}

/// A decision webhook still to be asked about an authorization held tentatively.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    pub endpoint: Endpoint,
    /// How long the endpoint is given.
    pub time: Duration,
    /// The card's available funds after the tentative hold.
    pub available: i64,
}

/// What the writer operation came to.
pub(super) enum Authorized {
    /// Decided (approved or declined) and emitted, or a replay of an earlier message.
    Done(Applied),
    /// Held tentatively; the endpoint must be asked.
    Awaiting(Applied, Ask),
}

/// Decides and records one authorization as one operation of the authorizations writer:
/// batched on SQLite, its own transaction on PostgreSQL.
pub(super) async fn authorize(
    state: &AppState,
    project_id: &str,
    card_id: &str,
    amount: Amount,
    purchase: &Purchase,
    message_id: Option<&str>,
    deadline: Option<Instant>,
) -> Result<Authorized, ApiError> {
    let shared = state.clone();
    let req = Request {
        project_id: project_id.to_owned(),
        card_id: card_id.to_owned(),
        amount,
        purchase: purchase.clone(),
        message_id: message_id.map(str::to_owned),
        deadline,
    };
    state
        .authorizations
        .run(move |conn| Box::pin(async move { decide(conn, &shared, &req).await }))
        .await
}

async fn decide(conn: &mut Conn, state: &AppState, req: &Request) -> Result<Authorized, ApiError> {
    let message_id = req.message_id.as_deref();
    // A copy of this message earlier in the same batch is not committed yet, so the
    // check `apply` made before queueing could not see it.
    if let Some(id) = message_id {
        if let Some(applied) = applied_on(conn, &req.project_id, id).await? {
            return Ok(Authorized::Done(applied));
        }
    }
    let locked = lock_card(conn, &req.project_id, &req.card_id).await?;
    let card = &locked.card;
    let now = now_micros();
    let amount = req.amount.micros();
    let mut rec = new_tx(
        card,
        TxKind::Auth,
        TxStatus::Pending,
        amount,
        &req.purchase,
        now,
    );
    let mut results = Vec::new();
    let verdict = match decide::status::check(card) {
        Some(decline) => Err(decline),
        None => {
            let controls = state
                .controls
                .get(conn, &req.project_id, locked.controls_revision)
                .await?;
            let m = &req.purchase.merchant;
            let attributes = Attributes::new(&m.mcc, &m.country, &m.name, amount);
            let (declined, matched) = decide::rules::check(
                &controls.rules,
                &req.project_id,
                &card.id,
                &rec.id,
                &attributes,
                now,
            );
            results = matched;
            match declined {
                Some(decline) => Err(decline),
                None => match limits_and_funds(conn, req, &locked, now).await? {
                    Some(decline) => Err(decline),
                    None => Ok((
                        decide::webhook::route(
                            controls.endpoint.as_ref(),
                            // What is left now, after the wait for the writer.
                            req.deadline
                                .map(|d| d.saturating_duration_since(Instant::now())),
                        ),
                        controls.endpoint.clone(),
                    )),
                },
            }
        }
    };
    let (plan, ask) = match verdict {
        Err(decline) => (declined(rec, decline, results), None),
        Ok((Route::Approve, _)) => (approved(state, rec, results, now), None),
        Ok((Route::Decided(outcome), _)) => (stand_in(state, rec, results, &outcome, now), None),
        Ok((Route::Ask(time), Some(endpoint))) => {
            rec.decision_state = Some(AWAITING.into());
            rec.decision_deadline = Some(now.saturating_add(micros(time)));
            rec.decision_on_timeout = Some(endpoint.on_timeout.as_str().into());
            let mut plan = approved(state, rec, results, now);
            // The event waits for the decision (`decision.rs`).
            plan.emit = false;
            let ask = Ask {
                endpoint,
                time,
                available: locked.available.micros() - amount,
            };
            (plan, Some(ask))
        }
        Ok((Route::Ask(_), None)) => return Err(ApiError::internal()),
    };
    let applied = execute(conn, card, plan, message_id, "authorization").await?;
    Ok(match ask {
        Some(ask) => Authorized::Awaiting(applied, ask),
        None => Authorized::Done(applied),
    })
}

/// Stages 3 and 4: the usage query runs only when a limit applying to this MCC has a
/// window, so a card without limits costs nothing more than before.
async fn limits_and_funds(
    conn: &mut Conn,
    req: &Request,
    locked: &issuing_store::cards::LockedCard,
    now: i64,
) -> Result<Option<Decline>, ApiError> {
    let amount = req.amount.micros();
    let mcc = &req.purchase.merchant.mcc;
    if let Some(limits) = decide::limits::of_card(&locked.card)? {
        let usage = if decide::limits::needs_usage(&limits, mcc) {
            usage::read(conn, &req.project_id, &req.card_id, &limits, now).await?
        } else {
            vec![Default::default(); limits.limits.len()]
        };
        if let Some(decline) = decide::limits::check(&limits, &usage, mcc, amount) {
            return Ok(Some(decline));
        }
    }
    Ok(decide::funds::check(locked.available.micros(), amount))
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// A declined authorization: nothing held, nothing counted.
fn declined(mut rec: CardTxRecord, decline: Decline, results: Vec<RuleResult>) -> Plan {
    rec.status = TxStatus::Declined.as_str().into();
    rec.tx_type = issuing_domain::card_tx::tx_type(true, TxKind::Auth, TxStatus::Declined);
    rec.failure_reason = Some(decline.reason.into());
    rec.decline = decline.detail;
    let mut plan = Plan::insert(rec, Vec::new());
    plan.rule_results = results;
    plan
}

/// An approved authorization: the amount held and counted (with one).
fn approved(state: &AppState, mut rec: CardTxRecord, results: Vec<RuleResult>, now: i64) -> Plan {
    rec.held = rec.auth_amount;
    let expiry = i64::try_from(state.config.hold_expiry.as_micros()).unwrap_or(i64::MAX);
    rec.hold_expires_at = Some(now.saturating_add(expiry));
    let amount = rec.auth_amount;
    set_counted(&mut rec, Counted::approved(amount));
    let hold = Move::new(
        TransferKind::CardAuthHold,
        Side::Funds,
        Side::Hold,
        rec.held,
    );
    let mut plan = Plan::insert(rec, vec![hold]);
    plan.rule_results = results;
    plan
}

/// Decided by `on_timeout` without a call (`stand_in`, or no time to call). A stand-in
/// decline is `webhook_timeout`: the endpoint was not heard in time, by choice.
fn stand_in(
    state: &AppState,
    mut rec: CardTxRecord,
    results: Vec<RuleResult>,
    outcome: &Outcome,
    now: i64,
) -> Plan {
    rec.decision_state = Some(DECIDED.into());
    match outcome.failure_reason {
        None => approved(state, rec, results, now),
        Some(reason) => declined(rec, Decline::plain(reason), results),
    }
}
