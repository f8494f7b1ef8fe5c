//! What a card's transactions count toward its limits, summed per window
//! (CONTRACT §11): from `card_usage`'s day and hour buckets (migration 0015, kept by
//! triggers) and, for a partial first hour, from the transactions themselves.

use crate::writer::{BatchConn, Param, RowRead};
use crate::{Backend, StoreError};

/// One limit's window for [`usage`]: transactions created at or after `start` (None:
/// ever), with one of `mccs` (empty: any).
#[derive(Debug, Clone, Copy)]
pub struct UsageWindow<'a> {
    pub start: Option<i64>,
    pub mccs: &'a [String],
}

/// The widths of `card_usage`'s buckets (migration 0015), in microseconds.
const DAY: i64 = 86_400_000_000;
const HOUR: i64 = 3_600_000_000;

/// What each window has counted on a card: (counted amount, authorizations), in one
/// query bounded by the earliest start.
///
/// The windows all end now, so their distinct starts, with the UTC hours and midnights
/// around each, cut the card's history into segments: whole UTC days are summed from
/// `card_usage`'s day rows, whole hours of a partial day from its hour rows (a row per
/// bucket and MCC, kept by triggers), and a segment inside one hour (a rolling window's
/// start, a time zone off the hour) from the transactions themselves. Each segment is
/// summed once per distinct MCC list, and a window's usage is the sum of the segments
/// from its start on. The cost grows with the days in the windows, 23 hours and the
/// rows of at most one partial hour per start, not with the card's history (measured:
/// the aggregate over transactions was most of what limits add to an authorization;
/// docs/benchmarks.md).
pub async fn usage(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    card_id: &str,
    windows: &[UsageWindow<'_>],
) -> Result<Vec<(i64, i64)>, StoreError> {
    if windows.is_empty() {
        return Ok(Vec::new());
    }
    let plan = UsagePlan::new(windows);
    // Every value is bound ($1 and $2 are the project and card); the SQL text only
    // depends on the windows' shape.
    let mut binds: Vec<Param<'_>> = vec![project_id.into(), card_id.into()];
    fn bind<'b>(binds: &mut Vec<Param<'b>>, v: Param<'b>) -> String {
        binds.push(v);
        format!("${}", binds.len())
    }
    // Each MCC list's test, bound once and shared by every segment. Spelled as
    // comparisons: inside a CASE, SQLite's `mcc IN (…)` costs more per row (measured on
    // 700 rows: 346 against 305 µs for the query).
    let tests: Vec<Option<String>> = plan
        .sets
        .iter()
        .map(|mccs| {
            (!mccs.is_empty()).then(|| {
                let each: Vec<String> = mccs
                    .iter()
                    .map(|m| format!("mcc = {}", bind(&mut binds, m.as_str().into())))
                    .collect();
                format!("({})", each.join(" OR "))
            })
        })
        .collect();
    let sums = |amount: &str, count: &str| -> String {
        tests
            .iter()
            .enumerate()
            .map(|(k, test)| match test {
                None => format!(
                    "CAST(COALESCE(SUM({amount}), 0) AS BIGINT) AS a{k}, \
                     CAST(COALESCE(SUM({count}), 0) AS BIGINT) AS c{k}"
                ),
                Some(when) => format!(
                    "CAST(COALESCE(SUM(CASE WHEN {when} THEN {amount} ELSE 0 END), 0) AS BIGINT) AS a{k}, \
                     CAST(COALESCE(SUM(CASE WHEN {when} THEN {count} ELSE 0 END), 0) AS BIGINT) AS c{k}"
                ),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let by_bucket = sums("spent", "used_count");
    let by_row = sums("counted_amount", "1");
    let selects: Vec<String> = plan
        .segments
        .iter()
        .enumerate()
        .map(|(j, seg)| {
            let (column, from, sums) = match seg.sums.span() {
                Some(span) => (
                    "bucket",
                    format!("card_usage WHERE project_id = $1 AND card_id = $2 AND span = {span}"),
                    &by_bucket,
                ),
                None => (
                    "created_at",
                    "card_transactions WHERE project_id = $1 AND card_id = $2 AND counts = 1"
                        .to_owned(),
                    &by_row,
                ),
            };
            let mut range = String::new();
            if let Some(v) = seg.from {
                range.push_str(&format!(" AND {column} >= {}", bind(&mut binds, v.into())));
            }
            if let Some(v) = seg.until {
                range.push_str(&format!(" AND {column} < {}", bind(&mut binds, v.into())));
            }
            format!("SELECT CAST({j} AS BIGINT) AS seg, {sums} FROM {from}{range}")
        })
        .collect();
    let sql = selects.join(" UNION ALL ");
    let rows = conn.rows(&sql, &binds).await?;
    let mut by_segment = vec![Vec::new(); plan.segments.len()];
    for row in &rows {
        let seg = row.int("seg")?;
        let sums = (0..plan.sets.len())
            .map(|k| Ok((row.int(&format!("a{k}"))?, row.int(&format!("c{k}"))?)))
            .collect::<Result<Vec<_>, StoreError>>()?;
        let slot = usize::try_from(seg)
            .ok()
            .and_then(|i| by_segment.get_mut(i))
            .ok_or_else(|| StoreError::Corrupt(format!("usage segment {seg} out of range")))?;
        *slot = sums;
    }
    if by_segment.iter().any(Vec::is_empty) {
        return Err(StoreError::Corrupt("usage segment missing".into()));
    }
    Ok(plan.combine(&by_segment))
}

/// [`usage`] for several cards of one project, each with its windows, in the cards'
/// order. On PostgreSQL one statement whose text never changes, whatever the cards and
/// their windows: a statement per card cost an authorizations' batch a round trip per
/// card with limits, and one statement made of per-card parts had a text (and a plan)
/// per number of cards, which was slower still (docs/benchmarks.md, issue 21's twelfth
/// round). On SQLite [`usage`] per card: on the writer's thread a statement costs
/// microseconds.
pub async fn usage_many(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    cards: &[(&str, &[UsageWindow<'_>])],
) -> Result<Vec<Vec<(i64, i64)>>, StoreError> {
    if conn.backend() != Backend::Postgres {
        let mut found = Vec::with_capacity(cards.len());
        for (card_id, windows) in cards {
            found.push(usage(conn, project_id, card_id, windows).await?);
        }
        return Ok(found);
    }
    let plans: Vec<Option<UsagePlan<'_>>> = cards
        .iter()
        .map(|(_, windows)| (!windows.is_empty()).then(|| UsagePlan::new(windows)))
        .collect();
    // One input row per card, segment and MCC list; `asked[i]` is row i's
    // (card, segment, list) by place. Written as text: the card and its lists are
    // encoded once per card, not once per row as a map of values.
    let mut asked: Vec<(usize, usize, usize)> = Vec::new();
    let mut input = Vec::new();
    for (c, ((card_id, _), plan)) in cards.iter().zip(&plans).enumerate() {
        let Some(plan) = plan else { continue };
        let card = serde_json::Value::from(*card_id).to_string();
        let sets: Vec<String> = plan
            .sets
            .iter()
            .map(|mccs| crate::query::json_texts(mccs.iter().map(String::as_str)))
            .collect();
        for (j, seg) in plan.segments.iter().enumerate() {
            for (k, set) in sets.iter().enumerate() {
                input.push(format!(
                    r#"{{"i":{},"c":{card},"s":{},"f":{},"u":{},"m":{set}}}"#,
                    asked.len(),
                    JsonInt(seg.sums.span()),
                    JsonInt(seg.from),
                    JsonInt(seg.until),
                ));
                asked.push((c, j, k));
            }
        }
    }
    let mut by_segment: Vec<Vec<Vec<(i64, i64)>>> = plans
        .iter()
        .map(|plan| match plan {
            Some(p) => vec![vec![(0, 0); p.sets.len()]; p.segments.len()],
            None => Vec::new(),
        })
        .collect();
    if !asked.is_empty() {
        let list = format!("[{}]", input.join(","));
        let rows = conn
            .rows(USAGE_MANY, &[project_id.into(), Param::Text(Some(&list))])
            .await?;
        if rows.len() != asked.len() {
            return Err(StoreError::Corrupt("usage segment missing".into()));
        }
        for row in &rows {
            let i = row.int("i")?;
            let slot = usize::try_from(i)
                .ok()
                .and_then(|i| asked.get(i))
                .and_then(|&(c, j, k)| by_segment.get_mut(c)?.get_mut(j)?.get_mut(k))
                .ok_or_else(|| StoreError::Corrupt(format!("usage row {i} out of range")))?;
            *slot = (row.int("a")?, row.int("n")?);
        }
    }
    Ok(plans
        .iter()
        .zip(&by_segment)
        .map(|(plan, sums)| plan.as_ref().map(|p| p.combine(sums)).unwrap_or_default())
        .collect())
}

/// A number in JSON, or `null`.
struct JsonInt(Option<i64>);

impl std::fmt::Display for JsonInt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v}"),
            None => f.write_str("null"),
        }
    }
}

/// [`usage_many`]'s statement: per input row (a card, a segment, a list of MCCs, empty
/// for any) the sums of the segment's buckets of its width (`s`), or of its
/// transactions (`s` null), as [`usage`] sums them. A row the card has nothing in sums
/// to zero. The bounds are index conditions on `card_usage`'s key and
/// `card_transactions_usage` (an open end compares with the extreme value).
const USAGE_MANY: &str = "SELECT q.i, CAST(COALESCE(SUM(x.a), 0) AS BIGINT) AS a, \
     CAST(COALESCE(SUM(x.n), 0) AS BIGINT) AS n \
     FROM json_to_recordset(CAST($2 AS json)) AS q(i BIGINT, c TEXT, s BIGINT, f BIGINT, u BIGINT, m TEXT[]) \
     LEFT JOIN LATERAL ( \
       SELECT b.spent AS a, b.used_count AS n FROM card_usage b \
       WHERE q.s IS NOT NULL AND b.project_id = $1 AND b.card_id = q.c AND b.span = q.s \
         AND b.bucket >= COALESCE(q.f, -9223372036854775807) \
         AND b.bucket < COALESCE(q.u, 9223372036854775807) \
         AND (cardinality(q.m) = 0 OR b.mcc = ANY(q.m)) \
       UNION ALL \
       SELECT t.counted_amount, 1 FROM card_transactions t \
       WHERE q.s IS NULL AND t.project_id = $1 AND t.card_id = q.c AND t.counts = 1 \
         AND t.created_at >= COALESCE(q.f, -9223372036854775807) \
         AND t.created_at < COALESCE(q.u, 9223372036854775807) \
         AND (cardinality(q.m) = 0 OR t.mcc = ANY(q.m)) \
     ) x ON true GROUP BY q.i";

/// A stretch of a card's history between two cuts (None: unbounded).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct Segment {
    from: Option<i64>,
    until: Option<i64>,
    sums: Sums,
}

/// Where a segment is summed from: a narrower one is only ever asked for less than
/// one bucket of the next (`UsagePlan::new` cuts so).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum Sums {
    /// Both ends UTC midnights or unbounded.
    Days,
    /// Both ends whole hours, inside one day.
    Hours,
    /// Inside one hour.
    Transactions,
}

impl Sums {
    /// The width of the `card_usage` buckets summed, or None: the transactions.
    fn span(self) -> Option<i64> {
        match self {
            Sums::Days => Some(DAY),
            Sums::Hours => Some(HOUR),
            Sums::Transactions => None,
        }
    }
}

/// How [`usage`] splits its windows: the segments in order from the earliest start, the
/// distinct MCC lists, and each window's first segment and list by position.
#[derive(Debug, PartialEq)]
struct UsagePlan<'a> {
    segments: Vec<Segment>,
    sets: Vec<&'a [String]>,
    /// Per window: (index of its first segment, index in `sets`).
    windows: Vec<(usize, usize)>,
}

impl<'a> UsagePlan<'a> {
    fn new(windows: &[UsageWindow<'a>]) -> UsagePlan<'a> {
        // Every start, and the bucket starts on both sides of it for each width it is
        // not aligned to: a segment between two consecutive cuts is then whole days,
        // whole hours inside one day, or inside one hour.
        let mut cuts: Vec<i64> = Vec::with_capacity(windows.len() * 5);
        for s in windows.iter().filter_map(|w| w.start) {
            cuts.push(s);
            for width in [DAY, HOUR] {
                let floor = s - s.rem_euclid(width);
                if floor != s {
                    cuts.push(floor);
                    cuts.push(floor.saturating_add(width));
                }
            }
        }
        cuts.sort_unstable();
        cuts.dedup();
        let earliest = if windows.iter().any(|w| w.start.is_none()) {
            None
        } else {
            windows.iter().filter_map(|w| w.start).min()
        };
        let mut froms: Vec<Option<i64>> = Vec::with_capacity(cuts.len() + 1);
        if earliest.is_none() {
            froms.push(None);
        }
        froms.extend(
            cuts.iter()
                .copied()
                .filter(|&c| earliest.is_none_or(|e| c >= e))
                .map(Some),
        );
        let segments: Vec<Segment> = froms
            .iter()
            .enumerate()
            .map(|(i, &from)| {
                let until = froms.get(i + 1).copied().flatten();
                let whole = |t: Option<i64>, width: i64| t.is_none_or(|t| t.rem_euclid(width) == 0);
                let sums = if whole(from, DAY) && whole(until, DAY) {
                    Sums::Days
                } else if whole(from, HOUR) && whole(until, HOUR) {
                    Sums::Hours
                } else {
                    Sums::Transactions
                };
                Segment { from, until, sums }
            })
            .collect();
        let mut sets: Vec<&'a [String]> = Vec::new();
        let windows = windows
            .iter()
            .map(|w| {
                let first = segments.iter().position(|s| s.from == w.start).unwrap_or(0);
                let set = match sets.iter().position(|s| *s == w.mccs) {
                    Some(k) => k,
                    None => {
                        sets.push(w.mccs);
                        sets.len() - 1
                    }
                };
                (first, set)
            })
            .collect();
        UsagePlan {
            segments,
            sets,
            windows,
        }
    }

    /// Each window's (amount, count): its list's sums over the segments from its start.
    fn combine(&self, by_segment: &[Vec<(i64, i64)>]) -> Vec<(i64, i64)> {
        self.windows
            .iter()
            .map(|&(start, set)| {
                by_segment[start..]
                    .iter()
                    .filter_map(|sums| sums.get(set))
                    .fold((0i64, 0i64), |(a, c), (sa, sc)| {
                        (a.saturating_add(*sa), c.saturating_add(*sc))
                    })
            })
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
pub(crate) mod tests {
    use super::*;
    use crate::writer::AsBatch;
    use sqlx::Row;

    const H: i64 = 3_600_000_000;

    fn seg(from: Option<i64>, until: Option<i64>, sums: Sums) -> Segment {
        Segment { from, until, sums }
    }

    /// Whole days come from the day rows, whole hours of a partial day from the hour
    /// rows, and only what lies inside an hour (a start off the hour: UTC+5:30, a
    /// rolling window) from the transactions; "ever" reads every day before the first
    /// cut.
    #[test]
    fn each_stretch_is_read_from_the_widest_buckets_that_fit() {
        use Sums::{Days, Hours, Transactions};
        let food = vec!["5814".to_owned()];
        let none: Vec<String> = Vec::new();
        let today = 20_000 * DAY;
        let kolkata = today - DAY + 18 * H + H / 2;
        let windows = [
            // daily in UTC
            UsageWindow {
                start: Some(today),
                mccs: &none,
            },
            // daily in UTC+5:30 (local midnight 18:30 UTC yesterday), food only
            UsageWindow {
                start: Some(kolkata),
                mccs: &food,
            },
            // all time
            UsageWindow {
                start: None,
                mccs: &none,
            },
            // rolling, starting at a whole hour of today
            UsageWindow {
                start: Some(today + 3 * H),
                mccs: &none,
            },
        ];
        let plan = UsagePlan::new(&windows);
        assert_eq!(
            plan.segments,
            [
                seg(None, Some(today - DAY), Days),
                seg(Some(today - DAY), Some(today - DAY + 18 * H), Hours),
                seg(Some(today - DAY + 18 * H), Some(kolkata), Transactions),
                seg(Some(kolkata), Some(today - DAY + 19 * H), Transactions),
                seg(Some(today - DAY + 19 * H), Some(today), Hours),
                seg(Some(today), Some(today + 3 * H), Hours),
                seg(Some(today + 3 * H), Some(today + DAY), Hours),
                seg(Some(today + DAY), None, Days),
            ]
        );
        assert_eq!(plan.sets.len(), 2);
        assert_eq!(plan.windows, [(5, 0), (3, 1), (0, 0), (6, 0)]);
        // (all, food) per segment.
        let segments = [
            vec![(1000, 10), (100, 1)],
            vec![(7, 1), (0, 0)],
            vec![(1, 1), (1, 1)],
            vec![(20, 2), (4, 1)],
            vec![(3, 1), (3, 1)],
            vec![(300, 3), (0, 0)],
            vec![(5, 1), (5, 1)],
            vec![(0, 0), (0, 0)],
        ];
        assert_eq!(
            plan.combine(&segments),
            [(305, 4), (12, 3), (1336, 19), (5, 1)]
        );
    }

    /// Without an unbounded window nothing before the earliest start is read, and a
    /// start at midnight needs no partial day.
    #[test]
    fn reading_starts_at_the_earliest_start() {
        let none: Vec<String> = Vec::new();
        let month = 20_000 * DAY;
        let windows = [
            UsageWindow {
                start: Some(month),
                mccs: &none,
            },
            UsageWindow {
                start: Some(month + 9 * DAY),
                mccs: &none,
            },
        ];
        let plan = UsagePlan::new(&windows);
        assert_eq!(
            plan.segments,
            [
                seg(Some(month), Some(month + 9 * DAY), Sums::Days),
                seg(Some(month + 9 * DAY), None, Sums::Days),
            ]
        );
        assert_eq!(plan.windows, [(0, 0), (1, 0)]);
    }

    /// A deterministic xorshift: the same cases on every run and backend.
    pub(crate) struct Rng(pub(crate) u64);

    impl Rng {
        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Random transactions over five days (inserted, changed, moved across hours and
    /// days, deleted: every trigger), then random windows (midnights, whole hours, half
    /// hours, any microsecond, "ever"; MCC lists or none): `usage` must equal the sum
    /// over the transactions themselves, and `verify` must find the buckets whole.
    /// Called by `ledger::tests` on each backend, which owns the databases.
    pub(crate) async fn usage_equals_the_transactions_sum(store: &crate::Store) {
        let mut conn = store.conn().await.unwrap();
        for sql in [
            "INSERT INTO projects (id, name, created_at) VALUES ('up', 'up', 0)",
            "INSERT INTO users (id, project_id, external_user_id, created_at, updated_at) \
             VALUES ('uu', 'up', 'u', 0, 0)",
            "INSERT INTO cardholders (id, project_id, user_id, external_user_id, subprovider_code, \
             registration_status, kyc_status, kyc_level, created_at, updated_at) \
             VALUES ('uh', 'up', 'uu', 'u', 's', 'r', 'k', 'l', 0, 0)",
            "INSERT INTO cards (id, project_id, user_id, external_user_id, cardholder_id, \
             product_code, subprovider_code, card_currency, status, created_at, updated_at) \
             VALUES ('uc', 'up', 'uu', 'u', 'uh', 'p', 's', 'USD', 'active', 0, 0)",
        ] {
            sqlx::query(sql).execute(&mut *conn).await.unwrap();
        }
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let base = 20_000 * DAY;
        let mccs = ["5411", "5814", "7995"];
        let mcc = |rng: &mut Rng| mccs.get(rng.below(4) as usize).map(|m| m.to_string());
        let at = |rng: &mut Rng| base + rng.below(5 * DAY as u64) as i64;
        for i in 0..400 {
            sqlx::query(
                "INSERT INTO card_transactions (id, project_id, card_id, tx_kind, status, tx_type, \
                 auth_amount, held, card_amount, merchant, merchant_currency, merchant_amount, \
                 created_at, updated_at, mcc, counted_amount, counts) \
                 VALUES ($1, 'up', 'uc', 'auth', 'pending', 'purchase', 0, 0, 0, '{}', 'USD', 0, \
                 $2, 0, $3, $4, $5)",
            )
            .bind(format!("t{i}"))
            .bind(at(&mut rng))
            .bind(mcc(&mut rng))
            .bind(rng.below(1_000) as i64)
            .bind(i64::from(rng.below(5) != 0))
            .execute(&mut *conn)
            .await
            .unwrap();
        }
        for _ in 0..300 {
            let id = format!("t{}", rng.below(400));
            let q = match rng.below(5) {
                0 => sqlx::query("UPDATE card_transactions SET counted_amount = $1 WHERE id = $2")
                    .bind(rng.below(1_000) as i64),
                1 => sqlx::query("UPDATE card_transactions SET counts = $1 WHERE id = $2")
                    .bind(rng.below(2) as i64),
                2 => sqlx::query("UPDATE card_transactions SET created_at = $1 WHERE id = $2")
                    .bind(at(&mut rng)),
                3 => sqlx::query("UPDATE card_transactions SET mcc = $1 WHERE id = $2")
                    .bind(mcc(&mut rng)),
                _ => {
                    sqlx::query("DELETE FROM card_transactions WHERE id = $2 OR $1 = 0").bind(1_i64)
                }
            };
            q.bind(id).execute(&mut *conn).await.unwrap();
        }
        let rows: Vec<(i64, Option<String>, i64)> = sqlx::query(
            "SELECT created_at, mcc, counted_amount FROM card_transactions \
             WHERE card_id = 'uc' AND counts = 1",
        )
        .fetch_all(&mut *conn)
        .await
        .unwrap()
        .iter()
        .map(|r| {
            (
                r.try_get("created_at").unwrap(),
                r.try_get("mcc").unwrap(),
                r.try_get("counted_amount").unwrap(),
            )
        })
        .collect();
        let lists: Vec<Vec<String>> = vec![
            vec![],
            vec!["5411".into()],
            vec!["5814".into(), "7995".into()],
        ];
        for case in 0..300 {
            let n = 1 + rng.below(4) as usize;
            let starts: Vec<Option<i64>> = (0..n)
                .map(|_| match rng.below(5) {
                    0 => None,
                    1 => Some(base + rng.below(6) as i64 * DAY),
                    2 => Some(base + rng.below(6 * 24) as i64 * HOUR),
                    3 => Some(base + rng.below(6 * 48) as i64 * HOUR / 2),
                    _ => Some(base - DAY + rng.below(7 * DAY as u64) as i64),
                })
                .collect();
            let sets: Vec<usize> = (0..n).map(|_| rng.below(3) as usize).collect();
            let windows: Vec<UsageWindow<'_>> = starts
                .iter()
                .zip(&sets)
                .map(|(&start, &k)| UsageWindow {
                    start,
                    mccs: &lists[k],
                })
                .collect();
            let got = usage(&mut conn.as_batch(), "up", "uc", &windows)
                .await
                .unwrap();
            if case % 10 == 0 {
                // The same through a batch writer's connection (SQLite: its own thread).
                let owned: Vec<(Option<i64>, Vec<String>)> =
                    windows.iter().map(|w| (w.start, w.mccs.to_vec())).collect();
                let (batch, durable) = store
                    .write_batch(move |mut c| {
                        Box::pin(async move {
                            let windows: Vec<UsageWindow<'_>> = owned
                                .iter()
                                .map(|(start, mccs)| UsageWindow {
                                    start: *start,
                                    mccs,
                                })
                                .collect();
                            usage(&mut c, "up", "uc", &windows).await
                        })
                    })
                    .await
                    .unwrap();
                durable.wait().await.unwrap();
                assert_eq!(batch, got, "case {case} through the batch writer");
            }
            let want: Vec<(i64, i64)> = windows
                .iter()
                .map(|w| {
                    rows.iter()
                        .filter(|(t, m, _)| {
                            w.start.is_none_or(|s| *t >= s)
                                && (w.mccs.is_empty()
                                    || m.as_ref().is_some_and(|m| w.mccs.contains(m)))
                        })
                        .fold((0, 0), |(a, c), (_, _, v)| (a + v, c + 1))
                })
                .collect();
            assert_eq!(got, want, "case {case}: {starts:?} {sets:?}");
            // The same among other cards in one statement: a card with no transactions
            // counts nothing, one without windows answers nothing, and another
            // project's view of the card counts nothing.
            let zeros = vec![(0, 0); windows.len()];
            let many = usage_many(
                &mut conn.as_batch(),
                "up",
                &[("none", &windows), ("uc", &[]), ("uc", &windows)],
            )
            .await
            .unwrap();
            assert_eq!(
                many,
                [zeros.clone(), Vec::new(), got],
                "case {case} among cards"
            );
            let elsewhere = usage_many(&mut conn.as_batch(), "zz", &[("uc", &windows)])
                .await
                .unwrap();
            assert_eq!(elsewhere, [zeros], "case {case} in another project");
        }
        let found = crate::ledger::verify(&mut conn).await.unwrap();
        assert!(found.is_empty(), "{found:?}");
    }
}
