//! The build worker: claims a report by a lease and writes its file as chunks. A build
//! always starts from scratch (the chunks of an earlier, unfinished build are deleted
//! first), so a restart or a crash in the middle of one costs the work done, never a
//! wrong file. Every chunk's transaction renews the lease and is fenced on it.

use super::rows;
use super::{KEPT_MICROS, READY_EVENT};
use crate::App;
use issuing_domain::ids::new_id;
use issuing_domain::time::now_micros;
use issuing_store::events::{self, NewEvent};
use issuing_store::reports::Cursor;
use issuing_store::reports::{self as store, Finished, ReportRecord};
use issuing_store::StoreError;
use sha2::{Digest, Sha256};
use std::time::Duration;
use tokio::sync::watch;

/// Rows read per query.
const PAGE_ROWS: i64 = 500;
/// A chunk is written once this many bytes of whole rows are waiting.
const CHUNK_BYTES: usize = 256 * 1024;
/// A build holds its report this long past its last write.
const LEASE: Duration = Duration::from_secs(60);
/// How long an idle worker sleeps before it looks for a report another process wrote.
const IDLE: Duration = Duration::from_secs(1);
/// Builds started before a report is given up as `failed`.
const MAX_ATTEMPTS: i64 = 5;
/// Chunks of an earlier build deleted per transaction.
const DELETE_BATCH: i64 = 16;

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Runs until `shutdown`: a build in hand is handed back (claimable at once by the
/// next server) rather than finished.
pub async fn run(state: App, mut shutdown: watch::Receiver<bool>) {
    let worker_id = new_id();
    loop {
        if *shutdown.borrow() {
            return;
        }
        let claimed = claim(&state, &worker_id).await;
        match claimed {
            Ok(Some(report)) => {
                let id = report.id.clone();
                let outcome = tokio::select! {
                    r = build(&state, &worker_id, report) => Some(r),
                    _ = shutdown.changed() => None,
                };
                match outcome {
                    Some(Ok(())) => {}
                    Some(Err(StoreError::LeaseLost(_))) => {
                        tracing::warn!(report_id = %id, "report taken over by another worker");
                    }
                    Some(Err(e)) => {
                        // The lease runs out and the build starts again.
                        tracing::error!(report_id = %id, error = %e, "report build failed; will retry");
                    }
                    None => {
                        hand_back(&state, &id, &worker_id).await;
                        return;
                    }
                }
            }
            Ok(None) => {
                tokio::select! {
                    _ = tokio::time::sleep(IDLE) => {}
                    _ = state.reports_wakeup.notified() => {}
                    _ = shutdown.changed() => return,
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not claim a report; will retry");
                tokio::select! {
                    _ = tokio::time::sleep(IDLE) => {}
                    _ = shutdown.changed() => return,
                }
            }
        }
    }
}

async fn claim(state: &App, worker_id: &str) -> Result<Option<ReportRecord>, StoreError> {
    let now = now_micros();
    {
        let mut conn = state.store.conn().await?;
        if !store::claimable(&mut conn, now).await? {
            return Ok(None);
        }
    }
    let mut tx = state.store.begin().await?;
    let claimed = store::claim_next(
        &mut tx,
        state.store.backend(),
        worker_id,
        now,
        now + micros(LEASE),
    )
    .await?;
    tx.commit().await?;
    Ok(claimed)
}

async fn hand_back(state: &App, id: &str, worker_id: &str) {
    let released = async {
        let mut conn = state.store.conn().await?;
        store::release(&mut conn, id, worker_id).await?;
        drop(conn);
        state.store.sync().await
    };
    match released.await {
        Ok(()) => tracing::info!(report_id = %id, "report build handed back for the next worker"),
        Err(e) => tracing::warn!(report_id = %id, error = %e, "could not hand a report back"),
    }
}

/// The file being written: what waits for the next chunk, and what was written.
struct File {
    buffer: String,
    seq: i64,
    size: i64,
    rows: i64,
    hash: Sha256,
}

async fn build(state: &App, worker_id: &str, report: ReportRecord) -> Result<(), StoreError> {
    if report.attempts > MAX_ATTEMPTS {
        return finish(
            state,
            worker_id,
            &report,
            None,
            Some("the report could not be built"),
        )
        .await;
    }
    // An earlier build's chunks go first.
    loop {
        let mut tx = state.store.begin().await?;
        store::renew(&mut tx, &report.id, worker_id, now_micros() + micros(LEASE)).await?;
        let deleted = store::delete_chunks(&mut tx, &report.id, DELETE_BATCH).await?;
        tx.commit().await?;
        if (deleted as i64) < DELETE_BATCH {
            break;
        }
    }
    let Some(columns) = rows::columns(&report.report_type) else {
        return finish(state, worker_id, &report, None, Some("unknown report type")).await;
    };
    let csv = report.format == "csv";
    let mut file = File {
        buffer: String::with_capacity(CHUNK_BYTES + 4096),
        seq: 0,
        size: 0,
        rows: 0,
        hash: Sha256::new(),
    };
    if csv {
        rows::csv_header(&mut file.buffer, columns);
    }
    let mut cursor = Cursor::start(report.from_at);
    let mut renewed = std::time::Instant::now();
    loop {
        let (page, next) = {
            let mut conn = state.store.conn().await?;
            rows::page(&mut conn, &report, &cursor, PAGE_ROWS).await?
        };
        let Some(next) = next else { break };
        let full = page.len() as i64 == PAGE_ROWS;
        for row in &page {
            if csv {
                rows::csv_row(&mut file.buffer, row);
            } else {
                rows::jsonl_row(&mut file.buffer, columns, row);
            }
            file.rows += 1;
            if file.buffer.len() >= CHUNK_BYTES {
                flush(state, worker_id, &report, &mut file).await?;
            }
        }
        drop(page);
        cursor = next;
        // Pages that fill no chunk (a slow database) must not let the lease run out.
        if renewed.elapsed() > LEASE / 3 {
            let mut tx = state.store.begin().await?;
            store::renew(&mut tx, &report.id, worker_id, now_micros() + micros(LEASE)).await?;
            tx.commit().await?;
            renewed = std::time::Instant::now();
        }
        if !state.config.report_page_pause.is_zero() {
            tokio::time::sleep(state.config.report_page_pause).await;
        }
        if !full {
            break;
        }
    }
    if !file.buffer.is_empty() {
        flush(state, worker_id, &report, &mut file).await?;
    }
    let sha256: String = file
        .hash
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    finish(
        state,
        worker_id,
        &report,
        Some((file.rows, file.size, sha256)),
        None,
    )
    .await
}

/// Writes what waits as the next chunk, renewing the lease.
async fn flush(
    state: &App,
    worker_id: &str,
    report: &ReportRecord,
    file: &mut File,
) -> Result<(), StoreError> {
    let mut tx = state.store.begin().await?;
    store::renew(&mut tx, &report.id, worker_id, now_micros() + micros(LEASE)).await?;
    store::insert_chunk(&mut tx, &report.id, file.seq, &file.buffer).await?;
    tx.commit().await?;
    file.hash.update(file.buffer.as_bytes());
    file.size += file.buffer.len() as i64;
    file.seq += 1;
    file.buffer.clear();
    Ok(())
}

/// Marks the report ready (with its file's rows, size and hash) or failed, and writes
/// `report.ready` in the same transaction.
async fn finish(
    state: &App,
    worker_id: &str,
    report: &ReportRecord,
    file: Option<(i64, i64, String)>,
    error: Option<&str>,
) -> Result<(), StoreError> {
    let now = now_micros();
    let status = if file.is_some() {
        store::READY
    } else {
        store::FAILED
    };
    let mut tx = state.store.begin().await?;
    store::finish(
        &mut tx,
        &report.id,
        worker_id,
        &Finished {
            status,
            row_count: file.as_ref().map(|f| f.0),
            size: file.as_ref().map(|f| f.1),
            sha256: file.as_ref().map(|f| f.2.as_str()),
            last_error: error,
            now,
            expires_at: now + KEPT_MICROS,
        },
    )
    .await?;
    events::insert(
        &mut tx,
        &NewEvent {
            project_id: &report.project_id,
            event_type: READY_EVENT,
            card_id: None,
            order_id: None,
            payload: &serde_json::json!({
                "report_id": report.id, "type": report.report_type, "status": status,
            }),
            now,
        },
    )
    .await?;
    tx.commit().await?;
    state.deliveries_wakeup.notify_one();
    tracing::info!(report_id = %report.id, status, "report built");
    Ok(())
}
