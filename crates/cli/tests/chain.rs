//! Deposits that arrive by themselves: HD-derived TRC20 addresses, the chain watcher
//! against a TronGrid-shaped server on port 0 (common/tron.rs), the sandbox's
//! simulate/project/deposit, and crediting exactly once across pages, restarts, a
//! SIGKILL and two processes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::process::ServeProcess;
use common::tron::{self, FakeTransfer, FakeTron};
use common::{Backend, Creds, TestDb, TestServer};
use issuing_app::config::TronConfig;
use issuing_domain::tron_hd::AccountXpub;
use issuing_server::{Mode, ServerConfig};
use issuing_store::Store;
use serde_json::json;
use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The account xpub (m/44'/195'/0') of the BIP39 test mnemonic "abandon … about": a
/// public test key (see crates/domain/tests/tron_vectors.json).
const XPUB: &str = "xpub6D1AabNHCupeiLM65ZR9UStMhJ1vCpyV4XbZdyhMZBiJXALQtmn9p42VTQckoHVn8WNqS7dqnJokZHAHcHGoaQgmv8D45oNUKx6DZMNZBCd";
/// Another account key: m/44'/195'/0' of BIP32 test vector 1's seed.
const OTHER_XPUB: &str = "xpub6Bs4tgnLVqXrzkUc298sbaM8KKLtxhndvxiXNXfQkjUCaFA28YjLRfnF3sPfaV7ZSub5ui2USq45Tzto2Q1s8zoWW61rPy8DpqPNWS8ySE7";
const API_KEY: &str = "test-api-key";

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn address(index: i64) -> String {
    AccountXpub::parse(XPUB).unwrap().address(index).unwrap()
}

fn watcher(fake: &FakeTron) -> TronConfig {
    TronConfig {
        xpub: Some(XPUB.to_owned()),
        api_url: Some(fake.base.clone()),
        api_key: Some(API_KEY.to_owned()),
        poll_interval: Duration::from_secs(1),
        ..Default::default()
    }
}

/// Runs the body against a server whose watcher polls a fresh fake, once per backend.
macro_rules! with_fake {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                run(Backend::Sqlite, $body).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                run(Backend::Postgres, $body).await;
            }
        }
    };
}

async fn run<F, Fut>(backend: Backend, body: F)
where
    F: FnOnce(TestServer, FakeTron) -> Fut,
    Fut: Future<Output = ()>,
{
    let fake = FakeTron::start().await;
    let config = ServerConfig {
        tron: watcher(&fake),
        metrics_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..Default::default()
    };
    let Some(t) = TestServer::start_with(backend, config).await else {
        return;
    };
    body(t, fake).await;
}

/// Waits until `check` holds, up to `secs` seconds.
async fn eventually<F, Fut>(what: &str, secs: u64, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("timed out waiting for {what}");
}

async fn balance_of(t: &TestServer, base: &str, creds: &Creds) -> String {
    let (s, v) = t.call_on(base, creds, "project/balance", json!({})).await;
    assert_eq!(s, 200, "{v}");
    v["available"].as_str().unwrap().to_owned()
}

/// A call to a server that just started on a database another server used: on SQLite
/// it refuses requests signed before its predecessor's replay ceiling (a moment ahead of
/// the clock), so the call is signed again until it is past it.
async fn call_fresh(
    t: &TestServer,
    base: &str,
    creds: &Creds,
    path: &str,
    body: serde_json::Value,
) -> (u16, serde_json::Value) {
    for _ in 0..50 {
        let (s, v) = t.call_on(base, creds, path, body.clone()).await;
        if v["error_slug"] != "request_timestamp_out_of_window" {
            return (s, v);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{path}: the new server kept refusing fresh timestamps");
}

async fn chain_deposits(store: &Store, project_id: &str) -> i64 {
    let mut conn = store.conn().await.unwrap();
    issuing_store::chain_deposits::count_of_project(&mut conn, project_id)
        .await
        .unwrap()
}

async fn verify_ledger(store: &Store) {
    let mut conn = store.conn().await.unwrap();
    let problems = issuing_store::ledger::verify(&mut conn).await.unwrap();
    assert!(problems.is_empty(), "{problems:?}");
}

/// The `reference` of every deposit in project/txs.
async fn deposit_references(t: &TestServer, base: &str, creds: &Creds) -> Vec<String> {
    let (s, v) = t
        .call_on(
            base,
            creds,
            "project/txs",
            json!({"type": "deposit", "limit": 100}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["reference"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn metrics(t: &TestServer) -> String {
    let at = t.metrics_addr().expect("metrics listener");
    reqwest::get(format!("http://{at}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

fn sample(text: &str, name_and_labels: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no sample {name_and_labels} in\n{text}"))
}

with_fake!(
    wallet_is_the_address_derived_from_the_xpub,
    |t: TestServer, _fake: FakeTron| async move {
        // Project n's address is child 0/n of the xpub; indexes are handed out in order.
        let v = t.ok("project/wallet/trc20", json!({})).await;
        assert_eq!(v["usdt_trc20"], json!(address(0)));
        assert_eq!(t.creds.deposit_address, address(0));
        let second = t.new_project("second").await;
        assert_eq!(second.deposit_address, address(1));
        let (_, v) = t.call_as(&second, "project/wallet/trc20", json!({})).await;
        assert_eq!(v["usdt_trc20"], json!(address(1)));

        // A project from before derived addresses: its random address is legacy and it
        // has no index. The next start gives it the next index; none is reused.
        let old = t.new_project("old").await;
        let legacy = issuing_domain::trc20::new_address();
        sqlx::query("DELETE FROM chain_watch WHERE project_id = $1")
            .bind(&old.project_id)
            .execute(t.store.pool())
            .await
            .unwrap();
        sqlx::query(
            "UPDATE projects SET deposit_address = NULL, deposit_index = NULL, \
             legacy_deposit_address = $1 WHERE id = $2",
        )
        .bind(&legacy)
        .bind(&old.project_id)
        .execute(t.store.pool())
        .await
        .unwrap();
        let sibling = t
            .sibling_with(ServerConfig {
                tron: TronConfig {
                    xpub: Some(XPUB.to_owned()),
                    ..Default::default()
                },
                ..Default::default()
            })
            .await;
        let mut conn = t.store.conn().await.unwrap();
        let slot = issuing_store::deposit_addresses::slot_of(&mut conn, &old.project_id, "")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(slot.deposit_index, Some(3));
        assert_eq!(slot.deposit_address, Some(address(3)));
        let kept = issuing_store::deposit_addresses::legacy_address(&mut conn, &old.project_id)
            .await
            .unwrap();
        assert_eq!(kept, Some(legacy));
        let watched = issuing_store::chain_watch::of_project(&mut conn, &old.project_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(watched.0.address, address(3));
        drop(conn);
        let base = format!("http://{}", sibling.addr);
        let (_, v) = call_fresh(&t, &base, &old, "project/wallet/trc20", json!({})).await;
        assert_eq!(v["usdt_trc20"], json!(address(3)));
        sibling.shutdown().await;

        // Another xpub than the one the addresses were derived from: refused at start.
        let store = Store::connect(&t.db.url).await.unwrap();
        let refused = issuing_server::start(
            store,
            t.master.clone(),
            ServerConfig {
                listen: "127.0.0.1:0".parse().unwrap(),
                tron: TronConfig {
                    xpub: Some(OTHER_XPUB.to_owned()),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await;
        let message = refused.err().expect("refused").to_string();
        assert!(message.contains("differs"), "{message}");
    }
);

both_backends_with!(
    production_without_an_xpub_has_no_wallet,
    ServerConfig {
        mode: Mode::Production,
        ..Default::default()
    },
    |t: TestServer| async move {
        assert_eq!(t.creds.deposit_address, "");
        t.expect_error("project/wallet/trc20", json!({}), 404, "wallet_not_found")
            .await;
        t.expect_error(
            "simulate/project/deposit",
            json!({"amount": "10"}),
            404,
            "not_found",
        )
        .await;
        // The project holds its index already; a start with an xpub gives it the address.
        let sibling = t
            .sibling_with(ServerConfig {
                mode: Mode::Production,
                tron: TronConfig {
                    xpub: Some(XPUB.to_owned()),
                    ..Default::default()
                },
                ..Default::default()
            })
            .await;
        let base = format!("http://{}", sibling.addr);
        let (s, v) = call_fresh(&t, &base, &t.creds, "project/wallet/trc20", json!({})).await;
        assert_eq!(
            (s, v["usdt_trc20"].clone()),
            (200, json!(address(0))),
            "{v}"
        );
        sibling.shutdown().await;
    }
);

both_backends!(
    the_sandbox_keeps_its_own_test_key,
    |t: TestServer| async move {
        let v = t.ok("project/wallet/trc20", json!({})).await;
        let first = v["usdt_trc20"].as_str().unwrap().to_owned();
        assert!(issuing_domain::trc20::is_valid(&first), "{first}");
        assert_eq!(first, t.creds.deposit_address);
        let mut conn = t.store.conn().await.unwrap();
        let source = issuing_store::settings::get(&mut conn, "tron_xpub_source")
            .await
            .unwrap();
        assert_eq!(source.as_deref(), Some("sandbox_test_key"));
        let sealed = issuing_store::settings::get(&mut conn, "tron_sandbox_test_seed")
            .await
            .unwrap()
            .unwrap();
        let seed = t.master.open(&sealed).unwrap();
        let key = issuing_domain::tron_hd::account_from_seed(&seed).unwrap();
        assert_eq!(key.address(0).unwrap(), first);
        drop(conn);
        // Kept: another process (or a restart) shows the same address.
        let sibling = t.sibling().await;
        let base = format!("http://{}", sibling.addr);
        let (_, v) = call_fresh(&t, &base, &t.creds, "project/wallet/trc20", json!({})).await;
        assert_eq!(v["usdt_trc20"], json!(first));
        sibling.shutdown().await;
    }
);

both_backends!(
    simulate_project_deposit_credits_like_a_chain_deposit,
    |t: TestServer| async move {
        let v = t
            .ok("simulate/project/deposit", json!({"amount": "25.50"}))
            .await;
        assert_eq!(v["credited"], json!(true));
        assert_eq!(v["amount"], "25.50");
        assert_eq!(v["available"], "25.50");
        assert_eq!(v["address"], json!(t.creds.deposit_address));
        let txid = v["transaction_id"].as_str().unwrap().to_owned();
        assert!(issuing_domain::chain_deposit::is_transaction_id(&txid));
        let refs = deposit_references(&t, &t.base, &t.creds).await;
        assert_eq!(refs, vec![txid.clone()]);

        // A chosen transaction id is credited once.
        let chosen = tron::txid(77);
        let body = json!({"amount": 4, "transaction_id": chosen.to_uppercase()});
        let v = t.ok("simulate/project/deposit", body.clone()).await;
        assert_eq!(
            (v["credited"].clone(), v["available"].clone()),
            (json!(true), json!("29.50"))
        );
        let again = t.ok("simulate/project/deposit", body).await;
        assert_eq!(again["credited"], json!(false));
        assert_eq!(again["available"], "29.50");
        assert_eq!(again["transfer_id"], v["transfer_id"]);
        t.expect_error(
            "simulate/project/deposit",
            json!({"amount": "5", "transaction_id": chosen}),
            400,
            "idempotency_conflict",
        )
        .await;

        t.expect_error("simulate/project/deposit", json!({}), 400, "invalid_amount")
            .await;
        t.expect_error(
            "simulate/project/deposit",
            json!({"amount": "-1"}),
            400,
            "invalid_amount",
        )
        .await;
        t.expect_error(
            "simulate/project/deposit",
            json!({"amount": "0.5"}),
            422,
            "amount_below_minimum",
        )
        .await;
        t.expect_error(
            "simulate/project/deposit",
            json!({"amount": "5", "transaction_id": "nope"}),
            400,
            "validation_error",
        )
        .await;
        assert_eq!(chain_deposits(&t.store, &t.creds.project_id).await, 2);
        verify_ledger(&t.store).await;
    }
);

with_fake!(
    the_watcher_credits_each_incoming_transfer_once,
    |t: TestServer, fake: FakeTron| async move {
        // Two transfers a page, each page starting with the last of the one before,
        // and an API that lists other tokens too.
        fake.set_page_cap(2);
        fake.repeat_last_on_next_page(true);
        fake.ignore_contract_filter(true);
        let me = t.creds.deposit_address.clone();
        let them = issuing_domain::trc20::new_address();
        let at = now_ms() - 60_000;
        let mut unconfirmed = tron::usdt(8, &them, &me, 5_000_000, at + 6_500);
        unconfirmed.confirmed = false;
        let other_token = FakeTransfer {
            token: tron::OTHER_TOKEN.to_owned(),
            ..tron::usdt(3, &them, &me, 7_000_000, at + 3_000)
        };
        fake.add_all(vec![
            tron::usdt(1, &them, &me, 10_000_000, at + 1_000),
            tron::usdt(2, &them, &me, 2_500_000, at + 2_000),
            other_token,
            tron::usdt(4, &me, &them, 1_000_000, at + 4_000),
            tron::usdt(5, &them, &me, 999_999, at + 5_000),
            tron::usdt(6, &them, &me, 3_000_000, at + 6_000),
            tron::usdt(7, &them, &me, 4_000_000, at + 6_000),
            unconfirmed,
            tron::usdt(9, &them, &me, 1_000_000, at + 7_000),
        ]);
        eventually("the confirmed deposits", 20, || async {
            balance_of(&t, &t.base, &t.creds).await == "20.50"
        })
        .await;
        // More polls change nothing.
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        assert_eq!(balance_of(&t, &t.base, &t.creds).await, "20.50");
        assert_eq!(chain_deposits(&t.store, &t.creds.project_id).await, 5);
        let mut refs = deposit_references(&t, &t.base, &t.creds).await;
        refs.sort();
        let want: Vec<String> = [1, 2, 6, 7, 9].into_iter().map(tron::txid).collect();
        assert_eq!(refs, want);

        // The unconfirmed transfer is credited once it is confirmed, though it is older
        // than the cursor.
        fake.confirm(&tron::txid(8));
        eventually("the late confirmation", 20, || async {
            balance_of(&t, &t.base, &t.creds).await == "25.50"
        })
        .await;
        tokio::time::sleep(Duration::from_millis(2_500)).await;
        assert_eq!(balance_of(&t, &t.base, &t.creds).await, "25.50");
        assert_eq!(chain_deposits(&t.store, &t.creds.project_id).await, 6);
        verify_ledger(&t.store).await;

        // What the watcher asked: confirmed USDT transfers, oldest first, paged.
        let requests = fake.requests();
        assert!(requests.iter().all(|r| r.address == me));
        for r in &requests {
            assert_eq!(
                r.query.get("only_confirmed").map(String::as_str),
                Some("true")
            );
            assert_eq!(
                r.query.get("contract_address").map(String::as_str),
                Some(tron::USDT)
            );
            assert_eq!(
                r.query.get("order_by").map(String::as_str),
                Some("block_timestamp,asc")
            );
            assert!(r.query.contains_key("limit") && r.query.contains_key("min_timestamp"));
            assert_eq!(r.api_key.as_deref(), Some(API_KEY));
        }
        assert!(requests.iter().any(|r| r.query.contains_key("fingerprint")));
        // Polls after the first start near the cursor, not at the beginning of history.
        assert!(requests
            .iter()
            .any(|r| r.query["min_timestamp"].parse::<i64>().unwrap() > 0));

        let text = metrics(&t).await;
        let transfers = |outcome: &str| {
            sample(
                &text,
                &format!("issuing_chain_transfers_total{{outcome=\"{outcome}\"}}"),
            )
        };
        assert_eq!(transfers("credited"), 6);
        assert_eq!(transfers("other_token"), 1);
        assert_eq!(transfers("outgoing"), 1);
        assert_eq!(transfers("below_minimum"), 1);
        assert!(transfers("duplicate") >= 1, "{text}");
        assert_eq!(
            sample(&text, "issuing_chain_credited_micro_usdt_total"),
            25_500_000
        );
        assert_eq!(sample(&text, "issuing_chain_watcher_enabled"), 1);
        assert!(sample(&text, "issuing_chain_last_success_timestamp_seconds") > 0);
    }
);

with_fake!(
    the_watcher_backs_off_on_429_and_5xx,
    |t: TestServer, fake: FakeTron| async move {
        fake.fail_next(&[429, 500]);
        let me = t.creds.deposit_address.clone();
        let them = issuing_domain::trc20::new_address();
        fake.add(tron::usdt(1, &them, &me, 5_000_000, now_ms() - 10_000));
        eventually("the deposit after the errors", 20, || async {
            balance_of(&t, &t.base, &t.creds).await == "5.00"
        })
        .await;
        let requests = fake.requests();
        assert!(requests.len() >= 3, "{requests:?}");
        // After the 429 (Retry-After: 1) it waited a second, after the 500 two.
        assert!(requests[1].at - requests[0].at >= Duration::from_millis(900));
        assert!(requests[2].at - requests[1].at >= Duration::from_millis(1_900));
        let text = metrics(&t).await;
        assert_eq!(
            sample(&text, "issuing_chain_polls_total{outcome=\"rate_limited\"}"),
            1
        );
        assert_eq!(
            sample(&text, "issuing_chain_polls_total{outcome=\"server_error\"}"),
            1
        );
        assert_eq!(sample(&text, "issuing_chain_backoff_seconds"), 0);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(chain_deposits(&t.store, &t.creds.project_id).await, 1);
    }
);

/// The environment of a real `issuing serve` watching `fake`.
fn serve_env(fake: &FakeTron) -> Vec<(&'static str, String)> {
    vec![
        ("ISSUING_TRON_XPUB", XPUB.to_owned()),
        ("ISSUING_TRON_API_URL", fake.base.clone()),
        ("ISSUING_TRON_API_KEY", API_KEY.to_owned()),
        ("ISSUING_TRON_POLL_INTERVAL", "1".to_owned()),
    ]
}

async fn serve(dir: &std::path::Path, db: &TestDb, env: &[(&'static str, String)]) -> ServeProcess {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    ServeProcess::start_env(dir, &db.url, &env).await
}

fn demo_creds(server: &ServeProcess) -> Creds {
    let value = |name: &str| server.banner_value(name).expect(name);
    Creds {
        project_id: value("project_id"),
        api_key: value("api_key"),
        api_secret: value("api_secret"),
        deposit_address: value("deposit_address"),
    }
}

/// A helper server on the same database, only to speak the API with `call_on`.
async fn caller(backend: Backend) -> Option<TestServer> {
    TestServer::start(backend).await
}

async fn killed_between_fetching_and_crediting(backend: Backend) {
    let Some(t) = caller(backend).await else {
        return;
    };
    let Some(db) = TestDb::create(backend).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeTron::start().await;
    let env = serve_env(&fake);
    // Every answer waits for the test, so the test can hold the database first.
    fake.hold();
    let server = serve(dir.path(), &db, &env).await;
    let creds = demo_creds(&server);
    assert_eq!(creds.deposit_address, address(0));
    fake.add(tron::usdt(
        42,
        &issuing_domain::trc20::new_address(),
        &creds.deposit_address,
        12_340_000,
        now_ms() - 10_000,
    ));
    eventually("the watcher's request", 20, || async {
        fake.in_flight() > 0
    })
    .await;

    // Block the credit: SQLite's write lock, or PostgreSQL's row lock on the master
    // balance the deposit must update.
    let store = Store::connect(&db.url).await.unwrap();
    let mut lock = store.begin().await.unwrap();
    if backend == Backend::Postgres {
        sqlx::query("SELECT id FROM accounts WHERE project_id = $1 AND kind = 'master' FOR UPDATE")
            .bind(&creds.project_id)
            .fetch_all(&mut *lock)
            .await
            .unwrap();
    }
    fake.release();
    eventually("the page to be served", 20, || async {
        fake.pages_served() > 0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    server.kill().await;
    lock.rollback().await.unwrap();
    assert_eq!(chain_deposits(&store, &creds.project_id).await, 0);

    // After a restart the transfer is credited, once.
    let server = serve(dir.path(), &db, &env).await;
    eventually("the credit after the restart", 20, || async {
        chain_deposits(&store, &creds.project_id).await == 1
    })
    .await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(chain_deposits(&store, &creds.project_id).await, 1);
    // The demo project starts with its sandbox credit of 1000.
    assert_eq!(balance_of(&t, &server.base, &creds).await, "1012.34");
    let refs = deposit_references(&t, &server.base, &creds).await;
    assert_eq!(refs.iter().filter(|r| **r == tron::txid(42)).count(), 1);
    verify_ledger(&store).await;
    server.kill().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_fetching_and_crediting_sqlite() {
    killed_between_fetching_and_crediting(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_between_fetching_and_crediting_postgres() {
    killed_between_fetching_and_crediting(Backend::Postgres).await;
}

/// Two processes on one PostgreSQL poll the same address at the same time (each answer
/// takes longer than the poll interval) and credit every transfer once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_on_postgres_credit_once() {
    let Some(t) = caller(Backend::Postgres).await else {
        return;
    };
    let Some(db) = TestDb::create(Backend::Postgres).await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fake = FakeTron::start().await;
    let env = serve_env(&fake);
    fake.set_page_cap(2);
    fake.set_delay(Duration::from_millis(1_500));
    let first = serve(dir.path(), &db, &env).await;
    let creds = demo_creds(&first);
    let second = serve(dir.path(), &db, &env).await;
    let them = issuing_domain::trc20::new_address();
    let at = now_ms() - 30_000;
    fake.add_all(
        (1..=4)
            .map(|n| {
                tron::usdt(
                    n,
                    &them,
                    &creds.deposit_address,
                    1_000_000 * n as i64,
                    at + n as i64,
                )
            })
            .collect(),
    );
    let store = Store::connect(&db.url).await.unwrap();
    eventually("every deposit", 30, || async {
        chain_deposits(&store, &creds.project_id).await == 4
    })
    .await;
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(chain_deposits(&store, &creds.project_id).await, 4);
    assert_eq!(balance_of(&t, &second.base, &creds).await, "1010.00");
    assert!(
        fake.max_in_flight() >= 2,
        "the two processes never polled at once"
    );
    verify_ledger(&store).await;
    first.kill().await;
    second.kill().await;
}
