//! A card's number and CVV: what `cards/details` answers and what the console's audited
//! `Reveal` shows. Nothing else ever opens them. Sandbox cards keep them sealed with the
//! master key; Lithic cards are read from Lithic each time and never stored in plain
//! text (CONTRACT §14).

use crate::App;
use issuing_store::cards::CardRecord;
use issuing_wire::{ApiError, ErrorSlug};

/// The opened credentials. Debug never prints them.
pub struct CardDetails {
    pub card_number: serde_json::Value,
    pub cvv: serde_json::Value,
}

impl std::fmt::Debug for CardDetails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CardDetails(***)")
    }
}

/// Opens the card's credentials when its subprovider exposes them in plaintext and the
/// card has been issued. Call it without holding a database connection: a Lithic card
/// costs a provider call.
pub async fn open(state: &App, card: &CardRecord) -> Result<CardDetails, ApiError> {
    let plaintext = state
        .catalog()
        .subprovider(&card.subprovider_code)
        .is_some_and(|s| s.plaintext_details);
    if !plaintext {
        return Err(unavailable(
            "The card's provider does not expose plaintext card details",
        ));
    }
    if let Some(lithic) = state.providers.lithic(&card.subprovider_code) {
        let provider_card_id = card
            .provider_card_id
            .as_deref()
            .ok_or_else(|| no_details_yet(card))?;
        let secrets = crate::provider::bounded(crate::provider::Provider::card_details(
            lithic.as_ref(),
            provider_card_id,
        ))
        .await
        .map_err(|e| crate::provider::failed_call(&card.id, "card details", &e))?
        .ok_or_else(|| {
            unavailable("The card's provider does not give this program the card number")
        })?;
        return Ok(CardDetails {
            card_number: serde_json::json!(secrets.pan),
            cvv: serde_json::json!(secrets.cvv),
        });
    }
    let sealed = card
        .secrets_enc
        .as_deref()
        .ok_or_else(|| no_details_yet(card))?;
    let secrets: serde_json::Value = state
        .master
        .open(sealed)
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| {
            tracing::error!(card_id = %card.id, "card secrets cannot be opened with the master key");
            ApiError::internal()
        })?;
    Ok(CardDetails {
        card_number: secrets["pan"].clone(),
        cvv: secrets["cvv"].clone(),
    })
}

fn unavailable(message: &str) -> ApiError {
    ApiError::new(ErrorSlug::CardDetailsPlaintextUnavailable, message)
}

fn no_details_yet(card: &CardRecord) -> ApiError {
    ApiError::new(
        ErrorSlug::CardNotActive,
        format!("Card is {}; it has no details yet", card.status),
    )
}
