//! `disputes/create` (CONTRACT §15): the checks on the disputed transaction, the
//! dispute row with its first timeline row, the provisional credit when asked, the
//! `dispute.updated` event and the stored idempotent answer, in one transaction.

use super::money::{self, CreditFrom};
use super::view;
use crate::idempotency::IdempotencyToken;
use crate::network::execute::read_tx;
use crate::App;
use issuing_domain::card_tx::{TxKind, TxStatus};
use issuing_domain::dispute::{DisputeReason, DisputeStatus};
use issuing_domain::ids::new_id;
use issuing_domain::time::now_micros;
use issuing_store::card_txs::CardTxRecord;
use issuing_store::disputes::{self, DisputeRecord};
use issuing_store::events::{self, NewEvent};
use issuing_store::writer::AsBatch;
use issuing_store::{ledger, Conn, StoreError, Tx};
use issuing_wire::{Amount, ApiError, ErrorSlug};
use serde::Deserialize;
use serde_json::Value;

pub const ENDPOINT: &str = "disputes/create";
/// CONTRACT §15.
pub const MAX_NOTE_CHARS: usize = 5_000;
/// A dispute may be filed up to 120 days after its transaction settled.
pub const WINDOW_MICROS: i64 = 120 * 24 * 3600 * 1_000_000;

/// The request as the flow reads it; `amount` as the client wrote it (a decimal string
/// or a number), judged like every amount.
#[derive(Debug, Deserialize)]
pub struct CreateRequest {
    #[serde(default)]
    pub transaction_id: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub amount: Option<Value>,
    #[serde(default)]
    pub customer_note: Option<String>,
    #[serde(default)]
    pub provisional_credit: Option<bool>,
}

/// A create request that passed every check that needs no database.
struct Parsed {
    transaction_id: String,
    reason: DisputeReason,
    amount: Option<Amount>,
    note: Option<String>,
    provisional: bool,
}

fn parse(req: CreateRequest) -> Result<Parsed, ApiError> {
    let transaction_id = req
        .transaction_id
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::validation("transaction_id is required"))?;
    let reason = req.reason.unwrap_or_default();
    let reason = DisputeReason::parse(reason.trim()).ok_or_else(|| {
        let known: Vec<&str> = DisputeReason::ALL.iter().map(|r| r.as_str()).collect();
        ApiError::validation(format!("reason must be one of {}", known.join(", ")))
    })?;
    let amount = match req.amount {
        None | Some(Value::Null) => None,
        Some(v) => Some(Amount::parse_positive(&v).map_err(|e| {
            ApiError::new(ErrorSlug::InvalidAmount, format!("Invalid amount: {e}"))
        })?),
    };
    let note = req.customer_note.filter(|n| !n.is_empty());
    if note
        .as_ref()
        .is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS)
    {
        return Err(ApiError::validation(format!(
            "customer_note must be at most {MAX_NOTE_CHARS} characters"
        )));
    }
    Ok(Parsed {
        transaction_id,
        reason,
        amount,
        note,
        provisional: req.provisional_credit.unwrap_or(false),
    })
}

fn not_disputable(t: &CardTxRecord) -> ApiError {
    ApiError::new(
        ErrorSlug::TransactionNotDisputable,
        format!(
            "Only a settled transaction can be disputed; this one is {} {}",
            t.tx_kind, t.status
        ),
    )
}

/// Whether `t` settled (a cleared authorization or a force post) and is not a refund.
fn check_disputable(t: &CardTxRecord) -> Result<(), ApiError> {
    let settled = TxKind::parse(&t.tx_kind) == Some(TxKind::Auth)
        && TxStatus::parse(&t.status) == Some(TxStatus::Approved)
        && t.cleared > 0;
    if settled {
        Ok(())
    } else {
        Err(not_disputable(t))
    }
}

/// Whether a transaction settled at `settled_at` may still be disputed at `now`.
pub fn window_open(settled_at: i64, now: i64) -> bool {
    now.saturating_sub(settled_at) <= WINDOW_MICROS
}

/// What may still be disputed of `t`: its settled amount less its refunds less what
/// its other open or won disputes claim.
fn disputable(t: &CardTxRecord, claimed: i64) -> i64 {
    (t.cleared - t.refunded - claimed).max(0)
}

/// Begins a dispute's transaction: the master account locked (a taken-back credit may
/// reach it, and a closed card's credit goes to it), then the disputed transaction's
/// card. Answers the card's free funds with it.
pub(crate) async fn begin_on(
    state: &App,
    project_id: &str,
    transaction_id: &str,
) -> Result<(Tx, issuing_store::cards::LockedCard, CardTxRecord), ApiError> {
    let mut tx = state.store.begin().await?;
    ledger::lock_master_read_debt(&mut tx.as_batch(), project_id).await?;
    let (locked, current) = read_tx(&mut tx, project_id, transaction_id).await?;
    Ok((tx, locked, current))
}

/// Writes `dispute.updated` for `d` as it is now.
pub(crate) async fn emit(conn: &mut Conn, d: &DisputeRecord) -> Result<(), ApiError> {
    let data = view::event_data(d)?;
    events::insert(
        conn,
        &NewEvent {
            project_id: &d.project_id,
            event_type: "dispute.updated",
            card_id: Some(&d.card_id),
            order_id: None,
            payload: &data,
            now: d.updated_at,
        },
    )
    .await?;
    Ok(())
}

/// What may be disputed of `disputed` as `p` asks, every check passed: the amount.
async fn checked_amount(
    tx: &mut Tx,
    project_id: &str,
    disputed: &CardTxRecord,
    p: &Parsed,
    now: i64,
) -> Result<i64, ApiError> {
    check_disputable(disputed)?;
    let settled_at = disputed.settled_at.unwrap_or(disputed.updated_at);
    if !window_open(settled_at, now) {
        return Err(ApiError::new(
            ErrorSlug::DisputeWindowClosed,
            "The transaction settled more than 120 days ago",
        ));
    }
    if disputes::has_open(tx, project_id, &disputed.id).await? {
        return Err(already_exists());
    }
    let claimed = disputes::claimed(tx, project_id, &disputed.id).await?;
    let left = disputable(disputed, claimed);
    let amount = p.amount.map_or(left, Amount::micros);
    if amount <= 0 || amount > left {
        return Err(ApiError::new(
            ErrorSlug::InvalidAmount,
            format!(
                "At most {} of this transaction can be disputed",
                Amount::from_micros(left)
            ),
        ));
    }
    Ok(amount)
}

/// `disputes/create`. A dispute of a Lithic card is filed with Lithic between two
/// transactions of ours: the first checks the request and lets its locks go (no lock
/// is held across Lithic's calls), Lithic files it, the second checks again and
/// records it with Lithic's token. A failure at Lithic leaves nothing of ours; a
/// failure of ours after Lithic filed withdraws it there again. A crash between the
/// two leaves an open dispute at Lithic that none of ours records: the next request to
/// dispute the transaction finds it there and records it (`file_dispute`).
pub async fn create(
    state: &App,
    project_id: &str,
    req: CreateRequest,
    token: IdempotencyToken,
) -> Result<Value, ApiError> {
    let p = parse(req)?;
    let now = now_micros();
    let (mut tx, mut locked, mut disputed) = begin_on(state, project_id, &p.transaction_id).await?;
    let amount = checked_amount(&mut tx, project_id, &disputed, &p, now).await?;
    let lithic = state
        .providers
        .lithic(&locked.card.subprovider_code)
        .cloned();
    let mut filed = None;
    if let Some(lithic) = &lithic {
        drop(tx);
        let dispute_token = lithic
            .file_dispute(&super::Filing {
                project_id,
                card_id: &disputed.card_id,
                transaction_id: &disputed.id,
                amount,
                reason: p.reason,
                customer_note: p.note.as_deref(),
            })
            .await?;
        let again = async {
            let (mut tx, locked, disputed) = begin_on(state, project_id, &p.transaction_id).await?;
            if checked_amount(&mut tx, project_id, &disputed, &p, now).await? != amount {
                return Err(ApiError::new(
                    ErrorSlug::InvalidAmount,
                    "The transaction changed meanwhile; dispute it again",
                ));
            }
            Ok((tx, locked, disputed))
        };
        match again.await {
            Ok(v) => (tx, locked, disputed) = v,
            Err(e) => {
                lithic.undo_filing(&disputed.card_id, &dispute_token).await;
                return Err(e);
            }
        }
        filed = Some(dispute_token);
    }
    let d = DisputeRecord {
        id: new_id(),
        project_id: project_id.to_owned(),
        transaction_id: disputed.id.clone(),
        card_id: disputed.card_id.clone(),
        external_user_id: locked.card.external_user_id.clone(),
        amount,
        reason: p.reason.as_str().into(),
        customer_note: p.note,
        status: DisputeStatus::Submitted.as_str().into(),
        resolution_reason: None,
        provisional_credit: p.provisional,
        provider_dispute_id: filed.clone(),
        created_at: now,
        updated_at: now,
        resolved_at: None,
    };
    let recorded = async {
        disputes::insert(&mut tx, &d, None)
            .await
            .map_err(|e| match e {
                StoreError::Conflict => already_exists(),
                other => other.into(),
            })?;
        if d.provisional_credit {
            money::credit(
                &mut tx,
                &d,
                &locked.card,
                &disputed,
                CreditFrom::DisputeAccount,
                now,
            )
            .await?;
        }
        emit(&mut tx, &d).await?;
        let mut body = serde_json::to_value(view::full(&mut tx, &d).await?)
            .map_err(|_| ApiError::internal())?;
        // The answer as the pipeline's `reply` shapes every success.
        body["success"] = Value::Bool(true);
        token.complete(&mut tx, &body).await?;
        tx.commit().await.map_err(StoreError::from)?;
        Ok::<_, ApiError>(body)
    }
    .await;
    match (recorded, &lithic, &filed) {
        (Ok(body), _, _) => {
            state.deliveries_wakeup.notify_one();
            Ok(body)
        }
        (Err(e), Some(lithic), Some(dispute_token)) => {
            lithic.undo_filing(&d.card_id, dispute_token).await;
            Err(e)
        }
        (Err(e), _, _) => Err(e),
    }
}

fn already_exists() -> ApiError {
    ApiError::new(
        ErrorSlug::DisputeAlreadyExists,
        "This transaction already has an open dispute",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_is_120_days_from_settlement() {
        let day = 24 * 3600 * 1_000_000_i64;
        assert!(window_open(0, 120 * day));
        assert!(!window_open(0, 120 * day + 1));
        assert!(window_open(5, 4));
    }

    #[test]
    fn requests_are_judged_before_any_read() {
        let req = |reason: &str, amount: Option<Value>, note: Option<String>| CreateRequest {
            transaction_id: Some("t".into()),
            reason: Some(reason.into()),
            amount,
            customer_note: note,
            provisional_credit: None,
        };
        assert!(parse(req("fraud_other", None, None)).is_ok());
        let e = |r: Result<Parsed, ApiError>| r.err().map(|e| e.slug);
        assert_eq!(
            e(parse(req("FRAUD", None, None))),
            Some(ErrorSlug::ValidationError)
        );
        assert_eq!(
            e(parse(req("other", Some(Value::from("0")), None))),
            Some(ErrorSlug::InvalidAmount)
        );
        assert_eq!(
            e(parse(req("other", None, Some("x".repeat(5_001))))),
            Some(ErrorSlug::ValidationError)
        );
        assert!(parse(req("other", None, Some("é".repeat(5_000)))).is_ok());
    }
}
