//! `issuing-bench soak`: hours-long behaviour in minutes of watching. One `issuing serve`
//! on a fresh database runs a steady mix (authorizations whose `card_transaction`
//! webhooks go to a local receiver, top-ups, reads) at a fixed rate, by default half of
//! the capacity measured first, with a short retention. Every sample interval (a minute)
//! it records the server's resident memory, open descriptors, database size, the rows
//! retention governs (deliveries and events), p99 latency and webhook lag; it writes
//! `soak.csv`, a gnuplot script and (with gnuplot on PATH) `soak.png`, prints a table to
//! paste into docs/benchmarks.md, and fails if any of them keeps growing (`judge`).

use crate::scenarios::call;
use crate::server::Server;
use anyhow::Context;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use axum::Router;
use issuing_client::Client;
use serde_json::{json, Value};
use sqlx::{Connection, Row};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

#[derive(clap::Args, Debug, Clone)]
pub struct SoakArgs {
    #[arg(long, value_enum, default_value = "sqlite")]
    pub backend: crate::Backend,
    /// PostgreSQL server to create the soak's own database on (dropped afterwards).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pub postgres_url: String,
    /// The `issuing` binary; by default the one beside this executable.
    #[arg(long)]
    pub issuing: Option<PathBuf>,
    /// How long the steady load runs.
    #[arg(long, default_value_t = 30.0)]
    pub minutes: f64,
    /// Seconds between samples.
    #[arg(long, default_value_t = 60)]
    pub sample_secs: u64,
    /// Operations per second; by default half of what the calibration measured.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Seconds of full-speed load that measure the capacity.
    #[arg(long, default_value_t = 20)]
    pub calibrate_secs: u64,
    /// The server's retention of final deliveries and their events, seconds.
    #[arg(long, default_value_t = 120)]
    pub retention: u64,
    /// Where soak.csv, soak.gp, soak.png and summary.md go.
    #[arg(long, default_value = "target/soak")]
    pub out: PathBuf,
}

/// Cards the load spreads over.
const CARDS: usize = 16;
/// Operations in flight at most; beyond it the load is past capacity and ops are skipped.
const MAX_IN_FLIGHT: usize = 256;
const CALIBRATION_CONCURRENCY: usize = 32;

/// One sample: a row of soak.csv.
#[derive(Debug, Clone, Default)]
struct Sample {
    minute: f64,
    ops: u64,
    errors: u64,
    skipped: u64,
    p99_ms: f64,
    rss_mib: f64,
    fds: u64,
    db_mib: f64,
    retained_rows: i64,
    webhooks: u64,
    lag_p99_ms: f64,
}

const CSV_HEADER: &str =
    "minute,ops,errors,skipped,p99_ms,rss_mib,fds,db_mib,retained_rows,webhooks,lag_p99_ms";

impl Sample {
    fn csv(&self) -> String {
        format!(
            "{:.2},{},{},{},{:.2},{:.1},{},{:.2},{},{},{:.1}",
            self.minute,
            self.ops,
            self.errors,
            self.skipped,
            self.p99_ms,
            self.rss_mib,
            self.fds,
            self.db_mib,
            self.retained_rows,
            self.webhooks,
            self.lag_p99_ms
        )
    }
}

/// What the load and the receiver collect between two samples.
#[derive(Default)]
struct Window {
    latencies: Vec<Duration>,
    errors: u64,
    skipped: u64,
    lags: Vec<Duration>,
    first_error: Option<String>,
}

#[derive(Clone)]
struct Shared {
    client: Client,
    cards: Arc<Vec<String>>,
    window: Arc<Mutex<Window>>,
    /// Authorizations answered and webhooks arrived, matched by transaction id.
    sent: Arc<Mutex<Pairing>>,
    seq: Arc<AtomicU64>,
}

/// A webhook may arrive before its authorization's answer is read: whichever comes
/// second measures the lag (zero when the webhook was first).
#[derive(Default)]
struct Pairing {
    /// transaction id → when its authorization was answered.
    answered: HashMap<String, Instant>,
    /// transaction id → when its webhook arrived, for those not answered yet.
    arrived: HashMap<String, Instant>,
}

impl Pairing {
    fn answer(&mut self, id: &str, at: Instant) -> Option<Duration> {
        match self.arrived.remove(id) {
            Some(_) => Some(Duration::ZERO),
            None => {
                self.answered.insert(id.to_owned(), at);
                None
            }
        }
    }

    fn arrive(&mut self, id: &str, at: Instant) -> Option<Duration> {
        match self.answered.remove(id) {
            Some(answered) => Some(at.saturating_duration_since(answered)),
            None => {
                // Later events of a transaction already matched land here too; bounded.
                if self.arrived.len() < 100_000 {
                    self.arrived.insert(id.to_owned(), at);
                }
                None
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub async fn run(args: SoakArgs) -> anyhow::Result<bool> {
    let binary = crate::issuing_binary(args.issuing.as_deref())?;
    let args = &args;
    crate::on_fresh_database(
        "soak",
        args.backend,
        &args.postgres_url,
        |dir, url| async move { soak(args, &binary, &dir, url.as_deref()).await },
    )
    .await
}

async fn soak(
    args: &SoakArgs,
    binary: &Path,
    data_dir: &Path,
    database_url: Option<&str>,
) -> anyhow::Result<bool> {
    let extra = vec!["--retention".to_owned(), args.retention.to_string()];
    let server = Server::start(binary, data_dir, database_url, &extra).await?;
    server
        .admin(&[
            "deposit",
            "--project",
            &server.project_id,
            "--amount",
            "1000000000",
        ])
        .await?;
    let client = Client::new(&server.base_url, &server.api_key, &server.api_secret)?
        .with_retry_policy(issuing_client::RetryPolicy::none());
    client.sync_clock().await?;
    let shared = Shared {
        cards: Arc::new(cards(&client).await?),
        client,
        window: Arc::default(),
        sent: Arc::default(),
        seq: Arc::default(),
    };
    let receiver = receive(shared.clone()).await?;
    call(
        &shared.client,
        "wh/subscribe",
        json!({"url": receiver, "title": "soak", "event_types": ["card_transaction"]}),
    )
    .await
    .map_err(anyhow::Error::msg)?;

    let rate = match args.rate {
        Some(r) => r,
        None => {
            let capacity = calibrate(&shared, Duration::from_secs(args.calibrate_secs)).await;
            eprintln!("soak: capacity {capacity:.0} ops/s with {CALIBRATION_CONCURRENCY} in flight; running at half");
            capacity / 2.0
        }
    }
    .max(1.0);
    *lock(&shared.window) = Window::default();
    std::fs::create_dir_all(&args.out)?;
    let csv_path = args.out.join("soak.csv");
    let mut csv = String::from(CSV_HEADER);
    csv.push('\n');
    eprintln!(
        "soak: {:?}, {rate:.0} ops/s for {} min, retention {} s, server pid {}, sampling every {} s",
        args.backend, args.minutes, args.retention, server.pid, args.sample_secs
    );
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(args.minutes * 60.0);
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut next_sample = started + Duration::from_secs(args.sample_secs);
    let mut samples = Vec::new();
    while Instant::now() < end {
        ticker.tick().await;
        match slots.clone().try_acquire_owned() {
            Ok(permit) => {
                let shared = shared.clone();
                tokio::spawn(async move {
                    let t = Instant::now();
                    let result = one(&shared).await;
                    let mut w = lock(&shared.window);
                    w.latencies.push(t.elapsed());
                    if let Err(e) = result {
                        w.errors += 1;
                        w.first_error.get_or_insert(e);
                    }
                    drop(permit);
                });
            }
            Err(_) => lock(&shared.window).skipped += 1,
        }
        if Instant::now() >= next_sample {
            next_sample += Duration::from_secs(args.sample_secs);
            let s = sample(&shared, &server, data_dir, database_url, started).await?;
            eprintln!("  {}", s.csv());
            csv.push_str(&s.csv());
            csv.push('\n');
            std::fs::write(&csv_path, &csv)?;
            samples.push(s);
        }
    }
    let verify = server.admin(&["verify-ledger"]).await;
    server.stop().await?;
    let first_error = lock(&shared.window).first_error.clone();
    let verdicts = judge(&samples, args);
    plot(&args.out)?;
    let summary = summary(args, rate, &samples, &verdicts, verify.is_ok(), first_error);
    std::fs::write(args.out.join("summary.md"), &summary)?;
    println!("{summary}");
    Ok(verify.is_ok() && verdicts.iter().all(|v| v.ok) && !samples.is_empty())
}

/// Operations per second of the mix with `CALIBRATION_CONCURRENCY` in flight.
async fn calibrate(shared: &Shared, length: Duration) -> f64 {
    let done = Arc::new(AtomicU64::new(0));
    let deadline = Instant::now() + length;
    let mut workers = Vec::new();
    for _ in 0..CALIBRATION_CONCURRENCY {
        let (shared, done) = (shared.clone(), done.clone());
        workers.push(tokio::spawn(async move {
            while Instant::now() < deadline {
                if one(&shared).await.is_ok() {
                    done.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for w in workers {
        let _ = w.await;
    }
    done.load(Ordering::Relaxed) as f64 / length.as_secs_f64().max(1e-9)
}

/// An approved cardholder and `CARDS` active cards with funds.
async fn cards(client: &Client) -> anyhow::Result<Vec<String>> {
    let kyc = json!({
        "first_name": "Ada", "last_name": "Lovelace", "birth_date": "1990-12-10",
        "email": "ada@example.com", "phone_number_full": "+447700900123", "country_iso": "GB"
    });
    let e = anyhow::Error::msg;
    call(client, "users/create", json!({"external_user_id": "soak"}))
        .await
        .map_err(e)?;
    call(
        client,
        "cardholders/create",
        json!({"external_user_id": "soak", "subprovider_code": "sandbox", "kyc_data": kyc}),
    )
    .await
    .map_err(e)?;
    let mut cards = Vec::new();
    for i in 0..CARDS {
        let v = call(
            client,
            "cards/create",
            json!({"external_user_id": "soak", "product_code": "virtual_usd",
                   "initial_topup": "1000", "idempotency_key": format!("soak-card-{i}")}),
        )
        .await
        .map_err(e)?;
        let order = v["order"]["order_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let started = Instant::now();
        loop {
            let o = call(client, "orders/check", json!({"order_id": order}))
                .await
                .map_err(e)?;
            match o["status"].as_str() {
                Some("completed") => break,
                Some("failed") => anyhow::bail!("card order {order} failed: {o}"),
                _ if started.elapsed() > Duration::from_secs(60) => {
                    anyhow::bail!("card order {order} did not finish")
                }
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        cards.push(v["card_id"].as_str().unwrap_or_default().to_owned());
    }
    Ok(cards)
}

/// One operation of the mix: half authorizations, a tenth top-ups, the rest reads.
async fn one(s: &Shared) -> Result<(), String> {
    let n = s.seq.fetch_add(1, Ordering::Relaxed);
    let card = &s.cards[(n as usize) % s.cards.len()];
    match n % 10 {
        0..=4 => {
            let body = json!({"card_id": card, "transactionAmount": "0.01",
                              "merchant": {"name": "Soak Shop", "mcc": "5814", "country": "US"}});
            let v = call(&s.client, "simulate/cards/auth", body).await?;
            if let Some(id) = v["transactionId"].as_str() {
                let lag = lock(&s.sent).answer(id, Instant::now());
                if let Some(lag) = lag {
                    lock(&s.window).lags.push(lag);
                }
            }
            Ok(())
        }
        5 => {
            let body = json!({"card_id": card, "amount": "10", "idempotency_key": format!("soak-topup-{n}")});
            call(&s.client, "cards/topup", body).await.map(drop)
        }
        6 | 7 => call(&s.client, "project/balance", json!({}))
            .await
            .map(drop),
        _ => call(
            &s.client,
            "cards/get",
            json!({"card_id": card, "external_user_id": "soak"}),
        )
        .await
        .map(drop),
    }
}

/// The webhook receiver; answers success and records each transaction's lag.
async fn receive(shared: Shared) -> anyhow::Result<String> {
    async fn hook(State(s): State<Shared>, headers: HeaderMap, body: Bytes) -> axum::Json<Value> {
        let now = Instant::now();
        let key = headers.get("API-KEY").and_then(|v| v.to_str().ok());
        if let Some(id) = s.client.open_webhook(key, &body).ok().and_then(|e| {
            e.get("transaction_id")
                .and_then(Value::as_str)
                .map(str::to_owned)
        }) {
            let lag = lock(&s.sent).arrive(&id, now);
            if let Some(lag) = lag {
                lock(&s.window).lags.push(lag);
            }
        }
        axum::Json(json!({"success": true}))
    }
    let app = Router::new().route("/hooks", post(hook)).with_state(shared);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(format!("http://{addr}/hooks"))
}

async fn sample(
    shared: &Shared,
    server: &Server,
    data_dir: &Path,
    database_url: Option<&str>,
    started: Instant,
) -> anyhow::Result<Sample> {
    let w = std::mem::take(&mut *lock(&shared.window));
    let mut latencies = w.latencies;
    latencies.sort_unstable();
    let mut lags = w.lags;
    lags.sort_unstable();
    let p99 = |v: &[Duration]| {
        if v.is_empty() {
            return 0.0;
        }
        let rank = ((v.len() as f64 - 1.0) * 0.99).round() as usize;
        v[rank.min(v.len() - 1)].as_secs_f64() * 1000.0
    };
    // Transactions whose webhook is overdue count at their age so far: a stuck queue
    // shows as a growing lag, not as silence.
    let webhooks = lags.len() as u64;
    let overdue: Vec<Duration> = lock(&shared.sent)
        .answered
        .values()
        .map(|t| t.elapsed())
        .filter(|d| *d > Duration::from_secs(10))
        .collect();
    lags.extend(overdue);
    lags.sort_unstable();
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", server.pid)).unwrap_or_default();
    let rss_kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    let fds = std::fs::read_dir(format!("/proc/{}/fd", server.pid))
        .map(|d| d.count() as u64)
        .unwrap_or(0);
    let (db_bytes, retained_rows) = database(data_dir, database_url).await?;
    let ops = latencies.len() as u64;
    Ok(Sample {
        minute: started.elapsed().as_secs_f64() / 60.0,
        ops,
        errors: w.errors,
        skipped: w.skipped,
        p99_ms: p99(&latencies),
        rss_mib: rss_kib / 1024.0,
        fds,
        db_mib: db_bytes as f64 / (1024.0 * 1024.0),
        retained_rows,
        webhooks,
        lag_p99_ms: p99(&lags),
    })
}

/// The database's size in bytes and the rows retention governs.
async fn database(data_dir: &Path, database_url: Option<&str>) -> anyhow::Result<(u64, i64)> {
    sqlx::any::install_default_drivers();
    let (url, size_sql) = match database_url {
        Some(url) => (
            url.to_owned(),
            Some("SELECT pg_database_size(current_database()) AS n"),
        ),
        None => {
            let db = data_dir.join("issuing.db");
            (format!("sqlite://{}?mode=ro", db.display()), None)
        }
    };
    let mut conn = sqlx::AnyConnection::connect(&url)
        .await
        .context("connecting to the soak database")?;
    let rows: i64 = sqlx::query(
        "SELECT (SELECT COUNT(*) FROM webhook_deliveries) + (SELECT COUNT(*) FROM events) AS n",
    )
    .fetch_one(&mut conn)
    .await?
    .try_get("n")?;
    let bytes = match size_sql {
        Some(sql) => sqlx::query(sql)
            .fetch_one(&mut conn)
            .await?
            .try_get::<i64, _>("n")? as u64,
        None => ["issuing.db", "issuing.db-wal"]
            .iter()
            .filter_map(|f| std::fs::metadata(data_dir.join(f)).ok())
            .map(|m| m.len())
            .sum(),
    };
    conn.close().await.ok();
    Ok((bytes, rows))
}

/// One series' verdict.
#[derive(Debug)]
struct Verdict {
    name: &'static str,
    ok: bool,
    detail: String,
}

/// "Keeps growing": the samples after the warm-up (the first third, and at least the
/// retention plus one sample, so retention has started to delete) are split into an
/// earlier and a later half; a series fails when the later half's median exceeds the
/// earlier half's by more than its tolerance (a relative and an absolute part, so noise
/// around small values does not count). The database also holds the ledger, orders and
/// card transactions, which are kept forever by design and grow with every operation:
/// its size fails when it grows faster per operation in the later half than in the
/// earlier half (by more than half), and the rows retention governs must stay flat.
fn judge(samples: &[Sample], args: &SoakArgs) -> Vec<Verdict> {
    let per_sample = args.sample_secs.max(1) as f64;
    let warm = ((args.retention as f64 / per_sample).ceil() as usize + 1).max(samples.len() / 3);
    let steady: &[Sample] = samples.get(warm..).unwrap_or(&[]);
    if steady.len() < 4 {
        return vec![Verdict {
            name: "samples",
            ok: false,
            detail: format!(
                "{} samples after a warm-up of {warm}: too few to judge (run longer or sample more often)",
                steady.len()
            ),
        }];
    }
    let (a, b) = steady.split_at(steady.len() / 2);
    type Series = fn(&Sample) -> f64;
    let flat: [(&'static str, Series, f64, f64); 5] = [
        ("RSS MiB", |s| s.rss_mib, 0.10, 5.0),
        ("open fds", |s| s.fds as f64, 0.10, 8.0),
        ("retained rows", |s| s.retained_rows as f64, 0.15, 500.0),
        ("p99 ms", |s| s.p99_ms, 0.50, 5.0),
        ("webhook lag p99 ms", |s| s.lag_p99_ms, 0.50, 200.0),
    ];
    let mut verdicts: Vec<Verdict> = flat
        .iter()
        .map(|(name, f, rel, abs)| {
            let (ma, mb) = (median(a, *f), median(b, *f));
            let limit = ma * (1.0 + rel) + abs;
            Verdict {
                name,
                ok: mb <= limit,
                detail: format!("median {ma:.1} then {mb:.1} (limit {limit:.1})"),
            }
        })
        .collect();
    let growth = |part: &[Sample], prev: &Sample| {
        let ops: u64 = part.iter().map(|s| s.ops).sum();
        let bytes = part.last().map_or(0.0, |l| l.db_mib - prev.db_mib) * 1024.0 * 1024.0;
        bytes / ops.max(1) as f64
    };
    let before_a = &samples[warm - 1];
    let (ga, gb) = (growth(a, before_a), growth(b, &a[a.len() - 1]));
    let limit = ga.max(0.0) * 1.5 + 64.0;
    verdicts.push(Verdict {
        name: "database bytes per operation",
        ok: gb <= limit,
        detail: format!("{ga:.0} then {gb:.0} (limit {limit:.0}); the ledger is kept forever"),
    });
    verdicts
}

fn median(part: &[Sample], f: fn(&Sample) -> f64) -> f64 {
    let mut v: Vec<f64> = part.iter().map(f).collect();
    v.sort_by(|x, y| x.total_cmp(y));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// soak.gp, and soak.png when gnuplot is on PATH.
fn plot(out: &Path) -> anyhow::Result<()> {
    let panels = [
        (6, "resident memory (MiB)"),
        (7, "open file descriptors"),
        (8, "database size (MiB)"),
        (9, "deliveries + events kept"),
        (5, "p99 latency (ms)"),
        (11, "webhook lag p99 (ms)"),
    ];
    let mut gp = String::from(
        "set terminal pngcairo size 1400,900 font 'sans,10'\nset output 'soak.png'\n\
         set datafile separator ','\nset key off\nset grid\nset xlabel 'minutes'\n\
         set yrange [0:*]\nset multiplot layout 2,3 title 'issuing soak'\n",
    );
    for (column, title) in panels {
        let _ = writeln!(
            gp,
            "set title '{title}'\nplot 'soak.csv' every ::1 using 1:{column} with linespoints pt 7 ps 0.5"
        );
    }
    gp.push_str("unset multiplot\n");
    std::fs::write(out.join("soak.gp"), gp)?;
    let ran = std::process::Command::new("gnuplot")
        .arg("soak.gp")
        .current_dir(out)
        .status();
    match ran {
        Ok(s) if s.success() => eprintln!("soak: plots in {}", out.join("soak.png").display()),
        _ => eprintln!(
            "soak: no plot made: install gnuplot (Debian: apt-get install gnuplot-nox) and run `gnuplot soak.gp` in {}",
            out.display()
        ),
    }
    Ok(())
}

fn summary(
    args: &SoakArgs,
    rate: f64,
    samples: &[Sample],
    verdicts: &[Verdict],
    ledger_ok: bool,
    first_error: Option<String>,
) -> String {
    let mut s = String::new();
    let backend = format!("{:?}", args.backend).to_lowercase();
    let _ = writeln!(
        s,
        "### Soak, {:?}: {} min at {rate:.0} ops/s, retention {} s\n",
        args.backend, args.minutes, args.retention
    );
    let _ = writeln!(
        s,
        "`issuing-bench soak --backend {backend} --minutes {} --sample-secs {} --retention {} --rate {rate:.0}`\n",
        args.minutes, args.sample_secs, args.retention
    );
    // The plot, once copied beside docs/benchmarks.md.
    let _ = writeln!(s, "![soak, {backend}](soak/{backend}.png)\n");
    let _ = writeln!(
        s,
        "| minute | ops | errors | skipped | p99 ms | RSS MiB | fds | DB MiB | deliveries+events | webhooks | lag p99 ms |"
    );
    let _ = writeln!(
        s,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for x in samples {
        let _ = writeln!(
            s,
            "| {:.1} | {} | {} | {} | {:.1} | {:.1} | {} | {:.1} | {} | {} | {:.0} |",
            x.minute,
            x.ops,
            x.errors,
            x.skipped,
            x.p99_ms,
            x.rss_mib,
            x.fds,
            x.db_mib,
            x.retained_rows,
            x.webhooks,
            x.lag_p99_ms
        );
    }
    let _ = writeln!(s);
    for v in verdicts {
        let _ = writeln!(
            s,
            "- {}: {} ({})",
            v.name,
            if v.ok { "flat" } else { "KEEPS GROWING" },
            v.detail
        );
    }
    let _ = writeln!(
        s,
        "- verify-ledger: {}",
        if ledger_ok { "ok" } else { "FAILED" }
    );
    if let Some(e) = first_error {
        let _ = writeln!(s, "- first failed request: {e}");
    }
    s
}
