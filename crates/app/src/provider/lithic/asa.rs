//! Authorization Stream Access (CONTRACT §14): Lithic asks us, signed, whether to
//! approve each authorization, and we answer `{"token", "result"}` (Lithic's
//! `asa-response`) within the subprovider's budget.
//!
//! `AUTHORIZATION` and `FINANCIAL_AUTHORIZATION` go through `network::apply` like
//! `simulate/cards/auth`, keyed by the request's `token` (`lithic:asa:<token>`): a
//! repeated request (Lithic retries once after a 5xx) gets the same answer and holds
//! once. `BALANCE_INQUIRY` answers the card's balance and changes nothing. Credit
//! authorizations are approved: money coming to the card is posted by its event.

use super::{verified, LithicProvider, Reply, Signed, Which};
use crate::network::{self, Merchant, Message, Purchase};
use crate::App;
use issuing_domain::lithic::{
    amount_to_cents_floor, asa_result, cents_to_amount, ASA_APPROVED, ASA_CARD_PAUSED,
    ASA_UNAUTHORIZED_MERCHANT,
};
use issuing_store::cards::{self, CardRecord};
use issuing_store::ledger;
use issuing_wire::{ApiError, ErrorSlug};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Our answer while the database is unavailable: the decline we give when we cannot
/// decide in time (Lithic's `asa-response` has no result of its own for an issuer that
/// is down; any result but `APPROVED` declines).
const ASA_UNAVAILABLE: &str = ASA_UNAUTHORIZED_MERCHANT;

/// The network message id of an ASA request: its transaction token.
pub(super) fn message_id(token: &str) -> String {
    format!("lithic:asa:{token}")
}

/// The fields of an ASA request we use.
#[derive(Debug, Clone, PartialEq, Eq)]
struct AsaRequest {
    token: String,
    status: String,
    card_token: String,
    /// `amounts.cardholder.amount`: cents of the card's currency.
    amount_cents: i64,
    purchase: Purchase,
}

/// Lithic's merchant (descriptor, MCC, alpha-3 country) as ours (alpha-2 for rules).
pub(super) fn merchant_of(m: Option<&Value>) -> Merchant {
    let text = |f: &str| {
        m.and_then(|m| m.get(f))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    let country = text("country");
    Merchant {
        name: text("descriptor"),
        mcc: text("mcc"),
        // An unknown code is kept as sent rather than lost.
        country: issuing_domain::country::alpha2_of(&country)
            .map(str::to_owned)
            .unwrap_or(country),
    }
}

/// The merchant side of a purchase from an `amounts.merchant` object (minor units).
pub(super) fn purchase_of(merchant: Option<&Value>, amounts_merchant: Option<&Value>) -> Purchase {
    let currency = amounts_merchant
        .and_then(|a| a.get("currency"))
        .and_then(Value::as_str)
        .filter(|c| c.len() == 3)
        .unwrap_or("USD")
        .to_ascii_uppercase();
    let minor = amounts_merchant
        .and_then(|a| a.get("amount"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    Purchase {
        merchant: merchant_of(merchant),
        merchant_currency: currency,
        merchant_amount: cents_to_amount(minor.abs()).unwrap_or_default(),
    }
}

impl AsaRequest {
    fn parse(v: &Value) -> Option<AsaRequest> {
        let text = |v: &Value, f: &str| v.get(f).and_then(Value::as_str).map(str::to_owned);
        let amounts = v.get("amounts");
        let amount_cents = amounts
            .and_then(|a| a.get("cardholder"))
            .and_then(|c| c.get("amount"))
            .or_else(|| v.get("amount"))
            .and_then(Value::as_i64)?;
        Some(AsaRequest {
            token: text(v, "token")?,
            status: text(v, "status")?,
            card_token: text(v.get("card")?, "token")?,
            amount_cents,
            purchase: purchase_of(v.get("merchant"), amounts.and_then(|a| a.get("merchant"))),
        })
    }
}

/// `POST /provider/lithic/{subprovider_code}/asa`: the answer to one signed request.
pub async fn asa(state: &App, code: &str, signed: &Signed<'_>, body: &[u8]) -> Reply {
    let started = Instant::now();
    let (lithic, value) = match verified(state, code, signed, body, Which::Asa).await {
        Ok(v) => v,
        Err(refused) => return refused,
    };
    let Some(req) = AsaRequest::parse(&value) else {
        return Reply::error(
            400,
            "not an ASA request: token, status, card.token and amounts are required",
        );
    };
    let deadline = started + lithic.asa_budget;
    // Within the budget whatever happens: a lookup stuck on a database that went away
    // is declined like a decision that took too long.
    let answered = tokio::time::timeout_at(deadline.into(), answer(state, &lithic, &req, deadline))
        .await
        .unwrap_or_else(|_| Err(ApiError::unavailable()));
    let (kind, answer) = match answered {
        Ok(a) => a,
        // No database (a failover under way): declined at once, within the budget. A 5xx
        // would make Lithic retry and then decide without us, and nothing here can hold
        // the card's funds.
        Err(e) if e.slug == ErrorSlug::ServiceUnavailable => {
            tracing::warn!(subprovider = %code, "ASA request while the database is unavailable; declined");
            (
                "unavailable",
                json!({ "token": req.token, "result": ASA_UNAVAILABLE }),
            )
        }
        Err(e) => {
            // Lithic retries once after a 5xx, then decides without us.
            tracing::error!(subprovider = %code, slug = %e.slug, error = %e.message, "ASA request failed");
            return Reply::error(500, "internal error");
        }
    };
    let result = answer
        .get("result")
        .and_then(Value::as_str)
        .map_or(ASA_UNAUTHORIZED_MERCHANT, static_result);
    state
        .metrics
        .provider
        .asa(code, kind, result, started.elapsed());
    Reply::ok(answer)
}

/// Our results as the static names the metrics take.
fn static_result(result: &str) -> &'static str {
    [
        ASA_APPROVED,
        issuing_domain::lithic::ASA_INSUFFICIENT_FUNDS,
        ASA_CARD_PAUSED,
        ASA_UNAUTHORIZED_MERCHANT,
        issuing_domain::lithic::ASA_VELOCITY_EXCEEDED,
    ]
    .into_iter()
    .find(|r| *r == result)
    .unwrap_or("other")
}

/// The answer to one request, and its status for the metrics.
async fn answer(
    state: &App,
    lithic: &Arc<LithicProvider>,
    req: &AsaRequest,
    deadline: Instant,
) -> Result<(&'static str, Value), ApiError> {
    let reply = |result: &str| json!({ "token": req.token, "result": result });
    let card = {
        let mut conn = state.store.conn().await?;
        cards::by_provider_card(&mut conn, lithic.code(), &req.card_token).await?
    };
    let Some(card) = card else {
        tracing::warn!(subprovider = %lithic.code(), "ASA request for a card we do not know; declined");
        return Ok(("unknown_card", reply(ASA_CARD_PAUSED)));
    };
    match req.status.as_str() {
        "AUTHORIZATION" | "FINANCIAL_AUTHORIZATION" => {
            let kind = if req.status == "AUTHORIZATION" {
                "authorization"
            } else {
                "financial_authorization"
            };
            let result = decide(state, lithic, &card, req, deadline).await?;
            Ok((kind, reply(result)))
        }
        "BALANCE_INQUIRY" => {
            let (available, held) = {
                let mut conn = state.store.conn().await?;
                ledger::card_funds(&mut conn, &card.project_id, &card.id).await?
            };
            let total = issuing_wire::Amount::from_micros(available.micros() + held.micros());
            let mut a = reply(ASA_APPROVED);
            a["balance"] = json!({
                "amount": amount_to_cents_floor(total),
                "available": amount_to_cents_floor(available),
            });
            Ok(("balance_inquiry", a))
        }
        // CREDIT_AUTHORIZATION, FINANCIAL_CREDIT_AUTHORIZATION: money to the card.
        _ => Ok(("credit", reply(ASA_APPROVED))),
    }
}

/// What an ASA decision keeps of its budget for after the decision webhook: writing
/// the webhook's outcome (or `on_timeout`'s) and answering Lithic. A quarter of the
/// budget, at most `OUTCOME_MARGIN`.
fn outcome_margin(budget: Duration) -> Duration {
    (budget / 4).min(OUTCOME_MARGIN)
}

/// The most an ASA decision keeps for writing its outcome (see `outcome_margin`).
const OUTCOME_MARGIN: Duration = Duration::from_millis(100);

/// Decides an authorization through the same path as `simulate/cards/auth`, within
/// `deadline`. The project's decision webhook is given what remains of it less
/// `outcome_margin`, so a slow endpoint is decided by its `on_timeout` within the
/// budget and our answer is what our ledger holds.
///
/// The decision runs as its own task, and the deadline is still enforced around it as
/// a last resort (a writer stalled past the budget): then we decline, and a hold the
/// task still makes is released when Lithic reports the authorization it declined (an
/// `AUTHORIZATION` event whose result is not `APPROVED`).
async fn decide(
    state: &App,
    lithic: &Arc<LithicProvider>,
    card: &CardRecord,
    req: &AsaRequest,
    deadline: Instant,
) -> Result<&'static str, ApiError> {
    if req.amount_cents < 0 {
        tracing::warn!(subprovider = %lithic.code(), "ASA authorization with a negative amount; declined");
        return Ok(ASA_UNAUTHORIZED_MERCHANT);
    }
    let amount = cents_to_amount(req.amount_cents)
        .ok_or_else(|| ApiError::validation("amount out of range"))?;
    let decision_deadline = deadline
        .checked_sub(outcome_margin(lithic.asa_budget))
        .unwrap_or(deadline);
    let task = {
        let state = state.clone();
        let project_id = card.project_id.clone();
        let message = Message::Authorization {
            card_id: card.id.clone(),
            amount,
            purchase: req.purchase.clone(),
        };
        let token = req.token.clone();
        tokio::spawn(async move {
            let id = message_id(&token);
            // Its events find the transaction by this message id (`events.rs`): no
            // second write.
            let applied = network::apply_within(
                &state,
                &project_id,
                Some(&id),
                message,
                Some(decision_deadline),
            )
            .await?;
            Ok::<_, ApiError>(applied.tx)
        })
    };
    let tx = match tokio::time::timeout_at(deadline.into(), task).await {
        Ok(Ok(result)) => result?,
        Ok(Err(join)) => {
            tracing::error!(error = %join, "ASA decision task failed");
            return Err(ApiError::internal());
        }
        Err(_) => {
            tracing::warn!(subprovider = %lithic.code(), "ASA decision took longer than the budget; declined");
            return Ok(ASA_UNAUTHORIZED_MERCHANT);
        }
    };
    Ok(if tx.status == "declined" {
        asa_result(tx.failure_reason.as_deref())
    } else {
        // Approved when it was decided (a repeat may find it cleared or released).
        ASA_APPROVED
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_an_asa_request() {
        let body = json!({
            "token": "4f9b0c3e-8a2f-4e7b-9c1d-2f3e4a5b6c7d",
            "status": "AUTHORIZATION",
            "card": {"token": "c", "state": "OPEN"},
            "amount": 999,
            "amounts": {
                "cardholder": {"amount": 1250, "conversion_rate": "1.0", "currency": "USD"},
                "merchant": {"amount": 1100, "currency": "EUR"},
                "settlement": null, "hold": null,
            },
            "merchant": {"descriptor": " COFFEE SHOP ", "mcc": "5814", "country": "DEU"},
        });
        let r = AsaRequest::parse(&body).unwrap();
        assert_eq!(
            r.amount_cents, 1250,
            "amounts.cardholder.amount, not amount"
        );
        assert_eq!(r.card_token, "c");
        assert_eq!(
            r.purchase.merchant,
            Merchant {
                name: "COFFEE SHOP".into(),
                mcc: "5814".into(),
                country: "DE".into()
            }
        );
        assert_eq!(r.purchase.merchant_currency, "EUR");
        assert_eq!(r.purchase.merchant_amount.micros(), 11_000_000);
        assert!(AsaRequest::parse(&json!({"token": "t"})).is_none());
    }

    #[test]
    fn the_outcome_keeps_a_quarter_of_the_budget_at_most_100_ms() {
        let ms = Duration::from_millis;
        assert_eq!(outcome_margin(ms(2000)), ms(100));
        assert_eq!(outcome_margin(ms(400)), ms(100));
        assert_eq!(outcome_margin(ms(100)), ms(25));
        assert_eq!(message_id("t"), "lithic:asa:t");
    }
}
