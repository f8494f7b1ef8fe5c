//! The authorizations' writer: authorizations are decided and written in batches, a few
//! statements per batch (docs/money.md, "One writer per hot account").
//!
//! Applied one transaction each, an authorization cost a dozen statements: on SQLite
//! each a hand-over to the driver's thread under the one write lock, on PostgreSQL each
//! a round trip and every authorization a commit. Here a writer drains its queue and,
//! per project in the batch: reads which of its network messages were applied before,
//! its cards, their accounts (PostgreSQL: locked, in the ledger's lock order) and its
//! controls revision, one query each; decides every authorization in arrival order
//! against the running balances and usage (`authorize::decide`); then writes every
//! transaction, hold, entry, message id, rule result, event and delivery in one insert,
//! every account once, and commits once.
//!
//! - Two authorizations on one card in one batch are decided one after the other: the
//!   second sees the first's hold in the card's running balance and its amount and
//!   count in its limits' usage (a window always contains the batch's moment), exactly
//!   as if the first had committed before.
//! - A network message applied before, or a copy of one earlier in the batch, writes
//!   nothing and is answered with its transaction as it is after the commit.
//! - A refused authorization is a declined transaction, written like any other; an
//!   error of one authorization (no such card) answers it alone.
//! - Cards are spread over `stripes` writers by id (PostgreSQL: two, on connections
//!   of their own; SQLite: one, on the writer's thread), so a card's authorizations are
//!   applied in arrival order by one writer, and writers never wait for each other's
//!   rows.

use super::authorize::{self, Authorized, Found, Request};
use super::controls::ControlsCache;
use super::decide::{self, limits::CardLimits};
use super::execute::{card_not_found, flow_error};
use super::plan::{Move, Side};
use super::{view, Applied};
use crate::batch_writer::{picked, ApplyFn, BatchWriter, Queued, Shape, Wakeups};
use issuing_domain::controls::limits::Usage;
use issuing_domain::ids::new_id;
use issuing_domain::ledger::Transfer;
use issuing_domain::time::now_micros;
use issuing_store::card_txs::{self, AppliedMessage, CardTxRecord};
use issuing_store::cards;
use issuing_store::controls::{self, RuleResult};
use issuing_store::events::{self, NewEvent};
use issuing_store::group_commit::Stats;
use issuing_store::ledger_batch::{Batch, Planned};
use issuing_store::query::Inserts;
use issuing_store::subscriptions::{self, SubscriptionRecord};
use issuing_store::writer::{BatchConn, Row};
use issuing_store::{ledger, Store, StoreError};
use issuing_wire::{Amount, ApiError};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

/// PostgreSQL writers; cards are spread over them by id.
const POSTGRES_STRIPES: usize = 2;

/// The handle to the writers. Cloning shares them.
#[derive(Clone, Debug)]
pub struct AuthWriter(BatchWriter<Request, Authorized>);

/// What every batch needs besides its requests.
struct Context {
    controls: Arc<ControlsCache>,
    hold_expiry: Duration,
}

impl AuthWriter {
    /// Starts the writers on `store`; they run until every handle is dropped.
    pub fn start(
        store: Store,
        controls: Arc<ControlsCache>,
        hold_expiry: Duration,
        wakeups: Wakeups,
    ) -> AuthWriter {
        let shape = Shape::of(store.backend(), POSTGRES_STRIPES);
        let context = Arc::new(Context {
            controls,
            hold_expiry,
        });
        let apply: ApplyFn<Request, Authorized> = Arc::new(move |mut conn, requests, only| {
            let context = context.clone();
            Box::pin(async move {
                let (answers, deliveries) =
                    apply_in(&mut conn, &context, &picked(&requests, only)).await?;
                let queued = Queued {
                    orders: false,
                    deliveries: deliveries > 0,
                };
                Ok((answers, queued))
            })
        });
        AuthWriter(BatchWriter::start(
            store,
            "authorizations",
            shape,
            apply,
            wakeups,
        ))
    }

    pub fn stats(&self) -> &Stats {
        self.0.stats()
    }

    /// Decides and writes `req` in its card's writer's next batch; answers once that
    /// batch is durable.
    pub async fn submit(&self, req: Request) -> Result<Authorized, ApiError> {
        let card = req.card_id.clone();
        self.0.submit(&card, req).await
    }
}

type Answers = Vec<Result<Authorized, ApiError>>;

/// What a batch writes, gathered over its projects.
#[derive(Default)]
struct Rows {
    inserts: Inserts,
    txs: Vec<CardTxRecord>,
    messages: Vec<(String, String, String)>,
    results: Vec<RuleResult>,
    /// (project, card, payload, at) of each `card_transaction` event.
    events: Vec<(String, String, serde_json::Value, i64)>,
    /// Each project's active webhook subscriptions, read with its cards.
    subscriptions: HashMap<String, Vec<SubscriptionRecord>>,
}

/// Every request's answer, decided and written on `conn` project by project, and how
/// many webhook deliveries the batch queued.
async fn apply_in(
    conn: &mut BatchConn<'_>,
    context: &Context,
    requests: &[&Request],
) -> Result<(Answers, usize), StoreError> {
    let now = now_micros();
    let mut by_project: Vec<usize> = (0..requests.len()).collect();
    // Stable: each project's requests stay in arrival order.
    by_project.sort_by(|a, b| requests[*a].project_id.cmp(&requests[*b].project_id));
    let mut answers: Vec<Option<Result<Authorized, ApiError>>> =
        requests.iter().map(|_| None).collect();
    let mut rows = Rows::default();
    for group in by_project.chunk_by(|a, b| requests[*a].project_id == requests[*b].project_id) {
        let members: Vec<&Request> = group.iter().map(|i| requests[*i]).collect();
        let decided = apply_project(conn, context, &members, now, &mut rows).await?;
        for (i, answer) in group.iter().zip(decided) {
            answers[*i] = Some(answer);
        }
    }
    let deliveries = write(conn, rows, now).await?;
    let answers = answers
        .into_iter()
        .map(|a| a.ok_or_else(|| StoreError::Corrupt("an authorization without an answer".into())))
        .collect::<Result<_, _>>()?;
    Ok((answers, deliveries))
}

/// Writes what the batch decided, every table in one insert; answers how many webhook
/// deliveries its events queued.
async fn write(conn: &mut BatchConn<'_>, rows: Rows, now: i64) -> Result<usize, StoreError> {
    let Rows {
        mut inserts,
        txs,
        messages,
        results,
        events: emitted,
        subscriptions: known,
    } = rows;
    card_txs::insert_many(&mut inserts, &txs);
    let messages: Vec<AppliedMessage<'_>> = messages
        .iter()
        .map(|(project_id, message_id, transaction_id)| AppliedMessage {
            project_id,
            message_id,
            transaction_id,
            kind: "authorization",
            now,
        })
        .collect();
    card_txs::record_messages(&mut inserts, &messages);
    controls::add_results(&mut inserts, &results);
    let new_events: Vec<NewEvent<'_>> = emitted
        .iter()
        .map(|(project_id, card_id, payload, at)| NewEvent {
            project_id,
            event_type: "card_transaction",
            card_id: Some(card_id),
            order_id: None,
            payload,
            now: *at,
        })
        .collect();
    let deliveries = events::insert_many(&new_events, &known, &mut inserts);
    inserts.write(conn).await?;
    Ok(deliveries)
}

/// One project's authorizations, in arrival order.
async fn apply_project(
    conn: &mut BatchConn<'_>,
    context: &Context,
    requests: &[&Request],
    now: i64,
    rows: &mut Rows,
) -> Result<Answers, StoreError> {
    let Some(project_id) = requests.first().map(|r| r.project_id.as_str()) else {
        return Ok(Vec::new());
    };
    let message_ids: Vec<&str> = requests
        .iter()
        .filter_map(|r| r.message_id.as_deref())
        .collect();
    let applied = card_txs::messages_applied(conn, project_id, &message_ids).await?;
    let mut card_ids: Vec<&str> = requests.iter().map(|r| r.card_id.as_str()).collect();
    card_ids.sort_unstable();
    card_ids.dedup();
    // The cards' accounts are locked (PostgreSQL) before the cards and the controls are
    // read, as one card's every message does (`execute::lock_card`): a freeze or close
    // that committed first is seen.
    let accounts = ledger::card_accounts(conn, project_id, &card_ids).await?;
    let ids: Vec<&str> = accounts
        .values()
        .flat_map(|(funds, hold)| [funds.as_str(), hold.as_str()])
        .collect();
    let mut ledger = Batch::read(conn, project_id, ids, now).await?;
    // The cards after the lock (a later statement: its snapshot sees what committed
    // before it), with the project's subscriptions for the batch's events.
    let [card_rows, subscription_rows]: [Vec<Row>; 2] = conn
        .together(&[
            cards::many_part(project_id, card_ids.clone()),
            subscriptions::active_part(project_id),
        ])
        .await?
        .try_into()
        .map_err(|_| StoreError::Corrupt("the cards' read answered out of shape".into()))?;
    rows.subscriptions.insert(
        project_id.to_owned(),
        subscriptions::active_of(&subscription_rows)?,
    );
    let (found_cards, revision) = cards::many_of(&card_rows)?;
    let revision = match revision {
        Some(revision) => revision,
        // None of the cards exists: nothing needs the controls.
        None => return Ok(requests.iter().map(|_| Err(card_not_found())).collect()),
    };
    let controls = match context.controls.get(conn, project_id, revision).await {
        Ok(controls) => controls,
        // A broken stored rule: every authorization of the project fails alone.
        Err(e) => return Ok(requests.iter().map(|_| Err(e.clone())).collect()),
    };

    // Each card's limits (a stored value that does not parse fails the card's
    // authorizations alone).
    let limits_of: HashMap<&str, Result<Option<CardLimits>, ApiError>> = found_cards
        .iter()
        .map(|(id, card)| (id.as_str(), decide::limits::of_card(card)))
        .collect();
    // What each card's limits counted before the batch, read for every card that an
    // authorization of the batch needs it for, all in one statement.
    let mut needing: Vec<(&str, &CardLimits)> = Vec::new();
    for req in requests {
        let card_id = req.card_id.as_str();
        let (Some(card), Some(Ok(Some(limits)))) =
            (found_cards.get(card_id), limits_of.get(card_id))
        else {
            continue;
        };
        if card.status == "active"
            && decide::limits::needs_usage(limits, &req.purchase.merchant.mcc)
            && !needing.iter().any(|(id, _)| *id == card_id)
        {
            needing.push((card_id, limits));
        }
    }
    let read = super::usage::read_many(conn, project_id, &needing, now).await?;
    let usage_before: HashMap<&str, Vec<Usage>> =
        needing.iter().map(|(id, _)| *id).zip(read).collect();

    let mut answers = Vec::with_capacity(requests.len());
    // Messages this batch applied: a later copy in it is a replay.
    let mut written_messages = HashSet::new();
    // What the batch's earlier authorizations on a card count: (MCC, amount, one).
    let mut counted_here: HashMap<&str, Vec<(String, i64, bool)>> = HashMap::new();
    for req in requests {
        if let Some(id) = req.message_id.as_deref() {
            if applied.contains_key(id) || written_messages.contains(id) {
                answers.push(Ok(Authorized::Replayed {
                    message_id: id.to_owned(),
                }));
                continue;
            }
        }
        let (Some(card), Some((funds, hold))) =
            (found_cards.get(&req.card_id), accounts.get(&req.card_id))
        else {
            answers.push(Err(card_not_found()));
            continue;
        };
        let limits = match limits_of.get(req.card_id.as_str()) {
            Some(Ok(limits)) => limits.as_ref(),
            Some(Err(e)) => {
                answers.push(Err(e.clone()));
                continue;
            }
            None => None,
        };
        let mcc = req.purchase.merchant.mcc.as_str();
        let usage = match limits {
            Some(l) if card.status == "active" && decide::limits::needs_usage(l, mcc) => {
                let card_id = req.card_id.as_str();
                // Read above for every card an authorization needs it for.
                let Some(before) = usage_before.get(card_id) else {
                    return Err(StoreError::Corrupt(format!(
                        "the usage of card {card_id} was not read"
                    )));
                };
                let mut usage = before.clone();
                for (earlier, amount, one) in counted_here.get(card_id).into_iter().flatten() {
                    for (u, limit) in usage.iter_mut().zip(&l.limits) {
                        if limit.applies_to(earlier) {
                            u.spent += amount;
                            u.used_count += i64::from(*one);
                        }
                    }
                }
                Some(usage)
            }
            _ => None,
        };
        let available = ledger.balance(funds).unwrap_or(0);
        let found = Found {
            card,
            available,
            controls: &controls,
            limits,
            usage: usage.as_deref(),
            hold_expiry: context.hold_expiry,
        };
        let decided = match authorize::decide(req, &found, now) {
            Ok(decided) => decided,
            Err(e) => {
                answers.push(Err(e));
                continue;
            }
        };
        let plan = decided.plan;
        let subject = plan.subject;
        let planned = match holds(&subject, &plan.moves, funds, hold) {
            Ok(planned) => planned,
            Err(e) => {
                answers.push(Err(e.into()));
                continue;
            }
        };
        if let Err(e) = ledger.post(&planned) {
            // The funds stage saw the same running balance; this is not expected.
            answers.push(Err(flow_error(e)));
            continue;
        }
        if subject.counted_amount != 0 || subject.counts {
            counted_here.entry(req.card_id.as_str()).or_default().push((
                mcc.to_owned(),
                subject.counted_amount,
                subject.counts,
            ));
        }
        if let Some(id) = req.message_id.as_deref() {
            written_messages.insert(id);
            rows.messages
                .push((project_id.to_owned(), id.to_owned(), subject.id.clone()));
        }
        rows.results.extend(plan.rule_results);
        if plan.emit {
            rows.events.push((
                project_id.to_owned(),
                card.id.clone(),
                view::item(&subject, card),
                subject.updated_at,
            ));
        }
        rows.txs.push(subject.clone());
        let applied = Applied {
            tx: subject,
            card: card.clone(),
        };
        answers.push(Ok(match decided.ask {
            Some(ask) => Authorized::Awaiting(applied, ask),
            None => Authorized::Done(applied),
        }));
    }
    ledger.finish(conn, &mut rows.inserts).await?;
    Ok(answers)
}

/// An authorization's moves (its hold, if any) as transfers between the card's funds and
/// hold accounts, tagged with the card and (uniquely) the transaction.
fn holds(
    t: &CardTxRecord,
    moves: &[Move],
    funds: &str,
    hold: &str,
) -> Result<Vec<Planned>, StoreError> {
    let account = |side: Side| match side {
        Side::Funds => Ok(funds.to_owned()),
        Side::Hold => Ok(hold.to_owned()),
        other => Err(StoreError::Corrupt(format!(
            "an authorization moving money to or from {other:?}"
        ))),
    };
    moves
        .iter()
        .filter(|m| m.micros > 0)
        .map(|m| {
            let transfer = Transfer::simple(
                m.kind,
                account(m.from)?,
                account(m.to)?,
                Amount::from_micros(m.micros),
            )
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            Ok(Planned {
                order_id: None,
                card_id: Some(t.card_id.clone()),
                // As `execute::post`: a transaction's postings of one kind each get their own.
                reference: Some(format!("{}:{}", t.id, new_id())),
                transfer,
            })
        })
        .collect()
}
