//! The in-memory replay guard (SQLite). Accepted requests live in sharded hash sets
//! until their timestamps leave the window. Durability comes from a ceiling kept in the
//! database: every timestamp this process accepts is below the stored ceiling. A
//! background task keeps the ceiling ~0.5 s ahead of the clock (a few small writes per
//! second), so ordinary requests never wait for it; a request signed further ahead
//! raises it first.
//!
//! How a successor starts (CONTRACT §13):
//! - after a graceful stop (`hand_over`, once no request is being served any more): it
//!   loads the requests its predecessor accepted that are still inside the window and
//!   refuses exactly their copies; no fence;
//! - after a crash: it refuses every timestamp below the ceiling its predecessor left
//!   (the fence), even for requests that never reached the old process: the client
//!   signs again;
//! - on a fresh database: no fence and nothing to remember.

use super::Admission;
use issuing_domain::time::now_micros;
use issuing_store::{replay, Store, StoreError};
use rand::RngCore;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

const SHARDS: usize = 16;
const _: () = assert!(SHARDS.is_power_of_two(), "shard_of keeps the top bits");
/// Bound on remembered requests: ~16 k/s sustained over a ±30 s window. Each costs about
/// 24 bytes, so the guard stays under ~40 MB.
const MAX_ENTRIES: usize = 1_000_000;
const PER_SHARD: usize = MAX_ENTRIES / SHARDS;
/// How far the ceiling is kept ahead of the clock.
const HEADROOM_MICROS: i64 = 500_000;
/// Below this much headroom the background task raises the ceiling.
const LOW_WATER_MICROS: i64 = 300_000;
const KEEP_AHEAD_EVERY: Duration = Duration::from_millis(100);
/// Longest wait at start for the clock to pass the fence.
const MAX_START_WAIT_MICROS: i64 = 2_000_000;

/// (hash of API key and path, request_timestamp) → expires_at. A 64-bit hash collision
/// between two different keys or paths with the same microsecond timestamp would refuse
/// a fresh request as a duplicate (the safe direction); it is vanishingly unlikely.
type Shard = HashMap<(u64, i64), i64>;

pub(crate) struct MemoryGuard {
    shards: Vec<Mutex<Shard>>,
    /// Keys the hash of (API key, path): random per guard, handed over with its
    /// entries. SHA-256 rather than the std hasher, whose output may change between
    /// Rust releases, so a successor built by another compiler hashes the same.
    seed: [u8; 16],
    /// Timestamps below this are refused: the ceiling a crashed predecessor left.
    fence: Option<i64>,
    /// Every accepted timestamp is below this durable value.
    ceiling: AtomicI64,
    raising: tokio::sync::Mutex<()>,
    /// Set by `hand_over`: the ceiling no longer moves and nothing more is admitted.
    closed: AtomicBool,
    store: Store,
}

/// How this process's guard began.
#[derive(Debug)]
enum Start {
    /// Nothing to remember: a fresh database.
    Fresh,
    /// A graceful predecessor's requests, still inside the window.
    HandedOver(replay::Handover),
    /// Refuse everything below this: the predecessor may have accepted it.
    Fenced(i64),
}

impl MemoryGuard {
    pub async fn start(
        store: Store,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<Arc<MemoryGuard>, StoreError> {
        let start = {
            let now = now_micros();
            let mut tx = store.begin().await?;
            let stored = replay::ceiling(&mut tx).await?;
            let handover = replay::take_handover(&mut tx, now).await?;
            let start = match (stored, handover) {
                // The handover is the predecessor's last word only if the ceiling has not
                // moved since it was written.
                (Some(ceiling), Some(h)) if h.ceiling == ceiling => Start::HandedOver(h),
                (Some(ceiling), _) => Start::Fenced(ceiling),
                // No ceiling: a fresh database, or one whose guard was kept in the table
                // by an earlier version; rows still inside the window mean that version
                // ran a moment ago, and this start bounds what it accepted.
                (None, _) if replay::any_unexpired(&mut tx, now).await? => Start::Fenced(now),
                (None, _) => Start::Fresh,
            };
            tx.commit().await?;
            start
        };
        let mut seed = [0u8; 16];
        rand::thread_rng().fill_bytes(&mut seed);
        let (fence, remembered) = match start {
            Start::Fresh => (None, Vec::new()),
            Start::Fenced(fence) => (Some(fence), Vec::new()),
            Start::HandedOver(h) => match decode_seed(&h.seed) {
                Some(theirs) => {
                    seed = theirs;
                    (None, h.entries)
                }
                // Unreadable: treat the stop as a crash.
                None => (Some(h.ceiling), Vec::new()),
            },
        };
        if let Some(fence) = fence {
            // The fence is usually the previous process's last ceiling, up to the
            // headroom ahead of the clock: waiting it out before serving means a client
            // whose clock agrees with ours is never refused after a quick restart. A
            // fence far ahead (a client signed ahead of the clock) is not waited for
            // beyond the bound.
            let ahead_micros = fence
                .saturating_sub(now_micros())
                .clamp(0, MAX_START_WAIT_MICROS);
            tokio::time::sleep(Duration::from_micros(ahead_micros as u64)).await;
        }
        let guard = Arc::new(MemoryGuard {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            seed,
            fence,
            ceiling: AtomicI64::new(fence.unwrap_or(i64::MIN)),
            raising: tokio::sync::Mutex::new(()),
            closed: AtomicBool::new(false),
            store,
        });
        let handed_over = remembered.len();
        for (hash, ts, expires_at) in remembered {
            guard.insert(hash as u64, ts, expires_at);
        }
        guard.raise(now_micros()).await?;
        match fence {
            Some(fence) => tracing::info!(
                fence,
                "replay guard in memory; the previous server did not stop gracefully: requests signed before the fence are refused"
            ),
            None => tracing::info!(
                handed_over,
                "replay guard in memory; no fence (a fresh database, or the previous server handed over the requests it accepted)"
            ),
        }
        let ahead = guard.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(KEEP_AHEAD_EVERY) => {}
                    _ = shutdown.changed() => return,
                }
                if ahead.closed.load(Ordering::Acquire) {
                    return;
                }
                let now = now_micros();
                if ahead.ceiling.load(Ordering::Acquire) - now < LOW_WATER_MICROS {
                    if let Err(e) = ahead.raise(now).await {
                        tracing::warn!(error = %e, "raising the replay ceiling failed; will retry");
                    }
                }
            }
        });
        Ok(guard)
    }

    /// Hash of (API key, path) under this guard's seed.
    fn key_hash(&self, api_key: &str, path: &str) -> u64 {
        let mut h = Sha256::new();
        h.update(self.seed);
        h.update((api_key.len() as u64).to_be_bytes());
        h.update(api_key.as_bytes());
        h.update(path.as_bytes());
        let digest = h.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        u64::from_be_bytes(first)
    }

    /// The shard of one request: chosen by its timestamp as well as its (API key, path),
    /// so one integrator calling one endpoint spreads over every shard. By the key and
    /// path alone, one hot endpoint of one key had a sixteenth of the bound (62,500
    /// requests in the window, ~2,000/s) and was refused `rate_limited` beyond it.
    fn shard(&self, hash: u64, ts: i64) -> std::sync::MutexGuard<'_, Shard> {
        let shard = &self.shards[shard_of(hash, ts)];
        shard.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remembers a handed-over entry (bounded like admissions; past the bound the oldest
    /// are simply not loaded: their copies are then refused only by the window).
    fn insert(&self, hash: u64, ts: i64, expires_at: i64) {
        let mut set = self.shard(hash, ts);
        if set.len() < PER_SHARD {
            set.insert((hash, ts), expires_at);
        }
    }

    /// Makes the durable ceiling exceed `ts` (by the headroom).
    async fn raise(&self, ts: i64) -> Result<(), StoreError> {
        let _one = self.raising.lock().await;
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Config(
                "the replay guard was handed over".into(),
            ));
        }
        if self.ceiling.load(Ordering::Acquire) > ts {
            return Ok(());
        }
        let target = ts.max(now_micros()).saturating_add(HEADROOM_MICROS);
        // A transaction, not a lone statement: it queues with the other writers instead
        // of polling for SQLite's lock, and its commit waits until the ceiling is durable.
        let mut tx = self.store.begin().await?;
        replay::raise_ceiling(&mut tx, target).await?;
        tx.commit().await?;
        self.ceiling.fetch_max(target, Ordering::AcqRel);
        Ok(())
    }

    pub async fn admit(
        &self,
        api_key: &str,
        path: &str,
        ts: i64,
        expires_at: i64,
    ) -> Result<Admission, StoreError> {
        if self.closed.load(Ordering::Acquire) {
            // After the handover nothing may be accepted that the successor would not
            // know about.
            return Err(StoreError::Config(
                "the replay guard was handed over".into(),
            ));
        }
        if let Some(fence) = self.fence.filter(|f| ts < *f) {
            return Ok(Admission::BeforeFence(fence));
        }
        if ts >= self.ceiling.load(Ordering::Acquire) {
            self.raise(ts).await?;
        }
        debug_assert!(ts < self.ceiling.load(Ordering::Acquire));
        let hash = self.key_hash(api_key, path);
        let mut set = self.shard(hash, ts);
        if set.contains_key(&(hash, ts)) {
            return Ok(Admission::Duplicate);
        }
        if set.len() >= PER_SHARD {
            let now = now_micros();
            set.retain(|_, exp| *exp >= now);
            if set.len() >= PER_SHARD {
                return Ok(Admission::Full);
            }
        }
        set.insert((hash, ts), expires_at);
        Ok(Admission::Fresh)
    }

    pub fn purge(&self, now: i64) {
        for shard in &self.shards {
            let mut set = shard.lock().unwrap_or_else(|p| p.into_inner());
            set.retain(|_, exp| *exp >= now);
        }
    }
}

impl MemoryGuard {
    /// Leaves what this guard accepted for the next server on the database, and stops
    /// the ceiling: called once no request is being served any more. Every entry still
    /// inside the window is written with the seed in one transaction, and the successor
    /// refuses exactly their copies instead of fencing. Returns how many were written.
    pub async fn hand_over(&self) -> Result<usize, StoreError> {
        let _one = self.raising.lock().await;
        self.closed.store(true, Ordering::Release);
        let now = now_micros();
        let mut entries = Vec::new();
        for shard in &self.shards {
            let set = shard.lock().unwrap_or_else(|p| p.into_inner());
            entries.extend(
                set.iter()
                    .filter(|(_, exp)| **exp >= now)
                    .map(|((hash, ts), exp)| (*hash as i64, *ts, *exp)),
            );
        }
        let mut tx = self.store.begin().await?;
        replay::write_handover(&mut tx, &encode_seed(&self.seed), &entries).await?;
        tx.commit().await?;
        Ok(entries.len())
    }
}

/// A shard index from the whole of (hash, timestamp): neighbouring microsecond
/// timestamps of one key and path land on different shards (a multiplicative hash's top
/// bits).
fn shard_of(hash: u64, ts: i64) -> usize {
    const SPREAD: u64 = 0x9E37_79B9_7F4A_7C15;
    let mixed = (hash ^ ts as u64).wrapping_mul(SPREAD);
    // SHARDS is a power of two below 2^64; the shift keeps the top bits.
    (mixed >> (64 - SHARDS.trailing_zeros())) as usize
}

fn encode_seed(seed: &[u8; 16]) -> String {
    seed.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_seed(text: &str) -> Option<[u8; 16]> {
    if text.len() != 32 || !text.is_ascii() {
        return None;
    }
    let mut seed = [0u8; 16];
    for (i, byte) in seed.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(seed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_key_and_path_spread_over_every_shard() {
        let hash = 0x0123_4567_89ab_cdef;
        let mut counts = [0usize; SHARDS];
        let start = 1_790_000_000_000_000i64;
        for ts in start..start + 16_000 {
            counts[shard_of(hash, ts)] += 1;
        }
        // 1,000 each if even; a shard chosen by the hash alone would hold all 16,000.
        assert!(
            counts.iter().all(|c| (800..=1_200).contains(c)),
            "{counts:?}"
        );
    }

    /// One API key calling one endpoint is admitted beyond a shard's share of the bound,
    /// and a copy of any of its requests is still refused.
    #[tokio::test]
    async fn one_hot_endpoint_is_not_refused_at_a_shards_bound() {
        let path = std::env::temp_dir().join(format!(
            "issuing-replay-{}.db",
            issuing_domain::ids::new_id()
        ));
        let store = Store::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let (_stop, shutdown) = watch::channel(false);
        let guard = MemoryGuard::start(store, shutdown).await.unwrap();
        let now = now_micros();
        let expires = now + 30_000_000;
        let n = PER_SHARD as i64 + 5_000;
        for i in 0..n {
            let admitted = guard.admit("key", "cards/topup", now - i, expires).await;
            assert_eq!(admitted.unwrap(), Admission::Fresh, "request {i}");
        }
        for i in [0, n / 2, n - 1] {
            let copy = guard.admit("key", "cards/topup", now - i, expires).await;
            assert_eq!(copy.unwrap(), Admission::Duplicate);
        }
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    #[test]
    fn seeds_survive_their_text_form() {
        let seed = [0u8, 1, 2, 0xab, 0xff, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0x10, 0xfe];
        assert_eq!(decode_seed(&encode_seed(&seed)), Some(seed));
        assert_eq!(decode_seed("zz"), None);
        assert_eq!(decode_seed(&"g".repeat(32)), None);
    }
}
