//! One order (`/console/orders/{id}`: its state, error and ledger transfers) and one card
//! transaction (`/console/transactions/{id}`: amounts, merchant, why it was declined).
//!
//! The transaction page reads one section per store call: the transaction, its card,
//! the rule matches recorded for it and the disputes filed on it; a declined one's
//! `decline` object and the decision webhook's part are put in words (`controls.rs`).
//! A dispute's card-side movement links its dispute.

use super::cards::merchant_name;
use super::controls::{self, DeclineView, MatchRow};
use super::disputes::{dispute_row, DisputeRow};
use super::view::{self, render, transfer_view, Ctx, PageResult, TransferView};
use super::{Console, ConsoleError, Op};
use askama::Template;
use axum::extract::{Path, State};
use axum::Extension;
use issuing_store::console as reads;

/// Transfers shown on an order page (an order makes a handful).
const TRANSFERS_SHOWN: i64 = 50;
/// Rule matches shown on a transaction page: one per rule at most, and a project has at
/// most 50 rules that are evaluated (more only if rules were changed meanwhile).
const MATCHES_SHOWN: i64 = 100;
/// Disputes shown on a transaction page: one open at a time, and each takes a share of
/// the amount, so a transaction has a handful.
const DISPUTES_SHOWN: i64 = 50;

#[derive(Template)]
#[template(path = "console/order.html")]
struct OrderPage {
    ctx: Ctx,
    id: String,
    project_id: String,
    order_type: String,
    status: String,
    badge: &'static str,
    card_id: String,
    balance_before: String,
    balance_after: String,
    last_error: String,
    last_error_slug: String,
    attempts: i64,
    next_attempt_at: String,
    created_at: String,
    completed_at: String,
    failed_at: String,
    data: String,
    transfers: Vec<TransferView>,
}

pub(crate) async fn order(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Path(order_id): Path<String>,
) -> PageResult {
    let mut conn = console.app.store.reader().conn().await?;
    let o = reads::order(&mut conn, &order_id)
        .await?
        .ok_or(ConsoleError::NotFound)?;
    op.may_see(&o.project_id)?;
    let transfers = reads::order_transfers(&mut conn, &o.id, TRANSFERS_SHOWN).await?;
    let money = |m: Option<i64>| m.map(view::money).unwrap_or_else(|| "—".to_owned());
    render(&OrderPage {
        ctx: op.ctx(&console, "cards"),
        badge: view::badge(&o.status),
        card_id: o.card_id.clone().unwrap_or_default(),
        balance_before: money(o.balance_before),
        balance_after: money(o.balance_after),
        last_error: view::opt(o.last_error.as_deref()),
        last_error_slug: view::opt(o.last_error_slug.as_deref()),
        attempts: o.attempts,
        next_attempt_at: view::opt_time(o.next_attempt_at),
        created_at: view::time(o.created_at),
        completed_at: view::opt_time(o.completed_at),
        failed_at: view::opt_time(o.failed_at),
        data: serde_json::to_string_pretty(&o.data).unwrap_or_default(),
        transfers: transfers.into_iter().map(transfer_view).collect(),
        id: o.id,
        project_id: o.project_id,
        order_type: o.order_type,
        status: o.status,
    })
}

#[derive(Template)]
#[template(path = "console/transaction.html")]
struct TransactionPage {
    ctx: Ctx,
    id: String,
    project_id: String,
    card_id: String,
    card_pan: String,
    card_status: String,
    kind: String,
    status: String,
    badge: &'static str,
    tx_type: String,
    failure_reason: String,
    auth_amount: String,
    held: String,
    card_amount: String,
    cleared: String,
    refunded: String,
    merchant: String,
    mcc: String,
    country: String,
    merchant_amount: String,
    original_transaction_id: String,
    hold_expires_at: String,
    created_at: String,
    updated_at: String,
    decline: Option<DeclineView>,
    webhook: String,
    matches: Vec<MatchRow>,
    more_matches: bool,
    /// The dispute whose money this transaction moved (type `other`).
    dispute_id: String,
    disputes: Vec<DisputeRow>,
}

pub(crate) async fn transaction(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Path(transaction_id): Path<String>,
) -> PageResult {
    let mut conn = console.app.store.reader().conn().await?;
    let t = reads::card_tx(&mut conn, &transaction_id)
        .await?
        .ok_or(ConsoleError::NotFound)?;
    op.may_see(&t.project_id)?;
    let card = reads::card(&mut conn, &t.card_id).await?;
    let (matches, more_matches) = controls::matches_of(
        &mut conn,
        &t.project_id,
        std::slice::from_ref(&t.id),
        MATCHES_SHOWN,
    )
    .await?;
    let disputes =
        reads::transaction_disputes(&mut conn, &t.project_id, &t.id, DISPUTES_SHOWN).await?;
    let field = |k: &str| t.merchant[k].as_str().unwrap_or("").to_owned();
    render(&TransactionPage {
        ctx: op.ctx(&console, "cards"),
        decline: controls::decline_view(&t, &matches),
        webhook: controls::webhook_words(&t),
        matches,
        more_matches,
        dispute_id: t.dispute_id.clone().unwrap_or_default(),
        disputes: disputes.into_iter().map(dispute_row).collect(),
        card_pan: view::masked_pan(card.as_ref().and_then(|c| c.label.as_deref())),
        card_status: card.map(|c| c.status).unwrap_or_default(),
        badge: view::badge(&t.status),
        failure_reason: view::opt(t.failure_reason.as_deref()),
        auth_amount: view::money(t.auth_amount),
        held: view::money(t.held),
        card_amount: view::money(t.card_amount),
        cleared: view::money(t.cleared),
        refunded: view::money(t.refunded),
        merchant: merchant_name(&t),
        mcc: field("mcc"),
        country: field("country"),
        merchant_amount: format!("{} {}", view::money(t.merchant_amount), t.merchant_currency),
        original_transaction_id: t.original_transaction_id.clone().unwrap_or_default(),
        hold_expires_at: view::opt_time(t.hold_expires_at),
        created_at: view::time(t.created_at),
        updated_at: view::time(t.updated_at),
        id: t.id,
        project_id: t.project_id,
        card_id: t.card_id,
        kind: t.tx_kind,
        status: t.status,
        tx_type: t.tx_type,
    })
}
