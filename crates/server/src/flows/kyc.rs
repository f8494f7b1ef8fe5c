//! KYC submission: validated data is sealed under the master key and checked; in the
//! sandbox the check answers at once (CONTRACT §7).

use crate::state::AppState;
use crate::Mode;
use issuing_domain::kyc::{
    sandbox_check, KycData, KycLevel, KycState, KycStatus, RegistrationStatus,
};
use issuing_store::cardholders::CardholderRecord;
use issuing_wire::ApiError;

/// Applies submitted KYC data to a cardholder record (not yet saved).
pub(crate) fn apply(
    state: &AppState,
    holder: &mut CardholderRecord,
    kyc: &KycData,
    now: i64,
) -> Result<(), ApiError> {
    let outcome = match state.config.mode {
        Mode::Sandbox => sandbox_check(kyc),
        // A production KYC vendor answers asynchronously; until then the review is pending.
        Mode::Production => KycState {
            registration_status: RegistrationStatus::Pending,
            kyc_status: KycStatus::Pending,
            kyc_level: KycLevel::None,
        },
    };
    let json = serde_json::to_vec(kyc).map_err(|e| {
        tracing::error!(error = %e, "KYC data could not be serialised");
        ApiError::internal()
    })?;
    holder.kyc_enc = Some(state.master.seal(&json));
    holder.registration_status = outcome.registration_status.as_str().to_owned();
    holder.kyc_status = outcome.kyc_status.as_str().to_owned();
    holder.kyc_level = outcome.kyc_level.as_str().to_owned();
    holder.updated_at = now;
    if outcome.registration_status == RegistrationStatus::Active {
        holder.registered_at.get_or_insert(now);
        holder.activated_at.get_or_insert(now);
    }
    Ok(())
}

/// The stored KYC data of a cardholder, for the card holder's name.
pub(crate) fn read(state: &AppState, holder: &CardholderRecord) -> Option<KycData> {
    let sealed = holder.kyc_enc.as_deref()?;
    let bytes = state.master.open(sealed)?;
    serde_json::from_slice(&bytes).ok()
}

pub(crate) fn is_ready(holder: &CardholderRecord) -> bool {
    holder.registration_status == RegistrationStatus::Active.as_str()
        && holder.kyc_status == KycStatus::Approved.as_str()
}
