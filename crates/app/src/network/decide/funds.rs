//! Stage 4: the card's available funds (read under its lock) must cover the amount.

use super::Decline;
use issuing_domain::card_tx::DECLINE_INSUFFICIENT_FUNDS;

pub fn check(available: i64, amount: i64) -> Option<Decline> {
    (available < amount).then(|| Decline::plain(DECLINE_INSUFFICIENT_FUNDS))
}

#[cfg(test)]
mod tests {
    #[test]
    fn exact_funds_pass() {
        assert_eq!(super::check(100, 100), None);
        assert_eq!(
            super::check(99, 100).map(|d| d.reason),
            Some("insufficient_funds")
        );
    }
}
