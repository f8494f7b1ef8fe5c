//! Statements (CONTRACT §17) as pure rules: a UTC month as a period, and which total a
//! ledger movement counts in. The sums come from the ledger (storage); this decides
//! what they mean.

use crate::ledger::TransferKind;
use chrono::{Datelike, NaiveDate};

/// One UTC month: `[start, end)` in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    pub year: i32,
    pub month: u32,
    pub start: i64,
    pub end: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeriodError {
    #[error("period must be a month, YYYY-MM")]
    Malformed,
    #[error("period {0} is in the future")]
    Future(String),
}

impl Period {
    /// `YYYY-MM`, not after the month of `now` (the current month runs up to now).
    pub fn parse(text: &str, now: i64) -> Result<Period, PeriodError> {
        let text = text.trim();
        let (y, m) = text.split_once('-').ok_or(PeriodError::Malformed)?;
        if y.len() != 4 || m.len() != 2 || !(y.bytes().chain(m.bytes())).all(|b| b.is_ascii_digit())
        {
            return Err(PeriodError::Malformed);
        }
        let year: i32 = y.parse().map_err(|_| PeriodError::Malformed)?;
        let month: u32 = m.parse().map_err(|_| PeriodError::Malformed)?;
        let first = NaiveDate::from_ymd_opt(year, month, 1).ok_or(PeriodError::Malformed)?;
        let next = if month == 12 {
            NaiveDate::from_ymd_opt(year + 1, 1, 1)
        } else {
            NaiveDate::from_ymd_opt(year, month + 1, 1)
        }
        .ok_or(PeriodError::Malformed)?;
        let micros = |d: NaiveDate| {
            d.and_hms_opt(0, 0, 0)
                .map(|t| t.and_utc().timestamp_micros())
                .ok_or(PeriodError::Malformed)
        };
        let (start, end) = (micros(first)?, micros(next)?);
        if start > now {
            return Err(PeriodError::Future(text.to_owned()));
        }
        Ok(Period {
            year,
            month,
            start,
            end,
        })
    }

    /// The period's last instant counted: its end, or now for the current month.
    pub fn close(self, now: i64) -> i64 {
        self.end.min(now)
    }

    pub fn label(self) -> String {
        format!("{:04}-{:02}", self.year, self.month)
    }

    /// The month of an instant.
    pub fn of(micros: i64) -> Option<Period> {
        let d = chrono::DateTime::from_timestamp_micros(micros)?.date_naive();
        Period::parse(&format!("{:04}-{:02}", d.year(), d.month()), micros).ok()
    }
}

/// The totals of a card statement, in the wire's order.
pub const CARD_TOTALS: [&str; 8] = [
    "topups",
    "withdrawals",
    "purchases",
    "refunds",
    "dispute_credits",
    "dispute_debits",
    "fees",
    "other",
];

/// The totals of a project statement, in the wire's order.
pub const PROJECT_TOTALS: [&str; 8] = [
    "deposits",
    "card_issue_fees",
    "card_topups",
    "card_withdrawals",
    "card_closes",
    "disputes",
    "shortfalls",
    "adjustments",
];

/// The total a movement of a card's funds counts in, and the `kind` its item carries.
pub fn card_category(kind: &str) -> (&'static str, &'static str) {
    let k = |t: TransferKind| t.as_str() == kind;
    if k(TransferKind::CardTopup) {
        ("topups", "topup")
    } else if k(TransferKind::CardWithdraw) {
        ("withdrawals", "withdrawal")
    } else if k(TransferKind::CardSpend) {
        ("purchases", "purchase")
    } else if k(TransferKind::CardRefund) {
        ("refunds", "refund")
    } else if k(TransferKind::DisputeCredit) {
        ("dispute_credits", "dispute_credit")
    } else if k(TransferKind::DisputeDebit) {
        ("dispute_debits", "dispute_debit")
    } else if k(TransferKind::TopupFee) || k(TransferKind::CardIssueFee) {
        ("fees", "fee")
    } else {
        ("other", "other")
    }
}

/// The total a movement of the master balance counts in. `closing` tells a card
/// withdrawal made by `cards/close` from one asked for.
pub fn project_category(kind: &str, closing: bool) -> &'static str {
    let k = |t: TransferKind| t.as_str() == kind;
    if k(TransferKind::Deposit) {
        "deposits"
    } else if k(TransferKind::CardIssueFee) {
        "card_issue_fees"
    } else if k(TransferKind::CardTopup) || k(TransferKind::TopupFee) {
        "card_topups"
    } else if k(TransferKind::CardWithdraw) && closing {
        "card_closes"
    } else if k(TransferKind::CardWithdraw) {
        "card_withdrawals"
    } else if k(TransferKind::DisputeCredit) || k(TransferKind::DisputeShortfall) {
        "disputes"
    } else if k(TransferKind::CardShortfall) {
        "shortfalls"
    } else {
        "adjustments"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000_000;

    #[test]
    fn a_period_is_a_utc_month() {
        let now = Period::parse("2026-11", i64::MAX).unwrap().start + 3 * DAY;
        let p = Period::parse("2026-11", now).unwrap();
        assert_eq!(p.end - p.start, 30 * DAY);
        assert_eq!(p.close(now), now, "the current month runs up to now");
        let dec = Period::parse("2025-12", now).unwrap();
        assert_eq!(dec.end, Period::parse("2026-01", now).unwrap().start);
        let feb = Period::parse("2024-02", now).unwrap();
        assert_eq!(feb.end - feb.start, 29 * DAY, "a leap year");
        assert_eq!(dec.label(), "2025-12");
        assert_eq!(Period::of(p.start + 5).unwrap(), p);
        assert!(matches!(
            Period::parse("2026-12", now),
            Err(PeriodError::Future(_))
        ));
        for bad in [
            "2026-13",
            "2026-1",
            "26-11",
            "2026/11",
            "2026-00",
            "x",
            "2026-11-01",
        ] {
            assert_eq!(
                Period::parse(bad, now),
                Err(PeriodError::Malformed),
                "{bad}"
            );
        }
    }

    #[test]
    fn every_kind_has_a_total() {
        assert_eq!(card_category("card_spend"), ("purchases", "purchase"));
        assert_eq!(card_category("something_new"), ("other", "other"));
        assert_eq!(project_category("card_withdraw", true), "card_closes");
        assert_eq!(project_category("card_withdraw", false), "card_withdrawals");
        assert_eq!(project_category("refund", false), "adjustments");
        assert!(CARD_TOTALS.contains(&card_category("dispute_debit").0));
        for kind in [
            "deposit",
            "card_issue",
            "fee",
            "dispute_shortfall",
            "card_shortfall",
        ] {
            assert!(PROJECT_TOTALS.contains(&project_category(kind, false)));
        }
    }
}
