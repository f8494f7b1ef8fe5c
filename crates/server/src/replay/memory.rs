//! The in-memory replay guard (SQLite). Accepted requests live in sharded hash sets
//! until their timestamps leave the window. Durability comes from a ceiling kept in the
//! database: every timestamp this process accepts is below the stored ceiling, and a
//! starting process refuses everything below the ceiling its predecessor left. A
//! background task keeps the ceiling ~0.5 s ahead of the clock (a few small writes per
//! second), so ordinary requests never wait for it; a request signed further ahead
//! raises it first. After a crash, requests signed before the crash are refused even if
//! they never reached the old process: the client signs again.

use super::Admission;
use issuing_domain::time::now_micros;
use issuing_store::{replay, Store, StoreError};
use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

const SHARDS: usize = 16;
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
    hasher: RandomState,
    /// Timestamps below this are refused: the ceiling the previous process left.
    fence: i64,
    /// Every accepted timestamp is below this durable value.
    ceiling: AtomicI64,
    raising: tokio::sync::Mutex<()>,
    store: Store,
}

impl MemoryGuard {
    pub async fn start(
        store: Store,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<Arc<MemoryGuard>, StoreError> {
        let stored = {
            let mut conn = store.conn().await?;
            replay::ceiling(&mut conn).await?
        };
        // No ceiling yet (first start, or the previous version kept the guard in a
        // table): this process's start time bounds what the previous one accepted,
        // except requests signed ahead of the clock; the old table's rows are still
        // purged by the cleanup worker.
        let fence = stored.unwrap_or_else(now_micros);
        // The fence is usually the previous process's last ceiling, up to the headroom
        // ahead of the clock: waiting it out before serving means a client whose clock
        // agrees with ours is never refused after a quick restart. A fence far ahead (a
        // client signed ahead of the clock) is not waited for beyond the bound.
        let ahead_micros = fence
            .saturating_sub(now_micros())
            .clamp(0, MAX_START_WAIT_MICROS);
        tokio::time::sleep(Duration::from_micros(ahead_micros as u64)).await;
        let guard = Arc::new(MemoryGuard {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: RandomState::new(),
            fence,
            ceiling: AtomicI64::new(fence),
            raising: tokio::sync::Mutex::new(()),
            store,
        });
        guard.raise(now_micros()).await?;
        tracing::info!(
            fence,
            "replay guard in memory; requests signed before the fence are refused"
        );
        let ahead = guard.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(KEEP_AHEAD_EVERY) => {}
                    _ = shutdown.changed() => return,
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

    /// Makes the durable ceiling exceed `ts` (by the headroom).
    async fn raise(&self, ts: i64) -> Result<(), StoreError> {
        let _one = self.raising.lock().await;
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
        if ts < self.fence {
            return Ok(Admission::BeforeFence(self.fence));
        }
        if ts >= self.ceiling.load(Ordering::Acquire) {
            self.raise(ts).await?;
        }
        debug_assert!(ts < self.ceiling.load(Ordering::Acquire));
        let hash = self.hasher.hash_one((api_key, path));
        let shard = &self.shards[(hash as usize) % SHARDS];
        let mut set = shard.lock().unwrap_or_else(|p| p.into_inner());
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
