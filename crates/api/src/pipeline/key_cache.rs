//! Unsealed API keys, cached for a short time so a request does not pay a database
//! lookup and a master-key decryption. The TTL bounds staleness: a revoked or expired
//! key, or a suspended project, is refused by every process within `KEY_CACHE_TTL`.
//! Unknown keys are not cached (the rate limit bounds what they cost).

use issuing_envelope::Key;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub(crate) const KEY_CACHE_TTL: Duration = Duration::from_secs(2);
/// Keys held at once; a full cache drops its expired entries, then everything.
const MAX_KEYS: usize = 10_000;

#[derive(Clone)]
pub(crate) struct CachedKey {
    pub project_id: String,
    pub active: bool,
    pub key: Key,
}

#[derive(Default)]
pub(crate) struct KeyCache {
    entries: Mutex<HashMap<String, (Instant, CachedKey)>>,
}

impl KeyCache {
    pub fn get(&self, api_key: &str, now: Instant) -> Option<CachedKey> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(api_key)
            .filter(|(at, _)| now.duration_since(*at) < KEY_CACHE_TTL)
            .map(|(_, k)| k.clone())
    }

    pub fn put(&self, api_key: &str, key: CachedKey, now: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= MAX_KEYS && !entries.contains_key(api_key) {
            entries.retain(|_, (at, _)| now.duration_since(*at) < KEY_CACHE_TTL);
            if entries.len() >= MAX_KEYS {
                entries.clear();
            }
        }
        entries.insert(api_key.to_owned(), (now, key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached() -> CachedKey {
        CachedKey {
            project_id: "p".into(),
            active: true,
            key: Key::from_secret("s"),
        }
    }

    #[test]
    fn entries_expire_and_the_cache_stays_bounded() {
        let c = KeyCache::default();
        let t0 = Instant::now();
        c.put("k", cached(), t0);
        assert!(c.get("k", t0 + Duration::from_millis(100)).is_some());
        assert!(
            c.get("k", t0 + KEY_CACHE_TTL).is_none(),
            "stale after the TTL"
        );
        for i in 0..(MAX_KEYS + 10) {
            c.put(&format!("k{i}"), cached(), t0);
        }
        let len = c.entries.lock().unwrap().len();
        assert!(len <= MAX_KEYS, "{len}");
    }
}
