//! The overview's chart: authorizations approved and declined per minute over the last
//! 24 hours, drawn as SVG on the server.
//!
//! Finished minutes never change, so each scope's counts are kept in memory and a
//! refresh reads only the last two minutes (late commits included) instead of a day of
//! transactions.

use issuing_store::console::{self as reads, Scope};
use issuing_store::{Conn, StoreError};
use std::collections::{BTreeMap, HashMap};
use tokio::sync::Mutex;

const MINUTE: i64 = 60 * 1_000_000;
/// Minutes drawn: 24 hours.
pub(crate) const MINUTES: i64 = 24 * 60;
/// Scopes whose counts are kept; past it the cache starts over (viewers are few).
const MAX_SCOPES: usize = 256;
/// The SVG's drawing area, in its own units.
const HEIGHT: i64 = 160;
const TOP: i64 = 10;

#[derive(Default)]
pub(crate) struct Cache {
    series: Mutex<HashMap<String, Series>>,
}

struct Series {
    /// Minute → (approved, declined).
    minutes: BTreeMap<i64, (i64, i64)>,
    /// The first minute that must be read again.
    fresh_from: i64,
}

/// The counts of the 24 hours before `now`, oldest minute first: (minute, approved,
/// declined), minutes without authorizations left out.
async fn counts(
    cache: &Cache,
    conn: &mut Conn,
    scope: &Scope,
    now: i64,
) -> Result<Vec<(i64, i64, i64)>, StoreError> {
    let current = now.div_euclid(MINUTE);
    let first = current - (MINUTES - 1);
    let key = format!("{scope:?}");
    let mut all = cache.series.lock().await;
    if all.len() >= MAX_SCOPES && !all.contains_key(&key) {
        all.clear();
    }
    let series = all.entry(key).or_insert_with(|| Series {
        minutes: BTreeMap::new(),
        fresh_from: first,
    });
    let from = series.fresh_from.max(first);
    let rows = reads::auth_decisions_by_minute(conn, scope, from * MINUTE).await?;
    series.minutes.retain(|m, _| *m >= first && *m < from);
    for (minute, approved, declined) in rows {
        series.minutes.insert(minute, (approved, declined));
    }
    // A transaction is stamped before its commit: read the last minute again next time.
    series.fresh_from = current - 1;
    Ok(series
        .minutes
        .iter()
        .map(|(m, (a, d))| (*m, *a, *d))
        .collect())
}

pub(crate) struct Bar {
    pub x: i64,
    pub approved_y: i64,
    pub approved_h: i64,
    pub declined_y: i64,
    pub declined_h: i64,
}

pub(crate) struct Tick {
    pub x: i64,
    pub label: String,
}

/// What the template draws: one bar per minute (approved below, declined stacked on
/// top), hour ticks, and the totals.
pub(crate) struct Chart {
    pub width: i64,
    pub height: i64,
    pub base: i64,
    pub bars: Vec<Bar>,
    pub ticks: Vec<Tick>,
    pub peak: i64,
    pub approved: i64,
    pub declined: i64,
}

pub(crate) async fn chart(
    cache: &Cache,
    conn: &mut Conn,
    scope: &Scope,
    now: i64,
) -> Result<Chart, StoreError> {
    let counts = counts(cache, conn, scope, now).await?;
    Ok(draw(&counts, now))
}

fn draw(counts: &[(i64, i64, i64)], now: i64) -> Chart {
    let current = now.div_euclid(MINUTE);
    let first = current - (MINUTES - 1);
    let counts: Vec<&(i64, i64, i64)> = counts.iter().filter(|(m, _, _)| *m >= first).collect();
    let peak = counts
        .iter()
        .map(|(_, a, d)| a + d)
        .max()
        .unwrap_or(0)
        .max(1);
    let scale = |n: i64| (n * HEIGHT + peak - 1) / peak;
    let base = TOP + HEIGHT;
    let bars = counts
        .iter()
        .map(|(m, a, d)| {
            let (ah, dh) = (scale(*a), scale(*d));
            Bar {
                x: m - first,
                approved_y: base - ah,
                approved_h: ah,
                declined_y: base - ah - dh,
                declined_h: dh,
            }
        })
        .collect();
    // A tick at every third full hour (UTC).
    let ticks = (first..=current)
        .filter(|m| m.rem_euclid(180) == 0)
        .map(|m| Tick {
            x: m - first,
            label: chrono::DateTime::<chrono::Utc>::from_timestamp(m * 60, 0)
                .map(|t| t.format("%H:%M").to_string())
                .unwrap_or_default(),
        })
        .collect();
    Chart {
        width: MINUTES,
        height: base + 20,
        base,
        bars,
        ticks,
        peak,
        approved: counts.iter().map(|(_, a, _)| a).sum(),
        declined: counts.iter().map(|(_, _, d)| d).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_declines_on_approvals_within_the_day() {
        let now = 1_700_000_000 * 1_000_000;
        let current = now / MINUTE;
        let counts = [
            (current - MINUTES, 5, 5), // a day ago: outside
            (current - 10, 3, 1),
            (current, 0, 4),
        ];
        let c = draw(&counts, now);
        assert_eq!(c.bars.len(), 2);
        assert_eq!((c.peak, c.approved, c.declined), (4, 3, 5), "the day only");
        let b = &c.bars[0];
        assert_eq!(b.x, MINUTES - 1 - 10);
        assert_eq!(b.approved_y + b.approved_h, c.base);
        assert_eq!(b.declined_y + b.declined_h, b.approved_y);
        assert_eq!(c.bars[1].approved_h, 0);
        assert_eq!(c.bars[1].declined_h, HEIGHT);
        assert_eq!(b.approved_h, 3 * HEIGHT / 4);
        assert!(!c.ticks.is_empty());
    }
}
