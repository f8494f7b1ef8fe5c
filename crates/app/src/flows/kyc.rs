//! KYC submission: validated data is sealed under the master key and checked. In the
//! sandbox the check answers at once (CONTRACT §7); a `lithic` subprovider asks Lithic
//! (CONTRACT §14), after the submission is saved: `apply` marks it pending, the caller
//! commits, then `submit_to_provider` calls Lithic and saves its answer.

use crate::App;
use crate::Mode;
use issuing_domain::catalog::ProviderKind;
use issuing_domain::kyc::{
    sandbox_check, KycData, KycLevel, KycState, KycStatus, RegistrationStatus,
};
use issuing_domain::time::now_micros;
use issuing_store::cardholders::{self, CardholderRecord};
use issuing_wire::ApiError;

fn pending() -> KycState {
    KycState {
        registration_status: RegistrationStatus::Pending,
        kyc_status: KycStatus::Pending,
        kyc_level: KycLevel::None,
    }
}

fn is_lithic(state: &App, subprovider_code: &str) -> bool {
    state
        .catalog()
        .subprovider(subprovider_code)
        .is_some_and(|s| matches!(s.kind, ProviderKind::Lithic(_)))
}

/// Refuses, before anything is saved, a submission the subprovider's KYC cannot take:
/// Lithic's `KYC_BASIC` needs fields `kyc_data` makes optional (400 naming them).
pub fn check_for_subprovider(
    state: &App,
    subprovider_code: &str,
    kyc: &KycData,
) -> Result<(), ApiError> {
    if !is_lithic(state, subprovider_code) {
        return Ok(());
    }
    let missing = issuing_domain::lithic::missing_for_kyc_basic(kyc);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ApiError::validation(format!(
            "Invalid KYC fields: {} (required by this subprovider's KYC)",
            missing
                .iter()
                .map(|m| format!("{m} (missing)"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
    }
}

/// Applies submitted KYC data to a cardholder record (not yet saved).
pub fn apply(
    state: &App,
    holder: &mut CardholderRecord,
    kyc: &KycData,
    now: i64,
) -> Result<(), ApiError> {
    let outcome = if is_lithic(state, &holder.subprovider_code) {
        // Lithic answers once the submission is saved (`submit_to_provider`).
        pending()
    } else {
        match state.config.mode {
            Mode::Sandbox => sandbox_check(kyc),
            // A production KYC vendor answers asynchronously; until then the review is
            // pending.
            Mode::Production => pending(),
        }
    };
    let json = serde_json::to_vec(kyc).map_err(|e| {
        tracing::error!(error = %e, "KYC data could not be serialised");
        ApiError::internal()
    })?;
    holder.kyc_enc = Some(state.master.seal(&json));
    holder.set_kyc_state(&outcome, now);
    Ok(())
}

/// After a saved submission: a `lithic` subprovider's account holder is created (or
/// read) and the cardholder takes its states, saved. Other subprovider kinds decided in
/// `apply` already. A Lithic failure answers `provider_error`; the cardholder stays
/// pending with its data, and a later submission (cards/create with `kyc_data`) tries
/// again without creating a second account holder.
pub async fn submit_to_provider(
    state: &App,
    holder: &mut CardholderRecord,
    kyc: &KycData,
) -> Result<(), ApiError> {
    let Some(lithic) = state.providers.lithic(&holder.subprovider_code) else {
        return Ok(());
    };
    let outcome = lithic.submit_kyc(holder, kyc).await?;
    holder.set_kyc_state(&outcome, now_micros());
    let mut tx = state.store.begin().await?;
    cardholders::update_kyc(&mut tx, holder).await?;
    tx.commit().await.map_err(issuing_store::StoreError::from)?;
    Ok(())
}

/// The stored KYC data of a cardholder, for the card holder's name.
pub fn read(state: &App, holder: &CardholderRecord) -> Option<KycData> {
    let sealed = holder.kyc_enc.as_deref()?;
    let bytes = state.master.open(sealed)?;
    serde_json::from_slice(&bytes).ok()
}

/// The cardholder's name as the card provider gets it ("" without KYC data).
pub fn holder_name(state: &App, holder: &CardholderRecord) -> String {
    read(state, holder)
        .map(|k| format!("{} {}", k.first_name, k.last_name))
        .unwrap_or_default()
}

/// Whether a cardholder with these statuses may get cards.
pub fn is_ready(registration_status: &str, kyc_status: &str) -> bool {
    registration_status == RegistrationStatus::Active.as_str()
        && kyc_status == KycStatus::Approved.as_str()
}
