//! The overview's cards per status, kept for a few seconds per scope.
//!
//! Counting is linear in the number of cards, even from the index that holds only
//! status and project: at 100,000 cards about 13 ms on SQLite, read again by every
//! overview and every 10 s refresh of it. A count at most `FRESH_FOR` old is what an
//! operator watching the page can use; a freeze shows on the card's own page at once.

use issuing_store::console::{self as reads, Scope};
use issuing_store::{Conn, StoreError};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a scope's counts are shown without being read again.
const FRESH_FOR: Duration = Duration::from_secs(5);
/// Scopes kept; past it the cache starts over (operators and viewers are few).
const MAX_SCOPES: usize = 256;

type Counts = Vec<(String, i64)>;

#[derive(Default)]
pub(crate) struct Cache {
    /// Scope → when read, and what.
    entries: Mutex<HashMap<String, (Instant, Counts)>>,
}

impl Cache {
    /// Cards per status in `scope`, from memory when read less than `FRESH_FOR` ago.
    /// The lock is not held across the query: two requests that miss together both
    /// read, and the later answer stays.
    pub async fn get(&self, conn: &mut Conn, scope: &Scope) -> Result<Counts, StoreError> {
        let key = format!("{scope:?}");
        if let Some(hit) = self.fresh(&key, Instant::now()) {
            return Ok(hit);
        }
        let counts = reads::card_counts(conn, scope).await?;
        if let Ok(mut all) = self.entries.lock() {
            if all.len() >= MAX_SCOPES && !all.contains_key(&key) {
                all.clear();
            }
            all.insert(key, (Instant::now(), counts.clone()));
        }
        Ok(counts)
    }

    fn fresh(&self, key: &str, now: Instant) -> Option<Counts> {
        let all = self.entries.lock().ok()?;
        let (at, counts) = all.get(key)?;
        (now.saturating_duration_since(*at) < FRESH_FOR).then(|| counts.clone())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_kept_for_a_few_seconds_only() {
        let cache = Cache::default();
        let read_at = Instant::now();
        cache
            .entries
            .lock()
            .unwrap()
            .insert("s".into(), (read_at, vec![("active".into(), 3)]));
        assert_eq!(
            cache.fresh("s", read_at + Duration::from_secs(1)),
            Some(vec![("active".into(), 3)])
        );
        assert_eq!(cache.fresh("s", read_at + FRESH_FOR), None);
        assert_eq!(cache.fresh("other", read_at), None);
    }
}
