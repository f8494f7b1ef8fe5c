//! Business flows that combine the domain's rules with storage: each runs its checks,
//! then makes its change, ledger transfer, order and outbox event in one transaction.

pub mod born;
pub mod close;
pub mod details;
pub mod issue;
pub mod kyc;
pub mod master_writer;
pub mod money;
pub mod orders;
pub mod reveal;
pub mod status;
pub mod threeds;
pub mod topup;
pub mod user_writer;

use issuing_store::{cards, users, Conn};
use issuing_wire::{ApiError, ErrorSlug};

fn card_not_found() -> ApiError {
    ApiError::new(ErrorSlug::CardNotFound, "Card not found")
}

/// Finds the project's card and checks the user named in the request (CONTRACT §3):
/// unknown card or user is 404 `card_not_found`, another user's card is 422
/// `card_user_mismatch`.
pub async fn card_for_user(
    conn: &mut Conn,
    project_id: &str,
    card_id: Option<&str>,
    external_user_id: Option<&str>,
) -> Result<cards::CardRecord, ApiError> {
    let card_id = card_id
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::validation("card_id is required"))?;
    let card = cards::get(conn, project_id, card_id)
        .await?
        .ok_or_else(card_not_found)?;
    if let Some(external_user_id) = external_user_id {
        let user = users::get_by_external_id(conn, project_id, external_user_id)
            .await?
            .ok_or_else(card_not_found)?;
        if user.id != card.user_id {
            return Err(ApiError::new(
                ErrorSlug::CardUserMismatch,
                "Card does not belong to the user",
            ));
        }
    }
    Ok(card)
}

/// `external_user_id` where CONTRACT §3 makes it required.
pub fn required_user(external_user_id: Option<&str>) -> Result<&str, ApiError> {
    external_user_id
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            ApiError::new(
                ErrorSlug::ExternalUserIdRequired,
                "external_user_id is required",
            )
        })
}
