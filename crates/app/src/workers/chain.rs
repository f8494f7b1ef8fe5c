//! The chain watcher: polls a TronGrid-compatible API for confirmed USDT transfers to
//! each project's deposit address and credits every incoming one once.
//!
//! Each pass claims a bounded batch of due addresses (a claim makes the address due
//! again one poll interval later, so other processes pass over it; a process that dies
//! just lets it come due). Per address it reads pages oldest first from its cursor,
//! less an overlap that catches transfers the API indexed late, at most `MAX_PAGES` a
//! pass. Credits are idempotent (see `deposits::credit`), so overlapping pages, restarts
//! and several processes never credit twice; the cursor moves only past pages whose
//! transfers are all credited, so nothing is skipped. 429s, 5xx and failed requests make
//! the whole watcher back off, exponentially and within bounds.

use crate::deposits::credit::{self, Credit};
use crate::deposits::trongrid::{FetchError, TronGrid};
use crate::App;
use issuing_domain::chain_deposit::{classify, Ignored, Trc20Transfer, Verdict, TRON};
use issuing_domain::time::now_micros;
use issuing_store::chain_deposits::ChainDeposit;
use issuing_store::chain_watch::{self, Watched};
use issuing_store::StoreError;
use std::collections::HashSet;
use std::time::Duration;
use tokio::sync::watch;

/// Addresses claimed per pass.
const BATCH: i64 = 16;
/// Pages read per address per pass; the rest waits for the next pass.
const MAX_PAGES: usize = 20;
/// How far before its cursor an address is read again: transfers the API lists late.
const OVERLAP_MS: i64 = 5 * 60 * 1000;
const BACKOFF_MIN: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(300);
/// Bounds on the pause between passes when nothing more is due.
const IDLE_MIN: Duration = Duration::from_millis(200);
const IDLE_MAX: Duration = Duration::from_secs(5);

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

pub async fn run(state: App, mut shutdown: watch::Receiver<bool>) {
    let tron = &state.config.tron;
    let Some(url) = tron.api_url.clone() else {
        return;
    };
    let client = match TronGrid::new(&url, tron.api_key.clone(), &tron.usdt_contract) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the chain watcher's HTTP client; no deposits will be credited");
            return;
        }
    };
    state.metrics.chain.set_enabled(true);
    tracing::info!(
        api = %host_of(&url),
        contract = %tron.usdt_contract,
        poll_interval_secs = tron.poll_interval.as_secs(),
        min_deposit = %tron.min_deposit,
        api_key = tron.api_key.is_some(),
        "chain watcher started"
    );
    let idle = (tron.poll_interval / 4).clamp(IDLE_MIN, IDLE_MAX);
    let mut backoff = Backoff::default();
    loop {
        if *shutdown.borrow() {
            break;
        }
        let pause = match pass(&state, &client, &shutdown, &mut backoff).await {
            Pass::Full => Duration::ZERO,
            Pass::Idle => idle,
            Pass::BackOff(d) => d,
        };
        state
            .metrics
            .chain
            .set_backoff_secs(backoff.current.as_secs());
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = shutdown.changed() => break,
        }
    }
    tracing::info!("chain watcher stopped");
}

/// The scheme and host of the API, for logs (never a path or query).
fn host_of(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => format!("{}://{}", u.scheme(), u.host_str().unwrap_or("?")),
        Err(_) => "(invalid url)".to_owned(),
    }
}

enum Pass {
    /// A full batch was claimed: more addresses may be due now.
    Full,
    Idle,
    BackOff(Duration),
}

/// Consecutive failed requests and the pause they earned.
#[derive(Default)]
struct Backoff {
    failures: u32,
    current: Duration,
}

impl Backoff {
    fn failed(&mut self, e: &FetchError) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let doubled = BACKOFF_MIN.saturating_mul(1 << self.failures.min(10).saturating_sub(1));
        let mut d = doubled.min(BACKOFF_MAX);
        if let FetchError::RateLimited {
            retry_after: Some(r),
        } = e
        {
            d = d.max(*r);
        }
        self.current = d;
        d
    }

    fn succeeded(&mut self) {
        self.failures = 0;
        self.current = Duration::ZERO;
    }
}

#[derive(Debug, thiserror::Error)]
enum PollError {
    #[error(transparent)]
    Fetch(#[from] FetchError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

async fn pass(
    state: &App,
    client: &TronGrid,
    shutdown: &watch::Receiver<bool>,
    backoff: &mut Backoff,
) -> Pass {
    let interval = micros(state.config.tron.poll_interval);
    let claimed = match claim(state, interval).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "chain watcher could not claim addresses; will retry");
            return Pass::Idle;
        }
    };
    let mut stop = shutdown.clone();
    for (i, w) in claimed.iter().enumerate() {
        if *stop.borrow() {
            return Pass::Idle;
        }
        // Shutdown does not wait for a slow API: an unfinished credit rolls back with its
        // transaction, and the address comes due again.
        let result = tokio::select! {
            r = poll_address(state, client, w) => r,
            _ = stop.changed() => return Pass::Idle,
        };
        let now = now_micros();
        let (next, error) = match &result {
            Ok(more) => {
                backoff.succeeded();
                (if *more { now } else { now + interval }, None)
            }
            Err(PollError::Fetch(e)) if e.backs_off() => {
                let wait = backoff.failed(e);
                tracing::warn!(address = %w.address, error = %e, backoff_secs = wait.as_secs(), "chain API unavailable; backing off");
                let later = now + micros(wait);
                record(state, w, now, later, Some(e.to_string())).await;
                postpone_rest(state, &claimed[i + 1..], later).await;
                return Pass::BackOff(wait);
            }
            Err(e) => {
                tracing::warn!(address = %w.address, project_id = %w.project_id, error = %e, "chain watcher could not finish an address; will retry");
                (now + interval, Some(e.to_string()))
            }
        };
        record(state, w, now, next, error).await;
    }
    if i64::try_from(claimed.len()).unwrap_or(0) >= BATCH {
        Pass::Full
    } else {
        Pass::Idle
    }
}

/// Claims due addresses; each is due again one poll interval later.
async fn claim(state: &App, interval: i64) -> Result<Vec<Watched>, StoreError> {
    let now = now_micros();
    let mut tx = state.store.begin().await?;
    let backend = state.store.backend();
    let claimed =
        chain_watch::claim_due(&mut tx, backend, TRON, now, now + interval, BATCH).await?;
    tx.commit().await?;
    Ok(claimed)
}

async fn record(state: &App, w: &Watched, now: i64, next: i64, error: Option<String>) {
    let done = async {
        let mut conn = state.store.conn().await?;
        chain_watch::finish(
            &mut conn,
            &w.project_id,
            &w.address,
            now,
            next,
            error.as_deref(),
        )
        .await
    };
    if let Err(e) = done.await {
        tracing::warn!(address = %w.address, error = %e, "could not record a chain poll");
    }
}

async fn postpone_rest(state: &App, rest: &[Watched], at: i64) {
    for w in rest {
        let done = async {
            let mut conn = state.store.conn().await?;
            chain_watch::postpone(&mut conn, &w.project_id, &w.address, at).await
        };
        if let Err(e) = done.await {
            tracing::warn!(address = %w.address, error = %e, "could not postpone a chain poll");
        }
    }
}

/// Reads one address's new transfers and credits them. Ok(true) when pages remain for
/// the next pass.
async fn poll_address(state: &App, client: &TronGrid, w: &Watched) -> Result<bool, PollError> {
    let min_timestamp = w
        .cursor_ms
        .map_or(0, |c| c.saturating_sub(OVERLAP_MS).max(0));
    let mut fingerprint: Option<String> = None;
    let mut newest: Option<i64> = None;
    let mut ascending = true;
    // A transfer listed on two pages of one pass is handled once (at most
    // MAX_PAGES × PAGE_LIMIT entries).
    let mut handled: HashSet<(String, String, String, String)> = HashSet::new();
    for _ in 0..MAX_PAGES {
        let page = client
            .page(&w.address, min_timestamp, fingerprint.as_deref())
            .await;
        state
            .metrics
            .chain
            .poll(page.as_ref().map_or_else(FetchError::label, |_| "ok"));
        let page = page?;
        for t in &page.transfers {
            let key = (
                t.transaction_id.clone(),
                t.from.clone(),
                t.to.clone(),
                t.value.clone(),
            );
            if handled.insert(key) {
                handle(state, w, t).await?;
            }
            ascending &= newest.is_none_or(|n| t.block_timestamp >= n);
            newest = newest.max(Some(t.block_timestamp));
        }
        // Oldest first, every transfer up to `newest` is credited: the cursor may move
        // there, so a crash from here on re-reads only from this page. Were the API to
        // ignore the order asked for, the cursor waits for the end of the pass.
        let last_page = page.next.is_none();
        if let (Some(n), true) = (newest, ascending || last_page) {
            let mut conn = state.store.conn().await?;
            chain_watch::advance(&mut conn, &w.project_id, &w.address, n).await?;
        }
        match page.next {
            Some(next) => fingerprint = Some(next),
            None => return Ok(false),
        }
    }
    Ok(true)
}

/// Credits or ignores one transfer. A transfer at or before the cursor was handled by an
/// earlier pass; it is credited idempotently again but not logged or counted again.
async fn handle(state: &App, w: &Watched, t: &Trc20Transfer) -> Result<(), PollError> {
    let tron = &state.config.tron;
    let seen = w.cursor_ms.is_some_and(|c| t.block_timestamp <= c);
    let amount = match classify(t, &w.address, &tron.usdt_contract, tron.min_deposit) {
        Verdict::Credit(amount) => amount,
        Verdict::Ignore(reason) => {
            if !seen {
                ignored(state, w, t, reason);
            }
            return Ok(());
        }
    };
    let deposit = ChainDeposit {
        network: TRON.to_owned(),
        transaction_id: t.transaction_id.clone(),
        address: w.address.clone(),
        project_id: w.project_id.clone(),
        from_address: t.from.clone(),
        token: t.token.clone(),
        amount,
        block_timestamp: t.block_timestamp,
        source: "watcher".to_owned(),
    };
    let chain = &state.metrics.chain;
    match credit::credit(&state.store, &deposit).await? {
        Credit::Credited {
            transfer_id,
            balance_after,
        } => {
            chain.credited(amount.micros());
            tracing::info!(
                project_id = %w.project_id,
                transaction_id = %t.transaction_id,
                amount = %amount,
                transfer_id = %transfer_id,
                balance = %balance_after,
                "chain deposit credited"
            );
        }
        Credit::AlreadyCredited { earlier } => {
            chain.duplicate();
            let same = earlier.is_some_and(|e| e.amount == amount && e.from_address == t.from);
            if !same && !seen {
                tracing::warn!(
                    project_id = %w.project_id,
                    transaction_id = %t.transaction_id,
                    amount = %amount,
                    "another transfer of a transaction already credited to this address was not credited; reconcile it by hand"
                );
            }
        }
        Credit::CreditedByOperator { transfer_id } => {
            chain.credited_by_operator();
            tracing::info!(
                project_id = %w.project_id,
                transaction_id = %t.transaction_id,
                transfer_id = %transfer_id,
                "chain deposit was already credited by an operator; recorded, not credited again"
            );
        }
    }
    Ok(())
}

fn ignored(state: &App, w: &Watched, t: &Trc20Transfer, reason: Ignored) {
    state.metrics.chain.ignored(reason);
    tracing::info!(
        project_id = %w.project_id,
        address = %w.address,
        transaction_id = %t.transaction_id,
        token = %t.token,
        from = %t.from,
        to = %t.to,
        value = %t.value,
        reason = reason.as_str(),
        "chain transfer ignored"
    );
}
