//! Disputes (CONTRACT §15): a project contests a settled card transaction for its
//! cardholder, adds evidence, and the network decides; in the sandbox
//! `simulate/disputes/advance` plays the network.

use super::{or_default, Decimal, ListQuery};
use serde::{Deserialize, Serialize};

/// `disputes/create` (idempotent: the key travels as `Idempotency-Key` or the
/// `idempotency_key` field). `amount` defaults to what is still disputable.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputesCreate {
    #[serde(default, deserialize_with = "or_default")]
    pub transaction_id: String,
    /// `atm_cash_misdispense`, `cancelled`, `duplicated`, `fraud_card_not_present`,
    /// `fraud_card_present`, `fraud_other`, `goods_services_not_as_described`,
    /// `goods_services_not_received`, `incorrect_amount`, `missing_auth`, `other`,
    /// `processing_error`, `recurring_transaction_not_cancelled` or
    /// `refund_not_processed`.
    #[serde(default, deserialize_with = "or_default")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub amount: Option<Decimal>,
    /// At most 5,000 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customer_note: Option<String>,
    /// Credit the card the amount at once, fronted by the project's dispute account.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisional_credit: Option<bool>,
}

/// `disputes/get` and `disputes/withdraw`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputeRef {
    #[serde(default, deserialize_with = "or_default")]
    pub dispute_id: String,
}

/// `disputes/find` filters (each also accepted in the singular: `dispute_id`,
/// `card_id`, `transaction_id`, `status`). Newest first by default.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputesFind {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dispute_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub card_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transaction_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub statuses: Vec<String>,
    /// RFC 3339, `YYYY-MM-DD` or integer microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_from: Option<String>,
    /// RFC 3339, `YYYY-MM-DD` (the whole day) or integer microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_to: Option<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// The dispute object. `resolution_reason` and `resolved_at` are `null` until the
/// dispute is final.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Dispute {
    pub dispute_id: String,
    pub transaction_id: String,
    pub card_id: String,
    pub external_user_id: String,
    pub amount: Decimal,
    /// Always `usdt`.
    pub currency: String,
    pub reason: String,
    #[serde(default)]
    pub customer_note: Option<String>,
    /// `submitted`, `representment`, `prearbitration`, `arbitration`, `won`, `lost` or
    /// `withdrawn`.
    pub status: String,
    /// For `won`: `won_first_chargeback`, `won_prearbitration`, `won_arbitration`; for
    /// `lost`: `case_lost`, `network_rejected`, `past_filing_date`,
    /// `no_dispute_rights`; for `withdrawn`: `withdrawn`.
    #[serde(default)]
    pub resolution_reason: Option<String>,
    pub provisional_credit: bool,
    #[serde(default)]
    pub evidence: Vec<Evidence>,
    /// Append-only: every status the dispute took, oldest first.
    #[serde(default)]
    pub timeline: Vec<TimelineEntry>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub resolved_at: Option<String>,
}

/// One status a dispute took.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEntry {
    pub at: String,
    pub status: String,
    #[serde(default)]
    pub note: Option<String>,
}

/// An evidence file's metadata.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    pub evidence_id: String,
    pub filename: String,
    /// `application/pdf`, `image/png` or `image/jpeg`.
    pub content_type: String,
    /// Bytes.
    pub size: u64,
    /// Hex SHA-256 of the content.
    pub sha256: String,
    pub created_at: String,
}

/// `disputes/evidence/add`: at most 4 MiB decoded, 10 files per dispute.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputesEvidenceAdd {
    #[serde(default, deserialize_with = "or_default")]
    pub dispute_id: String,
    #[serde(default, deserialize_with = "or_default")]
    pub filename: String,
    #[serde(default, deserialize_with = "or_default")]
    pub content_type: String,
    /// The file, base64 (standard alphabet, padded).
    #[serde(default, deserialize_with = "or_default")]
    pub content: String,
}

/// `disputes/evidence/get`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DisputesEvidenceGet {
    #[serde(default, deserialize_with = "or_default")]
    pub dispute_id: String,
    #[serde(default, deserialize_with = "or_default")]
    pub evidence_id: String,
}

/// An evidence file with its content (base64).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceFile {
    pub evidence_id: String,
    pub dispute_id: String,
    pub filename: String,
    pub content_type: String,
    pub size: u64,
    pub sha256: String,
    pub created_at: String,
    pub content: String,
}

/// `simulate/disputes/advance` (sandbox): the network's move.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimulateDisputesAdvance {
    #[serde(default, deserialize_with = "or_default")]
    pub dispute_id: String,
    /// `representment`, `prearbitration`, `arbitration`, `won` or `lost`.
    #[serde(default, deserialize_with = "or_default")]
    pub to: String,
    /// Defaults to the final state's reason for the stage it ends from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution_reason: Option<String>,
}

// Evidence can be personal (receipts, IDs): `Debug` shows its size, never its bytes.
impl std::fmt::Debug for DisputesEvidenceAdd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DisputesEvidenceAdd")
            .field("dispute_id", &self.dispute_id)
            .field("filename", &self.filename)
            .field("content_type", &self.content_type)
            .field("content_len", &self.content.len())
            .finish()
    }
}

impl std::fmt::Debug for EvidenceFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EvidenceFile")
            .field("evidence_id", &self.evidence_id)
            .field("dispute_id", &self.dispute_id)
            .field("filename", &self.filename)
            .field("size", &self.size)
            .finish()
    }
}
