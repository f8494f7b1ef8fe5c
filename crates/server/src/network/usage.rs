//! What a card's limits have counted in their current windows: one aggregate query
//! (`card_usage::usage`) over what the card's transactions count, kept per UTC day, UTC
//! hour and MCC and read row by row only for a window's partial first hour. Nothing is
//! kept per limit, so changing limits or their time zone never resets usage, and calendar
//! windows in any time zone and rolling windows are exact.

use super::decide::limits::{windows, CardLimits};
use issuing_domain::controls::limits::Usage;
use issuing_store::card_usage::{self, UsageWindow};
use issuing_store::writer::BatchConn;
use issuing_store::StoreError;

/// Each limit's usage (`Usage::default()` for per-authorization limits), at `now`.
pub(crate) async fn read(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    card_id: &str,
    card: &CardLimits,
    now: i64,
) -> Result<Vec<Usage>, StoreError> {
    let windows = windows(card, now);
    let asked: Vec<UsageWindow<'_>> = windows
        .iter()
        .zip(&card.limits)
        .filter_map(|(w, l)| {
            w.map(|w| UsageWindow {
                start: w.start,
                mccs: &l.mccs,
            })
        })
        .collect();
    let mut answers = card_usage::usage(conn, project_id, card_id, &asked)
        .await?
        .into_iter();
    Ok(windows
        .iter()
        .map(|w| match w {
            None => Usage::default(),
            Some(_) => answers
                .next()
                .map(|(spent, used_count)| Usage { spent, used_count })
                .unwrap_or_default(),
        })
        .collect())
}
