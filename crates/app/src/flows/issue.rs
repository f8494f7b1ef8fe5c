//! cards/create: checks in the order the spec lists the errors on a reading connection,
//! then the master balance's writer (`master_writer.rs`) decides the key, checks the
//! cardholder again, charges the issue fee (and an optional initial topup), and writes
//! the card, its accounts, the order, the `card.created` event and the key in its next
//! batch.

use super::master_writer::{
    is_answered, unless_answered, Answer, Kind, Made, Move, ProjectAccounts,
};
use super::orders::answer as order_answer;
use super::{kyc, required_user};
use crate::idempotency::{IdempotencyToken, KEY_TTL_MICROS};
use crate::App;
use issuing_domain::catalog::Product;
use issuing_domain::ids::new_id;
use issuing_domain::kyc::parse_kyc;
use issuing_domain::ledger::{Transfer, TransferKind};
use issuing_domain::time::now_micros;
use issuing_store::cards::CardRecord;
use issuing_store::ledger_batch::Planned;
use issuing_store::orders::OrderRecord;
use issuing_store::{cardholders, StoreError};
use issuing_wire::{Amount, ApiError, ErrorSlug};
use serde::Deserialize;
use serde_json::{json, Value};

#[derive(Deserialize)]
pub struct IssueRequest {
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

pub const CARD_PENDING: &str = "pending";

pub const ENDPOINT: &str = "cards/create";

fn cardholder_missing() -> ApiError {
    ApiError::new(ErrorSlug::CardholderNotFound, "Cardholder not found")
}

pub async fn create(
    state: &App,
    project_id: &str,
    req: IssueRequest,
    token: IdempotencyToken,
) -> Result<Answer, ApiError> {
    match prepared(state, project_id, req, &token).await {
        Ok(m) => state.master_writer.submit(m).await,
        Err(refused) => unless_answered(&state.store, &token, refused).await,
    }
}

/// Everything before the writer: the request's checks, the KYC data given with it, and
/// the checks needing no lock.
async fn prepared(
    state: &App,
    project_id: &str,
    req: IssueRequest,
    token: &IdempotencyToken,
) -> Result<Move, ApiError> {
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
    // a later check refuses the card (CONTRACT §3). A retry of a finished issue submits
    // nothing again: it is refused here and answered its first response.
    if let Some(k) = &kyc_data {
        if is_answered(&state.store, token).await? {
            return Err(ApiError::new(
                ErrorSlug::IdempotencyConflict,
                "This idempotency key has an answer",
            ));
        }
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
    let kind = checked(
        state,
        project_id,
        &external_user_id,
        &product,
        initial_topup,
        now,
    )
    .await?;
    Ok(Move {
        project_id: project_id.to_owned(),
        order_id: kind.order.id.clone(),
        now,
        token: token.clone(),
        key_expires_at: now + KEY_TTL_MICROS,
        kind: Kind::Issue(Box::new(kind)),
    })
}

/// The issue's checks in the spec's error order, on a reading connection; the writer
/// checks the cardholder again in its transaction.
async fn checked(
    state: &App,
    project_id: &str,
    external_user_id: &str,
    product: &Product,
    initial_topup: Option<Amount>,
    now: i64,
) -> Result<IssueMove, ApiError> {
    // The cardholder names its user (a foreign key), so the user needs no read of its own:
    // without a user there is no cardholder, and both answer `cardholder_not_found`.
    let mut conn = state.store.conn().await?;
    let holder = cardholders::get_for_user(
        &mut conn,
        project_id,
        external_user_id,
        &product.subprovider_code,
    )
    .await?
    .ok_or_else(cardholder_missing)?;
    drop(conn);
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
    if let Some(refused) = holder_refusal(Some(&(
        holder.registration_status.clone(),
        holder.kyc_status.clone(),
    ))) {
        return Err(refused);
    }
    product.check_usable()?;
    let initial = match initial_topup {
        Some(a) => {
            product.check_topup_amount(a)?;
            Some((a, product.topup_fee(a)))
        }
        None => None,
    };

    let card_id = new_id();
    let order_id = new_id();
    let card = CardRecord {
        id: card_id.clone(),
        project_id: project_id.to_owned(),
        user_id: holder.user_id.clone(),
        external_user_id: external_user_id.to_owned(),
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
    let mut data = json!({
        "product_code": product.code,
        "external_user_id": external_user_id,
        "issue_fee": product.pricing.issue_fee,
        "currency": "usdt",
    });
    if let Some((amount, fee)) = initial {
        data["initial_topup"] = json!({ "amount": amount, "fee": fee });
    }
    let order = OrderRecord {
        id: order_id,
        project_id: project_id.to_owned(),
        order_type: "card_issue".into(),
        status: "new".into(),
        card_id: Some(card_id),
        // Set by the writer once the debits have answered.
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
    Ok(IssueMove {
        card,
        order,
        issue_fee: product.pricing.issue_fee,
        initial,
        holder_name: kyc::holder_name(state, &holder),
    })
}

/// A card issue for the master balance's writer: the card, its order (balances unset),
/// and what it charges.
pub struct IssueMove {
    pub card: CardRecord,
    pub order: OrderRecord,
    pub issue_fee: Amount,
    /// The initial top-up's amount and fee.
    pub initial: Option<(Amount, Amount)>,
    /// The cardholder's name for the provider, handed to the order's worker with the
    /// card (`workers/born.rs`).
    pub holder_name: String,
}

impl IssueMove {
    pub fn charged(&self) -> i64 {
        self.issue_fee.micros()
            + self
                .initial
                .map_or(0, |(amount, fee)| amount.micros() + fee.micros())
    }

    /// The issue fee into fee income; an initial top-up's amount into in-flight (it
    /// reaches the card once issued) and its fee into fee income. Zero amounts move
    /// nothing.
    pub fn transfers(
        &self,
        order_id: &str,
        accounts: &ProjectAccounts,
    ) -> Result<Vec<Planned>, StoreError> {
        let mut moves = vec![(
            TransferKind::CardIssueFee,
            &accounts.fee_income,
            self.issue_fee,
        )];
        if let Some((amount, fee)) = self.initial {
            moves.push((TransferKind::CardTopup, &accounts.in_flight, amount));
            moves.push((TransferKind::TopupFee, &accounts.fee_income, fee));
        }
        moves
            .into_iter()
            .filter(|(_, _, amount)| amount.micros() > 0)
            .map(|(kind, to, amount)| {
                Ok(Planned {
                    reference: None,
                    order_id: Some(order_id.to_owned()),
                    card_id: Some(self.card.id.clone()),
                    transfer: Transfer::simple(kind, accounts.master.clone(), to.clone(), amount)
                        .map_err(|e| StoreError::Corrupt(e.to_string()))?,
                })
            })
            .collect()
    }

    /// The order and its `card.created` event (the card and its accounts are the
    /// writer's to insert).
    pub fn made(&self, _m: &Move) -> Made {
        let event = json!({
            "card_id": self.card.id,
            "order_id": self.order.id,
            "product_code": self.card.product_code,
            "status": self.order.status,
        });
        Made {
            order: self.order.clone(),
            event_type: "card.created",
            event,
        }
    }

    /// The response: the new card's id and status, and its order.
    pub fn body(&self, order: &OrderRecord) -> Result<Value, StoreError> {
        Ok(json!({
            "success": true,
            "card_id": self.card.id,
            "status": CARD_PENDING,
            "order": order_answer(order.clone()),
        }))
    }
}

/// Why a card may not be issued to a cardholder with these (registration, KYC)
/// statuses (`None`: not found).
pub fn holder_refusal(statuses: Option<&(String, String)>) -> Option<ApiError> {
    let Some((registration, kyc)) = statuses else {
        return Some(cardholder_missing());
    };
    if kyc::is_ready(registration, kyc) {
        return None;
    }
    Some(ApiError::new(
        ErrorSlug::CardholderNotReady,
        format!("Cardholder is not ready for cards (registration {registration}, KYC {kyc})"),
    ))
}
