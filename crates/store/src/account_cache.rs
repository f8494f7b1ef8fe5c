//! Which account is which, remembered in process memory.
//!
//! An account's id, project, card and kind never change once it is opened (accounts
//! are never deleted or re-purposed), so a cached answer can never go stale, in this
//! process or across processes sharing the database. A money move looked up each of
//! its accounts, and then their kinds for the lock order, in statements of their own:
//! six of a top-up's 23 statements. Balances are never cached.
//!
//! Entries come from reads only, never from `open_account`. An account read inside a
//! transaction that then rolls back belongs to a card or project that rolled back with
//! it, whose id is never made again (`new_id` never repeats), so its entry is never
//! looked up.
//!
//! Ids are unique across databases too, so one cache serves every `Store` of the
//! process. It is bounded: when full it starts over, which costs lookups, not
//! correctness.

use issuing_domain::ledger::AccountKind;
use std::collections::HashMap;
use std::sync::{LazyLock, Mutex};

/// Far above the accounts one process touches in a burst (7 per card and project).
const MAX_ENTRIES: usize = 200_000;

#[derive(Default)]
struct Cache {
    /// (project, card or "", kind) → account id.
    ids: HashMap<(String, String, AccountKind), String>,
    /// account id → kind.
    kinds: HashMap<String, AccountKind>,
}

static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(Mutex::default);

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    // A panic while holding the lock leaves two plain maps in a consistent state.
    CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(crate) fn id(project_id: &str, card_id: Option<&str>, kind: AccountKind) -> Option<String> {
    cache()
        .ids
        .get(&(
            project_id.to_owned(),
            card_id.unwrap_or_default().to_owned(),
            kind,
        ))
        .cloned()
}

pub(crate) fn kind(account_id: &str) -> Option<AccountKind> {
    cache().kinds.get(account_id).copied()
}

/// Remembers an account found in, or written to, the database.
pub(crate) fn remember(project_id: &str, card_id: Option<&str>, kind: AccountKind, id: &str) {
    let mut cache = cache();
    if cache.ids.len() >= MAX_ENTRIES || cache.kinds.len() >= MAX_ENTRIES {
        cache.ids.clear();
        cache.kinds.clear();
    }
    cache.ids.insert(
        (
            project_id.to_owned(),
            card_id.unwrap_or_default().to_owned(),
            kind,
        ),
        id.to_owned(),
    );
    cache.kinds.insert(id.to_owned(), kind);
}

/// Remembers only an account's kind (its project and card were not read with it).
pub(crate) fn remember_kind(id: &str, kind: AccountKind) {
    let mut cache = cache();
    if cache.kinds.len() >= MAX_ENTRIES {
        cache.ids.clear();
        cache.kinds.clear();
    }
    cache.kinds.insert(id.to_owned(), kind);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn remembers_ids_and_kinds() {
        let (p, c) = (issuing_domain::ids::new_id(), issuing_domain::ids::new_id());
        assert_eq!(id(&p, Some(&c), AccountKind::Card), None);
        remember(&p, Some(&c), AccountKind::Card, "acct-1");
        remember(&p, None, AccountKind::Master, "acct-2");
        assert_eq!(id(&p, Some(&c), AccountKind::Card).unwrap(), "acct-1");
        assert_eq!(id(&p, Some(&c), AccountKind::CardHold), None);
        assert_eq!(id(&p, None, AccountKind::Master).unwrap(), "acct-2");
        assert_eq!(kind("acct-1"), Some(AccountKind::Card));
        assert_eq!(kind("acct-2"), Some(AccountKind::Master));
    }
}
