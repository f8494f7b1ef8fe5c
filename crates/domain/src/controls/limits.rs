//! Card spending limits (CONTRACT §11): what a limit is, how a request's list is
//! validated, how a transaction counts toward limits, and whether an authorization
//! fits. Pure: usage comes in as numbers; storage computes it from card transactions.

use super::window::{parse_zone, Interval};
use issuing_wire::{Amount, ApiError, ErrorSlug};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// At most this many limits per card.
pub const MAX_LIMITS: usize = 10;
/// At most this many MCCs on one limit.
pub const MAX_MCCS: usize = 100;
/// Counts are stored in 32 bits; no card makes more authorizations than this in a window.
pub const MAX_COUNT: u32 = 1_000_000_000;
pub const DEFAULT_ZONE: &str = "UTC";
/// Why a limit declined (`failure_reason`).
pub const DECLINE_LIMIT: &str = "spending_limit_exceeded";

/// One limit of a card: an amount, a count, or both, over an interval, optionally only
/// for some MCCs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub interval: Interval,
    /// Micro-units; > 0.
    pub amount: Option<i64>,
    /// ≥ 1; never on `per_authorization`.
    pub count: Option<u32>,
    /// Empty: every MCC.
    pub mccs: Vec<String>,
}

/// The stored form of a limit (JSON on the card row): micro-units, not decimals.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Stored {
    interval: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window_seconds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    amount: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    count: Option<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    mccs: Vec<String>,
}

impl Limit {
    /// Whether the limit counts and applies to a transaction with this MCC.
    pub fn applies_to(&self, mcc: &str) -> bool {
        self.mccs.is_empty() || self.mccs.iter().any(|m| m == mcc)
    }
}

/// A limit as a request names it (`cards/limits/set`), before validation.
#[derive(Debug, Clone, Default)]
pub struct LimitInput<'a> {
    pub interval: &'a str,
    pub amount: Option<&'a Value>,
    pub count: Option<&'a Value>,
    pub window_seconds: Option<&'a Value>,
    pub mccs: Option<&'a [String]>,
}

fn invalid(i: usize, why: impl std::fmt::Display) -> ApiError {
    ApiError::validation(format!("limits[{i}]: {why}"))
}

/// Whether `s` is an MCC: exactly 4 ASCII digits.
pub fn is_mcc(s: &str) -> bool {
    s.len() == 4 && s.bytes().all(|b| b.is_ascii_digit())
}

fn small_integer(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse().ok()
        }
        _ => None,
    }
}

/// Validates one limit of a request (`i` is its index, for messages).
pub fn parse_limit(i: usize, input: &LimitInput<'_>) -> Result<Limit, ApiError> {
    let window_seconds = match input.window_seconds {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            small_integer(v)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| invalid(i, "window_seconds must be an integer"))?,
        ),
    };
    let interval = Interval::parse(input.interval, window_seconds).map_err(|e| invalid(i, e))?;
    let amount = match input.amount {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            Amount::parse_positive(v)
                .map_err(|e| {
                    ApiError::new(ErrorSlug::InvalidAmount, format!("limits[{i}].amount: {e}"))
                })?
                .micros(),
        ),
    };
    let count = match input.count {
        None | Some(Value::Null) => None,
        Some(v) => {
            let n = small_integer(v)
                .filter(|n| (1..=u64::from(MAX_COUNT)).contains(n))
                .ok_or_else(|| {
                    invalid(i, format!("count must be an integer from 1 to {MAX_COUNT}"))
                })?;
            Some(u32::try_from(n).map_err(|_| invalid(i, "count is too large"))?)
        }
    };
    if amount.is_none() && count.is_none() {
        return Err(invalid(i, "a limit needs an amount, a count, or both"));
    }
    if interval == Interval::PerAuthorization && count.is_some() {
        return Err(invalid(
            i,
            "count does not apply to per_authorization limits (each authorization is one)",
        ));
    }
    let mut mccs: Vec<String> = input.mccs.unwrap_or_default().to_vec();
    if mccs.len() > MAX_MCCS {
        return Err(invalid(i, format!("at most {MAX_MCCS} mccs")));
    }
    if let Some(bad) = mccs.iter().find(|m| !is_mcc(m)) {
        return Err(invalid(i, format!("mcc {bad:?} is not 4 digits")));
    }
    mccs.sort();
    mccs.dedup();
    Ok(Limit {
        interval,
        amount,
        count,
        mccs,
    })
}

/// Validates a whole `cards/limits/set` request: the limits and the zone name.
pub fn parse_limits(
    inputs: &[LimitInput<'_>],
    timezone: Option<&str>,
) -> Result<(Vec<Limit>, String), ApiError> {
    if inputs.len() > MAX_LIMITS {
        return Err(ApiError::validation(format!(
            "a card may have at most {MAX_LIMITS} limits"
        )));
    }
    let zone = timezone.map(str::trim).filter(|z| !z.is_empty());
    let zone = match zone {
        None => DEFAULT_ZONE.to_owned(),
        Some(z) => parse_zone(z)
            .map(|tz| tz.name().to_owned())
            .ok_or_else(|| {
                ApiError::validation(format!("timezone {z:?} is not an IANA time zone name"))
            })?,
    };
    let limits = inputs
        .iter()
        .enumerate()
        .map(|(i, l)| parse_limit(i, l))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((limits, zone))
}

/// The JSON stored on the card row.
pub fn to_stored(limits: &[Limit]) -> String {
    let stored: Vec<Stored> = limits
        .iter()
        .map(|l| Stored {
            interval: l.interval.name().to_owned(),
            window_seconds: l.interval.window_seconds(),
            amount: l.amount,
            count: l.count,
            mccs: l.mccs.clone(),
        })
        .collect();
    serde_json::to_string(&stored).unwrap_or_else(|_| "[]".to_owned())
}

/// Reads the stored JSON back; `None` when it is not what `to_stored` writes.
pub fn from_stored(json: &str) -> Option<Vec<Limit>> {
    let stored: Vec<Stored> = serde_json::from_str(json).ok()?;
    stored
        .into_iter()
        .map(|s| {
            Some(Limit {
                interval: Interval::parse(&s.interval, s.window_seconds).ok()?,
                amount: s.amount,
                count: s.count,
                mccs: s.mccs,
            })
        })
        .collect()
}

/// What a window has counted so far: the amount and the number of authorizations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub spent: i64,
    pub used_count: i64,
}

/// The limit an authorization would pass, with what its window had counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Breach {
    pub limit: Limit,
    pub usage: Usage,
}

/// Whether an authorization of `amount` with `mcc` fits every limit, given each limit's
/// usage (`usage[i]` for `limits[i]`; per-authorization limits ignore theirs). An exact
/// fit passes: `spent + amount ≤ limit`. The first limit it would pass is answered.
pub fn check(limits: &[Limit], usage: &[Usage], mcc: &str, amount: i64) -> Option<Breach> {
    debug_assert_eq!(limits.len(), usage.len());
    limits
        .iter()
        .zip(usage)
        .filter(|(l, _)| l.applies_to(mcc))
        .find(|(l, u)| {
            let (spent, used) = if l.interval == Interval::PerAuthorization {
                (0, 0)
            } else {
                (u.spent, u.used_count)
            };
            let over_amount = l
                .amount
                .is_some_and(|max| spent.saturating_add(amount) > max);
            let over_count = l.count.is_some_and(|max| used + 1 > i64::from(max));
            over_amount || over_count
        })
        .map(|(l, u)| Breach {
            limit: l.clone(),
            usage: if l.interval == Interval::PerAuthorization {
                Usage::default()
            } else {
                *u
            },
        })
}

/// Whether any of these limits needs the card's usage to decide `mcc` (per-authorization
/// limits and limits of other MCCs do not).
pub fn needs_usage(limits: &[Limit], mcc: &str) -> bool {
    limits
        .iter()
        .any(|l| l.interval != Interval::PerAuthorization && l.applies_to(mcc))
}

/// How a card transaction counts toward limits (CONTRACT §11, "What counts"): the
/// amount it counts now and whether it counts as one authorization.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    pub amount: i64,
    pub counts: bool,
}

impl Counted {
    /// Declined authorizations and refunds count nothing.
    pub const NOTHING: Counted = Counted {
        amount: 0,
        counts: false,
    };

    /// An approved authorization (or a force post) counts its amount and one.
    pub fn approved(amount: i64) -> Counted {
        Counted {
            amount,
            counts: true,
        }
    }

    /// A reversal, an expiry or a release by cards/close gives back what it released,
    /// never the count.
    pub fn released(self, released: i64) -> Counted {
        debug_assert!(released >= 0);
        Counted {
            amount: (self.amount - released).max(0),
            counts: self.counts,
        }
    }

    /// A clearing of `bill` against a hold of `held`: below the hold the counted amount
    /// becomes the bill; above it, the excess is added.
    pub fn cleared(self, held: i64, bill: i64) -> Counted {
        let amount = if bill <= held {
            bill.min(self.amount)
        } else {
            self.amount.saturating_add(bill - held)
        };
        Counted {
            amount,
            counts: self.counts,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn input<'a>(interval: &'a str, amount: Option<&'a Value>) -> LimitInput<'a> {
        LimitInput {
            interval,
            amount,
            ..LimitInput::default()
        }
    }

    fn daily(amount: Option<i64>, count: Option<u32>) -> Limit {
        Limit {
            interval: Interval::Daily,
            amount,
            count,
            mccs: vec![],
        }
    }

    #[test]
    fn validation() {
        let hundred = json!("100.00");
        let zero = json!("0");
        let l = parse_limit(0, &input("daily", Some(&hundred))).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(l.amount, Some(100_000_000));
        let e = parse_limit(0, &input("daily", Some(&zero))).unwrap_err();
        assert_eq!(e.slug, ErrorSlug::InvalidAmount, "no zero means unlimited");
        let e = parse_limit(0, &input("daily", None)).unwrap_err();
        assert_eq!(e.slug, ErrorSlug::ValidationError);
        let one = json!(1);
        let e = parse_limit(
            0,
            &LimitInput {
                interval: "per_authorization",
                count: Some(&one),
                ..LimitInput::default()
            },
        )
        .unwrap_err();
        assert_eq!(e.slug, ErrorSlug::ValidationError);
        let bad = ["541".to_owned()];
        let e = parse_limit(
            0,
            &LimitInput {
                interval: "daily",
                amount: Some(&hundred),
                mccs: Some(&bad),
                ..LimitInput::default()
            },
        )
        .unwrap_err();
        assert!(e.message.contains("541"), "{e}");
        let many: Vec<LimitInput<'_>> = (0..11).map(|_| input("daily", Some(&hundred))).collect();
        assert!(parse_limits(&many, None).is_err());
        assert!(parse_limits(&[], Some("Nowhere/Land")).is_err());
        let (_, zone) = parse_limits(&[], None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(zone, "UTC");
    }

    #[test]
    fn stored_form_round_trips() {
        let limits = vec![
            daily(Some(5), Some(2)),
            Limit {
                interval: Interval::Rolling { seconds: 600 },
                amount: None,
                count: Some(3),
                mccs: vec!["5411".into()],
            },
        ];
        assert_eq!(from_stored(&to_stored(&limits)), Some(limits));
        assert_eq!(from_stored("not json"), None);
    }

    #[test]
    fn exact_fit_passes() {
        let limits = [daily(Some(100), None)];
        let used = [Usage {
            spent: 60,
            used_count: 3,
        }];
        assert_eq!(check(&limits, &used, "5411", 40), None);
        let breach = check(&limits, &used, "5411", 41).unwrap_or_else(|| panic!("breach"));
        assert_eq!(breach.usage.spent, 60);
    }

    #[test]
    fn counts_and_mccs() {
        let limits = [
            daily(None, Some(2)),
            Limit {
                interval: Interval::PerAuthorization,
                amount: Some(50),
                count: None,
                mccs: vec!["6011".into()],
            },
        ];
        let used = [
            Usage {
                spent: 0,
                used_count: 1,
            },
            Usage::default(),
        ];
        assert_eq!(check(&limits, &used, "5411", 1000), None);
        assert!(
            check(&limits, &used, "6011", 51).is_some(),
            "per auth on 6011"
        );
        let full = [
            Usage {
                spent: 0,
                used_count: 2,
            },
            Usage::default(),
        ];
        assert!(check(&limits, &full, "5411", 1).is_some(), "third of two");
        assert!(needs_usage(&limits, "5411"));
        assert!(!needs_usage(&limits[1..], "6011"));
    }

    #[test]
    fn counting_rules() {
        let c = Counted::approved(100);
        assert_eq!(
            c.released(30),
            Counted {
                amount: 70,
                counts: true
            }
        );
        // Clearing below the hold: the bill. Above: the excess is added.
        assert_eq!(c.cleared(100, 80).amount, 80);
        assert_eq!(c.cleared(100, 100).amount, 100);
        assert_eq!(c.cleared(100, 130).amount, 130);
        assert_eq!(c.released(30).cleared(70, 90).amount, 90);
        assert_eq!(
            c.released(100),
            Counted {
                amount: 0,
                counts: true
            }
        );
        assert_eq!(Counted::NOTHING.amount, 0);
    }
}
