//! cards/create: checks in the order the spec lists the errors, then in one transaction
//! charges the issue fee (and an optional initial topup), creates the card, its account,
//! the order and the `card.created` event, and stores the idempotent response. On
//! SQLite that transaction is a batch of the master balance writer (`group_commit.rs`),
//! shared with other card issues and top-ups, each in its own savepoint.

use super::money::{self, Acct};
use super::{kyc, required_user};
use crate::pipeline::idempotency::IdempotencyToken;
use crate::routes::orders::OrderView;
use crate::state::AppState;
use issuing_domain::catalog::Product;
use issuing_domain::ids::new_id;
use issuing_domain::kyc::parse_kyc;
use issuing_domain::ledger::{AccountKind, TransferKind};
use issuing_domain::time::now_micros;
use issuing_store::cards::CardRecord;
use issuing_store::events::{self, NewEvent};
use issuing_store::group_commit::{GroupCommit, Turn};
use issuing_store::orders::{self, OrderRecord};
use issuing_store::{cardholders, cards, ledger, users, Conn};
use issuing_wire::{Amount, ApiError, ErrorSlug};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
pub(crate) struct IssueRequest {
    #[serde(default)]
    external_user_id: Option<String>,
    #[serde(default)]
    product_code: Option<String>,
    /// Legacy name of `product_code`.
    #[serde(default)]
    product_id: Option<String>,
    #[serde(default)]
    kyc_data: Option<Value>,
    /// Optional amount loaded onto the card once it is issued (topup rules apply).
    #[serde(default)]
    initial_topup: Option<Value>,
}

pub(crate) const CARD_PENDING: &str = "pending";

fn cardholder_missing() -> ApiError {
    ApiError::new(ErrorSlug::CardholderNotFound, "Cardholder not found")
}

pub(crate) async fn create(
    state: &AppState,
    project_id: &str,
    req: IssueRequest,
    token: IdempotencyToken,
) -> Result<Value, ApiError> {
    let external_user_id = required_user(req.external_user_id.as_deref())?.to_owned();
    let kyc_data = match &req.kyc_data {
        None | Some(Value::Null) => None,
        Some(v) => Some(parse_kyc(v)?),
    };
    let product_code = req
        .product_code
        .or(req.product_id)
        .filter(|c| !c.trim().is_empty())
        .ok_or_else(|| ApiError::validation("product_code is required"))?;
    let initial_topup =
        match &req.initial_topup {
            None | Some(Value::Null) => None,
            Some(v) => Some(Amount::parse_positive(v).map_err(|e| {
                ApiError::new(ErrorSlug::InvalidAmount, format!("initial_topup: {e}"))
            })?),
        };
    let product = state
        .catalog()
        .product(&product_code)
        .ok_or_else(|| ApiError::new(ErrorSlug::ProductNotFound, "Card product not found"))?
        .clone();

    let now = now_micros();
    // KYC data given here is submitted first, in its own transaction: it stands even if
    // a later check refuses the card (CONTRACT §3).
    if let Some(k) = &kyc_data {
        let mut tx = state.store.begin().await?;
        let mut holder = cardholders::get_for_user(
            &mut tx,
            project_id,
            &external_user_id,
            &product.subprovider_code,
        )
        .await?
        .ok_or_else(cardholder_missing)?;
        kyc::check_for_subprovider(state, &holder.subprovider_code, k)?;
        kyc::apply(state, &mut holder, k, now)?;
        cardholders::update_kyc(&mut tx, &holder).await?;
        tx.commit().await.map_err(issuing_store::StoreError::from)?;
        kyc::submit_to_provider(state, &mut holder, k).await?;
    }
    let issue = Issue {
        project_id: project_id.to_owned(),
        external_user_id,
        product,
        initial_topup,
        now,
    };
    let writer = state.master_moves.clone();
    let (body, turn) = state
        .master_moves
        .run(move |conn| {
            Box::pin(async move {
                let (body, turn) = charge(conn, &issue, &writer).await?;
                token.complete(conn, &body).await?;
                Ok::<_, ApiError>((body, turn))
            })
        })
        .await?;
    // Committed: the project's next card issue or top-up may take the master row.
    drop(turn);
    state.orders_wakeup.notify_one();
    state.deliveries_wakeup.notify_one();
    Ok(body)
}

/// A card issue, owned: it waits in the writer's queue.
struct Issue {
    project_id: String,
    external_user_id: String,
    product: Product,
    initial_topup: Option<Amount>,
    now: i64,
}

/// The issue's remaining checks and its change, on the master balance writer's
/// connection (`group_commit.rs`). Answers the response body.
async fn charge(
    conn: &mut Conn,
    issue: &Issue,
    writer: &GroupCommit,
) -> Result<(Value, Option<Turn>), ApiError> {
    let Issue {
        project_id,
        external_user_id,
        product,
        initial_topup,
        now,
    } = issue;
    let (project_id, initial_topup, now) = (project_id.as_str(), *initial_topup, *now);
    let user = users::get_by_external_id(conn, project_id, external_user_id)
        .await?
        .ok_or_else(cardholder_missing)?;
    let holder = cardholders::get_for_user(
        conn,
        project_id,
        external_user_id,
        &product.subprovider_code,
    )
    .await?
    .ok_or_else(cardholder_missing)?;
    if holder.kyc_enc.is_none() {
        return Err(ApiError::new(
            ErrorSlug::KycRequired,
            "KYC data is required before issuing a card",
        ));
    }
    if !product.active {
        return Err(ApiError::new(
            ErrorSlug::ProductNotActive,
            "Card product is not active",
        ));
    }
    if !kyc::is_ready(&holder) {
        return Err(ApiError::new(
            ErrorSlug::CardholderNotReady,
            format!(
                "Cardholder is not ready for cards (registration {}, KYC {})",
                holder.registration_status, holder.kyc_status
            ),
        ));
    }
    product.check_usable()?;
    let topup_fee = match initial_topup {
        Some(a) => {
            product.check_topup_amount(a)?;
            Some(product.topup_fee(a))
        }
        None => None,
    };

    let card_id = new_id();
    let order_id = new_id();
    let card = CardRecord {
        id: card_id.clone(),
        project_id: project_id.to_owned(),
        user_id: user.id.clone(),
        external_user_id: external_user_id.clone(),
        cardholder_id: holder.id.clone(),
        product_code: product.code.clone(),
        subprovider_code: product.subprovider_code.clone(),
        card_currency: product.card_currency.clone(),
        status: CARD_PENDING.to_owned(),
        label: None,
        provider_card_id: None,
        secrets_enc: None,
        expiry_month: None,
        expiry_year: None,
        created_at: now,
        updated_at: now,
        issued_at: None,
        activated_at: None,
        frozen_at: None,
        closed_at: None,
        limits: None,
        limits_timezone: None,
    };
    cards::insert(conn, &card).await?;
    ledger::open_account(conn, project_id, AccountKind::Card, Some(&card_id), now).await?;
    ledger::open_account(conn, project_id, AccountKind::CardHold, Some(&card_id), now).await?;

    let mut data = json!({
        "product_code": product.code,
        "external_user_id": external_user_id,
        "issue_fee": product.pricing.issue_fee,
        "currency": "usdt",
    });
    if let (Some(amount), Some(fee)) = (initial_topup, topup_fee) {
        data["initial_topup"] = json!({ "amount": amount, "fee": fee });
    }
    let mut order = OrderRecord {
        id: order_id.clone(),
        project_id: project_id.to_owned(),
        order_type: "card_issue".into(),
        status: "new".into(),
        card_id: Some(card_id.clone()),
        // Set once the debits below have answered.
        balance_before: None,
        balance_after: None,
        last_error: None,
        last_error_slug: None,
        data,
        issue_status: Some("card_create_pending".into()),
        topup_status: None,
        is_issued: Some(false),
        provider_card_status: None,
        attempts: 0,
        next_attempt_at: Some(now),
        created_at: now,
        updated_at: now,
        completed_at: None,
        failed_at: None,
    };
    // Written before the project's turn, so that less happens under the master row's
    // lock; the wake-up is sent at commit wherever it is written.
    events::insert(
        conn,
        &NewEvent {
            project_id,
            event_type: "card.created",
            card_id: Some(&card_id),
            order_id: Some(&order_id),
            payload: &json!({
                "card_id": card_id,
                "order_id": order_id,
                "product_code": product.code,
                "status": order.status,
            }),
            now,
        },
    )
    .await?;
    issuing_store::wakeup::announce(conn, issuing_store::wakeup::Queue::Orders).await?;
    let turn = writer.turn(project_id).await;

    let fee_income = || Acct::Project(AccountKind::FeeIncome);
    let master = || Acct::Project(AccountKind::Master);
    let issue_fee = product.pricing.issue_fee;
    let charged = issue_fee.micros()
        + initial_topup.map_or(0, Amount::micros)
        + topup_fee.map_or(0, Amount::micros);
    if charged == 0 {
        money::refuse_if_in_debt(conn, project_id).await?;
    }
    let mut moved = Vec::with_capacity(3);
    let tag = money::Tag {
        project_id,
        order_id: &order_id,
        card_id: &card_id,
    };
    moved.push(
        money::transfer(
            conn,
            &tag,
            TransferKind::CardIssueFee,
            master(),
            fee_income(),
            issue_fee,
        )
        .await?,
    );
    if let (Some(amount), Some(fee)) = (initial_topup, topup_fee) {
        let in_flight = Acct::Project(AccountKind::InFlight);
        moved.push(
            money::transfer(
                conn,
                &tag,
                TransferKind::CardTopup,
                master(),
                in_flight,
                amount,
            )
            .await?,
        );
        moved.push(
            money::transfer(
                conn,
                &tag,
                TransferKind::TopupFee,
                master(),
                fee_income(),
                fee,
            )
            .await?,
        );
    }
    // As the debits left it, while this transaction holds the master row, and the
    // balance before derived from what was charged: a read before the debit could see
    // other orders' changes.
    let balance_after = money::master_balance_after(conn, project_id, &moved).await?;
    order.balance_before = Some(balance_after.micros() + charged);
    order.balance_after = Some(balance_after.micros());
    orders::insert(conn, &order).await?;
    let body = json!({
        "success": true,
        "card_id": card_id,
        "status": CARD_PENDING,
        "order": OrderView::from(order),
    });
    Ok((body, turn))
}
