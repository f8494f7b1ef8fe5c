//! Verifying the ledger, as `issuing admin verify-ledger` and the console's
//! `Verify ledger` both do: every invariant checked over the whole database
//! (`issuing_store::ledger::verify`), and the result recorded so the console can show
//! the last one.

use issuing_domain::time::now_micros;
use issuing_store::audit::{self, NewVerification};
use issuing_store::ledger::{self, Mismatch};
use issuing_store::{Store, StoreError};

/// Problems kept in the recorded result; the count is always whole.
const MAX_RECORDED: usize = 100;

/// Checks the ledger, records the result under `actor` (an operator's email, or `cli`)
/// and answers every problem found.
pub async fn verify(store: &Store, actor: &str) -> Result<Vec<Mismatch>, StoreError> {
    let started_at = now_micros();
    let problems = {
        let mut conn = store.conn().await?;
        ledger::verify(&mut conn).await?
    };
    let details: Vec<String> = problems
        .iter()
        .take(MAX_RECORDED)
        .map(ToString::to_string)
        .collect();
    let mut tx = store.begin().await?;
    audit::record_verification(
        &mut tx,
        &NewVerification {
            started_at,
            finished_at: now_micros(),
            actor,
            problems: i64::try_from(problems.len()).unwrap_or(i64::MAX),
            details: &details.join("\n"),
        },
    )
    .await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(problems)
}
