//! cards/topup and cards/withdraw create orders the worker finishes through the provider.
//!
//! Topup: the master balance pays amount + fee when the order is created; the amount
//! waits in the project's in-flight account until the provider confirms, then lands on
//! the card. Withdraw: the amount leaves the card into in-flight at once (so two
//! withdraws can never both spend the same funds), then reaches the master balance when
//! the provider confirms. A failed order moves everything back.

use super::card_for_user;
use super::master_writer::{unless_answered, Answer, Item, Kind, Made, Move, ProjectAccounts};
use super::money::{self, Acct};
use super::orders::answer as order_answer;
use crate::idempotency::{IdempotencyToken, KEY_TTL_MICROS};
use crate::App;
use issuing_domain::ids::new_id;
use issuing_domain::ledger::Transfer;
use issuing_domain::ledger::{AccountKind, TransferKind};
use issuing_domain::time::now_micros;
use issuing_store::ledger;
use issuing_store::ledger_batch::Planned;
use issuing_store::orders::{self, OrderRecord};
use issuing_store::writer::AsBatch;
use issuing_store::writer::{BatchConn, Part, Row};
use issuing_store::{Conn, StoreError};
use issuing_wire::{Amount, ApiError, ErrorSlug};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
pub struct MoveRequest {
    #[serde(default)]
    card_id: Option<String>,
    #[serde(default)]
    amount: Option<Value>,
    #[serde(default)]
    currency: Option<String>,
    #[serde(default)]
    external_user_id: Option<String>,
}

fn parse_amount(req: &MoveRequest) -> Result<Amount, ApiError> {
    let value = req
        .amount
        .as_ref()
        .ok_or_else(|| ApiError::new(ErrorSlug::InvalidAmount, "amount is required"))?;
    Amount::parse_positive(value)
        .map_err(|e| ApiError::new(ErrorSlug::InvalidAmount, format!("Invalid amount: {e}")))
}

/// Only USDT moves between the master balance and cards (any letter case).
fn check_currency(req: &MoveRequest) -> Result<(), ApiError> {
    match req.currency.as_deref() {
        None => Ok(()),
        Some(c) if c.trim().eq_ignore_ascii_case("usdt") => Ok(()),
        Some(c) => Err(ApiError::new(
            ErrorSlug::CurrencyMismatch,
            format!("Only USDT is supported, not {c}"),
        )),
    }
}

/// What both money moves check before they touch the database, in the spec's error
/// order: the amount, then the currency. The card and its user come next, inside the
/// transaction.
fn check(req: &MoveRequest) -> Result<(Amount, i64), ApiError> {
    let amount = parse_amount(req)?;
    check_currency(req)?;
    Ok((amount, now_micros()))
}

async fn card(
    conn: &mut Conn,
    project_id: &str,
    req: &MoveRequest,
) -> Result<issuing_store::cards::CardRecord, ApiError> {
    card_for_user(
        conn,
        project_id,
        req.card_id.as_deref(),
        req.external_user_id.as_deref(),
    )
    .await
}

pub const ENDPOINT: &str = "cards/topup";

/// A top-up: the checks that need no lock here, on a reading connection, then the
/// master balance's writer (`master_writer.rs`) decides the key, debits the master
/// balance and writes the order, its event and its key in its next batch.
pub async fn topup(
    state: &App,
    project_id: &str,
    req: MoveRequest,
    token: IdempotencyToken,
) -> Result<Answer, ApiError> {
    match checked(state, project_id, &req, &token).await {
        Ok(topup) => state.master_writer.submit(topup).await,
        Err(refused) => unless_answered(&state.store, &token, refused).await,
    }
}

/// The top-up's checks in the spec's error order, and its fee.
///
/// A card this process read before needs no read here: its product never changes
/// (`cards::remembered`), and its status, which does, is checked by the writer in the
/// batch (`card_refusal`), after the same checks as here. Only when the product refuses
/// the amount is the card read, so that a card that is not active still answers that
/// first, as it would have without the shortcut.
async fn checked(
    state: &App,
    project_id: &str,
    req: &MoveRequest,
    token: &IdempotencyToken,
) -> Result<Move, ApiError> {
    let (amount, now) = check(req)?;
    if req.external_user_id.is_none() {
        let card_id = req.card_id.as_deref().map(str::trim).unwrap_or_default();
        if let Some(facts) = issuing_store::cards::remembered(project_id, card_id) {
            if let Ok(fee) = product_fee(state, &facts.product_code, amount) {
                return Ok(topup_move(
                    project_id,
                    card_id.to_owned(),
                    amount,
                    fee,
                    now,
                    token,
                ));
            }
        }
    }
    let mut conn = state.store.conn().await?;
    let card = card(&mut conn, project_id, req).await?;
    drop(conn);
    issuing_store::cards::remember(&card);
    if let Some(refused) = card_refusal(Some(&card.status)) {
        return Err(refused);
    }
    let fee = product_fee(state, &card.product_code, amount)?;
    Ok(topup_move(project_id, card.id, amount, fee, now, token))
}

/// The fee of topping up `amount` on a card of `product`, if the product allows it.
fn product_fee(state: &App, product: &str, amount: Amount) -> Result<Amount, ApiError> {
    let product = state.catalog().product(product).ok_or_else(|| {
        ApiError::new(
            ErrorSlug::InvalidPricing,
            "The card's product is no longer configured",
        )
    })?;
    product.check_usable()?;
    product.check_topup_amount(amount)?;
    Ok(product.topup_fee(amount))
}

fn topup_move(
    project_id: &str,
    card_id: String,
    amount: Amount,
    fee: Amount,
    now: i64,
    token: &IdempotencyToken,
) -> Move {
    Move {
        project_id: project_id.to_owned(),
        order_id: new_id(),
        now,
        token: token.clone(),
        key_expires_at: now + KEY_TTL_MICROS,
        kind: Kind::Topup(TopupMove {
            card_id,
            amount,
            fee,
        }),
    }
}

/// A top-up the provider confirmed, for the master balance's writer: its order as the
/// worker saves it (completed), and the worker that holds its lease.
pub struct Confirmed {
    pub order: OrderRecord,
    pub worker: String,
    pub card_id: String,
    pub amount: Amount,
}

/// The batch's confirmed top-ups of one project (`items`, by place), planned before the
/// batch's statement: each one's in-flight → card transfer, posted only if its order's
/// save (`saves`, in the same statement) finds its worker still holding the lease.
pub struct Confirmations<'i> {
    /// Each confirmation's place in the batch, its order's save (order, worker), its
    /// transfers, and its order's data as text; in the same order.
    places: Vec<usize>,
    saves: Vec<orders::Step<'i>>,
    plans: Vec<Vec<Planned>>,
    datas: Vec<String>,
}

impl<'i> Confirmations<'i> {
    /// Plans `items`' confirmations (the cards' accounts are read only where this
    /// process does not know them).
    pub async fn plan(
        conn: &mut BatchConn<'_>,
        project_id: &str,
        items: &[&'i Item],
        accounts: &ProjectAccounts,
    ) -> Result<Confirmations<'i>, StoreError> {
        let found: Vec<(usize, &Confirmed)> = items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| match item {
                Item::Confirmed(c) => Some((i, &**c)),
                Item::Move(_) => None,
            })
            .collect();
        let cards: Vec<&str> = found.iter().map(|(_, c)| c.card_id.as_str()).collect();
        let funds = if cards.is_empty() {
            Default::default()
        } else {
            ledger::card_accounts(conn, project_id, &cards).await?
        };
        let mut plans = Vec::with_capacity(found.len());
        for (_, c) in &found {
            let Some((card_account, _)) = funds.get(&c.card_id) else {
                return Err(StoreError::NotFound("card account"));
            };
            let transfer = Transfer::simple(
                TransferKind::CardTopup,
                accounts.in_flight.clone(),
                card_account.clone(),
                c.amount,
            )
            .map_err(|e| StoreError::Corrupt(e.to_string()))?;
            plans.push(vec![Planned {
                order_id: Some(c.order.id.clone()),
                card_id: Some(c.card_id.clone()),
                reference: None,
                transfer,
            }]);
        }
        let saves: Vec<orders::Step<'_>> = found
            .iter()
            .map(|(_, c)| orders::Step {
                order: &c.order,
                worker: c.worker.as_str(),
                lease: orders::Lease::Release,
            })
            .collect();
        Ok(Confirmations {
            places: found.into_iter().map(|(i, _)| i).collect(),
            datas: orders::step_datas(&saves),
            saves,
            plans,
        })
    }

    /// Every planned transfer, for the accounts the batch locks.
    pub fn plans(&self) -> &[Vec<Planned>] {
        &self.plans
    }

    /// The orders' saves, completed and their leases released, as a part of the
    /// batch's statement.
    pub fn saves(&self) -> Part<'_> {
        orders::steps_part(&self.saves, &self.datas)
    }

    /// Each confirmation by place: its transfers if its order was saved (`rows`: of
    /// `saves`), else `LeaseLost` (it moves nothing).
    pub fn saved(self, rows: &[Row]) -> Result<Vec<(usize, PlanOrLost)>, StoreError> {
        let saved = orders::saved(&self.saves, rows)?;
        Ok(self
            .places
            .into_iter()
            .zip(self.saves)
            .zip(self.plans)
            .zip(saved)
            .map(|(((i, step), plan), saved)| {
                if saved {
                    (i, Ok(plan))
                } else {
                    let lost = StoreError::LeaseLost(step.order.id.clone());
                    (i, Err(ApiError::from(lost)))
                }
            })
            .collect())
    }
}

/// A confirmation's transfers, or why it moves nothing.
pub type PlanOrLost = Result<Vec<Planned>, ApiError>;

/// A top-up for the master balance's writer.
pub struct TopupMove {
    pub card_id: String,
    pub amount: Amount,
    pub fee: Amount,
}

impl TopupMove {
    pub fn charged(&self) -> i64 {
        self.amount.micros() + self.fee.micros()
    }

    /// The master balance pays the amount into in-flight (it reaches the card when the
    /// provider confirms) and the fee into fee income.
    pub fn transfers(
        &self,
        order_id: &str,
        accounts: &ProjectAccounts,
    ) -> Result<Vec<Planned>, StoreError> {
        let mut moves = vec![(TransferKind::CardTopup, &accounts.in_flight, self.amount)];
        if self.fee.micros() > 0 {
            moves.push((TransferKind::TopupFee, &accounts.fee_income, self.fee));
        }
        moves
            .into_iter()
            .map(|(kind, to, amount)| {
                Ok(Planned {
                    reference: None,
                    order_id: Some(order_id.to_owned()),
                    card_id: Some(self.card_id.clone()),
                    transfer: Transfer::simple(kind, accounts.master.clone(), to.clone(), amount)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                })
            })
            .collect()
    }

    /// The order and its `card.topup` event.
    pub fn made(&self, m: &Move) -> Made {
        let order = new_order(
            &m.project_id,
            &m.order_id,
            "card_topup",
            &self.card_id,
            m.now,
            json!({
                "amount": self.amount,
                "fee": self.fee,
                "total": Amount::from_micros(self.charged()),
                "currency": "usdt",
            }),
        );
        let event = json!({
            "card_id": self.card_id,
            "order_id": m.order_id,
            "amount": self.amount,
            "status": order.status,
        });
        Made {
            order,
            event_type: "card.topup",
            event,
        }
    }
}

/// A top-up's response: its order.
pub fn body(order: &OrderRecord) -> Result<Value, StoreError> {
    let mut body = serde_json::to_value(order_answer(order.clone()))
        .map_err(|e| StoreError::Corrupt(e.to_string()))?;
    body["success"] = json!(true);
    Ok(body)
}

/// Why a top-up may not go to a card with this status (`None`: not found).
pub fn card_refusal(status: Option<&String>) -> Option<ApiError> {
    match status.map(String::as_str) {
        Some("active") => None,
        Some(status) => Some(ApiError::new(
            ErrorSlug::CardNotActive,
            format!("Card is {status}, not active"),
        )),
        None => Some(ApiError::new(ErrorSlug::CardNotFound, "Card not found")),
    }
}

pub async fn withdraw(
    state: &App,
    project_id: &str,
    req: MoveRequest,
    token: IdempotencyToken,
) -> Result<Value, ApiError> {
    let (amount, now) = check(&req)?;
    let mut tx = state.store.begin().await?;
    let card = card(&mut tx, project_id, &req).await?;
    let subprovider = state.catalog().subprovider(&card.subprovider_code);
    if !subprovider.is_some_and(|s| s.withdraw_supported) {
        return Err(ApiError::new(
            ErrorSlug::ProviderWithdrawNotSupported,
            "Withdraw is not supported for this card's provider",
        ));
    }
    // A closed card may still receive refunds of earlier purchases; they are taken
    // back the same way.
    if !matches!(card.status.as_str(), "active" | "frozen" | "closed") {
        return Err(ApiError::new(
            ErrorSlug::CardNotActive,
            format!(
                "Card is {}; funds can be withdrawn from active, frozen or closed cards",
                card.status
            ),
        ));
    }
    let order_id = new_id();
    let balance_before = money::master_balance(&mut tx, project_id).await?;
    money::transfer(
        &mut tx,
        &money::Tag {
            project_id,
            order_id: &order_id,
            card_id: &card.id,
        },
        TransferKind::CardWithdraw,
        Acct::Card(&card.id),
        Acct::Project(AccountKind::InFlight),
        amount,
    )
    .await
    .map_err(|e| match e {
        StoreError::InsufficientFunds { .. } => ApiError::new(
            ErrorSlug::InsufficientFunds,
            "The card's available balance is lower than the amount",
        ),
        other => other.into(),
    })?;
    let mut order = new_order(
        project_id,
        &order_id,
        "card_withdraw",
        &card.id,
        now,
        json!({
            "amount": amount,
            "currency": "usdt",
        }),
    );
    order.balance_before = Some(balance_before.micros());
    order.balance_after = Some(balance_before.micros());
    orders::insert(&mut tx, &order).await?;
    issuing_store::wakeup::announce(&mut tx.as_batch(), issuing_store::wakeup::Queue::Orders)
        .await?;
    let body = record(&mut tx, &token, order).await?;
    tx.commit().await.map_err(StoreError::from)?;
    announced(state);
    Ok(body)
}

/// A new top-up or withdraw order; the flow sets its balances once its debit answered.
pub fn new_order(
    project_id: &str,
    order_id: &str,
    order_type: &str,
    card_id: &str,
    now: i64,
    data: Value,
) -> OrderRecord {
    OrderRecord {
        id: order_id.to_owned(),
        project_id: project_id.to_owned(),
        order_type: order_type.to_owned(),
        status: "new".into(),
        card_id: Some(card_id.to_owned()),
        balance_before: None,
        balance_after: None,
        last_error: None,
        last_error_slug: None,
        data,
        issue_status: None,
        topup_status: (order_type == "card_topup").then(|| "new".into()),
        is_issued: None,
        provider_card_status: None,
        attempts: 0,
        next_attempt_at: Some(now),
        created_at: now,
        updated_at: now,
        completed_at: None,
        failed_at: None,
    }
}

/// Stores the order's answer under its idempotency key and announces the order to
/// every process's workers, in the order's transaction.
async fn record(
    conn: &mut Conn,
    token: &IdempotencyToken,
    order: OrderRecord,
) -> Result<Value, ApiError> {
    let body = body(&order)?;
    token.complete(conn, &body).await?;
    Ok(body)
}

/// Wakes this process's workers once the order is committed.
fn announced(state: &App) {
    state.orders_wakeup.notify_one();
    state.deliveries_wakeup.notify_one();
}
