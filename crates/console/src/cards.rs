//! Cards: the list and search (`q` = card id, last 4 digits or external_user_id), one
//! card's page, and its actions: Freeze, Unfreeze, Simulate authorization (sandbox),
//! Reveal (admins, audited).
//!
//! The card page is a list of sections, each read by one store call (`show`): its
//! facts and funds, its limits with their usage, the rules that apply to it, its open
//! holds, a page of its transactions with the rule matches of those transactions, its
//! orders and its disputes (CONTRACT §11, §12, §15).

use super::audit::{finish, record};
use super::controls::{self, LimitsView, MatchRow, RuleRow};
use super::disputes::{dispute_row, DisputeRow};
use super::operators::Role;
use super::operators::MAX_PASSWORD_LEN;
use super::security::ClientAddress;
use super::see_other;
use super::session::{self, Act, NoFields};
use super::view::{self, render, Ctx, PageResult};
use super::{Console, ConsoleError, Op, PAGE_SIZE};
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::Extension;
use issuing_app::flows::status::{self, Change};
use issuing_domain::time::now_micros;
use issuing_store::card_txs::{self, CardTxRecord};
use issuing_store::cards::CardRecord;
use issuing_store::console::{self as reads, CardQuery};
use issuing_store::ledger;
use issuing_store::operators as store_ops;
use issuing_store::StoreError;
use serde::Deserialize;
use serde_json::json;

const HOUR: i64 = 3600 * 1_000_000;
/// Open authorizations shown on a card page.
const HOLDS_SHOWN: i64 = 50;
/// The statuses a card may have (the list filter's choices).
const CARD_STATUSES: &[&str] = &["pending", "active", "frozen", "closed", "failed"];
/// Orders shown on a card page (newest).
const ORDERS_SHOWN: i64 = 20;
/// Disputes shown on a card page (newest).
const DISPUTES_SHOWN: i64 = 20;
/// Rule matches shown on a card page: those of the page's transactions, at most this
/// many (a transaction matches at most 50 rules).
const MATCHES_SHOWN: i64 = 100;

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    q: Option<String>,
    project: Option<String>,
    status: Option<String>,
    before: Option<String>,
}

pub(crate) struct CardRow {
    pub card_id: String,
    pub project_id: String,
    pub external_user_id: String,
    pub pan: String,
    pub status: String,
    pub badge: &'static str,
    pub product_code: String,
    pub created_at: String,
}

pub(crate) fn card_row(c: CardRecord) -> CardRow {
    CardRow {
        pan: view::masked_pan(c.label.as_deref()),
        badge: view::badge(&c.status),
        created_at: view::time(c.created_at),
        card_id: c.id,
        project_id: c.project_id,
        external_user_id: c.external_user_id,
        status: c.status,
        product_code: c.product_code,
    }
}

#[derive(Template)]
#[template(path = "console/cards.html")]
struct CardsPage {
    ctx: Ctx,
    q: String,
    project: String,
    statuses: Vec<(&'static str, bool)>,
    rows: Vec<CardRow>,
    next: Option<String>,
    here: String,
}

pub(crate) async fn list(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Query(query): Query<ListQuery>,
) -> PageResult {
    let q = view::filter(&query.q)?;
    let project = view::filter(&query.project)?;
    let status = view::filter(&query.status)?;
    let before = view::cursor(&query.before)?;
    let mut conn = console.app.store.reader().conn().await?;
    let records = reads::cards_page(
        &mut conn,
        &op.scope,
        &CardQuery {
            q: q.clone(),
            project_id: project.clone(),
            status: status.clone(),
        },
        before.as_ref(),
        PAGE_SIZE + 1,
    )
    .await?;
    let (records, next) = view::split_page(records, PAGE_SIZE, |c| (c.created_at, &c.id));
    let link = |before: Option<&str>| {
        view::link(
            "/console/cards",
            &[
                ("q", q.as_deref()),
                ("project", project.as_deref()),
                ("status", status.as_deref()),
                ("before", before),
            ],
        )
    };
    render(&CardsPage {
        ctx: op.ctx(&console, "cards"),
        here: link(query.before.as_deref()),
        next: next.map(|n| link(Some(&n))),
        rows: records.into_iter().map(card_row).collect(),
        statuses: view::options(CARD_STATUSES, status.as_deref()),
        q: q.unwrap_or_default(),
        project: project.unwrap_or_default(),
    })
}

pub(crate) struct TxRow {
    pub id: String,
    pub kind: String,
    pub status: String,
    pub badge: &'static str,
    pub amount: String,
    pub held: String,
    pub merchant: String,
    pub failure_reason: String,
    pub created_at: String,
}

pub(crate) fn merchant_name(t: &CardTxRecord) -> String {
    t.merchant["name"].as_str().unwrap_or("").to_owned()
}

fn tx_row(t: CardTxRecord) -> TxRow {
    TxRow {
        merchant: merchant_name(&t),
        badge: view::badge(&t.status),
        amount: view::money(t.card_amount),
        held: view::money(t.held),
        failure_reason: view::opt(t.failure_reason.as_deref()),
        created_at: view::time(t.created_at),
        id: t.id,
        kind: t.tx_kind,
        status: t.status,
    }
}

pub(crate) struct OrderRow {
    pub id: String,
    pub order_type: String,
    pub status: String,
    pub badge: &'static str,
    pub error: String,
    pub created_at: String,
}

pub(crate) fn order_row(o: issuing_store::orders::OrderRecord) -> OrderRow {
    OrderRow {
        badge: view::badge(&o.status),
        error: view::opt(o.last_error.as_deref()),
        created_at: view::time(o.created_at),
        id: o.id,
        order_type: o.order_type,
        status: o.status,
    }
}

#[derive(Template)]
#[template(path = "console/card.html")]
struct CardPage {
    ctx: Ctx,
    card: CardRow,
    user_id: String,
    cardholder_id: String,
    expiry: String,
    available: String,
    pending: String,
    frozen_at: String,
    closed_at: String,
    limits: LimitsView,
    rules: Vec<RuleRow>,
    holds: Vec<TxRow>,
    txs: Vec<TxRow>,
    next: Option<String>,
    matches: Vec<MatchRow>,
    more_matches: bool,
    orders: Vec<OrderRow>,
    disputes: Vec<DisputeRow>,
    more_disputes: bool,
    here: String,
}

#[derive(Deserialize)]
pub(crate) struct PageQuery {
    before: Option<String>,
}

/// A card the operator may see, or 404.
async fn visible_card(
    console: &Console,
    op: &Op,
    card_id: &str,
) -> Result<CardRecord, ConsoleError> {
    let mut conn = console.app.store.conn().await?;
    let card = reads::card(&mut conn, card_id)
        .await?
        .ok_or(ConsoleError::NotFound)?;
    op.may_see(&card.project_id)?;
    Ok(card)
}

pub(crate) async fn show(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Path(card_id): Path<String>,
    Query(query): Query<PageQuery>,
) -> PageResult {
    let before = view::cursor(&query.before)?;
    let card = visible_card(&console, &op, &card_id).await?;
    let mut conn = console.app.store.reader().conn().await?;
    // One store call per section.
    let funds = ledger::card_funds(&mut conn, &card.project_id, &card.id)
        .await
        .ok();
    let holds =
        card_txs::open_auths_of_card(&mut conn, &card.project_id, &card.id, HOLDS_SHOWN).await?;
    let txs = reads::card_txs_page(&mut conn, &card.id, before.as_ref(), PAGE_SIZE + 1).await?;
    let orders = reads::card_orders(&mut conn, &card.id, ORDERS_SHOWN).await?;
    let mut disputes =
        reads::card_disputes(&mut conn, &card.project_id, &card.id, DISPUTES_SHOWN + 1).await?;
    let more_disputes = disputes.len() > usize::try_from(DISPUTES_SHOWN).unwrap_or(0);
    disputes.truncate(usize::try_from(DISPUTES_SHOWN).unwrap_or(0));
    let (txs, next) = view::split_page(txs, PAGE_SIZE, |t| (t.created_at, &t.id));
    let limits = controls::card_limits(&mut conn, &card).await;
    let rules = controls::card_rules(&mut conn, &card).await?;
    let tx_ids: Vec<String> = txs.iter().map(|t| t.id.clone()).collect();
    let (matches, more_matches) =
        controls::matches_of(&mut conn, &card.project_id, &tx_ids, MATCHES_SHOWN).await?;
    let path = format!("/console/cards/{}", card.id);
    let (available, pending) = match funds {
        Some((a, p)) => (a.to_string(), p.to_string()),
        None => ("—".to_owned(), "—".to_owned()),
    };
    render(&CardPage {
        ctx: op.ctx(&console, "cards"),
        here: view::link(&path, &[("before", query.before.as_deref())]),
        next: next.map(|n| view::link(&path, &[("before", Some(&n))])),
        user_id: card.user_id.clone(),
        cardholder_id: card.cardholder_id.clone(),
        expiry: match (card.expiry_month, card.expiry_year) {
            (Some(m), Some(y)) => format!("{m:02}/{y}"),
            _ => "—".to_owned(),
        },
        frozen_at: view::opt_time(card.frozen_at),
        closed_at: view::opt_time(card.closed_at),
        available,
        pending,
        limits,
        rules,
        matches,
        more_matches,
        holds: holds.into_iter().map(tx_row).collect(),
        txs: txs.into_iter().map(tx_row).collect(),
        orders: orders.into_iter().map(order_row).collect(),
        disputes: disputes.into_iter().map(dispute_row).collect(),
        more_disputes,
        card: card_row(card),
    })
}

async fn change(console: Console, op: Op, card_id: String, c: Change) -> PageResult {
    let card = visible_card(&console, &op, &card_id).await?;
    let result = status::change(&console.app, &card.project_id, Some(&card.id), None, c)
        .await
        .map(|(_, to)| format!("Card {} is {to}.", card.id))
        .map_err(|e| e.message);
    let action = match c {
        Change::Freeze => "card.freeze",
        Change::Unfreeze => "card.unfreeze",
    };
    let back = format!("/console/cards/{}", card.id);
    finish(
        &console,
        &op,
        action,
        Some(&card.project_id),
        json!({ "card_id": card.id }),
        result,
        &back,
    )
    .await
}

pub(crate) async fn freeze(
    State(console): State<Console>,
    Path(card_id): Path<String>,
    Act(op, NoFields {}): Act<NoFields>,
) -> PageResult {
    change(console, op, card_id, Change::Freeze).await
}

pub(crate) async fn unfreeze(
    State(console): State<Console>,
    Path(card_id): Path<String>,
    Act(op, NoFields {}): Act<NoFields>,
) -> PageResult {
    change(console, op, card_id, Change::Unfreeze).await
}

#[derive(Deserialize)]
pub(crate) struct SimulateForm {
    #[serde(default)]
    amount: String,
    #[serde(default)]
    merchant: String,
    #[serde(default)]
    mcc: String,
}

/// Sandbox: an authorization from the simulated card network, built as the body of
/// simulate/cards/auth and applied by `network::apply` like that endpoint does.
pub(crate) async fn simulate(
    State(console): State<Console>,
    Path(card_id): Path<String>,
    Act(op, form): Act<SimulateForm>,
) -> PageResult {
    let card = visible_card(&console, &op, &card_id).await?;
    let body = json!({
        "card_id": card.id,
        "transactionAmount": form.amount.trim(),
        "merchant": { "name": form.merchant, "mcc": form.mcc },
    });
    let applied = async {
        let req: issuing_app::network::simulate::SimRequest = serde_json::from_value(body)
            .map_err(|e| issuing_wire::ApiError::validation(e.to_string()))?;
        let message = issuing_app::network::simulate::authorization(&req)?;
        issuing_app::network::apply(&console.app, &card.project_id, None, message).await
    }
    .await;
    let (result, back) = match applied {
        Ok(a) => {
            let outcome = match a.tx.failure_reason.as_deref() {
                Some(reason) => format!("{} ({reason})", a.tx.status),
                None => a.tx.status.clone(),
            };
            (
                Ok(format!("Authorization {}: {outcome}.", a.tx.id)),
                format!("/console/transactions/{}", a.tx.id),
            )
        }
        Err(e) => (Err(e.message), format!("/console/cards/{}", card.id)),
    };
    finish(
        &console,
        &op,
        "card.simulate_authorization",
        Some(&card.project_id),
        json!({ "card_id": card.id, "amount": form.amount.trim() }),
        result,
        &back,
    )
    .await
}

#[derive(Template)]
#[template(path = "console/reveal.html")]
struct RevealPage {
    ctx: Ctx,
    card_id: String,
    card_number: String,
    cvv: String,
    expiry: String,
}

#[derive(Deserialize)]
pub(crate) struct RevealForm {
    #[serde(default)]
    password: String,
}

/// Admins only: the card's number and CVV, on a page of its own that is never cached;
/// the audit row says who looked, never what they saw. The admin types the password
/// again (a wrong one counts towards the lockout like a failed login, and a lockout
/// ends the admin's sessions), and makes at most `reveals_per_hour` reveals an hour.
pub(crate) async fn reveal(
    State(console): State<Console>,
    Path(card_id): Path<String>,
    Extension(client): Extension<ClientAddress>,
    Act(op, form): Act<RevealForm>,
) -> PageResult {
    if op.role != Role::Admin {
        return Err(ConsoleError::Forbidden(
            "Only admins may reveal card details.",
        ));
    }
    let card = visible_card(&console, &op, &card_id).await?;
    let back = format!("/console/cards/{}", card.id);
    let now = now_micros();
    let hash = {
        let mut conn = console.app.store.conn().await?;
        store_ops::get_by_email(&mut conn, &op.email)
            .await?
            .filter(|o| o.status == store_ops::ACTIVE)
            .map(|o| o.password_hash)
    };
    let matches = match hash {
        Some(hash) if form.password.len() <= MAX_PASSWORD_LEN => {
            session::verify(&console, hash, form.password).await
        }
        _ => false,
    };
    if !matches {
        let mut tx = console.app.store.begin().await?;
        let locked = session::failed(
            &mut tx,
            &console,
            &op.email,
            &client.0,
            now,
            ("card.reveal", "error: wrong password"),
        )
        .await?;
        if locked.is_some() {
            store_ops::end_sessions(&mut tx, &op.email).await?;
        }
        tx.commit().await.map_err(StoreError::from)?;
        if locked.is_some() {
            return Ok(see_other("/console/login"));
        }
        op.flash(
            &console,
            &Err("Wrong password: the card's details were not shown.".into()),
        )
        .await?;
        return Ok(see_other(&back));
    }
    let limit = console.app.config.console_security.reveals_per_hour;
    let made = {
        let mut conn = console.app.store.conn().await?;
        issuing_store::audit::count_since(&mut conn, &op.email, "card.reveal", "ok", now - HOUR)
            .await?
    };
    if made >= i64::from(limit) {
        return finish(
            &console,
            &op,
            "card.reveal",
            Some(&card.project_id),
            json!({ "card_id": card.id }),
            Err(format!(
                "refused: at most {limit} reveals an hour (ISSUING_CONSOLE_REVEALS_PER_HOUR)"
            )),
            &back,
        )
        .await;
    }
    let opened = issuing_app::flows::details::open(&console.app, &card).await;
    let result = opened
        .as_ref()
        .map(|_| "revealed".to_owned())
        .map_err(|e| e.message.clone());
    let targets = json!({ "card_id": card.id });
    let Ok(details) = opened else {
        return finish(
            &console,
            &op,
            "card.reveal",
            Some(&card.project_id),
            targets,
            result,
            &back,
        )
        .await;
    };
    record(
        &console,
        &op,
        "card.reveal",
        Some(&card.project_id),
        &targets,
        &result,
    )
    .await?;
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned).unwrap_or_default();
    render(&RevealPage {
        ctx: op.ctx(&console, "cards"),
        card_number: text(&details.card_number),
        cvv: text(&details.cvv),
        expiry: match (card.expiry_month, card.expiry_year) {
            (Some(m), Some(y)) => format!("{m:02}/{y}"),
            _ => "—".to_owned(),
        },
        card_id: card.id,
    })
}
