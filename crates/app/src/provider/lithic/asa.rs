//! Authorization Stream Access (CONTRACT §14): Lithic asks us, signed, whether to
//! approve each authorization, and we answer `{"token", "result"}` (Lithic's
//! `asa-response`) within the subprovider's budget.
//!
//! `AUTHORIZATION` and `FINANCIAL_AUTHORIZATION` go through `network::apply` like
//! `simulate/cards/auth`, keyed by the request's `token` (`lithic:asa:<token>`): a
//! repeated request (Lithic retries once after a 5xx) gets the same answer and holds
//! once. `BALANCE_INQUIRY` answers the card's balance and changes nothing. Credit
//! authorizations are approved: money coming to the card is posted by its event. A
//! request we cannot read (`inbound`: a bad token, amount, status, currency or text) is
//! declined with a 200 and changes nothing; only our own failures answer 5xx.

use super::inbound::{self, nested, BadMessage, Token};
use super::{verified, LithicProvider, Reply, Signed, Which};
use crate::network::{self, Message, Purchase};
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
pub(super) fn message_id(token: &Token) -> String {
    format!("lithic:asa:{token}")
}

/// An ASA request's `status` (Lithic's `asa_request_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AsaStatus {
    Authorization,
    FinancialAuthorization,
    CreditAuthorization,
    FinancialCreditAuthorization,
    BalanceInquiry,
}

impl AsaStatus {
    fn parse(s: &str) -> Option<AsaStatus> {
        Some(match s {
            "AUTHORIZATION" => AsaStatus::Authorization,
            "FINANCIAL_AUTHORIZATION" => AsaStatus::FinancialAuthorization,
            "CREDIT_AUTHORIZATION" => AsaStatus::CreditAuthorization,
            "FINANCIAL_CREDIT_AUTHORIZATION" => AsaStatus::FinancialCreditAuthorization,
            "BALANCE_INQUIRY" => AsaStatus::BalanceInquiry,
            _ => return None,
        })
    }
}

/// The fields of an ASA request we use, each parsed (`inbound`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct AsaRequest {
    token: Token,
    status: AsaStatus,
    card_token: Token,
    /// `amounts.cardholder.amount`: cents of the card's currency, within our bound.
    amount_cents: i64,
    purchase: Purchase,
}

impl AsaRequest {
    fn parse(v: &Value) -> Result<AsaRequest, BadMessage> {
        let token = Token::at(v, "token")?;
        // A status Lithic does not document is not approved as a credit would be.
        let status = AsaStatus::parse(inbound::required_text(v, "status")?)
            .ok_or_else(|| BadMessage::new("status", "is not an ASA request status"))?;
        let card =
            inbound::object(v, "card")?.ok_or_else(|| BadMessage::new("card", "is required"))?;
        Ok(AsaRequest {
            token,
            status,
            card_token: Token::at(card, "token").map_err(|e| nested("card", e))?,
            amount_cents: inbound::cardholder_cents(v)?,
            purchase: inbound::purchase(v, v)?,
        })
    }
}

/// `POST /provider/lithic/{subprovider_code}/asa`: the answer to one signed request.
pub async fn asa(state: &App, code: &str, signed: &Signed<'_>, body: &[u8]) -> Reply {
    let started = Instant::now();
    let lithic = match verified(state, code, signed, body, Which::Asa).await {
        Ok(v) => v,
        Err(refused) => return refused,
    };
    let parsed = match inbound::body(body) {
        Ok(v) => AsaRequest::parse(&v).map_err(|e| (e, Token::at(&v, "token").ok())),
        Err(e) => Err((e, None)),
    };
    let req = match parsed {
        Ok(req) => req,
        Err((e, token)) => return refuse(state, code, &e.to_string(), token.as_ref(), started),
    };
    let deadline = started + lithic.asa_budget;
    // Within the budget whatever happens: a lookup stuck on a database that went away
    // is declined like a decision that took too long.
    let answered = tokio::time::timeout_at(deadline.into(), answer(state, &lithic, &req, deadline))
        .await
        .unwrap_or_else(|_| Err(ApiError::unavailable()));
    let (kind, answer) = match answered {
        Ok(a) => a,
        // Refused for what the request holds: the same request would be refused again.
        Err(e) if e.slug == ErrorSlug::ValidationError => {
            return refuse(state, code, &e.message, Some(&req.token), started)
        }
        // No database (a failover under way): declined at once, within the budget. A 5xx
        // would make Lithic retry and then decide without us, and nothing here can hold
        // the card's funds.
        Err(e) if e.slug == ErrorSlug::ServiceUnavailable => {
            tracing::warn!(subprovider = %code, "ASA request while the database is unavailable; declined");
            (
                "unavailable",
                json!({ "token": req.token.as_str(), "result": ASA_UNAVAILABLE }),
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

/// A request we cannot decide as it is (`inbound`), declined as Lithic's `asa-response`
/// allows: 200 with a declining `result`, the request's `token` when it is one. Never a
/// 5xx, which Lithic retries, nor a 4xx it does not document (its fallback might approve
/// what we never held).
fn refuse(state: &App, code: &str, why: &str, token: Option<&Token>, started: Instant) -> Reply {
    tracing::warn!(subprovider = %code, token = ?token.map(Token::as_str), reason = %why, "malformed ASA request declined");
    state.metrics.provider.asa(
        code,
        "malformed",
        ASA_UNAUTHORIZED_MERCHANT,
        started.elapsed(),
    );
    let mut answer = json!({ "result": ASA_UNAUTHORIZED_MERCHANT });
    if let Some(t) = token {
        answer["token"] = json!(t.as_str());
    }
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
    let reply = |result: &str| json!({ "token": req.token.as_str(), "result": result });
    let card = {
        let mut conn = state.store.conn().await?;
        cards::by_provider_card(&mut conn, lithic.code(), req.card_token.as_str()).await?
    };
    let Some(card) = card else {
        tracing::warn!(subprovider = %lithic.code(), "ASA request for a card we do not know; declined");
        return Ok(("unknown_card", reply(ASA_CARD_PAUSED)));
    };
    match req.status {
        AsaStatus::Authorization | AsaStatus::FinancialAuthorization => {
            let kind = if req.status == AsaStatus::Authorization {
                "authorization"
            } else {
                "financial_authorization"
            };
            let result = decide(state, lithic, &card, req, deadline).await?;
            Ok((kind, reply(result)))
        }
        AsaStatus::BalanceInquiry => {
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
        // Money to the card.
        AsaStatus::CreditAuthorization | AsaStatus::FinancialCreditAuthorization => {
            Ok(("credit", reply(ASA_APPROVED)))
        }
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
        .ok_or_else(|| ApiError::validation("amounts.cardholder.amount is out of range"))?;
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
    use crate::network::Merchant;

    const TOKEN: &str = "4f9b0c3e-8a2f-4e7b-9c1d-2f3e4a5b6c7d";
    const CARD: &str = "7ef7d65c-9023-4da3-b113-3b8583fd7951";

    fn request() -> Value {
        json!({
            "token": TOKEN,
            "status": "AUTHORIZATION",
            "card": {"token": CARD, "state": "OPEN"},
            "amount": 999,
            "amounts": {
                "cardholder": {"amount": 1250, "conversion_rate": "1.0", "currency": "USD"},
                "merchant": {"amount": 1100, "currency": "EUR"},
                "settlement": null, "hold": null,
            },
            "merchant": {"descriptor": " COFFEE SHOP ", "mcc": "5814", "country": "DEU"},
        })
    }

    #[test]
    fn parses_an_asa_request() {
        let r = AsaRequest::parse(&request()).unwrap();
        assert_eq!(
            r.amount_cents, 1250,
            "amounts.cardholder.amount, not amount"
        );
        assert_eq!(r.card_token.as_str(), CARD);
        assert_eq!(r.status, AsaStatus::Authorization);
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
    }

    #[test]
    fn refuses_what_it_cannot_decide_naming_the_field() {
        let with = |pointer: &str, v: Value| {
            let mut r = request();
            *r.pointer_mut(pointer).unwrap() = v;
            AsaRequest::parse(&r).unwrap_err().field
        };
        assert_eq!(with("/token", json!("t".repeat(245))), "token");
        assert_eq!(
            with("/token", json!(format!("{}\u{0}", &TOKEN[..35]))),
            "token"
        );
        assert_eq!(with("/card/token", json!("c")), "card.token");
        assert_eq!(with("/card", json!(null)), "card");
        assert_eq!(with("/status", json!("SOMETHING")), "status");
        assert_eq!(with("/status", json!("")), "status");
        assert_eq!(
            with("/amounts/cardholder/amount", json!(922_337_203_685_478_i64)),
            "amounts.cardholder.amount"
        );
        assert_eq!(
            with("/amounts/cardholder/amount", json!(12.5)),
            "amounts.cardholder.amount"
        );
        assert_eq!(with("/merchant/mcc", json!("58\u{0}4")), "merchant.mcc");
        assert_eq!(
            with("/amounts/merchant/currency", json!("E\u{0}R")),
            "amounts.merchant.currency"
        );
        let mut r = request();
        r.as_object_mut().unwrap().remove("token");
        assert_eq!(AsaRequest::parse(&r).unwrap_err().field, "token");
    }

    #[test]
    fn the_outcome_keeps_a_quarter_of_the_budget_at_most_100_ms() {
        let ms = Duration::from_millis;
        assert_eq!(outcome_margin(ms(2000)), ms(100));
        assert_eq!(outcome_margin(ms(400)), ms(100));
        assert_eq!(outcome_margin(ms(100)), ms(25));
        let token = Token::at(&json!({"token": TOKEN}), "token").unwrap();
        assert_eq!(message_id(&token), format!("lithic:asa:{TOKEN}"));
    }
}
