//! `issuing-bench`: starts one `issuing serve` on a fresh database (SQLite or PostgreSQL),
//! runs every scenario against it in one run, plain `GET /health` first as the baseline,
//! prints a table, and checks the ledger afterwards; with `--json` and `--charts` it saves
//! the table and draws it (`charts.rs`). See docs/benchmarks.md.
//!
//! It uses the Rust client only and runs the release binary as a separate process.

mod asa;
mod charts;
mod console;
mod lithic;
mod load;
mod receiver;
mod saved;
mod scenarios;
mod server;
mod soak;

use anyhow::Context;
use clap::{Parser, ValueEnum};
use issuing_client::{Client, RetryPolicy};
use scenarios::{Ctx, Row};
use server::Server;
use sqlx::{Connection, Executor};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Parser, Debug)]
#[command(
    about = "Benchmark one issuing server: every scenario in one run",
    args_conflicts_with_subcommands = true
)]
struct Args {
    #[command(subcommand)]
    mode: Option<Mode>,
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: Backend,
    /// PostgreSQL server to create the benchmark's own database on (dropped afterwards).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    postgres_url: String,
    /// The `issuing` binary; by default the one beside this benchmark's executable.
    #[arg(long)]
    issuing: Option<PathBuf>,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Multiplies every scenario's request count (0.1 for a quick try).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Comma-separated scenarios to run (default: all, in order). Later scenarios need
    /// the cards that `cards/create` leaves behind.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Extra arguments for `issuing serve`.
    #[arg(long, allow_hyphen_values = true, num_args = 1..)]
    serve_arg: Vec<String>,
    /// Also write the table as JSON to FILE, for `issuing-bench charts` to draw later.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Also draw the table as SVG in DIR: <backend>-rps.svg and <backend>-latency.svg.
    #[arg(long, value_name = "DIR")]
    charts: Option<PathBuf>,
    /// The run's name in the saved JSON and the charts' legend (default: the backend's).
    #[arg(long)]
    label: Option<String>,
}

#[derive(clap::Subcommand, Debug)]
enum Mode {
    /// Steady mixed load for a long time; fails if memory, descriptors, the data
    /// retention governs, latency or webhook lag keep growing (docs/benchmarks.md).
    Soak(soak::SoakArgs),
    /// Signed ASA requests at a fixed rate against a production server whose cards are
    /// issued through a fake Lithic (docs/benchmarks.md).
    Asa(asa::AsaArgs),
    /// Draws runs saved with `--json` as SVG (requests/s, p50 and p99 per scenario), side
    /// by side when several are given, and prints their table in Markdown.
    Charts(charts::ChartsArgs),
}

/// Enough USDT for every top-up and fee of a full-scale run, credited before it starts.
const BENCH_DEPOSIT: &str = "100000000";

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    let outcome = match args.mode {
        Some(Mode::Soak(soak)) => soak::run(soak).await,
        Some(Mode::Asa(a)) => asa::run(a).await,
        Some(Mode::Charts(c)) => charts::run(c),
        None => run(args).await,
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("issuing-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The `issuing` binary: the one given, or the one beside this executable.
pub(crate) fn issuing_binary(given: Option<&std::path::Path>) -> anyhow::Result<PathBuf> {
    Ok(match given {
        Some(p) => p.to_owned(),
        None => std::env::current_exe()?
            .parent()
            .context("no parent directory")?
            .join("issuing"),
    })
}

async fn run(args: Args) -> anyhow::Result<bool> {
    let binary = issuing_binary(args.issuing.as_deref())?;
    let data_dir = std::env::temp_dir().join(format!("issuing-bench-{}", std::process::id()));
    std::fs::create_dir_all(&data_dir)?;
    let database = match args.backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(create_database(&args.postgres_url).await?),
    };
    let result = bench(
        &args,
        &binary,
        &data_dir,
        database.as_ref().map(|d| d.1.as_str()),
    )
    .await;
    if let Some((name, _)) = &database {
        drop_database(&args.postgres_url, name).await?;
    }
    std::fs::remove_dir_all(&data_dir).ok();
    result
}

async fn bench(
    args: &Args,
    binary: &std::path::Path,
    data_dir: &std::path::Path,
    database_url: Option<&str>,
) -> anyhow::Result<bool> {
    let server = Server::start(binary, data_dir, database_url, &args.serve_arg).await?;
    server
        .admin(&[
            "deposit",
            "--project",
            &server.project_id,
            "--amount",
            BENCH_DEPOSIT,
        ])
        .await?;
    let client = Client::new(&server.base_url, &server.api_key, &server.api_secret)?
        .with_retry_policy(RetryPolicy::none());
    client.sync_clock().await?;
    let mut ctx = Ctx {
        client,
        plain: reqwest::Client::new(),
        base_url: server.base_url.clone(),
        concurrency: args.concurrency,
        scale: args.scale,
        cards: Vec::new(),
        auth_rate: None,
    };
    let names: Vec<String> = if args.only.is_empty() {
        scenarios::NAMES.iter().map(|s| s.to_string()).collect()
    } else {
        args.only.clone()
    };
    eprintln!(
        "issuing-bench: {:?}, server pid {}, concurrency {}, scale {}",
        args.backend, server.pid, args.concurrency, args.scale
    );
    let mut rows = Vec::new();
    for name in &names {
        server.take_peak_rss_mib();
        if name == "console" {
            let target = console::Target {
                console_url: server.console_url.clone(),
                email: "admin@localhost".to_owned(),
                password: server.console_password.clone(),
                database_url: server.database_url(),
                project_id: server.project_id.clone(),
                api: ctx.client.clone(),
            };
            for row in console::run(&target, args.scale).await? {
                report(&row);
                rows.push((row, server.take_peak_rss_mib()));
            }
            continue;
        }
        let cpu = server.cpu_secs();
        let mut row = ctx.run(name).await?;
        row.cpu_secs = Some(server.cpu_secs() - cpu);
        let rss = server.take_peak_rss_mib();
        report(&row);
        rows.push((row, rss));
    }
    let max_rss = server
        .max_rss_kib
        .load(std::sync::atomic::Ordering::Relaxed) as f64
        / 1024.0;
    let verify = server.admin(&["verify-ledger"]).await;
    server.stop().await?;
    print_table(args, &rows, max_rss);
    let verified = match verify {
        Ok(out) => {
            println!(
                "\nverify-ledger: ok ({})",
                out.trim().lines().last().unwrap_or("")
            );
            true
        }
        Err(e) => {
            println!("\nverify-ledger: FAILED: {e:#}");
            false
        }
    };
    save(args, &rows, max_rss, verified)?;
    Ok(verified && rows.iter().all(|(r, _)| r.outcome.errors == 0))
}

/// `--json` and `--charts`: the run's table saved and drawn.
fn save(args: &Args, rows: &[(Row, f64)], max_rss: f64, verified: bool) -> anyhow::Result<()> {
    if args.json.is_none() && args.charts.is_none() {
        return Ok(());
    }
    let backend = format!("{:?}", args.backend).to_lowercase();
    let facts = saved::RunFacts {
        backend: &backend,
        label: args.label.as_deref(),
        scale: args.scale,
        concurrency: args.concurrency,
        peak_rss_mib: max_rss,
        ledger_verified: verified,
    };
    let run = saved::SavedRun::from_rows(&facts, rows);
    if let Some(path) = &args.json {
        run.write(path)?;
        eprintln!("issuing-bench: wrote {}", path.display());
    }
    if let Some(dir) = &args.charts {
        charts::write(dir, &backend, std::slice::from_ref(&run), false)?;
    }
    Ok(())
}

fn report(row: &Row) {
    eprintln!(
        "  {:<22} {:>9.0} req/s  p99 {:>7.1} ms  errors {}{}",
        row.name,
        row.outcome.per_second(),
        ms(row.outcome.percentile(0.99)),
        row.outcome.errors,
        row.outcome
            .first_error
            .as_ref()
            .map(|e| format!(" (first: {e})"))
            .unwrap_or_default()
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn print_table(args: &Args, rows: &[(Row, f64)], max_rss: f64) {
    let baseline = rows
        .iter()
        .find(|(r, _)| r.name == "health")
        .map(|(r, _)| r.outcome.per_second());
    println!(
        "\n{:?}, concurrency {}, scale {}: peak resident memory {max_rss:.0} MiB\n",
        args.backend, args.concurrency, args.scale
    );
    println!(
        "| Scenario | Requests | Errors | req/s | p50 ms | p99 ms | vs baseline | server CPU µs/req | peak RSS MiB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (row, rss) in rows {
        let o = &row.outcome;
        let ratio = baseline
            .filter(|b| *b > 0.0)
            .map(|b| format!("{:.1}%", 100.0 * o.per_second() / b))
            .unwrap_or_else(|| "-".into());
        let cpu = row
            .cpu_secs
            .filter(|_| o.requests > 0)
            .map(|s| format!("{:.0}", s * 1e6 / o.requests as f64))
            .unwrap_or_else(|| "-".into());
        println!(
            "| {} | {} | {} | {:.0} | {:.2} | {:.2} | {} | {} | {:.0} |",
            row.name,
            o.requests,
            o.errors,
            o.per_second(),
            ms(o.percentile(0.5)),
            ms(o.percentile(0.99)),
            ratio,
            cpu,
            rss
        );
    }
    for (row, _) in rows {
        if !row.note.is_empty() {
            println!("\n- {}: {}", row.name, row.note);
        }
    }
}

/// Runs `body` on a fresh data directory (`issuing-<what>-<pid>` under the temporary
/// directory) and, on PostgreSQL, a fresh database; removes both afterwards.
pub(crate) async fn on_fresh_database<F, Fut>(
    what: &str,
    backend: Backend,
    postgres_url: &str,
    body: F,
) -> anyhow::Result<bool>
where
    F: FnOnce(PathBuf, Option<String>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let data_dir = std::env::temp_dir().join(format!("issuing-{what}-{}", std::process::id()));
    std::fs::create_dir_all(&data_dir)?;
    let database = match backend {
        Backend::Sqlite => None,
        Backend::Postgres => Some(create_database(postgres_url).await?),
    };
    let result = body(data_dir.clone(), database.as_ref().map(|d| d.1.clone())).await;
    if let Some((name, _)) = &database {
        drop_database(postgres_url, name).await?;
    }
    std::fs::remove_dir_all(&data_dir).ok();
    result
}

/// A fresh database for this run; returns (name, URL).
pub(crate) async fn create_database(admin_url: &str) -> anyhow::Result<(String, String)> {
    let name = format!("issuing_bench_{}", std::process::id());
    let mut conn = sqlx::PgConnection::connect(admin_url)
        .await
        .context("cannot reach PostgreSQL")?;
    conn.execute(format!("DROP DATABASE IF EXISTS {name}").as_str())
        .await?;
    conn.execute(format!("CREATE DATABASE {name}").as_str())
        .await?;
    let base = admin_url
        .rsplit_once('/')
        .map(|(b, _)| b)
        .context("the PostgreSQL URL has no database part")?;
    Ok((name.clone(), format!("{base}/{name}")))
}

pub(crate) async fn drop_database(admin_url: &str, name: &str) -> anyhow::Result<()> {
    let mut conn = sqlx::PgConnection::connect(admin_url).await?;
    conn.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
        .await?;
    Ok(())
}
