//! Backups: `issuing admin backup` copies a SQLite database while `serve` runs under
//! load, `admin restore` puts it into a fresh data directory (and refuses while a server
//! holds the database, or without the right master key), and a server on the restored
//! database verifies its ledger and shows the cards and orders. PostgreSQL: the
//! `pg_dump` / `pg_restore` commands of docs/operations.md, when `pg_dump` is on PATH.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::cards::kyc;
use common::process::{issuing, ServeProcess};
use common::{fresh_timestamp, Backend, Creds, TestDb};
use issuing_client::{CardRef, CardholdersCreate, CardsCreate, CardsTopup, Client, RetryPolicy};
use issuing_envelope::Key;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const STOP_WITHIN: Duration = Duration::from_secs(30);

fn creds_of(server: &ServeProcess) -> Creds {
    Creds {
        project_id: server.banner_value("project_id").unwrap(),
        api_key: server.banner_value("api_key").unwrap(),
        api_secret: server.banner_value("api_secret").unwrap(),
        deposit_address: String::new(),
    }
}

fn sdk(base: &str, creds: &Creds) -> Client {
    Client::new(base, &creds.api_key, &creds.api_secret)
        .unwrap()
        .with_retry_policy(RetryPolicy::none())
}

async fn admin(
    dir: &Path,
    url: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> (i32, String, String) {
    let out = issuing()
        .envs(env.iter().copied())
        .arg("--data-dir")
        .arg(dir)
        .arg("--database-url")
        .arg(url)
        .arg("admin")
        .args(args)
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `n` active cards of user `user`, each with an initial top-up; (card, order) ids.
async fn cards(sdk: &Client, user: &str, n: usize) -> Vec<(String, String)> {
    sdk.cardholders_create(&CardholdersCreate {
        external_user_id: user.into(),
        subprovider_code: "sandbox".into(),
        kyc_data: Some(serde_json::from_value(kyc()).unwrap()),
        ..CardholdersCreate::default()
    })
    .await
    .unwrap();
    let mut out = Vec::new();
    for i in 0..n {
        let created = sdk
            .cards_create(
                &CardsCreate {
                    external_user_id: user.into(),
                    product_code: "virtual_usd".into(),
                    initial_topup: Some("20".into()),
                    ..CardsCreate::default()
                },
                &format!("{user}-card-{i}"),
            )
            .await
            .unwrap();
        let order = sdk
            .wait_order(&created.order.order_id, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(order.status, "completed", "{order:?}");
        out.push((created.card_id, created.order.order_id));
    }
    out
}

/// Top-ups on `cards` until `stop`; each accepted one's order id is pushed to `accepted`.
fn topup_load(
    base: String,
    creds: Creds,
    cards: Vec<String>,
    accepted: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let sdk = sdk(&base, &creds);
        let mut i = 0usize;
        while !stop.load(Ordering::Relaxed) && i < 5_000 {
            let card = &cards[i % cards.len()];
            let request = CardsTopup {
                card_id: card.clone(),
                amount: "10".into(),
                ..CardsTopup::default()
            };
            if let Ok(r) = sdk.cards_topup(&request, &format!("load-{i}")).await {
                accepted.lock().unwrap().push(r.order_id);
            }
            i += 1;
        }
    })
}

/// The cards and orders of `sample` as a server on the restored database shows them.
async fn check_sample(sdk: &Client, user: &str, sample: &[(String, String)], orders: &[String]) {
    for (card, issue_order) in sample {
        let c = sdk.cards_get(&CardRef::new(card, user)).await.unwrap();
        assert_eq!(c.status, "active", "{c:?}");
        let o = sdk
            .wait_order(issue_order, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(o.status, "completed");
    }
    for order in orders {
        let o = sdk
            .wait_order(order, Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(
            o.status, "completed",
            "top-up {order} from before the backup"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_backup_under_load_restores_into_a_fresh_directory() {
    let live = tempfile::tempdir().unwrap();
    let db = TestDb::create(Backend::Sqlite).await.unwrap();
    let server = ServeProcess::start(live.path(), &db.url).await;
    let creds = creds_of(&server);
    let client = sdk(&server.base, &creds);
    let sample = cards(&client, "ada", 3).await;
    let card_ids: Vec<String> = sample.iter().map(|(c, _)| c.clone()).collect();

    let accepted = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let load = topup_load(
        server.base.clone(),
        creds.clone(),
        card_ids,
        accepted.clone(),
        stop.clone(),
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    // Accepted before the backup started: the backup must hold them.
    let before_backup = accepted.lock().unwrap().clone();
    assert!(!before_backup.is_empty(), "the load runs");

    let safe = tempfile::tempdir().unwrap();
    let backup = safe.path().join("issuing-backup.db");
    let key_file = safe.path().join("issuing-master.key");
    let backup_s = backup.to_str().unwrap();
    let key_s = key_file.to_str().unwrap();
    let (code, out, err) = admin(
        live.path(),
        &db.url,
        &["backup", "--to", backup_s, "--master-key-to", key_s],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let printed: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(printed["backup"], backup_s);
    assert_eq!(printed["master_key"], key_s);
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();

    // The key is where it was asked to go, and not in the database copy.
    let key = std::fs::read_to_string(&key_file).unwrap();
    assert_eq!(
        key.trim(),
        std::fs::read_to_string(live.path().join("master.key"))
            .unwrap()
            .trim()
    );
    let copy = std::fs::read(&backup).unwrap();
    assert!(!copy
        .windows(key.trim().len())
        .any(|w| w == key.trim().as_bytes()));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for f in [&backup, &key_file] {
            let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", f.display());
        }
    }
    // An existing file is never overwritten.
    let (code, _, err) = admin(live.path(), &db.url, &["backup", "--to", backup_s], &[]).await;
    assert!(code != 0 && err.contains("exists"), "{err}");

    // A restore is refused while a server holds the database.
    let (code, _, err) = admin(
        live.path(),
        &db.url,
        &["restore", "--from", backup_s, "--force"],
        &[],
    )
    .await;
    assert!(code != 0 && err.contains("server is running"), "{err}");
    assert_eq!(server.terminate(STOP_WITHIN).await, Some(0));

    // Into a fresh directory: refused without the key or with another one.
    let fresh = tempfile::tempdir().unwrap();
    let fresh_url = format!("sqlite://{}", fresh.path().join("issuing.db").display());
    let (code, _, err) = admin(
        fresh.path(),
        &fresh_url,
        &["restore", "--from", backup_s],
        &[],
    )
    .await;
    assert!(code != 0 && err.contains("no master key"), "{err}");
    let other = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let (code, _, err) = admin(
        fresh.path(),
        &fresh_url,
        &["restore", "--from", backup_s],
        &[("ISSUING_MASTER_KEY", other)],
    )
    .await;
    assert!(
        code != 0 && err.contains("does not open this backup"),
        "{err}"
    );
    let signed_before_restore =
        json!({"request_timestamp": fresh_timestamp(), "external_user_id": "late"});
    let (code, out, err) = admin(
        fresh.path(),
        &fresh_url,
        &["restore", "--from", backup_s, "--master-key-from", key_s],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let restored: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(restored["previous_database_kept_as"], Value::Null);
    // A second restore over it needs --force, and keeps what it replaces.
    let (code, _, err) = admin(
        fresh.path(),
        &fresh_url,
        &["restore", "--from", backup_s],
        &[],
    )
    .await;
    assert!(code != 0 && err.contains("--force"), "{err}");
    let (code, out, err) = admin(
        fresh.path(),
        &fresh_url,
        &["restore", "--from", backup_s, "--force"],
        &[],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let kept: Value = serde_json::from_str(out.trim()).unwrap();
    assert!(Path::new(kept["previous_database_kept_as"].as_str().unwrap()).exists());

    let (code, out, _) = admin(fresh.path(), &fresh_url, &["verify-ledger"], &[]).await;
    assert_eq!((code, out.trim()), (0, "ledger ok"));
    let server = ServeProcess::start(fresh.path(), &fresh_url).await;
    let client = sdk(&server.base, &creds);
    check_sample(&client, "ada", &sample, &before_backup).await;
    // The restored database does not know what was accepted after the backup: requests
    // signed before the restore are refused, as after a crash.
    let secret = Key::from_secret(&creds.api_secret);
    let body = json!({"encrypted": issuing_envelope::seal(&secret, signed_before_restore.to_string().as_bytes())});
    let resp = reqwest::Client::new()
        .post(format!("{}/api/v2/users/create", server.base))
        .header("API-KEY", &creds.api_key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let v: Value = resp.json().await.unwrap();
    assert_eq!(v["error_slug"], "request_timestamp_out_of_window", "{v}");
    assert_eq!(server.terminate(STOP_WITHIN).await, Some(0));
    let (code, out, _) = admin(fresh.path(), &fresh_url, &["verify-ledger"], &[]).await;
    assert_eq!((code, out.trim()), (0, "ledger ok"));
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

/// The commands docs/operations.md gives, run as written there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_pg_dump_and_pg_restore_round_trip() {
    if !on_path("pg_dump") || !on_path("pg_restore") {
        eprintln!("skipping: pg_dump / pg_restore not on PATH");
        return;
    }
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let live = tempfile::tempdir().unwrap();
    let server = ServeProcess::start(live.path(), &db.url).await;
    let creds = creds_of(&server);
    let client = sdk(&server.base, &creds);
    let sample = cards(&client, "ada", 2).await;
    let accepted = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let load = topup_load(
        server.base.clone(),
        creds.clone(),
        sample.iter().map(|(c, _)| c.clone()).collect(),
        accepted.clone(),
        stop.clone(),
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    let before_backup = accepted.lock().unwrap().clone();
    let dump = live.path().join("issuing.dump");
    // pg_dump --format=custom --file=issuing.dump "$ISSUING_DATABASE_URL"
    let out = tokio::process::Command::new("pg_dump")
        .arg("--format=custom")
        .arg(format!("--file={}", dump.display()))
        .arg(&db.url)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stop.store(true, Ordering::Relaxed);
    load.await.unwrap();
    assert_eq!(server.terminate(STOP_WITHIN).await, Some(0));

    // pg_restore --no-owner --exit-on-error --dbname="$NEW_DATABASE_URL" issuing.dump
    let restored = TestDb::create(Backend::Postgres).await.unwrap();
    let out = tokio::process::Command::new("pg_restore")
        .arg("--no-owner")
        .arg("--exit-on-error")
        .arg(format!("--dbname={}", restored.url))
        .arg(&dump)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The same master key (the data directory's master.key) opens the restored database.
    let (code, out, err) = admin(live.path(), &restored.url, &["verify-ledger"], &[]).await;
    assert_eq!((code, out.trim()), (0, "ledger ok"), "{err}");
    let server = ServeProcess::start(live.path(), &restored.url).await;
    let client = sdk(&server.base, &creds);
    check_sample(&client, "ada", &sample, &before_backup).await;
    assert_eq!(server.terminate(STOP_WITHIN).await, Some(0));
}
