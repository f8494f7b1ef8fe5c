//! Authorization requests (CONTRACT §9, §11): the decision stages in order on the card
//! as its writer's batch found it, one plan per authorization. Authorizations are
//! applied by the authorizations' writer (`auth_writer.rs`) in batches: the limit check
//! and the hold are one atomic step there, since concurrent authorizations on one card
//! are decided one after another against its running balance and usage and never pass
//! a limit, or hold the same money, together.
//!
//! When the project has a live decision webhook, the authorization is held tentatively
//! (funds and limit usage, no event yet) and `decision.rs` asks the endpoint outside
//! any transaction, then settles it in an operation of the authorizations' group commit.

use super::controls::{Endpoint, ProjectControls};
use super::decide::{self, limits::CardLimits, webhook::Route, Decline};
use super::plan::{new_tx, set_counted, Move, Plan, Side};
use super::{Applied, Purchase};
use crate::App;
use issuing_domain::card_tx::{TxKind, TxStatus};
use issuing_domain::controls::decision::Outcome;
use issuing_domain::controls::limits::{Counted, Usage};
use issuing_domain::controls::rules::Attributes;
use issuing_domain::ledger::TransferKind;
use issuing_store::card_txs::{CardTxRecord, AWAITING, DECIDED};
use issuing_store::cards::CardRecord;
use issuing_store::controls::RuleResult;
use issuing_wire::{Amount, ApiError};
use std::time::{Duration, Instant};

/// One authorization request, owned: it waits in the writer's queue.
#[derive(Debug, Clone)]
pub struct Request {
    pub project_id: String,
    pub card_id: String,
    pub amount: Amount,
    pub purchase: Purchase,
    pub message_id: Option<String>,
    /// When the decision webhook must have answered (the Lithic budget); None: its
    /// own `timeout_ms` alone bounds it.
    pub deadline: Option<Instant>,
}

/// A decision webhook still to be asked about an authorization held tentatively.
#[derive(Debug, Clone)]
pub struct Ask {
    pub endpoint: Endpoint,
    /// How long the endpoint is given.
    pub time: Duration,
    /// The card's available funds after the tentative hold.
    pub available: i64,
}

/// What the writer did with an authorization.
pub enum Authorized {
    /// Decided (approved or declined) and emitted.
    Done(Applied),
    /// Held tentatively; the endpoint must be asked.
    Awaiting(Applied, Ask),
    /// A copy of a message applied before (or earlier in the same batch): its
    /// transaction is answered as it is now.
    Replayed { message_id: String },
}

/// Decides and records one authorization in the authorizations' writer's next batch;
/// answers once that batch is durable.
pub(super) async fn authorize(
    state: &App,
    project_id: &str,
    card_id: &str,
    amount: Amount,
    purchase: &Purchase,
    message_id: Option<&str>,
    deadline: Option<Instant>,
) -> Result<Authorized, ApiError> {
    state
        .auth_writer
        .submit(Request {
            project_id: project_id.to_owned(),
            card_id: card_id.to_owned(),
            amount,
            purchase: purchase.clone(),
            message_id: message_id.map(str::to_owned),
            deadline,
        })
        .await
}

/// What deciding an authorization needs besides the request: the card as its batch
/// found it, its available funds as the batch has left them, its project's controls and
/// (when a limit needs it) what its limits' windows counted before it.
pub struct Found<'a> {
    pub card: &'a CardRecord,
    pub available: i64,
    pub controls: &'a ProjectControls,
    pub limits: Option<&'a CardLimits>,
    pub usage: Option<&'a [Usage]>,
    pub hold_expiry: Duration,
}

/// An authorization decided: its plan, and the webhook to ask when it is held
/// tentatively.
pub struct Decided {
    pub plan: Plan,
    pub ask: Option<Ask>,
}

/// The stages in CONTRACT §11's order (status, rules, limits, funds, the decision
/// webhook) on what the batch found; the first that declines decides. `now` is the
/// batch's time.
pub fn decide(req: &Request, found: &Found<'_>, now: i64) -> Result<Decided, ApiError> {
    let card = found.card;
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
            let m = &req.purchase.merchant;
            let attributes = Attributes::new(&m.mcc, &m.country, &m.name, amount);
            let (declined, matched) = decide::rules::check(
                &found.controls.rules,
                &req.project_id,
                &card.id,
                &rec.id,
                &attributes,
                now,
            );
            results = matched;
            match declined.or_else(|| limits_and_funds(req, found)) {
                Some(decline) => Err(decline),
                None => Ok(decide::webhook::route(
                    found.controls.endpoint.as_ref(),
                    // What is left now, after the wait for the writer.
                    req.deadline
                        .map(|d| d.saturating_duration_since(Instant::now())),
                )),
            }
        }
    };
    let expiry = found.hold_expiry;
    Ok(match verdict {
        Err(decline) => Decided {
            plan: declined(rec, decline, results),
            ask: None,
        },
        Ok(Route::Approve) => Decided {
            plan: approved(rec, results, now, expiry),
            ask: None,
        },
        Ok(Route::Decided(outcome)) => Decided {
            plan: stand_in(rec, results, &outcome, now, expiry),
            ask: None,
        },
        Ok(Route::Ask(time)) => {
            let endpoint = found
                .controls
                .endpoint
                .clone()
                .ok_or_else(ApiError::internal)?;
            rec.decision_state = Some(AWAITING.into());
            rec.decision_deadline = Some(now.saturating_add(micros(time)));
            rec.decision_on_timeout = Some(endpoint.on_timeout.as_str().into());
            let mut plan = approved(rec, results, now, expiry);
            // The event waits for the decision (`decision.rs`).
            plan.emit = false;
            let ask = Ask {
                endpoint,
                time,
                available: found.available - amount,
            };
            Decided {
                plan,
                ask: Some(ask),
            }
        }
    })
}

/// Stages 3 and 4. The usage was read only when a limit applying to this MCC has a
/// window (`decide::limits::needs_usage`), so a card without limits costs nothing more.
fn limits_and_funds(req: &Request, found: &Found<'_>) -> Option<Decline> {
    let amount = req.amount.micros();
    let mcc = &req.purchase.merchant.mcc;
    if let Some(limits) = found.limits {
        let none = vec![Usage::default(); limits.limits.len()];
        let usage = found.usage.unwrap_or(&none);
        if let Some(decline) = decide::limits::check(limits, usage, mcc, amount) {
            return Some(decline);
        }
    }
    decide::funds::check(found.available, amount)
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
fn approved(mut rec: CardTxRecord, results: Vec<RuleResult>, now: i64, expiry: Duration) -> Plan {
    rec.held = rec.auth_amount;
    rec.hold_expires_at = Some(now.saturating_add(micros(expiry)));
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
    mut rec: CardTxRecord,
    results: Vec<RuleResult>,
    outcome: &Outcome,
    now: i64,
    expiry: Duration,
) -> Plan {
    rec.decision_state = Some(DECIDED.into());
    match outcome.failure_reason {
        None => approved(rec, results, now, expiry),
        Some(reason) => declined(rec, Decline::plain(reason), results),
    }
}
