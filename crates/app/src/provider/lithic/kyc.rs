//! KYC through Lithic account holders (CONTRACT §14): `POST /v1/account_holders` with
//! workflow `KYC_BASIC` answers at once (`ACCEPTED`, `PENDING_*`, `REJECTED`); later
//! changes arrive as `account_holder.*` events.
//!
//! Account holder creation has no idempotency key. Its `external_id` is a UUID derived
//! from our cardholder id, recorded before the first attempt; a create whose outcome is
//! unknown (no answer, a 5xx) is looked up by that `external_id` before it is tried
//! again, so a cardholder never gets two account holders.

use super::client::{CallError, Retry};
use super::{path_segment, LithicProvider};
use crate::App;
use issuing_domain::kyc::{KycData, KycLevel, KycState, KycStatus, RegistrationStatus};
use issuing_domain::lithic::{account_holder_external_id, address_country, kyc_state_of};
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_store::cardholders::{self, CardholderRecord};
use issuing_store::lithic::{self as records, AccountHolder, HolderState};
use issuing_wire::ApiError;
use reqwest::Method;
use serde_json::{json, Value};

/// Rounds of "look up, then create" for one submission.
const MAX_CREATE_ROUNDS: u32 = 3;

/// What Lithic said about an account holder.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Answer {
    token: String,
    account_token: Option<String>,
    status: String,
    reasons: Vec<String>,
}

impl Answer {
    /// An account holder as `POST` or `GET` answers it: the verification
    /// application's status where given (the top-level one is deprecated).
    fn of(v: &Value) -> Option<Answer> {
        let app = v.get("verification_application");
        let status = app
            .and_then(|a| a.get("status"))
            .or_else(|| v.get("status"))
            .and_then(Value::as_str)?;
        let reasons = app
            .and_then(|a| a.get("status_reasons"))
            .or_else(|| v.get("status_reasons"))
            .or_else(|| v.get("status_reason"));
        Some(Answer {
            token: v.get("token").and_then(Value::as_str)?.to_owned(),
            account_token: v
                .get("account_token")
                .and_then(Value::as_str)
                .map(str::to_owned),
            status: status.to_owned(),
            reasons: reasons
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// Our states for Lithic's status; a status Lithic adds later waits as pending.
    fn state(&self) -> KycState {
        kyc_state_of(&self.status).unwrap_or(KycState {
            registration_status: RegistrationStatus::Pending,
            kyc_status: KycStatus::Pending,
            kyc_level: KycLevel::None,
        })
    }
}

/// `POST /v1/account_holders` body: a `Kyc` with workflow `KYC_BASIC`. The fields it
/// needs were checked by `issuing_domain::lithic::missing_for_kyc_basic`.
fn kyc_request(external_id: &str, kyc: &KycData, now: i64) -> Value {
    let address = kyc.address.clone().unwrap_or_default();
    let country = issuing_domain::country::alpha3_of(address_country(kyc)).unwrap_or("USA");
    let mut addr = json!({
        "address1": address.line1,
        "city": address.city,
        "state": address.state,
        "postal_code": address.postal_code,
        "country": country,
    });
    if let Some(line2) = &address.line2 {
        addr["address2"] = json!(line2);
    }
    json!({
        "workflow": "KYC_BASIC",
        "external_id": external_id,
        // The project accepted the program's terms for its user when it submitted them.
        "tos_timestamp": to_rfc3339(now),
        "individual": {
            "first_name": kyc.first_name,
            "last_name": kyc.last_name,
            "dob": kyc.birth_date,
            "email": kyc.email,
            "phone_number": kyc.phone_number_full,
            "government_id": kyc.id_document.as_ref().and_then(|d| d.number.clone()),
            "address": addr,
        },
    })
}

impl LithicProvider {
    /// Submits a cardholder's KYC to Lithic and answers the states it leads to; the
    /// account holder is recorded. A cardholder that has an account holder already is
    /// not created again: its current status is read instead.
    pub async fn submit_kyc(
        &self,
        holder: &CardholderRecord,
        kyc: &KycData,
    ) -> Result<KycState, ApiError> {
        let now = now_micros();
        let external_id = account_holder_external_id(&holder.id);
        let record = {
            let mut conn = self.deps.store.conn().await?;
            records::insert_holder_if_absent(
                &mut conn,
                &AccountHolder {
                    cardholder_id: holder.id.clone(),
                    project_id: holder.project_id.clone(),
                    subprovider_code: self.code.clone(),
                    external_id: external_id.clone(),
                    token: None,
                    account_token: None,
                    status: None,
                    status_reasons: None,
                    created_at: now,
                    updated_at: now,
                },
            )
            .await?;
            records::holder_of_cardholder(&mut conn, &holder.project_id, &holder.id)
                .await?
                .ok_or_else(ApiError::internal)?
        };
        let answer = match &record.token {
            Some(token) => self.read_holder(token).await,
            None => {
                // A row from an earlier submission: its create may have succeeded.
                let earlier = record.created_at < now;
                self.create_holder(&external_id, kyc, earlier, now).await
            }
        }
        .map_err(|e| crate::provider::failed_call(&holder.id, "account holder", &e.into()))?;
        self.record(&record, &answer).await?;
        Ok(answer.state())
    }

    /// `GET /v1/account_holders/{token}`.
    async fn get_holder(&self, token: &str) -> Result<Value, CallError> {
        self.client
            .get(
                "get_account_holder",
                &format!("/v1/account_holders/{}", path_segment(token)),
            )
            .await
    }

    async fn read_holder(&self, token: &str) -> Result<Answer, CallError> {
        let v = self.get_holder(token).await?;
        Answer::of(&v).ok_or_else(|| malformed("account holder"))
    }

    /// The account holder created for `external_id` earlier, if Lithic has one.
    async fn find_holder(&self, external_id: &str) -> Result<Option<Answer>, CallError> {
        let v = self
            .client
            .get(
                "find_account_holder",
                &format!("/v1/account_holders?external_id={external_id}&limit=1"),
            )
            .await?;
        Ok(v.get("data")
            .and_then(Value::as_array)
            .and_then(|d| d.first())
            .and_then(Answer::of))
    }

    async fn create_holder(
        &self,
        external_id: &str,
        kyc: &KycData,
        look_first: bool,
        now: i64,
    ) -> Result<Answer, CallError> {
        let body = kyc_request(external_id, kyc, now);
        let mut last = CallError::Unavailable("no attempt".into());
        for round in 0..MAX_CREATE_ROUNDS {
            if look_first || round > 0 {
                if let Some(found) = self.find_holder(external_id).await? {
                    return Ok(found);
                }
            }
            match self
                .client
                .call(
                    "create_account_holder",
                    Method::POST,
                    "/v1/account_holders",
                    Some(&body),
                    None,
                    Retry::NotProcessedOnly,
                )
                .await
            {
                Ok(v) => return Answer::of(&v).ok_or_else(|| malformed("account holder")),
                Err(e @ CallError::Refused { .. }) => return Err(e),
                // Unknown outcome: look it up before the next create.
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    async fn record(&self, record: &AccountHolder, answer: &Answer) -> Result<(), ApiError> {
        let reasons = serde_json::to_string(&answer.reasons).unwrap_or_else(|_| "[]".into());
        let mut conn = self.deps.store.conn().await?;
        records::update_holder(
            &mut conn,
            &record.cardholder_id,
            &HolderState {
                token: &answer.token,
                account_token: answer.account_token.as_deref(),
                status: &answer.status,
                status_reasons: &reasons,
                now: now_micros(),
            },
        )
        .await?;
        Ok(())
    }

    /// An `account_holder.created` or `account_holder.verification` event: the
    /// cardholder's states follow the account holder's new status. Events of account
    /// holders that are not ours are ignored.
    pub async fn on_holder_event(
        &self,
        state: &App,
        event_type: &str,
        body: &Value,
    ) -> Result<(), ApiError> {
        let Some(answer) = Answer::of(body) else {
            return Err(ApiError::validation(
                "the account holder event has no token or status",
            ));
        };
        let mut record = {
            let mut conn = state.store.conn().await?;
            records::holder_by_token_or_external_id(&mut conn, &self.code, &answer.token, None)
                .await?
        };
        if record.is_none() {
            // Our create may have succeeded without our hearing the answer: Lithic
            // knows the external id we gave it.
            let external_id = match self.read_external_id(&answer.token).await {
                Ok(id) => id,
                Err(e) if e.is_not_found() => None,
                Err(e) => {
                    return Err(crate::provider::failed_call(
                        &answer.token,
                        "account holder",
                        &e.into(),
                    ))
                }
            };
            if let Some(id) = external_id {
                let mut conn = state.store.conn().await?;
                record = records::holder_by_token_or_external_id(
                    &mut conn,
                    &self.code,
                    &answer.token,
                    Some(&id),
                )
                .await?;
            }
        }
        let Some(record) = record else {
            tracing::info!(subprovider = %self.code, "account holder event for an account holder that is not ours; ignored");
            return Ok(());
        };
        // `created` only repeats the status the create answered; a verification that
        // came first must not be undone by it.
        if event_type == "account_holder.created" && record.status.is_some() {
            return Ok(());
        }
        self.record(&record, &answer).await?;
        let mut tx = state.store.begin().await?;
        let Some(mut holder) =
            cardholders::get(&mut tx, &record.project_id, &record.cardholder_id).await?
        else {
            return Ok(());
        };
        holder.set_kyc_state(&answer.state(), now_micros());
        cardholders::update_kyc(&mut tx, &holder).await?;
        tx.commit().await.map_err(issuing_store::StoreError::from)?;
        Ok(())
    }

    async fn read_external_id(&self, token: &str) -> Result<Option<String>, CallError> {
        let v = self.get_holder(token).await?;
        Ok(v.get("external_id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_owned))
    }
}

fn malformed(what: &str) -> CallError {
    CallError::Unavailable(format!("Lithic's {what} answer could not be read"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use issuing_domain::kyc::{Address, IdDocument};

    #[test]
    fn reads_post_and_get_answers() {
        let post = json!({"token": "t", "account_token": "a", "status": "REJECTED",
            "status_reasons": ["NAME_VERIFICATION_FAILURE"], "created": "2024-01-01T00:00:00Z"});
        let a = Answer::of(&post).unwrap();
        assert_eq!((a.status.as_str(), a.reasons.len()), ("REJECTED", 1));
        assert_eq!(a.state().kyc_status, KycStatus::Rejected);
        let get = json!({"token": "t", "account_token": "a", "status": "PENDING_REVIEW",
            "verification_application": {"status": "ACCEPTED", "status_reasons": []}});
        assert_eq!(
            Answer::of(&get).unwrap().state().kyc_status,
            KycStatus::Approved
        );
        let created_event = json!({"token": "t", "status": "ACCEPTED", "status_reason": []});
        assert_eq!(Answer::of(&created_event).unwrap().account_token, None);
        let unknown = json!({"token": "t", "status": "SOMETHING_NEW"});
        assert_eq!(
            Answer::of(&unknown).unwrap().state().kyc_status,
            KycStatus::Pending
        );
        assert!(Answer::of(&json!({"status": "ACCEPTED"})).is_none());
    }

    #[test]
    fn builds_a_kyc_basic_request() {
        let kyc = KycData {
            first_name: "Ada".into(),
            last_name: "Lovelace".into(),
            birth_date: "1990-01-01".into(),
            email: "ada@example.com".into(),
            phone_number_full: "+14155550123".into(),
            country_iso: "US".into(),
            address: Some(Address {
                line1: Some("1 Main St".into()),
                city: Some("Omaha".into()),
                state: Some("NE".into()),
                postal_code: Some("68022".into()),
                ..Default::default()
            }),
            id_document: Some(IdDocument {
                number: Some("111-23-1412".into()),
                ..Default::default()
            }),
        };
        let body = kyc_request("e", &kyc, 0);
        assert_eq!(body["workflow"], "KYC_BASIC");
        assert_eq!(body["external_id"], "e");
        assert_eq!(body["individual"]["address"]["country"], "USA");
        assert_eq!(body["individual"]["government_id"], "111-23-1412");
        assert!(body["individual"]["address"].get("address2").is_none());
        assert_eq!(body["tos_timestamp"], "1970-01-01T00:00:00.000000Z");
    }
}
