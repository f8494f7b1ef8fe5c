//! What a card's limits have counted in their current windows: one aggregate query
//! (`card_usage::usage`) over what the card's transactions count, kept per UTC day, UTC
//! hour and MCC and read row by row only for a window's partial first hour. Nothing is
//! kept per limit, so changing limits or their time zone never resets usage, and calendar
//! windows in any time zone and rolling windows are exact.

use super::decide::limits::{windows, CardLimits};
use issuing_domain::controls::limits::Usage;
use issuing_domain::controls::window::Window;
use issuing_store::card_usage::{self, UsageWindow};
use issuing_store::writer::BatchConn;
use issuing_store::StoreError;

/// Each limit's usage (`Usage::default()` for per-authorization limits), at `now`.
pub async fn read(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    card_id: &str,
    card: &CardLimits,
    now: i64,
) -> Result<Vec<Usage>, StoreError> {
    let windows = windows(card, now);
    let asked = asked(card, &windows);
    let answers = card_usage::usage(conn, project_id, card_id, &asked).await?;
    Ok(answer(&windows, answers))
}

/// [`read`] for several cards of one project, in the cards' order: one statement on
/// PostgreSQL (`card_usage::usage_many`), so a batch of authorizations pays one round
/// trip for its cards' limits, not one per card.
pub async fn read_many(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    cards: &[(&str, &CardLimits)],
    now: i64,
) -> Result<Vec<Vec<Usage>>, StoreError> {
    let windows: Vec<Vec<Option<Window>>> = cards.iter().map(|(_, l)| windows(l, now)).collect();
    let asked: Vec<Vec<UsageWindow<'_>>> = cards
        .iter()
        .zip(&windows)
        .map(|((_, l), w)| asked(l, w))
        .collect();
    let each: Vec<(&str, &[UsageWindow<'_>])> = cards
        .iter()
        .zip(&asked)
        .map(|((id, _), a)| (*id, a.as_slice()))
        .collect();
    let answers = card_usage::usage_many(conn, project_id, &each).await?;
    Ok(windows
        .iter()
        .zip(answers)
        .map(|(w, a)| answer(w, a))
        .collect())
}

/// The windows a card's limits sum over (a per-authorization limit has none).
fn asked<'a>(card: &'a CardLimits, windows: &[Option<Window>]) -> Vec<UsageWindow<'a>> {
    windows
        .iter()
        .zip(&card.limits)
        .filter_map(|(w, l)| {
            w.map(|w| UsageWindow {
                start: w.start,
                mccs: &l.mccs,
            })
        })
        .collect()
}

/// Each limit's usage from the sums of the windows it has, in the limits' order.
fn answer(windows: &[Option<Window>], sums: Vec<(i64, i64)>) -> Vec<Usage> {
    let mut sums = sums.into_iter();
    windows
        .iter()
        .map(|w| match w {
            None => Usage::default(),
            Some(_) => sums
                .next()
                .map(|(spent, used_count)| Usage { spent, used_count })
                .unwrap_or_default(),
        })
        .collect()
}
