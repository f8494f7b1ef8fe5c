//! Settlement reconciliation (CONTRACT §17): what a subprovider's provider settled on
//! one UTC date (Lithic's settlement details; the sandbox provider's own records)
//! against the clearings and refunds this service applied that date
//! (`applied_settlements`, written with each ledger change). Amounts are compared in
//! cents, by absolute value. The result is kept per (subprovider, date).

pub mod simulate;

use crate::provider::lithic::LithicProvider;
use crate::App;
use issuing_domain::catalog::{Catalog, ProviderKind};
use issuing_domain::time::now_micros;
use issuing_store::reconciliation::{self, Reconciliation, Settlement};
use issuing_store::Store;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Whether `date` is a valid `YYYY-MM-DD` date.
pub fn valid_date(date: &str) -> bool {
    date.len() == 10 && chrono::NaiveDate::parse_from_str(date, "%Y-%m-%d").is_ok()
}

/// One settlement as the provider reports it: Lithic's settlement detail (the events it
/// settled, its gross amount in cents, its transaction token), or a sandbox record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detail {
    pub event_tokens: Vec<String>,
    pub amount_cents: i64,
    /// The provider's name of the transaction, when it gives one.
    pub transaction: Option<String>,
}

fn cents(micros: i64) -> i64 {
    (micros / 10_000).abs()
}

/// What a comparison found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Outcome {
    pub matched_count: i64,
    pub matched_cents: i64,
    pub breaks: Vec<Value>,
}

impl Outcome {
    pub fn count(&self, kind: &str) -> i64 {
        let n = self.breaks.iter().filter(|b| b["kind"] == kind).count();
        i64::try_from(n).unwrap_or(i64::MAX)
    }
}

/// Matches the provider's details with our settlements by event token. A detail none
/// of whose tokens we applied is `missing_here`; one whose tokens we applied at another
/// total is `amount_mismatch`; a settlement of ours no detail names is `missing_there`.
pub fn compare(ours: &[Settlement], theirs: &[Detail]) -> Outcome {
    let by_token: BTreeMap<&str, &Settlement> =
        ours.iter().map(|s| (s.event_token.as_str(), s)).collect();
    let mut seen = BTreeSet::new();
    let mut out = Outcome::default();
    for d in theirs {
        let mine: Vec<&Settlement> = d
            .event_tokens
            .iter()
            .filter_map(|t| by_token.get(t.as_str()).copied())
            .collect();
        let token = d.event_tokens.first().cloned().unwrap_or_default();
        let there = d.amount_cents.abs();
        let Some(first) = mine.first() else {
            out.breaks.push(json!({
                "kind": "missing_here",
                "transaction_id": d.transaction,
                "event_token": token,
                "here_cents": null,
                "there_cents": there,
            }));
            continue;
        };
        seen.extend(mine.iter().map(|s| s.event_token.as_str()));
        let here: i64 = mine.iter().map(|s| cents(s.amount)).sum();
        if here == there {
            out.matched_count += 1;
            out.matched_cents += here;
        } else {
            out.breaks.push(json!({
                "kind": "amount_mismatch",
                "transaction_id": first.transaction_id,
                "event_token": first.event_token,
                "here_cents": here,
                "there_cents": there,
            }));
        }
    }
    for s in ours {
        if !seen.contains(s.event_token.as_str()) {
            out.breaks.push(json!({
                "kind": "missing_there",
                "transaction_id": s.transaction_id,
                "event_token": s.event_token,
                "here_cents": cents(s.amount),
                "there_cents": null,
            }));
        }
    }
    out
}

/// Why a reconciliation could not run.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("no subprovider {0} in the catalog")]
    UnknownSubprovider(String),
    #[error("invalid date {0}: expected YYYY-MM-DD")]
    InvalidDate(String),
    #[error("the provider's settlements could not be read: {0}")]
    Provider(String),
    #[error(transparent)]
    Store(#[from] issuing_store::StoreError),
}

/// What a reconciliation reads: the database, the catalog, and the Lithic program of
/// the subprovider when it is a `lithic` one.
pub struct Sources<'a> {
    pub store: &'a Store,
    pub catalog: &'a Catalog,
    pub lithic: Option<&'a LithicProvider>,
}

impl<'a> Sources<'a> {
    /// The running service's, for subprovider `code`.
    pub fn of(state: &'a App, code: &str) -> Sources<'a> {
        Sources {
            store: &state.store,
            catalog: &state.config.catalog,
            lithic: state.providers.lithic(code).map(AsRef::as_ref),
        }
    }
}

/// The provider's settlements of `code` on `date`.
async fn theirs(src: &Sources<'_>, code: &str, date: &str) -> Result<Vec<Detail>, ReconcileError> {
    let sub = src
        .catalog
        .subprovider(code)
        .ok_or_else(|| ReconcileError::UnknownSubprovider(code.to_owned()))?;
    match &sub.kind {
        ProviderKind::Sandbox => {
            let mut conn = src.store.conn().await?;
            let records = reconciliation::sandbox_on(&mut conn, code, date).await?;
            Ok(records
                .into_iter()
                .map(|r| Detail {
                    event_tokens: vec![r.event_token],
                    amount_cents: cents(r.amount),
                    transaction: Some(r.transaction_id),
                })
                .collect())
        }
        ProviderKind::Lithic(_) => {
            let lithic = src
                .lithic
                .ok_or_else(|| ReconcileError::UnknownSubprovider(code.to_owned()))?;
            let details = lithic
                .settlement_details(date)
                .await
                .map_err(|e| ReconcileError::Provider(e.to_string()))?;
            Ok(details
                .into_iter()
                .map(|d| Detail {
                    event_tokens: d.event_tokens,
                    amount_cents: d.amount_cents,
                    transaction: d.transaction_token,
                })
                .collect())
        }
    }
}

/// Reconciles `code`'s settlements of `date` and keeps the result (replacing what was
/// kept for that date). A provider that cannot be read keeps a `failed` result.
pub async fn run(
    src: &Sources<'_>,
    code: &str,
    date: &str,
) -> Result<Reconciliation, ReconcileError> {
    if !valid_date(date) {
        return Err(ReconcileError::InvalidDate(date.to_owned()));
    }
    let started_at = now_micros();
    let found = theirs(src, code, date).await;
    let mut conn = src.store.conn().await?;
    let mut result = Reconciliation {
        subprovider_code: code.to_owned(),
        report_date: date.to_owned(),
        status: "done".into(),
        matched_count: 0,
        matched_cents: 0,
        missing_here: 0,
        missing_there: 0,
        amount_mismatch: 0,
        breaks: json!([]),
        error: None,
        started_at,
        finished_at: None,
    };
    match found {
        Ok(details) => {
            let ours = reconciliation::applied_on(&mut conn, code, date).await?;
            let outcome = compare(&ours, &details);
            result.matched_count = outcome.matched_count;
            result.matched_cents = outcome.matched_cents;
            result.missing_here = outcome.count("missing_here");
            result.missing_there = outcome.count("missing_there");
            result.amount_mismatch = outcome.count("amount_mismatch");
            result.breaks = Value::from(outcome.breaks);
        }
        Err(ReconcileError::Provider(e)) => {
            result.status = "failed".into();
            result.error = Some(e);
        }
        Err(e) => return Err(e),
    }
    result.finished_at = Some(now_micros());
    reconciliation::save(&mut conn, &result).await?;
    Ok(result)
}

/// A result as the command prints it and the console shows it.
pub fn to_json(r: &Reconciliation) -> Value {
    json!({
        "subprovider": r.subprovider_code,
        "date": r.report_date,
        "status": r.status,
        "matched": {"count": r.matched_count, "amount_cents": r.matched_cents},
        "breaks_count": {
            "missing_here": r.missing_here,
            "missing_there": r.missing_there,
            "amount_mismatch": r.amount_mismatch,
        },
        "breaks": r.breaks,
        "error": r.error,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(token: &str, amount: i64) -> Settlement {
        Settlement {
            subprovider_code: "sandbox".into(),
            event_token: token.into(),
            project_id: "p".into(),
            transaction_id: format!("tx-{token}"),
            card_id: "c".into(),
            kind: "clearing".into(),
            amount,
            settled_at: 0,
            settled_on: "1970-01-01".into(),
        }
    }

    fn d(tokens: &[&str], cents: i64) -> Detail {
        Detail {
            event_tokens: tokens.iter().map(|t| (*t).to_owned()).collect(),
            amount_cents: cents,
            transaction: Some("lt".into()),
        }
    }

    #[test]
    fn each_kind_of_break() {
        let ours = [s("a", 1_000_000), s("b", 2_000_000), s("c", 500_000)];
        let theirs = [d(&["a"], -100), d(&["b"], 201), d(&["z"], 7)];
        let o = compare(&ours, &theirs);
        assert_eq!((o.matched_count, o.matched_cents), (1, 100));
        assert_eq!(o.count("amount_mismatch"), 1);
        assert_eq!(o.count("missing_here"), 1);
        assert_eq!(o.count("missing_there"), 1);
        assert_eq!(o.breaks[2]["event_token"], "c");
    }

    #[test]
    fn dates_are_utc() {
        assert_eq!(issuing_domain::time::utc_date(0), "1970-01-01");
        assert!(valid_date("2026-02-28") && !valid_date("2026-02-30"));
    }
}
