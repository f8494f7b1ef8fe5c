//! Stage 3: the card's limits. An authorization passes when, for every limit that
//! applies to its MCC, what the limit's current window counted plus the amount stays
//! within the limit (an exact fit passes) and one more authorization stays within its
//! count.

use super::Decline;
use crate::network::view::number;
use chrono_tz::Tz;
use issuing_domain::controls::limits::{self, Limit, Usage, DECLINE_LIMIT};
use issuing_domain::controls::window::{self, parse_zone, Interval, Window};
use issuing_store::cards::CardRecord;
use issuing_wire::ApiError;
use serde_json::{json, Value};

/// A card's limits with the zone of their calendar windows.
#[derive(Debug, Clone, PartialEq)]
pub struct CardLimits {
    pub limits: Vec<Limit>,
    pub zone: Tz,
}

/// The card's limits; `None` when it has none. A stored value that does not parse is a
/// broken invariant (it was validated when set), answered as an internal error rather
/// than ignored (ignoring it would approve what the limits decline).
pub fn of_card(card: &CardRecord) -> Result<Option<CardLimits>, ApiError> {
    let Some(stored) = card.limits.as_deref() else {
        return Ok(None);
    };
    let limits = limits::from_stored(stored).ok_or_else(|| {
        tracing::error!(card_id = %card.id, "stored card limits cannot be read");
        ApiError::internal()
    })?;
    if limits.is_empty() {
        return Ok(None);
    }
    let zone_name = card
        .limits_timezone
        .as_deref()
        .unwrap_or(limits::DEFAULT_ZONE);
    let zone = parse_zone(zone_name).ok_or_else(|| {
        tracing::error!(card_id = %card.id, zone_name, "stored limits time zone is unknown");
        ApiError::internal()
    })?;
    Ok(Some(CardLimits { limits, zone }))
}

/// Each limit's current window (None for per-authorization limits).
pub fn windows(card: &CardLimits, now: i64) -> Vec<Option<Window>> {
    card.limits
        .iter()
        .map(|l| window::window(l.interval, card.zone, now))
        .collect()
}

/// Whether deciding an authorization with `mcc` needs the card's usage at all.
pub fn needs_usage(card: &CardLimits, mcc: &str) -> bool {
    limits::needs_usage(&card.limits, mcc)
}

pub fn check(card: &CardLimits, usage: &[Usage], mcc: &str, amount: i64) -> Option<Decline> {
    let breach = limits::check(&card.limits, usage, mcc, amount)?;
    Some(Decline {
        reason: DECLINE_LIMIT,
        detail: Some(detail(&breach.limit, breach.usage)),
    })
}

/// The `decline` object of a limit: its interval, its amount and count, and what its
/// window had counted before this authorization (amounts as JSON numbers, like the
/// other amounts of `card_tx_data`).
fn detail(l: &Limit, usage: Usage) -> Value {
    let mut d = json!({
        "interval": l.interval.name(),
        "spent": number(usage.spent),
        "used_count": usage.used_count,
    });
    if let Interval::Rolling { seconds } = l.interval {
        d["window_seconds"] = json!(seconds);
    }
    if let Some(amount) = l.amount {
        d["limit"] = number(amount);
    }
    if let Some(count) = l.count {
        d["count"] = json!(count);
    }
    if !l.mccs.is_empty() {
        d["mccs"] = json!(l.mccs);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::tests::card;

    fn limited(stored: &str, zone: Option<&str>) -> CardRecord {
        let mut c = card();
        c.limits = Some(stored.into());
        c.limits_timezone = zone.map(Into::into);
        c
    }

    #[test]
    fn reads_the_card() {
        assert_eq!(of_card(&card()).ok(), Some(None));
        assert_eq!(of_card(&limited("[]", None)).ok(), Some(None));
        let l = of_card(&limited(
            r#"[{"interval":"daily","amount":5}]"#,
            Some("Europe/Paris"),
        ))
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("limits"));
        assert_eq!(l.zone, chrono_tz::Europe::Paris);
        assert!(of_card(&limited("garbage", None)).is_err());
    }

    #[test]
    fn declines_with_the_limit_and_its_usage() {
        let l = of_card(&limited(
            r#"[{"interval":"rolling","window_seconds":600,"amount":10000000,"count":3}]"#,
            None,
        ))
        .ok()
        .flatten()
        .unwrap_or_else(|| panic!("limits"));
        assert!(needs_usage(&l, "5411"));
        let used = [Usage {
            spent: 9_000_000,
            used_count: 1,
        }];
        assert_eq!(check(&l, &used, "5411", 1_000_000), None);
        let d = check(&l, &used, "5411", 1_000_001).unwrap_or_else(|| panic!("declined"));
        assert_eq!(d.reason, "spending_limit_exceeded");
        assert_eq!(
            d.detail,
            Some(
                json!({"interval": "rolling", "window_seconds": 600, "limit": 10.0, "count": 3, "spent": 9.0, "used_count": 1})
            )
        );
        let w = windows(&l, 1_000_000_000);
        assert_eq!(w[0].and_then(|w| w.start), Some(400_000_000));
    }
}
