//! Disputes on Lithic cards (CONTRACT §15, §14): filed with `POST /v1/disputes`, their
//! evidence sent with `POST /v1/disputes/{token}/evidences` and a PUT of the file to the
//! `upload_url` it answers, withdrawn with `DELETE /v1/disputes/{token}`; Lithic's
//! `dispute.updated` events then drive the status (`issuing_domain::lithic::
//! dispute_status_of`), applied as the sandbox's moves are (`disputes::moves`).
//!
//! Every call answers a failure as any synchronous provider call does (500
//! `provider_error`, `provider::failed_call`), so the callers in `disputes` need not
//! know the provider's error type.

use super::client::{CallError, Retry};
use super::inbound::{self, BadMessage, Token};
use super::{path_segment, LithicProvider, Reply};
use crate::disputes::moves::{self, Change};
use crate::disputes::Filing;
use crate::App;
use issuing_domain::lithic::{
    dispute_reason, dispute_status_of, is_token, DISPUTE_STATUSES, MICROS_PER_CENT,
};
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_store::{cards, disputes, lithic as records};
use issuing_wire::{ApiError, ErrorSlug};
use reqwest::Method;
use serde_json::{json, Value};

fn failed(card_id: &str, action: &str, e: CallError) -> ApiError {
    crate::provider::failed_call(card_id, action, &e.into())
}

impl LithicProvider {
    /// Files `f` with Lithic: its dispute token. Lithic's document gives
    /// `POST /v1/disputes` no `Idempotency-Key`, so a dispute is looked up before it is
    /// filed (`GET /v1/disputes?transaction_tokens=`) and after an answer that was
    /// lost or a refusal: an open one of the same amount and reason that no dispute of ours records
    /// is one an earlier attempt filed (then crashed, or lost the answer), and is the
    /// one recorded now. Any other open dispute there refuses the request.
    pub async fn file_dispute(&self, f: &Filing<'_>) -> Result<String, ApiError> {
        let transaction_token = {
            let mut conn = self.deps.store.conn().await?;
            records::token_of_transaction(&mut conn, &self.code, f.project_id, f.transaction_id)
                .await?
        }
        .ok_or_else(|| {
            ApiError::new(
                ErrorSlug::TransactionNotDisputable,
                "Lithic holds no transaction of this one: it cannot be disputed",
            )
        })?;
        if f.amount % MICROS_PER_CENT != 0 {
            return Err(ApiError::new(
                ErrorSlug::InvalidAmount,
                "A dispute of a Lithic card is in whole cents",
            ));
        }
        let cents = f.amount / MICROS_PER_CENT;
        let reason = dispute_reason(f.reason);
        if let Some(token) = self
            .unrecorded_dispute(f.card_id, &transaction_token, cents, &reason)
            .await?
        {
            return Ok(token);
        }
        let mut body = json!({
            "transaction_token": transaction_token,
            "amount": cents,
            "reason": reason,
            "customer_filed_date": to_rfc3339(now_micros()),
        });
        if let Some(note) = f.customer_note {
            body["customer_note"] = json!(note);
        }
        let answer = self
            .client
            .call(
                "create_dispute",
                Method::POST,
                "/v1/disputes",
                Some(&body),
                None,
                // A repeat could file a second dispute: only what Lithic did not
                // process is repeated, and a lost answer is looked up.
                Retry::NotProcessedOnly,
            )
            .await;
        let answer = match answer {
            Ok(answer) => answer,
            // A lost answer, or a refusal because another request filed meanwhile (two
            // racing for one transaction): what Lithic holds now says which.
            Err(e) => {
                return match self
                    .unrecorded_dispute(f.card_id, &transaction_token, cents, &reason)
                    .await?
                {
                    Some(token) => Ok(token),
                    None => Err(failed(f.card_id, "dispute", e)),
                };
            }
        };
        answer
            .get("token")
            .and_then(Value::as_str)
            .filter(|t| is_token(t))
            .map(str::to_owned)
            .ok_or_else(|| {
                failed(
                    f.card_id,
                    "dispute",
                    CallError::Unavailable("Lithic's dispute answer has no token".into()),
                )
            })
    }

    /// The open dispute Lithic holds of `transaction_token` that no dispute of ours
    /// records, if it is of `cents` and `reason`; a refusal when it is another.
    async fn unrecorded_dispute(
        &self,
        card_id: &str,
        transaction_token: &str,
        cents: i64,
        reason: &str,
    ) -> Result<Option<String>, ApiError> {
        let query: String = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("transaction_tokens", transaction_token)
            .finish();
        let list = self
            .client
            .get("list_disputes", &format!("/v1/disputes?{query}"))
            .await
            .map_err(|e| failed(card_id, "dispute lookup", e))?;
        let open = list
            .get("data")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|d| {
                d.get("transaction_token").and_then(Value::as_str) == Some(transaction_token)
            })
            .filter(|d| {
                !matches!(
                    d.get("status").and_then(Value::as_str),
                    Some("CASE_WON" | "CASE_CLOSED")
                )
            });
        for d in open {
            let Some(token) = d
                .get("token")
                .and_then(Value::as_str)
                .filter(|t| is_token(t))
            else {
                continue;
            };
            let recorded = {
                let mut conn = self.deps.store.conn().await?;
                disputes::by_provider_id(&mut conn, token, "")
                    .await?
                    .is_some()
            };
            let same = d.get("amount").and_then(Value::as_i64) == Some(cents)
                && d.get("reason").and_then(Value::as_str) == Some(reason);
            if recorded || !same {
                return Err(ApiError::new(
                    ErrorSlug::DisputeAlreadyExists,
                    "Lithic holds another open dispute of this transaction",
                ));
            }
            tracing::info!(subprovider = %self.code, card_id, dispute_token = token, "a dispute filed with Lithic by an earlier attempt is recorded now");
            return Ok(Some(token.to_owned()));
        }
        Ok(None)
    }

    /// Withdraws at Lithic a dispute filed for a request that then failed on our side.
    /// Should this fail too, the dispute stays at Lithic unrecorded: logged for an
    /// operator, and its `dispute.updated` events are acknowledged as of an unknown
    /// dispute. (Had our commit in fact landed, Lithic's withdrawal moves ours.)
    pub async fn undo_filing(&self, card_id: &str, token: &str) {
        // Two requests racing for one transaction may both hold the token (the second
        // found the first's filing at Lithic): the one that recorded it keeps it.
        let recorded = async {
            let mut conn = self.deps.store.conn().await?;
            disputes::by_provider_id(&mut conn, token, "").await
        };
        match recorded.await {
            Ok(None) => {}
            Ok(Some(_)) => return,
            Err(e) => {
                tracing::error!(subprovider = %self.code, card_id, dispute_token = token, error = %e, "a dispute filed with Lithic may not be recorded: check it by hand");
                return;
            }
        }
        if let Err(e) = self.withdraw_dispute(card_id, token).await {
            tracing::error!(subprovider = %self.code, card_id, dispute_token = token, error = %e.message, "a dispute filed with Lithic was not recorded and could not be withdrawn there: withdraw it by hand");
        }
    }

    /// Withdraws the dispute `token` at Lithic.
    pub async fn withdraw_dispute(&self, card_id: &str, token: &str) -> Result<(), ApiError> {
        self.client
            .call(
                "withdraw_dispute",
                Method::DELETE,
                &format!("/v1/disputes/{}", path_segment(token)),
                None,
                None,
                // Withdrawing twice withdraws once.
                Retry::Transient,
            )
            .await
            .map(|_| ())
            .map_err(|e| failed(card_id, "dispute withdrawal", e))
    }

    /// Sends one evidence file of the dispute `token`: the evidence Lithic makes for
    /// it, then the bytes to its `upload_url`.
    pub async fn upload_evidence(
        &self,
        card_id: &str,
        token: &str,
        filename: &str,
        content_type: &str,
        bytes: &[u8],
    ) -> Result<(), ApiError> {
        let evidence = self
            .client
            .call(
                "create_dispute_evidence",
                Method::POST,
                &format!("/v1/disputes/{}/evidences", path_segment(token)),
                Some(&json!({ "filename": filename })),
                None,
                // A repeat makes a second evidence that is never uploaded: Lithic
                // reviews only what was.
                Retry::Transient,
            )
            .await
            .map_err(|e| failed(card_id, "dispute evidence", e))?;
        let url = evidence
            .get("upload_url")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| {
                failed(
                    card_id,
                    "dispute evidence",
                    CallError::Unavailable("Lithic's evidence answer has no upload_url".into()),
                )
            })?;
        self.client
            .upload("upload_dispute_evidence", url, content_type, bytes)
            .await
            .map_err(|e| failed(card_id, "dispute evidence upload", e))
    }
}

/// The fields of a `dispute.updated` event we use, parsed.
pub struct DisputeUpdated {
    token: Token,
    status: &'static str,
    resolution_reason: Option<String>,
}

impl DisputeUpdated {
    pub fn parse(v: &Value) -> Result<DisputeUpdated, BadMessage> {
        let status = inbound::required_text(v, "status")?;
        let status = DISPUTE_STATUSES
            .into_iter()
            .find(|s| *s == status)
            .ok_or_else(|| BadMessage::new("status", "is not a status of Lithic's disputes"))?;
        let resolution_reason = inbound::text(v, "resolution_reason")?;
        if resolution_reason.is_some_and(|r| {
            r.is_empty()
                || !r
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        }) {
            return Err(BadMessage::new(
                "resolution_reason",
                "is not a resolution reason of Lithic's",
            ));
        }
        Ok(DisputeUpdated {
            token: Token::at(v, "token")?,
            status,
            resolution_reason: resolution_reason.map(str::to_owned),
        })
    }
}

fn not_applied(why: &str) -> Reply {
    Reply::ok(json!({"received": true, "applied": false, "error": why}))
}

/// `dispute.updated`: our dispute of this token takes the status Lithic's maps to. A
/// dispute we do not know, or a move our state machine refuses (an event overtaken by
/// a later one), is acknowledged and logged: delivered again, it would be refused
/// again. An event of the status the dispute has changes nothing.
pub async fn on_updated(
    state: &App,
    lithic: &LithicProvider,
    u: &DisputeUpdated,
) -> Result<Reply, ApiError> {
    let code = lithic.code();
    let ours = {
        let mut conn = state.store.conn().await?;
        match disputes::by_provider_id(&mut conn, u.token.as_str(), "").await? {
            // Tokens are Lithic's, per program: the dispute must be of a card of this
            // subprovider.
            Some(d) => match cards::get(&mut conn, &d.project_id, &d.card_id).await? {
                Some(card) if card.subprovider_code == code => Some(d),
                _ => None,
            },
            None => None,
        }
    };
    let Some(d) = ours else {
        tracing::warn!(subprovider = %code, dispute_token = %u.token, "dispute.updated of a dispute we do not know; acknowledged");
        return Ok(not_applied("unknown dispute"));
    };
    let Some((to, reason)) = dispute_status_of(u.status, u.resolution_reason.as_deref()) else {
        return Ok(not_applied("unknown status"));
    };
    let note = format!("lithic: {}", u.status);
    match moves::apply(
        state,
        &d.project_id,
        &d.id,
        Change::Provider(to, reason),
        Some(&note),
    )
    .await
    {
        Ok(_) => Ok(Reply::ok(json!({"received": true}))),
        Err(e)
            if matches!(
                e.slug,
                ErrorSlug::InvalidStatusTransition | ErrorSlug::ValidationError
            ) =>
        {
            tracing::warn!(subprovider = %code, dispute_id = %d.id, lithic_status = u.status, error = %e.message, "dispute.updated refused by the dispute's state machine; acknowledged");
            Ok(not_applied(&e.message))
        }
        Err(e) => Err(e),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const T: &str = "b24230fa-181e-4b31-9a5c-276747e619a0";

    #[test]
    fn reads_dispute_updated() {
        let u = DisputeUpdated::parse(&json!({"token": T, "status": "CASE_CLOSED",
            "resolution_reason": "NO_DISPUTE_RIGHTS_3DS"}))
        .unwrap();
        assert_eq!(u.status, "CASE_CLOSED");
        assert_eq!(
            u.resolution_reason.as_deref(),
            Some("NO_DISPUTE_RIGHTS_3DS")
        );
        let field = |v: Value| DisputeUpdated::parse(&v).err().map(|e| e.field);
        assert_eq!(field(json!({"token": T})).as_deref(), Some("status"));
        assert_eq!(
            field(json!({"token": T, "status": "LOST"})).as_deref(),
            Some("status")
        );
        assert_eq!(
            field(json!({"token": "x", "status": "NEW"})).as_deref(),
            Some("token")
        );
        assert_eq!(
            field(json!({"token": T, "status": "CASE_WON", "resolution_reason": "won it"}))
                .as_deref(),
            Some("resolution_reason")
        );
        assert!(DisputeUpdated::parse(
            &json!({"token": T, "status": "NEW", "resolution_reason": null})
        )
        .is_ok());
    }
}
