//! A run's table as JSON (`issuing-bench --json FILE`), read back by `issuing-bench
//! charts` to draw it, alone or beside other runs, and to print the runs' table side by
//! side. Every measured field is optional, so a run transcribed by hand from an older
//! table (docs/bench/*.json) can leave out what was not recorded.

use crate::scenarios::Row;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// One run of the benchmark: one server, one backend.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SavedRun {
    /// `sqlite` or `postgres`, as `--backend` spells it.
    pub backend: String,
    /// A name for the run in charts and tables (`--label`); the backend's name without it.
    pub label: Option<String>,
    /// When the run ended, UTC (`2026-11-28 09:41 UTC`).
    pub date: Option<String>,
    /// The git commit of the directory it ran in (`git rev-parse --short HEAD`, `-dirty`
    /// when tracked files were changed).
    pub commit: Option<String>,
    pub scale: Option<f64>,
    pub concurrency: Option<usize>,
    /// The server's peak resident memory over the whole run, MiB.
    pub peak_rss_mib: Option<f64>,
    /// Whether `issuing admin verify-ledger` passed afterwards.
    pub ledger_verified: Option<bool>,
    /// Where the numbers come from, for runs not written by the benchmark itself.
    pub source: Option<String>,
    pub rows: Vec<SavedRow>,
}

/// One scenario's row, as the printed table has it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SavedRow {
    pub scenario: String,
    pub requests: Option<u64>,
    pub errors: Option<u64>,
    pub per_second: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// The server's CPU time per request, µs (not measured for the console's pages).
    pub cpu_us_per_request: Option<f64>,
    /// The server's peak resident memory during the scenario, MiB.
    pub peak_rss_mib: Option<f64>,
    pub note: Option<String>,
    pub first_error: Option<String>,
}

pub struct RunFacts<'a> {
    pub backend: &'a str,
    pub label: Option<&'a str>,
    pub scale: f64,
    pub concurrency: usize,
    pub peak_rss_mib: f64,
    pub ledger_verified: bool,
}

impl SavedRun {
    /// The run that just finished, with its date and the commit of the current directory.
    pub fn from_rows(facts: &RunFacts<'_>, rows: &[(Row, f64)]) -> SavedRun {
        SavedRun {
            backend: facts.backend.to_owned(),
            label: facts.label.map(str::to_owned),
            date: Some(chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string()),
            commit: git_commit(),
            scale: Some(facts.scale),
            concurrency: Some(facts.concurrency),
            peak_rss_mib: Some(facts.peak_rss_mib),
            ledger_verified: Some(facts.ledger_verified),
            source: None,
            rows: rows.iter().map(|(row, rss)| saved_row(row, *rss)).collect(),
        }
    }

    pub fn read(path: &Path) -> anyhow::Result<SavedRun> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a saved run", path.display()))
    }

    pub fn write(&self, path: &Path) -> anyhow::Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let mut text = serde_json::to_string_pretty(self)?;
        text.push('\n');
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
    }

    /// The backend as a reader knows it.
    pub fn backend_name(&self) -> &str {
        backend_name(&self.backend)
    }

    /// The run's name in a legend or a table's header.
    pub fn label(&self) -> &str {
        self.label.as_deref().unwrap_or_else(|| self.backend_name())
    }

    /// What the run was: backend, scale, concurrency, date and commit, those known.
    pub fn facts(&self) -> String {
        let mut parts = vec![self.backend_name().to_owned()];
        parts.extend(self.facts_but_backend());
        parts.join(", ")
    }

    /// The run's name and what it was, for a legend: `SQLite run 1: scale 1, …` or
    /// `fast disk: SQLite, scale 1, …` (the backend once).
    pub fn legend(&self) -> String {
        let label = self.label();
        if label == self.backend_name() {
            self.facts()
        } else if label.contains(self.backend_name()) {
            format!("{label}: {}", self.facts_but_backend().join(", "))
        } else {
            format!("{label}: {}", self.facts())
        }
    }

    fn facts_but_backend(&self) -> Vec<String> {
        let mut parts = Vec::new();
        if let Some(s) = self.scale {
            parts.push(format!("scale {s}"));
        }
        if let Some(c) = self.concurrency {
            parts.push(format!("{c} in flight"));
        }
        parts.extend(self.date.clone());
        if let Some(c) = &self.commit {
            parts.push(format!("commit {c}"));
        }
        parts
    }
}

pub fn backend_name(backend: &str) -> &str {
    match backend {
        "sqlite" => "SQLite",
        "postgres" => "PostgreSQL",
        other => other,
    }
}

fn saved_row(row: &Row, rss: f64) -> SavedRow {
    let o = &row.outcome;
    SavedRow {
        scenario: row.name.clone(),
        requests: Some(o.requests as u64),
        errors: Some(o.errors as u64),
        per_second: Some(o.per_second()),
        p50_ms: Some(ms(o.percentile(0.5))),
        p99_ms: Some(ms(o.percentile(0.99))),
        cpu_us_per_request: row
            .cpu_secs
            .filter(|_| o.requests > 0)
            .map(|s| s * 1e6 / o.requests as f64),
        peak_rss_mib: Some(rss),
        note: Some(row.note.clone()).filter(|n| !n.is_empty()),
        first_error: o.first_error.clone(),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `git rev-parse --short HEAD` of the current directory, `-dirty` when a tracked file
/// differs from it; None outside a repository or without git.
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    let head = git(&["rev-parse", "--short", "HEAD"]).filter(|h| !h.is_empty())?;
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty { format!("{head}-dirty") } else { head })
}

/// The scenarios of several runs, in the order they first appear. A scenario run twice
/// in one run (`--only a,b,a`) is a row of its own the second time, `a (2)`.
pub fn scenario_keys(runs: &[SavedRun]) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for run in runs {
        for (key, _) in keyed_rows(run) {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys
}

/// A run's rows with their keys (see `scenario_keys`).
pub fn keyed_rows(run: &SavedRun) -> Vec<(String, &SavedRow)> {
    let mut seen: Vec<&str> = Vec::new();
    run.rows
        .iter()
        .map(|row| {
            let n = seen.iter().filter(|s| **s == row.scenario).count();
            seen.push(&row.scenario);
            let key = if n == 0 {
                row.scenario.clone()
            } else {
                format!("{} ({})", row.scenario, n + 1)
            };
            (key, row)
        })
        .collect()
}

/// A run's row by key.
pub fn row<'a>(run: &'a SavedRun, key: &str) -> Option<&'a SavedRow> {
    keyed_rows(run)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, r)| r)
}

/// The runs' table side by side, in Markdown: per run its requests/s, p50 and p99 (a
/// column none of the run's rows has is left out; a missing cell is `—`), then the
/// rows' notes.
pub fn markdown_table(runs: &[SavedRun]) -> String {
    type Column = (&'static str, fn(&SavedRow) -> Option<String>);
    let columns: [Column; 3] = [
        ("req/s", |r| r.per_second.map(fmt_rate)),
        ("p50 ms", |r| r.p50_ms.map(fmt_ms)),
        ("p99 ms", |r| r.p99_ms.map(fmt_ms)),
    ];
    let keys = scenario_keys(runs);
    let mut header = String::from("| Scenario |");
    let mut rule = String::from("|---|");
    let mut used: Vec<(usize, Column)> = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        for col in columns {
            if run.rows.iter().any(|r| (col.1)(r).is_some()) {
                let _ = write!(header, " {} {} |", run.label(), col.0);
                rule.push_str("---:|");
                used.push((i, col));
            }
        }
    }
    let mut s = String::new();
    let _ = writeln!(s, "{header}\n{rule}");
    for key in &keys {
        let _ = write!(s, "| {key} |");
        for (i, (_, cell)) in &used {
            let value = row(&runs[*i], key).and_then(cell);
            let _ = write!(s, " {} |", value.as_deref().unwrap_or("—"));
        }
        s.push('\n');
    }
    let mut notes = runs.iter().flat_map(|run| {
        keyed_rows(run)
            .into_iter()
            .filter_map(move |(key, r)| Some((key, run.label(), r.note.as_ref()?)))
    });
    if let Some(first) = notes.next() {
        s.push('\n');
        for (key, label, note) in std::iter::once(first).chain(notes) {
            let _ = writeln!(s, "- {key} ({label}): {note}");
        }
    }
    s
}

/// `v` with `decimals` decimals and commas between thousands: 7755.6 → `7,756`.
pub fn thousands(v: f64, decimals: usize) -> String {
    let text = format!("{:.*}", decimals, v.abs());
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    if v < 0.0 && out.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.insert(0, '-');
    }
    out
}

/// A rate as the tables give it: whole requests from 100 on, decimals below.
pub fn fmt_rate(v: f64) -> String {
    match v {
        v if v >= 100.0 => thousands(v, 0),
        v if v >= 10.0 => thousands(v, 1),
        v => thousands(v, 2),
    }
}

/// Milliseconds: two decimals under 10, one under 1,000, none above, trailing zeros
/// dropped (a run transcribed as 9.9 ms is not shown as 9.90).
pub fn fmt_ms(v: f64) -> String {
    let text = match v {
        v if v >= 1000.0 => return thousands(v, 0),
        v if v >= 10.0 => thousands(v, 1),
        v => thousands(v, 2),
    };
    match text.trim_end_matches('0').trim_end_matches('.') {
        "" => "0".to_owned(),
        trimmed => trimmed.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, rate: Option<f64>, p99: Option<f64>) -> SavedRow {
        SavedRow {
            scenario: name.into(),
            per_second: rate,
            p99_ms: p99,
            ..SavedRow::default()
        }
    }

    #[test]
    fn numbers_are_written_as_the_tables_write_them() {
        assert_eq!(thousands(7755.6, 0), "7,756");
        assert_eq!(thousands(81580.0, 0), "81,580");
        assert_eq!(thousands(999.4, 0), "999");
        assert_eq!(thousands(1234567.891, 2), "1,234,567.89");
        assert_eq!(thousands(-1500.0, 0), "-1,500");
        assert_eq!(fmt_rate(61046.2), "61,046");
        assert_eq!(fmt_rate(42.25), "42.2");
        assert_eq!(fmt_ms(0.474), "0.47");
        assert_eq!(fmt_ms(16.54), "16.5");
        assert_eq!(fmt_ms(9.9), "9.9");
        assert_eq!(fmt_ms(13.0), "13");
        assert_eq!(fmt_ms(0.5), "0.5");
        assert_eq!(fmt_ms(2104.4), "2,104");
        assert_eq!(fmt_ms(1000.0), "1,000");
        assert_eq!(fmt_ms(0.0), "0");
    }

    #[test]
    fn a_saved_run_reads_back_and_a_hand_written_one_may_leave_fields_out() {
        let run = SavedRun {
            backend: "sqlite".into(),
            commit: Some("58931df".into()),
            scale: Some(0.02),
            rows: vec![row("health", Some(61046.0), Some(1.2))],
            ..SavedRun::default()
        };
        let text = serde_json::to_string(&run).unwrap();
        assert_eq!(serde_json::from_str::<SavedRun>(&text).unwrap(), run);

        let hand: SavedRun = serde_json::from_str(
            r#"{"backend": "postgres", "rows": [{"scenario": "cards/topup", "per_second": 3186}]}"#,
        )
        .unwrap();
        assert_eq!(hand.label(), "PostgreSQL");
        assert_eq!(hand.rows[0].per_second, Some(3186.0));
        assert_eq!(hand.rows[0].p50_ms, None);
    }

    #[test]
    fn a_scenario_run_twice_is_two_rows_and_runs_merge_in_order() {
        let a = SavedRun {
            backend: "sqlite".into(),
            rows: vec![
                row("health", Some(1.0), None),
                row("auth", Some(2.0), None),
                row("auth", Some(3.0), None),
            ],
            ..SavedRun::default()
        };
        let b = SavedRun {
            backend: "postgres".into(),
            rows: vec![row("health", None, None), row("webhooks", None, None)],
            ..SavedRun::default()
        };
        let keys = scenario_keys(&[a.clone(), b]);
        assert_eq!(keys, ["health", "auth", "auth (2)", "webhooks"]);
        assert_eq!(super::row(&a, "auth (2)").unwrap().per_second, Some(3.0));
    }

    #[test]
    fn the_markdown_table_leaves_out_empty_columns_and_marks_missing_cells() {
        let a = SavedRun {
            backend: "sqlite".into(),
            label: Some("run 1".into()),
            rows: vec![
                row("health", Some(61046.0), None),
                SavedRow {
                    note: Some("orders 4,767/s end to end".into()),
                    ..row("cards/topup", Some(7756.0), Some(10.4))
                },
            ],
            ..SavedRun::default()
        };
        let table = markdown_table(&[a]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "| Scenario | run 1 req/s | run 1 p99 ms |");
        assert_eq!(lines[1], "|---|---:|---:|");
        assert_eq!(lines[2], "| health | 61,046 | — |");
        assert_eq!(lines[3], "| cards/topup | 7,756 | 10.4 |");
        assert_eq!(lines[4], "");
        assert_eq!(lines[5], "- cards/topup (run 1): orders 4,767/s end to end");
        assert_eq!(lines.len(), 6);
    }
}
