//! `issuing-bench asa`: signed ASA requests at a fixed rate against one `issuing serve`
//! in production mode whose lithic subprovider is a minimal fake Lithic (`lithic.rs`).
//! Cards are issued through it (cardholders with KYC, `cards/create` with a top-up),
//! the server is enrolled with `issuing admin provider enroll`, then each request asks
//! to hold 1 cent on one of the cards. The load is open: request i is sent at
//! i / rate whether or not earlier ones were answered (at most `MAX_IN_FLIGHT` wait),
//! and its latency counts from when it was due, so a stall shows in the percentiles.
//! Every answer must be `200 APPROVED`; the ledger is verified afterwards.

use crate::lithic::FakeLithic;
use crate::load::Outcome;
use crate::scenarios::call;
use crate::server::{admin, Launch, Project, Server};
use anyhow::Context;
use issuing_client::Client;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

#[derive(clap::Args, Debug, Clone)]
pub struct AsaArgs {
    #[arg(long, value_enum, default_value = "sqlite")]
    pub backend: crate::Backend,
    /// PostgreSQL server to create the run's own database on (dropped afterwards).
    #[arg(long, default_value = "postgres://postgres@127.0.0.1:5432/postgres")]
    pub postgres_url: String,
    /// The `issuing` binary; by default the one beside this executable.
    #[arg(long)]
    pub issuing: Option<PathBuf>,
    /// ASA requests per second.
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// How long the load runs.
    #[arg(long, default_value_t = 30.0)]
    pub seconds: f64,
    /// Cards the requests spread over.
    #[arg(long, default_value_t = 64)]
    pub cards: usize,
}

/// Requests waiting for an answer at most; beyond it the server is past capacity and
/// the request counts as an error.
const MAX_IN_FLIGHT: usize = 2048;
const SUB: &str = "lithic_us";
/// What each card is topped up with: 1 cent a request never runs it dry.
const CARD_FUNDS: &str = "1000";

pub async fn run(args: AsaArgs) -> anyhow::Result<bool> {
    let binary = crate::issuing_binary(args.issuing.as_deref())?;
    let args = &args;
    crate::on_fresh_database(
        "asa",
        args.backend,
        &args.postgres_url,
        |dir, url| async move { bench(args, &binary, &dir, url.as_deref()).await },
    )
    .await
}

/// The config file: production, one lithic subprovider on the fake, one product.
fn config(fake: &FakeLithic) -> String {
    format!(
        r#"mode = "production"
webhook_allowed_networks = "127.0.0.0/8"

[[catalog.subproviders]]
code = "{SUB}"
kind = "lithic"
base_url = "{}"
api_key_env = "ISSUING_LITHIC_API_KEY"

[[catalog.products]]
code = "lithic_virtual"
subprovider = "{SUB}"
issue_fee = "0"
topup_fee_percent = "0"
topup_fee_fixed = "0"
topup_min = "1"
topup_max = "{CARD_FUNDS}"
"#,
        fake.base
    )
}

async fn bench(
    args: &AsaArgs,
    binary: &Path,
    data_dir: &Path,
    database_url: Option<&str>,
) -> anyhow::Result<bool> {
    let fake = FakeLithic::start().await?;
    let config_path = data_dir.join("issuing.toml");
    std::fs::write(&config_path, config(&fake))?;
    let launch = Launch {
        global: vec!["--config".into(), config_path.display().to_string()],
        env: vec![("ISSUING_LITHIC_API_KEY".into(), fake.api_key.clone())],
    };
    let adm = |a: Vec<String>| {
        let launch = launch.clone();
        async move {
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            admin(binary, data_dir, database_url, &launch, &a).await
        }
    };
    let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
    let created: Value =
        serde_json::from_str(&adm(words("project create --name asa-bench")).await?)
            .context("admin project create printed no JSON")?;
    let field = |name: &str| {
        created[name]
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("admin project create printed no {name}"))
    };
    let project = Project {
        project_id: field("project_id")?,
        api_key: field("api_key")?,
        api_secret: field("api_secret")?,
    };
    adm(words(&format!(
        "deposit --project {} --amount 100000000",
        project.project_id
    )))
    .await?;
    let server =
        Server::start_with(binary, data_dir, database_url, launch.clone(), project).await?;
    server
        .admin(&[
            "provider",
            "enroll",
            "--subprovider",
            SUB,
            "--public-url",
            &server.base_url,
        ])
        .await?;
    let asa_url = fake
        .asa_url()
        .context("enrolment registered no ASA responder")?;
    let client = Client::new(&server.base_url, &server.api_key, &server.api_secret)?;
    client.sync_clock().await?;
    eprintln!(
        "issuing-bench asa: {:?}, server pid {}, issuing {} cards",
        args.backend, server.pid, args.cards
    );
    let tokens = issue_cards(&client, &fake, args.cards).await?;
    eprintln!(
        "issuing-bench asa: {} ASA requests/s for {} s",
        args.rate, args.seconds
    );
    server.take_peak_rss_mib();
    let cpu_before = server.cpu_secs();
    let outcome = load(args, &fake, &asa_url, tokens).await;
    let cpu = Some(server.cpu_secs() - cpu_before);
    let rss = server.take_peak_rss_mib();
    let verify = server.admin(&["verify-ledger"]).await;
    server.stop().await?;
    print(args, &outcome, rss, cpu);
    match verify {
        Ok(out) => {
            println!(
                "\nverify-ledger: ok ({})",
                out.trim().lines().last().unwrap_or("")
            );
            Ok(outcome.errors == 0)
        }
        Err(e) => {
            println!("\nverify-ledger: FAILED: {e:#}");
            Ok(false)
        }
    }
}

/// `n` approved cardholders with one funded card each: Lithic's card tokens.
async fn issue_cards(client: &Client, fake: &FakeLithic, n: usize) -> anyhow::Result<Vec<String>> {
    let mut tokens = Vec::with_capacity(n);
    for i in 0..n {
        let user = format!("asa-{i}");
        call(
            client,
            "cardholders/create",
            json!({"external_user_id": user, "subprovider_code": SUB, "kyc_data": {
                "first_name": "Ada", "last_name": "Lovelace", "birth_date": "1990-12-10",
                "email": "ada@example.com", "phone_number_full": "+14155550123",
                "country_iso": "US",
                "address": {"line1": "1 Main Street", "city": "Omaha", "state": "NE",
                            "postal_code": "68022", "country_iso": "US"},
                "id_document": {"type": "ssn", "number": "111-23-1412", "country_iso": "US"},
            }}),
        )
        .await
        .map_err(anyhow::Error::msg)?;
        let v = call(
            client,
            "cards/create",
            json!({"external_user_id": user, "product_code": "lithic_virtual",
                   "idempotency_key": format!("asa-card-{i}"), "initial_topup": CARD_FUNDS}),
        )
        .await
        .map_err(anyhow::Error::msg)?;
        let order = v["order"]["order_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let card = v["card_id"].as_str().unwrap_or_default().to_owned();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let o = call(client, "orders/check", json!({"order_id": order}))
                .await
                .map_err(anyhow::Error::msg)?;
            match o["status"].as_str() {
                Some("completed") => break,
                Some("failed") => anyhow::bail!("card {card} failed: {o}"),
                _ if Instant::now() > deadline => anyhow::bail!("card {card} not issued in time"),
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
        tokens.push(
            fake.card_token(&card)
                .with_context(|| format!("Lithic has no card {card}"))?,
        );
    }
    Ok(tokens)
}

#[derive(Default)]
struct Tally {
    latencies: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
}

async fn load(args: &AsaArgs, fake: &FakeLithic, url: &str, tokens: Vec<String>) -> Outcome {
    let http = reqwest::Client::new();
    let total = (args.rate * args.seconds).round() as usize;
    let tally = Arc::new(Mutex::new(Tally::default()));
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(total);
    for i in 0..total {
        let due = started + Duration::from_secs_f64(i as f64 / args.rate);
        tokio::time::sleep_until(due.into()).await;
        let Ok(permit) = slots.clone().try_acquire_owned() else {
            let mut t = lock(&tally);
            t.errors += 1;
            t.first_error
                .get_or_insert_with(|| format!("more than {MAX_IN_FLIGHT} requests in flight"));
            continue;
        };
        let request = fake.asa_request(url, &http, &tokens[i % tokens.len()], 1);
        let tally = tally.clone();
        tasks.push(tokio::spawn(async move {
            let result = match request {
                Ok(r) => answer(r).await,
                Err(e) => Err(e.to_string()),
            };
            let mut t = lock(&tally);
            t.latencies.push(due.elapsed());
            if let Err(e) = result {
                t.errors += 1;
                t.first_error.get_or_insert(e);
            }
            drop(permit);
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = started.elapsed();
    let mut t = std::mem::take(&mut *lock(&tally));
    t.latencies.sort_unstable();
    Outcome {
        requests: t.latencies.len(),
        errors: t.errors,
        elapsed,
        latencies: t.latencies,
        first_error: t.first_error,
    }
}

async fn answer(request: reqwest::RequestBuilder) -> Result<(), String> {
    let r = request.send().await.map_err(|e| e.to_string())?;
    let status = r.status().as_u16();
    let v: Value = r.json().await.map_err(|e| e.to_string())?;
    if status == 200 && v["result"] == "APPROVED" {
        Ok(())
    } else {
        Err(format!("{status} {v}"))
    }
}

fn print(args: &AsaArgs, o: &Outcome, rss: f64, cpu: Option<f64>) {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "\n{:?}, {} cards, {} ASA requests/s offered for {} s: peak resident memory {rss:.0} MiB\n",
        args.backend, args.cards, args.rate, args.seconds
    );
    println!("| Scenario | Requests | Errors | req/s | p50 ms | p99 ms | p99.9 ms | max ms |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| lithic/asa | {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} |",
        o.requests,
        o.errors,
        o.per_second(),
        ms(o.percentile(0.5)),
        ms(o.percentile(0.99)),
        ms(o.percentile(0.999)),
        ms(o.percentile(1.0)),
    );
    if let Some(cpu) = cpu {
        println!(
            "\nserver CPU: {cpu:.1} s over the load, {:.2} ms per request answered",
            1000.0 * cpu / (o.requests.max(1) as f64)
        );
    }
    if let Some(e) = &o.first_error {
        println!("\nfirst error: {e}");
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
