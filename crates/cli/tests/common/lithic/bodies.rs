//! Lithic's objects as the fake builds them: cards, account holders, ASA requests,
//! transactions and their events. Each is checked against Lithic's document before it
//! is sent (see `spec.rs`), so the fake cannot drift from what Lithic sends.

use serde_json::{json, Value};

/// A fresh random UUID (version 4).
pub fn uuid() -> String {
    let b: [u8; 16] = rand::random();
    let mut b = b;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// Now, as Lithic writes times (RFC 3339, UTC).
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

pub fn error(message: &str) -> Value {
    json!({ "debugging_request_id": uuid(), "message": message })
}

/// A merchant as the network reports it.
#[derive(Debug, Clone)]
pub struct Merchant {
    pub descriptor: String,
    pub mcc: String,
    /// ISO alpha-3.
    pub country: String,
}

impl Merchant {
    pub fn coffee() -> Merchant {
        Merchant {
            descriptor: "COFFEE SHOP".into(),
            mcc: "5814".into(),
            country: "USA".into(),
        }
    }

    pub fn json(&self) -> Value {
        json!({
            "acceptor_id": "333301802529120",
            "acquiring_institution_id": "191231",
            "city": "NEW YORK",
            "country": self.country,
            "descriptor": self.descriptor,
            "mcc": self.mcc,
            "state": "NY",
            "postal_code": "10001",
            "street_address": null,
            "phone_number": null,
        })
    }
}

/// A card as `POST /v1/cards` answers it (`pci_card_response`).
pub fn card(token: &str, account_token: &str, state: &str, memo: &str, pan: &str) -> Value {
    json!({
        "token": token,
        "account_token": account_token,
        "card_program_token": "00000000-0000-0000-1000-000000000000",
        "created": now(),
        "funding": null,
        "last_four": &pan[pan.len() - 4..],
        "pin_status": "NOT_SET",
        "spend_limit": 0,
        "spend_limit_duration": "FOREVER",
        "state": state,
        "type": "VIRTUAL",
        "memo": memo,
        "exp_month": "06",
        "exp_year": "2031",
        "pan": pan,
        "cvv": "776",
    })
}

/// The card of an ASA request (`asa_request_card`).
pub fn asa_card(card: &Value) -> Value {
    json!({
        "token": card["token"],
        "last_four": card["last_four"],
        "memo": card["memo"],
        "spend_limit": 0,
        "spend_limit_duration": "FOREVER",
        "state": card["state"],
        "type": "VIRTUAL",
    })
}

/// An ASA request (`card_authorization.approval_request`).
pub fn asa_request(token: &str, status: &str, card: &Value, cents: i64, m: &Merchant) -> Value {
    json!({
        "event_type": "card_authorization.approval_request",
        "token": token,
        "status": status,
        "acquirer_fee": 0,
        "amount": cents,
        "authorization_amount": cents,
        "settled_amount": 0,
        "merchant_amount": cents,
        "merchant_currency": "USD",
        "cardholder_currency": "USD",
        "cash_amount": 0,
        "created": now(),
        "amounts": {
            "cardholder": {"amount": cents, "conversion_rate": "1.000000", "currency": "USD"},
            "merchant": {"amount": cents, "currency": "USD"},
            "settlement": null,
            "hold": null,
        },
        "avs": {"address": "123 Evergreen Terrace", "zipcode": "95006", "address_on_file_match": "MATCH"},
        "card": asa_card(card),
        "merchant": m.json(),
        "name_validation": null,
        "service_location": null,
        "network": "VISA",
        "transaction_initiator": "CARDHOLDER",
    })
}

/// The `detailed_results` entry of a transaction `result` (`decline_result` and
/// `detailed_result` are different lists).
fn detailed(result: &str) -> &str {
    match result {
        "UNKNOWN_HOST_TIMEOUT" => "CUSTOMER_ASA_TIMEOUT",
        "USER_TRANSACTION_LIMIT" => "CARD_SPEND_LIMIT_EXCEEDED",
        other => other,
    }
}

/// One event of a transaction (`transaction_event`).
pub fn event(kind: &str, cents: i64, result: &str, polarity: &str) -> Value {
    json!({
        "token": uuid(),
        "type": kind,
        "amount": cents,
        "amounts": {
            "cardholder": {"amount": cents, "conversion_rate": "1.000000", "currency": "USD"},
            "merchant": {"amount": cents, "currency": "USD"},
            "settlement": null,
        },
        "created": now(),
        "detailed_results": [detailed(result)],
        "effective_polarity": polarity,
        "result": result,
        "rule_results": [],
        "network_info": null,
    })
}

/// A settlement detail (`SettlementDetail`) of one event, settled at `created` (its
/// date is the report's). The detail's token is the event's: stable across pages.
pub fn settlement_detail(
    event_token: &str,
    tx_token: &str,
    card_token: &str,
    account_token: Value,
    kind: &str,
    gross_cents: i64,
    created: &str,
) -> Value {
    let date = created.get(..10).unwrap_or_default();
    let at = created;
    json!({
        "account_token": account_token,
        "card_program_token": null,
        "card_token": card_token,
        "created": at,
        "currency": "USD",
        "disputes_gross_amount": 0,
        "event_tokens": [event_token],
        "institution": "00001",
        "interchange_fee_extended_precision": 0,
        "interchange_gross_amount": 0,
        "network": "VISA",
        "other_fees_details": {},
        "other_fees_gross_amount": 0,
        "report_date": date,
        "settlement_date": date,
        "token": event_token,
        "transaction_token": tx_token,
        "transactions_gross_amount": gross_cents,
        "type": kind,
        "updated": at,
    })
}

/// A transaction (`card_transaction`) with its events; the status and amounts follow
/// from them.
pub fn transaction(
    token: &str,
    card: &Value,
    m: &Merchant,
    status: &str,
    result: &str,
    events: &[Value],
) -> Value {
    let amount = |kinds: &[&str]| -> i64 {
        events
            .iter()
            .filter(|e| kinds.contains(&e["type"].as_str().unwrap_or_default()))
            .map(|e| e["amount"].as_i64().unwrap_or(0))
            .sum()
    };
    let authorized = amount(&["AUTHORIZATION", "FINANCIAL_AUTHORIZATION"]);
    let settled = amount(&["CLEARING", "FINANCIAL_AUTHORIZATION", "RETURN"]);
    let money = |cents: i64| json!({"amount": cents, "currency": "USD"});
    json!({
        "token": token,
        "account_token": card["account_token"],
        "card_token": card["token"],
        "financial_account_token": null,
        "acquirer_fee": 0,
        "acquirer_reference_number": null,
        "amount": if settled != 0 { settled } else { authorized },
        "authorization_amount": authorized,
        "settled_amount": settled,
        "merchant_amount": authorized,
        "merchant_authorization_amount": authorized,
        "merchant_currency": "USD",
        "amounts": {
            "cardholder": {"amount": settled, "conversion_rate": "1.000000", "currency": "USD"},
            "hold": money(if status == "PENDING" { authorized } else { 0 }),
            "merchant": money(settled),
            "settlement": money(settled),
        },
        "authorization_code": "071471",
        "avs": null,
        "cardholder_authentication": null,
        "created": events.first().map_or_else(now, |e| e["created"].as_str().unwrap_or_default().to_owned()),
        "updated": now(),
        "events": events,
        "merchant": m.json(),
        "service_location": null,
        "network": "VISA",
        "network_risk_score": null,
        "pos": {
            "entry_mode": {"card": "NOT_PRESENT", "cardholder": "NOT_PRESENT", "pan": "ECOMMERCE", "pin_entered": false},
            "terminal": {"attended": false, "card_retention_capable": false, "on_premise": false,
                "operator": "UNKNOWN", "partial_approval_capable": false, "pin_capability": "NOT_CAPABLE",
                "type": "UNKNOWN"},
        },
        "result": result,
        "status": status,
        "tags": {},
        "token_info": null,
    })
}

/// An account holder as `POST /v1/account_holders` answers it.
pub fn holder_created(token: &str, account_token: &str, status: &str, reasons: &[&str]) -> Value {
    json!({
        "token": token,
        "account_token": account_token,
        "status": status,
        "status_reasons": reasons,
        "created": now(),
    })
}

/// An account holder as `GET /v1/account_holders[/{token}]` answers it.
pub fn holder(
    token: &str,
    account_token: &str,
    external_id: &str,
    status: &str,
    reasons: &[&str],
    individual: &Value,
) -> Value {
    let mut ind = individual.clone();
    if let Some(o) = ind.as_object_mut() {
        o.remove("government_id");
        o.insert("entity_token".into(), json!(uuid()));
    }
    json!({
        "token": token,
        "account_token": account_token,
        "created": now(),
        "external_id": external_id,
        "user_type": "INDIVIDUAL",
        "status": status,
        "status_reasons": reasons,
        "individual": ind,
        "email": individual["email"],
        "phone_number": individual["phone_number"],
        "verification_application": {
            "created": now(),
            "updated": now(),
            "status": status,
            "status_reasons": reasons,
        },
    })
}

/// A dispute as `POST /v1/disputes` makes it (`dispute-v1`), `NEW`.
pub fn dispute(token: &str, request: &Value) -> Value {
    json!({
        "token": token,
        "transaction_token": request["transaction_token"],
        "amount": request["amount"],
        "reason": request["reason"],
        "customer_filed_date": request.get("customer_filed_date").cloned().unwrap_or(Value::Null),
        "customer_note": request.get("customer_note").cloned().unwrap_or(Value::Null),
        "created": now(),
        "status": "NEW",
        "resolution_reason": null,
        "resolution_date": null,
        "resolution_note": null,
        "arbitration_date": null,
        "prearbitration_date": null,
        "representment_date": null,
        "network_claim_ids": null,
        "network_filed_date": null,
        "network_reason_code": null,
        "primary_claim_id": null,
    })
}

/// An evidence as `POST /v1/disputes/{dispute_token}/evidences` makes it, to be
/// uploaded to `upload_url`.
pub fn evidence(token: &str, dispute_token: &str, filename: &str, upload_url: &str) -> Value {
    json!({
        "token": token,
        "dispute_token": dispute_token,
        "created": now(),
        "filename": filename,
        "upload_status": "PENDING",
        "upload_url": upload_url,
    })
}
