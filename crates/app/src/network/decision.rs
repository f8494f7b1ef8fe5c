//! The real-time decision webhook (CONTRACT §11), after an authorization passed every
//! other stage and was held tentatively (`authorize.rs`):
//! - the endpoint is asked once, outside any database transaction, sealed like webhook
//!   deliveries, within the time the authorization allows it;
//! - its answer (or its silence, or a bad answer, through `on_timeout`) is applied by a
//!   second writer operation, conditional on the authorization still awaiting it, so a
//!   late or repeated resolution changes nothing;
//! - after a crash, the recovery pass (run by the hold expiry worker) resolves every
//!   authorization whose deadline passed `RECOVERY_MARGIN` ago by its stored
//!   `on_timeout`, so no tentative hold outlives its process for long.

use super::authorize::Ask;
use super::execute::{execute, lock_card};
use super::plan::{set_counted, Move, Plan, Side};
use super::Applied;
use crate::webhooks::http;
use crate::App;
use issuing_domain::card_tx::{tx_type, TxKind, TxStatus};
use issuing_domain::controls::decision::{outcome, read_answer, Answer, OnTimeout, Outcome};
use issuing_domain::controls::limits::Counted;
use issuing_domain::ids::new_id;
use issuing_domain::ledger::TransferKind;
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_store::card_txs::{self, CardTxRecord, DECIDED};
use issuing_store::cards::CardRecord;
use issuing_store::{projects, Conn};
use issuing_wire::{Amount, ApiError, ErrorSlug};
use serde_json::{json, Value};
use std::time::Duration;

/// How long after its deadline an awaited decision is left to the process that asked;
/// then the recovery pass decides it by `on_timeout`.
pub const RECOVERY_MARGIN: Duration = Duration::from_secs(5);
/// How often a replayed message looks whether its original was decided.
const REPLAY_POLL: Duration = Duration::from_millis(20);
/// Awaited decisions resolved per recovery pass.
const RECOVERY_BATCH: i64 = 100;

/// Asks the endpoint and applies its decision. Runs as a task of its own, so a caller
/// that goes away (a dropped HTTP request) does not leave the decision half made.
pub(super) async fn ask(state: &App, applied: Applied, ask: Ask) -> Result<Applied, ApiError> {
    let task_state = state.clone();
    let task = tokio::spawn(async move {
        let answer = call(&task_state, &applied, &ask).await;
        if let Answer::Failed(why) = &answer {
            tracing::info!(transaction_id = %applied.tx.id, why = %why, "decision webhook answered badly");
        }
        let decided = outcome(answer, ask.endpoint.on_timeout);
        resolve(&task_state, &applied.tx, Some(&applied.card), &decided).await
    });
    task.await.map_err(|e| {
        tracing::error!(error = %e, "decision task failed");
        ApiError::internal()
    })?
}

/// The request body the endpoint receives (sealed).
fn request_body(applied: &Applied, ask: &Ask, deadline: i64) -> Value {
    let (t, card) = (&applied.tx, &applied.card);
    json!({
        "type": "authorization_request",
        "request_id": new_id(),
        "transaction_id": t.id,
        "card_id": t.card_id,
        "external_user_id": card.external_user_id,
        "amount": Amount::from_micros(t.auth_amount),
        "currency": card.card_currency.to_ascii_uppercase(),
        "merchant": t.merchant,
        "merchant_amount": Amount::from_micros(t.merchant_amount),
        "merchant_currency": t.merchant_currency,
        "available": Amount::from_micros(ask.available),
        "deadline_at": to_rfc3339(deadline),
    })
}

/// One attempt; never retried.
async fn call(state: &App, applied: &Applied, ask: &Ask) -> Answer {
    let project_id = &applied.tx.project_id;
    let key = async {
        let mut conn = state.store.conn().await?;
        projects::api_keys_of(&mut conn, project_id).await
    };
    // The project's newest valid key, as webhook deliveries use.
    let key = match key.await {
        Ok(keys) => keys.into_iter().next(),
        Err(e) => return Answer::Failed(format!("could not read the project's key: {e}")),
    };
    let Some((api_key, secret)) = key.and_then(|k| {
        let secret = state.master.open_secret(&k.secret_enc)?;
        Some((k.api_key, secret))
    }) else {
        return Answer::Failed("the project has no usable API key".into());
    };
    let envelope_key = issuing_envelope::Key::from_secret(secret.expose());
    let deadline = applied.tx.decision_deadline.unwrap_or_else(now_micros);
    let plain = request_body(applied, ask, deadline).to_string();
    let sealed = issuing_envelope::seal(&envelope_key, plain.as_bytes());
    let body = json!({ "encrypted": sealed }).to_string();
    let left = u64::try_from(deadline.saturating_sub(now_micros())).unwrap_or(0);
    if left == 0 {
        return Answer::TimedOut;
    }
    let time = Duration::from_micros(left).min(ask.time);
    let reply = http::post(
        &state.decision_http,
        state.config.mode,
        &state.config.webhook_allowed_networks,
        &ask.endpoint.url,
        &api_key,
        body,
        Some(time),
    )
    .await;
    match reply {
        Err(e) if e.timed_out => Answer::TimedOut,
        Err(e) => Answer::Failed(e.error),
        Ok(r) if r.status != 200 => Answer::Failed(format!("endpoint answered HTTP {}", r.status)),
        Ok(r) => open(&envelope_key, &r.body),
    }
}

/// Opens a sealed answer `{"encrypted": …}`; anything else is an error.
fn open(key: &issuing_envelope::Key, body: &[u8]) -> Answer {
    let sealed = serde_json::from_slice::<Value>(body).ok().and_then(|v| {
        v.get("encrypted")
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let Some(sealed) = sealed else {
        return Answer::Failed("the answer is not sealed".into());
    };
    match issuing_envelope::open(key, &sealed)
        .ok()
        .and_then(|plain| serde_json::from_slice::<Value>(&plain).ok())
    {
        Some(v) => read_answer(&v),
        None => Answer::Failed("the answer cannot be opened with the project's key".into()),
    }
}

/// Applies a decision to an authorization that awaits it, as one operation of the
/// decisions' group commit; an authorization decided meanwhile is answered as it is.
///
/// An approval moves no money: it is one update conditional on the transaction still
/// being `t` (awaiting, as phase 1 left it), with no lock on the card's accounts. A
/// decline releases the hold, so it locks the card and re-reads the transaction first.
pub async fn resolve(
    state: &App,
    t: &CardTxRecord,
    card: Option<&CardRecord>,
    decided: &Outcome,
) -> Result<Applied, ApiError> {
    let (t, card, decided) = (t.clone(), card.cloned(), decided.clone());
    let applied = state
        .decisions
        .run(move |conn| Box::pin(async move { decide(conn, &t, card, &decided).await }))
        .await?;
    state.deliveries_wakeup.notify_one();
    Ok(applied)
}

async fn decide(
    conn: &mut Conn,
    t: &CardTxRecord,
    card: Option<CardRecord>,
    decided: &Outcome,
) -> Result<Applied, ApiError> {
    let (project_id, id) = (&t.project_id, &t.id);
    if let (true, Some(card)) = (decided.approve, card) {
        let plan = plan_decided(t, decided, now_micros());
        return match execute(conn, &card, plan, None, "decision").await {
            Err(e) if e.slug == ErrorSlug::InvalidTransactionState => {
                // Decided meanwhile (recovered, or declined by cards/close).
                let current = card_txs::get(conn, project_id, id)
                    .await?
                    .ok_or_else(ApiError::internal)?;
                Ok(Applied { tx: current, card })
            }
            other => other,
        };
    }
    let card = lock_card(conn, project_id, &t.card_id).await?.card;
    let prev = card_txs::get(conn, project_id, id)
        .await?
        .ok_or_else(ApiError::internal)?;
    if !prev.awaiting_decision() {
        return Ok(Applied { tx: prev, card });
    }
    let plan = plan_decided(&prev, decided, now_micros());
    execute(conn, &card, plan, None, "decision").await
}

/// Declines an awaited authorization inside the caller's transaction (the card's
/// accounts locked): `cards/close` on a card whose decision is still out.
pub async fn decline_awaiting(
    conn: &mut Conn,
    card: &CardRecord,
    prev: &CardTxRecord,
    reason: &'static str,
) -> Result<CardTxRecord, ApiError> {
    let decided = Outcome {
        approve: false,
        failure_reason: Some(reason),
        decision_reason: None,
    };
    let plan = plan_decided(prev, &decided, now_micros());
    Ok(execute(conn, card, plan, None, "decision").await?.tx)
}

/// The decision applied: approval keeps the hold and emits the transaction's first
/// event; a decline releases the hold, counts nothing (declines never count) and
/// emits it declined.
fn plan_decided(prev: &CardTxRecord, decided: &Outcome, now: i64) -> Plan {
    let mut next = prev.clone();
    next.decision_state = Some(DECIDED.into());
    next.decision_reason = decided.decision_reason.clone();
    next.updated_at = now;
    let mut moves = Vec::new();
    if let Some(reason) = decided.failure_reason {
        next.status = TxStatus::Declined.as_str().into();
        next.tx_type = tx_type(true, TxKind::Auth, TxStatus::Declined);
        next.failure_reason = Some(reason.into());
        next.held = 0;
        next.hold_expires_at = None;
        set_counted(&mut next, Counted::NOTHING);
        moves.push(Move::new(
            TransferKind::CardHoldRelease,
            Side::Hold,
            Side::Funds,
            prev.held,
        ));
    }
    Plan::update(prev, next, moves, "decide")
}

/// The recovery pass: decides every authorization still awaiting a decision whose
/// deadline passed `RECOVERY_MARGIN` ago, by its stored `on_timeout`.
pub async fn recover(state: &App) -> Result<usize, ApiError> {
    let margin = i64::try_from(RECOVERY_MARGIN.as_micros()).unwrap_or(0);
    let overdue = {
        let mut conn = state.store.conn().await?;
        card_txs::overdue_decisions(&mut conn, now_micros() - margin, RECOVERY_BATCH).await?
    };
    for t in &overdue {
        let on_timeout = t
            .decision_on_timeout
            .as_deref()
            .and_then(OnTimeout::parse)
            .unwrap_or(OnTimeout::Decline);
        resolve(state, t, None, &outcome(Answer::TimedOut, on_timeout)).await?;
        tracing::warn!(transaction_id = %t.id, on_timeout = on_timeout.as_str(), "awaited decision resolved after its deadline");
    }
    Ok(overdue.len())
}

/// A transaction answered to a replayed message: once its decision is made. While its
/// original still awaits the endpoint, the replay waits (bounded by the deadline and
/// the recovery margin) and answers the final state.
pub(super) async fn settled(state: &App, applied: Applied) -> Result<Applied, ApiError> {
    if !applied.tx.awaiting_decision() {
        return Ok(applied);
    }
    let margin = i64::try_from((RECOVERY_MARGIN + Duration::from_secs(1)).as_micros()).unwrap_or(0);
    let give_up = applied
        .tx
        .decision_deadline
        .unwrap_or_else(now_micros)
        .saturating_add(margin);
    let mut current = applied;
    while current.tx.awaiting_decision() && now_micros() < give_up {
        tokio::time::sleep(REPLAY_POLL).await;
        let mut conn = state.store.conn().await?;
        if let Some(tx) = card_txs::get(&mut conn, &current.tx.project_id, &current.tx.id).await? {
            current.tx = tx;
        }
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::plan::new_tx;
    use crate::network::tests::{card, purchase};
    use issuing_store::card_txs::AWAITING;

    fn awaiting() -> CardTxRecord {
        let mut t = new_tx(
            &card(),
            TxKind::Auth,
            TxStatus::Pending,
            100,
            &purchase(),
            1,
        );
        t.held = 100;
        t.decision_state = Some(AWAITING.into());
        set_counted(&mut t, Counted::approved(100));
        t
    }

    #[test]
    fn approval_keeps_the_hold_and_emits() {
        let o = outcome(Answer::Approved, OnTimeout::Decline);
        let plan = plan_decided(&awaiting(), &o, 5);
        assert!(plan.emit && plan.moves.is_empty());
        assert_eq!(plan.subject.held, 100);
        assert_eq!(plan.subject.tx_type, "transaction_created_auth_pending");
        assert_eq!(plan.subject.decision_state.as_deref(), Some(DECIDED));
    }

    #[test]
    fn a_decline_releases_and_counts_nothing() {
        let o = outcome(
            Answer::Declined {
                reason: Some("velocity".into()),
            },
            OnTimeout::Approve,
        );
        let plan = plan_decided(&awaiting(), &o, 5);
        let t = &plan.subject;
        assert_eq!(
            (t.status.as_str(), t.held, t.counted_amount, t.counts),
            ("declined", 0, 0, false)
        );
        assert_eq!(t.failure_reason.as_deref(), Some("webhook_declined"));
        assert_eq!(t.decision_reason.as_deref(), Some("velocity"));
        assert_eq!(t.tx_type, "transaction_created_auth_declined");
        assert_eq!(plan.moves[0].micros, 100);
    }

    #[test]
    fn answers_must_be_sealed() {
        let key = issuing_envelope::Key::from_secret("s");
        assert!(matches!(
            open(&key, br#"{"approved": true}"#),
            Answer::Failed(_)
        ));
        let sealed = issuing_envelope::seal(&key, br#"{"approved": true}"#);
        let body = json!({ "encrypted": sealed }).to_string();
        assert_eq!(open(&key, body.as_bytes()), Answer::Approved);
        let other = issuing_envelope::Key::from_secret("t");
        assert!(matches!(open(&other, body.as_bytes()), Answer::Failed(_)));
    }
}
