//! Stage 1: only an active card authorizes.

use super::Decline;
use issuing_domain::card_tx::DECLINE_CARD_NOT_ACTIVE;
use issuing_store::cards::CardRecord;

pub fn check(card: &CardRecord) -> Option<Decline> {
    (card.status != "active").then(|| Decline::plain(DECLINE_CARD_NOT_ACTIVE))
}

#[cfg(test)]
mod tests {
    use crate::network::tests::card;

    #[test]
    fn only_active_cards() {
        let mut c = card();
        assert_eq!(super::check(&c), None);
        for status in ["frozen", "closed", "pending", "failed"] {
            c.status = status.into();
            assert_eq!(
                super::check(&c).map(|d| d.reason),
                Some("card_not_active"),
                "{status}"
            );
        }
    }
}
