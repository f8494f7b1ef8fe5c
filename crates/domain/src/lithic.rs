//! The rules of the Lithic provider (CONTRACT §14) that need no HTTP and no SQL: ids
//! derived for Lithic's idempotency, amounts between Lithic's cents and our micro-units,
//! KYC states from account holder statuses, what Lithic needs from `kyc_data`, the ASA
//! `result` of a decision, and what each transaction event does to our ledger.

use crate::dispute::{DisputeReason, DisputeStatus, ResolutionReason};
use crate::kyc::{KycData, KycLevel, KycState, KycStatus, RegistrationStatus};
use issuing_wire::Amount;
use sha2::{Digest, Sha256};

/// Micro-units in one cent: card amounts are USD at 1 USDT = 1 USD (CONTRACT §8).
pub const MICROS_PER_CENT: i64 = 10_000;

/// A UUID derived from one of our ids, the same every time: Lithic types its
/// `external_id` lookups and `Idempotency-Key` as UUIDs, and a retried call must carry
/// the same one. RFC 9562 version 8 (its SHA-256 example): the first 16 bytes of
/// SHA-256("issuing:<purpose>:<id>") with the version and variant bits set.
pub fn derived_uuid(purpose: &str, id: &str) -> String {
    let digest = Sha256::digest(format!("issuing:{purpose}:{id}").as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    b[6] = (b[6] & 0x0f) | 0x80;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Whether `s` is a Lithic token: Lithic's document types every token (a transaction's,
/// a card's, an event's, an account holder's) as `format: uuid`, the hyphenated form of
/// 36 characters. Anything else is not from Lithic: it is refused where a message is
/// read, before it can become a network message id or a stored key.
pub fn is_token(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// The `external_id` of our cardholder's Lithic account holder.
pub fn account_holder_external_id(cardholder_id: &str) -> String {
    derived_uuid("lithic-account-holder", cardholder_id)
}

/// The `Idempotency-Key` of the `POST /v1/cards` that issues our card.
pub fn card_idempotency_key(card_id: &str) -> String {
    derived_uuid("lithic-card", card_id)
}

/// Our dispute reason as Lithic's `reason`: the same name in upper case.
pub fn dispute_reason(reason: DisputeReason) -> String {
    reason.as_str().to_ascii_uppercase()
}

/// Lithic's dispute statuses (`dispute-v1.status`).
pub const DISPUTE_STATUSES: [&str; 8] = [
    "ARBITRATION",
    "CASE_CLOSED",
    "CASE_WON",
    "NEW",
    "PENDING_CUSTOMER",
    "PREARBITRATION",
    "REPRESENTMENT",
    "SUBMITTED",
];

/// The status (and, for a final one, the resolution reason) a Lithic dispute's
/// `status` and `resolution_reason` mean for ours (CONTRACT §15): `NEW`,
/// `PENDING_CUSTOMER` and `SUBMITTED` are submitted; `REPRESENTMENT`, `PREARBITRATION`
/// and `ARBITRATION` are the same; `CASE_WON` is won; `CASE_CLOSED` is withdrawn when
/// its reason is `WITHDRAWN`, else lost. A final status's reason is Lithic's in lower
/// case when it is one of ours of that status, `no_dispute_rights` for any
/// `NO_DISPUTE_RIGHTS_*`, else `won_first_chargeback` or `case_lost`. None for a status
/// Lithic adds later.
pub fn dispute_status_of(
    status: &str,
    resolution_reason: Option<&str>,
) -> Option<(DisputeStatus, Option<ResolutionReason>)> {
    let to = match status {
        "NEW" | "PENDING_CUSTOMER" | "SUBMITTED" => DisputeStatus::Submitted,
        "REPRESENTMENT" => DisputeStatus::Representment,
        "PREARBITRATION" => DisputeStatus::Prearbitration,
        "ARBITRATION" => DisputeStatus::Arbitration,
        "CASE_WON" => DisputeStatus::Won,
        "CASE_CLOSED" if resolution_reason == Some("WITHDRAWN") => DisputeStatus::Withdrawn,
        "CASE_CLOSED" => DisputeStatus::Lost,
        _ => return None,
    };
    if !to.is_final() {
        return Some((to, None));
    }
    let theirs = resolution_reason.unwrap_or_default();
    let reason = if theirs.starts_with("NO_DISPUTE_RIGHTS_") && to == DisputeStatus::Lost {
        ResolutionReason::NoDisputeRights
    } else {
        match ResolutionReason::parse(&theirs.to_ascii_lowercase()) {
            Some(r) if r.status() == to => r,
            _ => match to {
                DisputeStatus::Won => ResolutionReason::WonFirstChargeback,
                DisputeStatus::Withdrawn => ResolutionReason::Withdrawn,
                _ => ResolutionReason::CaseLost,
            },
        }
    };
    Some((to, Some(reason)))
}

/// Lithic cents as our micro-units; None beyond the bound of every amount of ours
/// (`Amount::checked_from_micros`: 10^12 USD, 10^14 cents), which also keeps the
/// multiplication from overflowing.
pub fn cents_to_amount(cents: i64) -> Option<Amount> {
    cents
        .checked_mul(MICROS_PER_CENT)
        .and_then(|m| Amount::checked_from_micros(m).ok())
}

/// Micro-units as whole cents, rounded down: a balance told to a merchant is never more
/// than the card holds.
pub fn amount_to_cents_floor(amount: Amount) -> i64 {
    amount.micros().div_euclid(MICROS_PER_CENT)
}

/// Our cardholder states for an account holder's `status` (CONTRACT §14): `ACCEPTED`
/// approves, `PENDING_*` waits, `REJECTED` rejects. None for a status Lithic adds later.
pub fn kyc_state_of(status: &str) -> Option<KycState> {
    let state = |registration_status, kyc_status, kyc_level| KycState {
        registration_status,
        kyc_status,
        kyc_level,
    };
    match status {
        // KYC_BASIC is the only workflow we run: the level says so.
        "ACCEPTED" => Some(state(
            RegistrationStatus::Active,
            KycStatus::Approved,
            KycLevel::Basic,
        )),
        "PENDING_REVIEW" | "PENDING_DOCUMENT" | "PENDING_RESUBMIT" => Some(state(
            RegistrationStatus::Pending,
            KycStatus::Pending,
            KycLevel::None,
        )),
        "REJECTED" => Some(state(
            RegistrationStatus::Failed,
            KycStatus::Rejected,
            KycLevel::None,
        )),
        _ => None,
    }
}

/// The `kyc_data` fields (by their names in our API) that `KYC_BASIC` needs and this
/// submission lacks: Lithic's `Address` requires a street, city, state and postal code,
/// and `KycIndividual` a government id (our `id_document.number`).
pub fn missing_for_kyc_basic(kyc: &KycData) -> Vec<&'static str> {
    let address = kyc.address.clone().unwrap_or_default();
    let mut missing = Vec::new();
    for (name, value) in [
        ("address.line1", &address.line1),
        ("address.city", &address.city),
        ("address.state", &address.state),
        ("address.postal_code", &address.postal_code),
    ] {
        if value.is_none() {
            missing.push(name);
        }
    }
    if kyc
        .id_document
        .as_ref()
        .and_then(|d| d.number.as_ref())
        .is_none()
    {
        missing.push("id_document.number");
    }
    if crate::country::alpha3_of(address_country(kyc)).is_none() {
        missing.push("address.country_iso");
    }
    missing
}

/// The address's country, or the cardholder's when the address names none.
pub fn address_country(kyc: &KycData) -> &str {
    kyc.address
        .as_ref()
        .and_then(|a| a.country_iso.as_deref())
        .unwrap_or(&kyc.country_iso)
}

/// ASA answers (`asa-response.result`) that decline.
pub const ASA_APPROVED: &str = "APPROVED";
pub const ASA_INSUFFICIENT_FUNDS: &str = "INSUFFICIENT_FUNDS";
pub const ASA_CARD_PAUSED: &str = "CARD_PAUSED";
pub const ASA_UNAUTHORIZED_MERCHANT: &str = "UNAUTHORIZED_MERCHANT";
pub const ASA_VELOCITY_EXCEEDED: &str = "VELOCITY_EXCEEDED";

/// The ASA `result` for our decision: approved (no `failure_reason`), or the declining
/// result of CONTRACT §14 for the reason. Reasons of the decision pipeline (CONTRACT §11)
/// are named here already; a reason this function does not know still declines.
pub fn asa_result(failure_reason: Option<&str>) -> &'static str {
    match failure_reason {
        None => ASA_APPROVED,
        Some("insufficient_funds") => ASA_INSUFFICIENT_FUNDS,
        Some("card_not_active") => ASA_CARD_PAUSED,
        Some("spending_limit_exceeded") => ASA_VELOCITY_EXCEEDED,
        // Rules and the project's decision webhook refuse this purchase: the merchant
        // (or this use of the card) is not allowed. Never approve what we did not.
        Some(
            "mcc_blocked" | "country_blocked" | "merchant_blocked" | "rule_declined"
            | "webhook_declined" | "webhook_timeout" | "webhook_error",
        )
        | Some(_) => ASA_UNAUTHORIZED_MERCHANT,
    }
}

/// What we know of the transaction an event belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Known {
    /// No transaction of ours (Lithic's token maps to none).
    Unknown,
    /// An authorization of ours still holding funds.
    OpenAuth,
    /// A transaction of ours in any other state (cleared, released, declined).
    Settled,
}

/// What one transaction event does to our ledger (CONTRACT §14).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventAction {
    /// Clear the open authorization at the event's amount.
    Clear,
    /// Post the event's amount to the card with no authorization.
    ForcePost,
    /// Release the event's amount of the hold.
    ReleasePart,
    /// Release the whole hold.
    ReleaseAll,
    /// Return the event's amount to the card, linked to nothing.
    Refund,
    /// Recorded and ignored.
    Ignore,
}

/// The action of an event of `kind` with `result` on a transaction we know as `known`.
/// A single-message purchase (`FINANCIAL_AUTHORIZATION`, approved by ASA like an
/// authorization) settles at once, so its approved event clears like a `CLEARING`; a
/// `CLEARING` of a transaction that holds nothing (already cleared: a second completion;
/// or released) posts without an authorization.
pub fn event_action(kind: &str, result: &str, known: Known) -> EventAction {
    let approved = result == ASA_APPROVED;
    match (kind, known) {
        ("CLEARING", Known::OpenAuth) => EventAction::Clear,
        ("CLEARING", _) => EventAction::ForcePost,
        ("FINANCIAL_AUTHORIZATION", Known::OpenAuth) if approved => EventAction::Clear,
        ("AUTHORIZATION" | "FINANCIAL_AUTHORIZATION", Known::OpenAuth) if !approved => {
            EventAction::ReleaseAll
        }
        ("AUTHORIZATION_REVERSAL", Known::OpenAuth) => EventAction::ReleasePart,
        ("AUTHORIZATION_EXPIRY", Known::OpenAuth) => EventAction::ReleaseAll,
        ("RETURN", _) if approved => EventAction::Refund,
        _ => EventAction::Ignore,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kyc::{Address, IdDocument};

    #[test]
    fn derived_uuids_are_stable_uuids() {
        let a = derived_uuid("x", "6740a1c2e1f0a9b3c4d5e6f7");
        assert_eq!(a, derived_uuid("x", "6740a1c2e1f0a9b3c4d5e6f7"));
        assert_ne!(a, derived_uuid("y", "6740a1c2e1f0a9b3c4d5e6f7"));
        assert_ne!(a, derived_uuid("x", "6740a1c2e1f0a9b3c4d5e6f8"));
        assert_eq!(a.len(), 36);
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('8'), "version 8: {a}");
        assert!("89ab".contains(&parts[3][..1]), "RFC variant: {a}");
        assert_ne!(account_holder_external_id("c1"), card_idempotency_key("c1"));
    }

    #[test]
    fn tokens_are_uuids() {
        assert!(is_token("4f9b0c3e-8a2f-4e7b-9c1d-2f3e4a5b6c7d"));
        assert!(is_token("4F9B0C3E-8A2F-4E7B-9C1D-2F3E4A5B6C7D"));
        assert!(is_token(&derived_uuid("x", "y")));
        for bad in [
            "",
            "c",
            "4f9b0c3e8a2f4e7b9c1d2f3e4a5b6c7d",
            "4f9b0c3e-8a2f-4e7b-9c1d-2f3e4a5b6c7",
            "4f9b0c3e-8a2f-4e7b-9c1d-2f3e4a5b6c7dd",
            "4f9b0c3e-8a2f-4e7b-9c1d-2f3e4a5b6c7\0",
            "4f9b0c3e-8a2f\u{7f}4e7b-9c1d-2f3e4a5b6c7d",
            "g f9b0c3e-8a2f-4e7b-9c1d-2f3e4a5b6c7",
            "4f9b0c3e_8a2f-4e7b-9c1d-2f3e4a5b6c7d",
        ] {
            assert!(!is_token(bad), "{bad:?}");
        }
        assert!(!is_token(&"a".repeat(245)));
    }

    #[test]
    fn amounts() {
        assert_eq!(cents_to_amount(1250).unwrap().micros(), 12_500_000);
        assert_eq!(cents_to_amount(i64::MAX), None);
        // Fuzzed: 922337203685478 cents overflow an i64 of micro-units; far less is
        // already beyond any amount of ours.
        assert_eq!(cents_to_amount(922_337_203_685_478), None);
        assert_eq!(cents_to_amount(100_000_000_000_001), None);
        assert_eq!(cents_to_amount(-100_000_000_000_001), None);
        assert_eq!(
            cents_to_amount(100_000_000_000_000).unwrap().micros(),
            1_000_000_000_000_000_000
        );
        assert_eq!(amount_to_cents_floor(Amount::from_micros(12_509_999)), 1250);
        assert_eq!(amount_to_cents_floor(Amount::from_micros(0)), 0);
    }

    #[test]
    fn kyc_states() {
        let s = kyc_state_of("ACCEPTED").unwrap();
        assert_eq!(
            (s.registration_status, s.kyc_status),
            (RegistrationStatus::Active, KycStatus::Approved)
        );
        for p in ["PENDING_REVIEW", "PENDING_DOCUMENT", "PENDING_RESUBMIT"] {
            assert_eq!(kyc_state_of(p).unwrap().kyc_status, KycStatus::Pending);
        }
        let r = kyc_state_of("REJECTED").unwrap();
        assert_eq!(
            (r.registration_status, r.kyc_status),
            (RegistrationStatus::Failed, KycStatus::Rejected)
        );
        assert!(kyc_state_of("SOMETHING_NEW").is_none());
    }

    fn kyc() -> KycData {
        KycData {
            first_name: "Ada".into(),
            last_name: "Lovelace".into(),
            birth_date: "1990-01-01".into(),
            email: "ada@example.com".into(),
            phone_number_full: "+14155550123".into(),
            country_iso: "US".into(),
            address: None,
            id_document: None,
        }
    }

    #[test]
    fn names_what_kyc_basic_lacks() {
        assert_eq!(
            missing_for_kyc_basic(&kyc()),
            [
                "address.line1",
                "address.city",
                "address.state",
                "address.postal_code",
                "id_document.number"
            ]
        );
        let mut full = kyc();
        full.address = Some(Address {
            line1: Some("1 Main St".into()),
            city: Some("Omaha".into()),
            state: Some("NE".into()),
            postal_code: Some("68022".into()),
            ..Default::default()
        });
        full.id_document = Some(IdDocument {
            number: Some("111-23-1412".into()),
            ..Default::default()
        });
        assert!(missing_for_kyc_basic(&full).is_empty());
        full.country_iso = "ZZ".into();
        assert_eq!(missing_for_kyc_basic(&full), ["address.country_iso"]);
    }

    #[test]
    fn asa_results() {
        assert_eq!(asa_result(None), "APPROVED");
        for (reason, result) in [
            ("insufficient_funds", "INSUFFICIENT_FUNDS"),
            ("card_not_active", "CARD_PAUSED"),
            ("mcc_blocked", "UNAUTHORIZED_MERCHANT"),
            ("country_blocked", "UNAUTHORIZED_MERCHANT"),
            ("merchant_blocked", "UNAUTHORIZED_MERCHANT"),
            ("rule_declined", "UNAUTHORIZED_MERCHANT"),
            ("spending_limit_exceeded", "VELOCITY_EXCEEDED"),
            ("webhook_declined", "UNAUTHORIZED_MERCHANT"),
            ("webhook_timeout", "UNAUTHORIZED_MERCHANT"),
            ("webhook_error", "UNAUTHORIZED_MERCHANT"),
            ("a_reason_added_later", "UNAUTHORIZED_MERCHANT"),
        ] {
            assert_eq!(asa_result(Some(reason)), result, "{reason}");
        }
    }

    #[test]
    fn event_actions() {
        use EventAction::*;
        use Known::*;
        let cases = [
            ("CLEARING", "APPROVED", OpenAuth, Clear),
            ("CLEARING", "APPROVED", Unknown, ForcePost),
            ("CLEARING", "APPROVED", Settled, ForcePost),
            ("AUTHORIZATION", "APPROVED", OpenAuth, Ignore),
            (
                "AUTHORIZATION",
                "CUSTOMER_ASA_TIMEOUT",
                OpenAuth,
                ReleaseAll,
            ),
            ("AUTHORIZATION", "DECLINED", Settled, Ignore),
            ("AUTHORIZATION", "DECLINED", Unknown, Ignore),
            ("FINANCIAL_AUTHORIZATION", "APPROVED", OpenAuth, Clear),
            ("FINANCIAL_AUTHORIZATION", "DECLINED", OpenAuth, ReleaseAll),
            ("AUTHORIZATION_REVERSAL", "APPROVED", OpenAuth, ReleasePart),
            ("AUTHORIZATION_REVERSAL", "APPROVED", Settled, Ignore),
            ("AUTHORIZATION_EXPIRY", "APPROVED", OpenAuth, ReleaseAll),
            ("AUTHORIZATION_EXPIRY", "APPROVED", Unknown, Ignore),
            ("RETURN", "APPROVED", Unknown, Refund),
            ("RETURN", "DECLINED", Unknown, Ignore),
            ("AUTHORIZATION_ADVICE", "APPROVED", OpenAuth, Ignore),
            ("BALANCE_INQUIRY", "APPROVED", Unknown, Ignore),
            ("RETURN_REVERSAL", "APPROVED", Unknown, Ignore),
            ("CORRECTION_DEBIT", "APPROVED", Settled, Ignore),
        ];
        for (kind, result, known, action) in cases {
            assert_eq!(event_action(kind, result, known), action, "{kind} {result}");
        }
    }

    #[test]
    fn lithic_dispute_statuses_as_ours() {
        use DisputeStatus::*;
        use ResolutionReason as R;
        let of = |s: &str, r: Option<&str>| dispute_status_of(s, r);
        for s in ["NEW", "PENDING_CUSTOMER", "SUBMITTED"] {
            assert_eq!(of(s, None), Some((Submitted, None)));
        }
        assert_eq!(of("REPRESENTMENT", None), Some((Representment, None)));
        assert_eq!(of("PREARBITRATION", None), Some((Prearbitration, None)));
        assert_eq!(of("ARBITRATION", None), Some((Arbitration, None)));
        assert_eq!(
            of("CASE_WON", None),
            Some((Won, Some(R::WonFirstChargeback)))
        );
        assert_eq!(
            of("CASE_WON", Some("WON_ARBITRATION")),
            Some((Won, Some(R::WonArbitration)))
        );
        assert_eq!(
            of("CASE_WON", Some("CASE_LOST")),
            Some((Won, Some(R::WonFirstChargeback)))
        );
        assert_eq!(
            of("CASE_CLOSED", Some("WITHDRAWN")),
            Some((Withdrawn, Some(R::Withdrawn)))
        );
        assert_eq!(
            of("CASE_CLOSED", Some("NO_DISPUTE_RIGHTS_3DS")),
            Some((Lost, Some(R::NoDisputeRights)))
        );
        assert_eq!(
            of("CASE_CLOSED", Some("PAST_FILING_DATE")),
            Some((Lost, Some(R::PastFilingDate)))
        );
        assert_eq!(
            of("CASE_CLOSED", Some("NETWORK_REJECTED")),
            Some((Lost, Some(R::NetworkRejected)))
        );
        assert_eq!(
            of("CASE_CLOSED", Some("REFUNDED")),
            Some((Lost, Some(R::CaseLost)))
        );
        assert_eq!(of("CASE_CLOSED", None), Some((Lost, Some(R::CaseLost))));
        assert_eq!(of("LATER", None), None);
        for s in DISPUTE_STATUSES {
            assert!(of(s, None).is_some(), "{s}");
        }
        assert_eq!(
            dispute_reason(DisputeReason::GoodsServicesNotReceived),
            "GOODS_SERVICES_NOT_RECEIVED"
        );
    }
}
