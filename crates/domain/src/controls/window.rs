//! Spending windows (CONTRACT §11): which stretch of time a limit counts over, given
//! the card's IANA time zone and the moment of the authorization.
//!
//! Calendar windows are local: `daily` starts at local midnight, `weekly` on Monday
//! 00:00, `monthly` on the 1st, `yearly` on January 1st, so a local day is 23 or 25
//! hours long on the days the clocks change. A rolling window is the `window_seconds`
//! before the moment. Every function takes the moment as a parameter (the injectable
//! clock of the tests); nothing here reads the system clock.

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, TimeZone, Utc};
use chrono_tz::Tz;

/// Microseconds since the epoch, as everywhere in the service.
pub type Micros = i64;

/// Bounds of `rolling` windows (CONTRACT §11): a minute to 90 days.
pub const MIN_ROLLING_SECONDS: u32 = 60;
pub const MAX_ROLLING_SECONDS: u32 = 7_776_000;

/// A limit's interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    PerAuthorization,
    Daily,
    Weekly,
    Monthly,
    Yearly,
    AllTime,
    Rolling { seconds: u32 },
}

impl Interval {
    /// The wire name (`rolling` without its seconds).
    pub const fn name(self) -> &'static str {
        match self {
            Interval::PerAuthorization => "per_authorization",
            Interval::Daily => "daily",
            Interval::Weekly => "weekly",
            Interval::Monthly => "monthly",
            Interval::Yearly => "yearly",
            Interval::AllTime => "all_time",
            Interval::Rolling { .. } => "rolling",
        }
    }

    /// Parses a wire name; `rolling` needs `window_seconds` in its bounds, the others
    /// must not have it.
    pub fn parse(name: &str, window_seconds: Option<u32>) -> Result<Interval, String> {
        let fixed = match name {
            "per_authorization" => Interval::PerAuthorization,
            "daily" => Interval::Daily,
            "weekly" => Interval::Weekly,
            "monthly" => Interval::Monthly,
            "yearly" => Interval::Yearly,
            "all_time" => Interval::AllTime,
            "rolling" => {
                return match window_seconds {
                    Some(s) if (MIN_ROLLING_SECONDS..=MAX_ROLLING_SECONDS).contains(&s) => {
                        Ok(Interval::Rolling { seconds: s })
                    }
                    _ => Err(format!(
                        "rolling limits need window_seconds from {MIN_ROLLING_SECONDS} to {MAX_ROLLING_SECONDS}"
                    )),
                }
            }
            other => {
                return Err(format!(
                    "interval {other:?} is not one of: per_authorization, daily, weekly, monthly, yearly, all_time, rolling"
                ))
            }
        };
        if window_seconds.is_some() {
            return Err(format!(
                "window_seconds applies only to rolling limits, not {name}"
            ));
        }
        Ok(fixed)
    }

    pub const fn window_seconds(self) -> Option<u32> {
        match self {
            Interval::Rolling { seconds } => Some(seconds),
            _ => None,
        }
    }
}

/// The stretch of time a limit counts over: from `start` (inclusive) to `end`
/// (exclusive). `None` bounds are open (an all-time window has neither).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: Option<Micros>,
    pub end: Option<Micros>,
}

/// Parses an IANA zone name (`Europe/Berlin`, `UTC`).
pub fn parse_zone(name: &str) -> Option<Tz> {
    name.parse::<Tz>().ok()
}

/// The window of `interval` that contains `now`, in zone `tz`; `None` for
/// `per_authorization`, which counts nothing.
pub fn window(interval: Interval, tz: Tz, now: Micros) -> Option<Window> {
    let local_date = || {
        let utc = chrono::DateTime::<Utc>::from_timestamp_micros(now).unwrap_or_default();
        utc.with_timezone(&tz).date_naive()
    };
    let calendar = |start: NaiveDate, next: NaiveDate| {
        Some(Window {
            start: Some(local_midnight(tz, start)),
            end: Some(local_midnight(tz, next)),
        })
    };
    match interval {
        Interval::PerAuthorization => None,
        Interval::AllTime => Some(Window {
            start: None,
            end: None,
        }),
        Interval::Rolling { seconds } => Some(Window {
            start: Some(now - i64::from(seconds) * 1_000_000),
            end: Some(now),
        }),
        Interval::Daily => {
            let d = local_date();
            calendar(d, d + Duration::days(1))
        }
        Interval::Weekly => {
            let d = local_date();
            let monday = d - Duration::days(i64::from(d.weekday().num_days_from_monday()));
            calendar(monday, monday + Duration::days(7))
        }
        Interval::Monthly => {
            let d = local_date();
            let first = d.with_day(1).unwrap_or(d);
            let next = if first.month() == 12 {
                NaiveDate::from_ymd_opt(first.year() + 1, 1, 1)
            } else {
                NaiveDate::from_ymd_opt(first.year(), first.month() + 1, 1)
            }
            .unwrap_or(first);
            calendar(first, next)
        }
        Interval::Yearly => {
            let d = local_date();
            let first = NaiveDate::from_ymd_opt(d.year(), 1, 1).unwrap_or(d);
            let next = NaiveDate::from_ymd_opt(d.year() + 1, 1, 1).unwrap_or(d);
            calendar(first, next)
        }
    }
}

/// The instant a local date begins in `tz`. Where the clocks jump over midnight (a few
/// zones start summer time at 00:00) the day begins at the first local minute that
/// exists; where midnight happens twice, at the first one.
fn local_midnight(tz: Tz, date: NaiveDate) -> Micros {
    let midnight: NaiveDateTime = date.and_hms_opt(0, 0, 0).unwrap_or_default();
    // Gaps are at most a few hours long; a day always has a valid minute within 24 h.
    for minute in 0..24 * 60 {
        let local = midnight + Duration::minutes(minute);
        if let Some(at) = tz.from_local_datetime(&local).earliest() {
            return at.with_timezone(&Utc).timestamp_micros();
        }
    }
    // Unreachable for any real zone: treat the date as UTC.
    Utc.from_utc_datetime(&midnight).timestamp_micros()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The clock the tests inject: an RFC 3339 instant as microseconds.
    fn at(rfc3339: &str) -> Micros {
        chrono::DateTime::parse_from_rfc3339(rfc3339)
            .map(|d| d.timestamp_micros())
            .unwrap_or_else(|e| panic!("{rfc3339}: {e}"))
    }

    fn zone(name: &str) -> Tz {
        parse_zone(name).unwrap_or_else(|| panic!("zone {name}"))
    }

    fn bounds(interval: Interval, tz: &str, now: &str) -> (Micros, Micros) {
        let w = window(interval, zone(tz), at(now)).unwrap_or_else(|| panic!("no window"));
        (
            w.start.unwrap_or_else(|| panic!("open start")),
            w.end.unwrap_or_else(|| panic!("open end")),
        )
    }

    const HOUR: Micros = 3_600_000_000;

    #[test]
    fn utc_day() {
        let (s, e) = bounds(Interval::Daily, "UTC", "2026-05-10T13:45:00Z");
        assert_eq!(s, at("2026-05-10T00:00:00Z"));
        assert_eq!(e, at("2026-05-11T00:00:00Z"));
    }

    #[test]
    fn local_day_ends_at_local_midnight() {
        // 23:30 in New York on May 10 is 03:30 UTC on May 11: still May 10 there.
        let (s, e) = bounds(Interval::Daily, "America/New_York", "2026-05-11T03:30:00Z");
        assert_eq!(s, at("2026-05-10T04:00:00Z"));
        assert_eq!(e, at("2026-05-11T04:00:00Z"));
        // Half an hour later the next local day has begun.
        let (s, _) = bounds(Interval::Daily, "America/New_York", "2026-05-11T04:00:00Z");
        assert_eq!(s, at("2026-05-11T04:00:00Z"));
        // One microsecond before it, the old one.
        let (s, _) = bounds(
            Interval::Daily,
            "America/New_York",
            "2026-05-11T03:59:59.999999Z",
        );
        assert_eq!(s, at("2026-05-10T04:00:00Z"));
    }

    #[test]
    fn spring_forward_day_has_23_hours() {
        let (s, e) = bounds(Interval::Daily, "America/New_York", "2026-03-08T12:00:00Z");
        assert_eq!(s, at("2026-03-08T05:00:00Z"));
        assert_eq!(e, at("2026-03-09T04:00:00Z"));
        assert_eq!(e - s, 23 * HOUR);
    }

    #[test]
    fn fall_back_day_has_25_hours() {
        let (s, e) = bounds(Interval::Daily, "America/New_York", "2026-11-01T12:00:00Z");
        assert_eq!(s, at("2026-11-01T04:00:00Z"));
        assert_eq!(e, at("2026-11-02T05:00:00Z"));
        assert_eq!(e - s, 25 * HOUR);
        // 01:30 local happens twice that day; both moments are in the same day.
        for moment in ["2026-11-01T05:30:00Z", "2026-11-01T06:30:00Z"] {
            assert_eq!(
                bounds(Interval::Daily, "America/New_York", moment),
                (s, e),
                "{moment}"
            );
        }
    }

    #[test]
    fn midnight_that_does_not_exist() {
        // Havana starts summer time at 00:00 (to 01:00) on 2026-03-08: the day begins
        // at 01:00 local, 05:00 UTC.
        let (s, e) = bounds(Interval::Daily, "America/Havana", "2026-03-08T12:00:00Z");
        assert_eq!(s, at("2026-03-08T05:00:00Z"));
        assert_eq!(e, at("2026-03-09T04:00:00Z"));
    }

    #[test]
    fn week_starts_on_monday() {
        // Sunday 2026-03-08 (the spring-forward day) is in the week of Monday March 2.
        let (s, e) = bounds(Interval::Weekly, "America/New_York", "2026-03-08T12:00:00Z");
        assert_eq!(s, at("2026-03-02T05:00:00Z"));
        assert_eq!(e, at("2026-03-09T04:00:00Z"));
        assert_eq!(e - s, 7 * 24 * HOUR - HOUR);
        // Monday 00:00 UTC starts a UTC week.
        let (s, _) = bounds(Interval::Weekly, "UTC", "2026-03-09T00:00:00Z");
        assert_eq!(s, at("2026-03-09T00:00:00Z"));
        let (s, _) = bounds(Interval::Weekly, "UTC", "2026-03-08T23:59:59Z");
        assert_eq!(s, at("2026-03-02T00:00:00Z"));
    }

    #[test]
    fn months_and_years() {
        let (s, e) = bounds(Interval::Monthly, "Europe/Berlin", "2026-02-15T10:00:00Z");
        assert_eq!(s, at("2026-01-31T23:00:00Z"));
        assert_eq!(e, at("2026-02-28T23:00:00Z"));
        // December rolls over into the next year; Berlin is UTC+1 in winter.
        let (s, e) = bounds(Interval::Monthly, "Europe/Berlin", "2026-12-31T22:59:00Z");
        assert_eq!(s, at("2026-11-30T23:00:00Z"));
        assert_eq!(e, at("2026-12-31T23:00:00Z"));
        let (s, _) = bounds(Interval::Monthly, "Europe/Berlin", "2026-12-31T23:00:00Z");
        assert_eq!(s, at("2026-12-31T23:00:00Z"));
        let (s, e) = bounds(Interval::Yearly, "Asia/Tokyo", "2026-06-01T00:00:00Z");
        assert_eq!(s, at("2025-12-31T15:00:00Z"));
        assert_eq!(e, at("2026-12-31T15:00:00Z"));
        // A month holding the fall-back day is an hour longer than its days.
        let (s, e) = bounds(
            Interval::Monthly,
            "America/New_York",
            "2026-11-20T00:00:00Z",
        );
        assert_eq!(e - s, 30 * 24 * HOUR + HOUR);
    }

    #[test]
    fn rolling_and_open_windows() {
        let now = at("2026-05-10T13:45:00Z");
        let w = window(Interval::Rolling { seconds: 3600 }, zone("UTC"), now);
        assert_eq!(
            w,
            Some(Window {
                start: Some(now - HOUR),
                end: Some(now)
            })
        );
        assert_eq!(
            window(Interval::AllTime, zone("UTC"), now),
            Some(Window {
                start: None,
                end: None
            })
        );
        assert_eq!(window(Interval::PerAuthorization, zone("UTC"), now), None);
    }

    #[test]
    fn parsing() {
        assert_eq!(Interval::parse("daily", None), Ok(Interval::Daily));
        assert_eq!(
            Interval::parse("rolling", Some(60)),
            Ok(Interval::Rolling { seconds: 60 })
        );
        assert!(Interval::parse("rolling", Some(59)).is_err());
        assert!(Interval::parse("rolling", Some(7_776_001)).is_err());
        assert!(Interval::parse("rolling", None).is_err());
        assert!(Interval::parse("daily", Some(60)).is_err());
        assert!(Interval::parse("hourly", None).is_err());
        assert!(parse_zone("Mars/Olympus").is_none());
        assert!(parse_zone("America/New_York").is_some());
    }
}
