//! A card's limits with what each current window has counted: the answer of
//! cards/limits/set and cards/limits/get, and what the console's card page shows, so
//! both read the same numbers.

use super::decide::limits::{of_card, windows, CardLimits as Parsed};
use super::usage;
use issuing_domain::controls::limits::{self, Usage};
use issuing_domain::controls::window::Interval;
use issuing_domain::time::to_rfc3339;
use issuing_store::cards::CardRecord;
use issuing_store::writer::AsBatch;
use issuing_store::Conn;
use issuing_wire::api::{CardLimitUsage, CardLimits};
use issuing_wire::{Amount, ApiError};

/// The card's limits with their usage at `now` (also what the console's card page
/// shows, so both read the same numbers).
pub async fn view(conn: &mut Conn, card: &CardRecord, now: i64) -> Result<CardLimits, ApiError> {
    let zone = card
        .limits_timezone
        .clone()
        .unwrap_or_else(|| limits::DEFAULT_ZONE.to_owned());
    let Some(parsed) = of_card(card)? else {
        return Ok(CardLimits {
            card_id: card.id.clone(),
            timezone: zone,
            limits: Vec::new(),
        });
    };
    let used = usage::read(
        &mut conn.as_batch(),
        &card.project_id,
        &card.id,
        &parsed,
        now,
    )
    .await?;
    Ok(CardLimits {
        card_id: card.id.clone(),
        timezone: zone,
        limits: items(&parsed, &used, now),
    })
}

fn items(parsed: &Parsed, used: &[Usage], now: i64) -> Vec<CardLimitUsage> {
    let windows = windows(parsed, now);
    parsed
        .limits
        .iter()
        .zip(used)
        .zip(windows)
        .map(|((l, u), w)| {
            let unsigned = |n: i64| u64::try_from(n.max(0)).unwrap_or(0);
            CardLimitUsage {
                interval: l.interval.name().to_owned(),
                amount: l.amount.map(|a| Amount::from_micros(a).into()),
                count: l.count,
                window_seconds: match l.interval {
                    Interval::Rolling { seconds } => Some(seconds),
                    _ => None,
                },
                mccs: l.mccs.clone(),
                spent: Amount::from_micros(u.spent).into(),
                used_count: unsigned(u.used_count),
                remaining_amount: l
                    .amount
                    .map(|a| Amount::from_micros((a - u.spent).max(0)).into()),
                remaining_count: l.count.map(|c| unsigned(i64::from(c) - u.used_count)),
                window_start: w.and_then(|w| w.start).map(to_rfc3339),
                window_end: w.and_then(|w| w.end).map(to_rfc3339),
            }
        })
        .collect()
}
