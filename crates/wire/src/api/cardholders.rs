//! `cardholders/*` and the KYC data they carry.

use super::ListQuery;
use serde::{Deserialize, Serialize};

/// KYC data of a cardholder (`cardholders/create`, `cards/create`).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KycData {
    pub first_name: String,
    pub last_name: String,
    /// `YYYY-MM-DD`.
    pub birth_date: String,
    pub email: String,
    /// E.164, e.g. `+447700900123`.
    pub phone_number_full: String,
    /// ISO 3166-1 alpha-2.
    pub country_iso: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<Address>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_document: Option<IdDocument>,
}

/// A postal address (KYC data; card billing address).
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Address {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line1: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line2: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub city: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub postal_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country_iso: Option<String>,
}

/// An identity document in KYC data.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdDocument {
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country_iso: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry_date: Option<String>,
}

/// `cardholders/create`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardholdersCreate {
    pub external_user_id: String,
    pub subprovider_code: String,
    /// Required by some subproviders (`sandbox_restricted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_code: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kyc_data: Option<KycData>,
}

/// `cardholders/get`: by `cardholder_id`, or by `external_user_id` and `subprovider_code`.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardholdersGet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cardholder_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_user_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subprovider_code: Option<String>,
}

impl CardholdersGet {
    pub fn by_id(cardholder_id: impl Into<String>) -> Self {
        CardholdersGet {
            cardholder_id: Some(cardholder_id.into()),
            ..Self::default()
        }
    }

    pub fn by_user(
        external_user_id: impl Into<String>,
        subprovider_code: impl Into<String>,
    ) -> Self {
        CardholdersGet {
            cardholder_id: None,
            external_user_id: Some(external_user_id.into()),
            subprovider_code: Some(subprovider_code.into()),
        }
    }
}

/// `cardholders/find` filters.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardholdersFind {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cardholder_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external_user_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub user_ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subprovider_codes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub product_codes: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registration_statuses: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kyc_statuses: Vec<String>,
    #[serde(flatten)]
    pub page: ListQuery,
}

/// The cardholder object. The server writes the optional fields as `null` when they do
/// not apply.
#[cfg_attr(feature = "openapi", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cardholder {
    pub cardholder_id: String,
    pub user_id: String,
    pub external_user_id: String,
    pub project_id: String,
    pub subprovider_code: String,
    /// Legacy name of `subprovider_code` (the earlier API generation's).
    #[serde(default)]
    pub subprovider_id: String,
    #[serde(default)]
    pub product_code: Option<String>,
    /// `pending`, `active`, `suspended` or `failed`.
    pub registration_status: String,
    /// `not_started`, `pending`, `approved`, `rejected` or `expired`.
    pub kyc_status: String,
    /// `none`, `basic`, `advanced` or `full`.
    pub kyc_level: String,
    pub created_at: String,
    pub updated_at: String,
    #[serde(default)]
    pub registered_at: Option<String>,
    #[serde(default)]
    pub activated_at: Option<String>,
}

impl Cardholder {
    /// `active` and `approved`: cards can be issued to it.
    pub fn is_ready(&self) -> bool {
        self.registration_status == "active" && self.kyc_status == "approved"
    }
}
