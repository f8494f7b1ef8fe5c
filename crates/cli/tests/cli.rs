//! The `issuing` binary: first run, operator commands, settings validation.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::process::{issuing, ServeProcess};
use common::{Creds, TestDb, TestServer};
use serde_json::{json, Value};

async fn run_admin(data_dir: &std::path::Path, url: &str, args: &[&str]) -> (i32, String, String) {
    let out = issuing()
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--database-url")
        .arg(url)
        .arg("admin")
        .args(args)
        .output()
        .await
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

both_backends!(
    first_run_prints_working_demo_credentials_once,
    |t: TestServer| async move {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::create(t.db.backend).await.unwrap();
        let server = ServeProcess::start(dir.path(), &db.url).await;
        let creds = Creds {
            project_id: server
                .banner_value("project_id")
                .expect("project_id printed"),
            api_key: server.banner_value("api_key").expect("api_key printed"),
            api_secret: server
                .banner_value("api_secret")
                .expect("api_secret printed"),
            deposit_address: server
                .banner_value("deposit_address")
                .expect("deposit_address printed"),
        };
        assert!(dir.path().join("master.key").exists());
        let (s, v) = t
            .call_on(&server.base, &creds, "project/balance", json!({}))
            .await;
        assert_eq!((s, v["available"].as_str()), (200, Some("1000.00")), "{v}");
        let (_, v) = t
            .call_on(&server.base, &creds, "project/wallet/trc20", json!({}))
            .await;
        assert_eq!(v["usdt_trc20"], json!(creds.deposit_address));
        server.kill().await;

        // A restart creates no second demo project and the credentials keep working.
        let server = ServeProcess::start(dir.path(), &db.url).await;
        assert_eq!(server.banner_value("api_key"), None, "{:?}", server.banner);
        let (s, _) = t
            .call_on(&server.base, &creds, "system/health", json!({}))
            .await;
        assert_eq!(s, 200);
        server.kill().await;
        let (code, out, _) = run_admin(dir.path(), &db.url, &["project", "list"]).await;
        assert_eq!((code, out.lines().count()), (0, 1), "{out}");
    }
);

both_backends!(admin_commands, |t: TestServer| async move {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::create(t.db.backend).await.unwrap();
    let url = db.url.as_str();
    let (code, out, err) =
        run_admin(dir.path(), url, &["project", "create", "--name", "Acme"]).await;
    assert_eq!(code, 0, "{err}");
    let created: Value = serde_json::from_str(out.trim()).unwrap();
    for f in ["project_id", "api_key", "api_secret", "deposit_address"] {
        assert!(
            created[f].as_str().is_some_and(|v| !v.is_empty()),
            "{f}: {created}"
        );
    }
    let project = created["project_id"].as_str().unwrap();

    let (code, out, err) = run_admin(
        dir.path(),
        url,
        &["deposit", "--project", project, "--amount", "125.5"],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["amount"].as_str(), v["balance"].as_str()),
        (Some("125.50"), Some("125.50"))
    );

    // The same chain reference is never credited twice.
    let args = [
        "deposit",
        "--project",
        project,
        "--amount",
        "10",
        "--reference",
        "tx-1",
    ];
    assert_eq!(run_admin(dir.path(), url, &args).await.0, 0);
    let (code, _, err) = run_admin(dir.path(), url, &args).await;
    assert_ne!(code, 0);
    assert!(err.contains("already credited"), "{err}");

    for bad in ["0", "-5", "1.0000001", "abc"] {
        let (code, _, err) = run_admin(
            dir.path(),
            url,
            &["deposit", "--project", project, "--amount", bad],
        )
        .await;
        assert_ne!(code, 0, "{bad}");
        assert!(err.contains("--amount"), "{err}");
    }
    let (code, _, err) = run_admin(
        dir.path(),
        url,
        &["deposit", "--project", "nope", "--amount", "1"],
    )
    .await;
    assert!(code != 0 && err.contains("not found"), "{err}");

    let (code, out, _) = run_admin(dir.path(), url, &["project", "list"]).await;
    assert_eq!(code, 0);
    let listed: Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(
        (listed["name"].as_str(), listed["balance"].as_str()),
        (Some("Acme"), Some("135.50"))
    );
    assert!(
        !out.contains(created["api_secret"].as_str().unwrap()),
        "list must not show secrets"
    );

    // The deposits are visible through the API with the printed credentials.
    let server = ServeProcess::start(dir.path(), url).await;
    let creds = Creds {
        project_id: project.to_owned(),
        api_key: created["api_key"].as_str().unwrap().to_owned(),
        api_secret: created["api_secret"].as_str().unwrap().to_owned(),
        deposit_address: String::new(),
    };
    let (_, v) = t
        .call_on(
            &server.base,
            &creds,
            "project/txs",
            json!({"sort_dir": "asc"}),
        )
        .await;
    assert_eq!(v["total"], 2, "{v}");
    assert_eq!(v["items"][1]["reference"], "tx-1");
    server.kill().await;

    let (code, out, _) = run_admin(dir.path(), url, &["verify-ledger"]).await;
    assert_eq!((code, out.trim()), (0, "ledger ok"));
    // Corrupt a balance behind the ledger's back: verify-ledger names the account.
    let store = issuing_store::Store::connect(url).await.unwrap();
    let account: String = sqlx::Row::get(
        &sqlx::query("SELECT id FROM accounts WHERE project_id = $1 AND kind = 'master'")
            .bind(project)
            .fetch_one(store.pool())
            .await
            .unwrap(),
        "id",
    );
    sqlx::query("UPDATE accounts SET balance = balance + 1 WHERE id = $1")
        .bind(&account)
        .execute(store.pool())
        .await
        .unwrap();
    store.close().await;
    let (code, out, _) = run_admin(dir.path(), url, &["verify-ledger"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.contains(&account), "{out}");
});

#[tokio::test]
async fn settings_are_validated_with_clear_messages() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["serve", "--listen", "not-an-address"], "--listen"),
        (&["serve", "--mode", "staging"], "--mode"),
        (&["--database-url", "mysql://x", "serve"], "--database-url"),
    ];
    for (args, needle) in cases {
        let out = issuing()
            .arg("--data-dir")
            .arg(dir.path())
            .args(*args)
            .output()
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    // A config file with an unknown key is refused, naming the file.
    let cfg = dir.path().join("issuing.toml");
    std::fs::write(&cfg, "listen = \"127.0.0.1:0\"\nlisten_port = 5\n").unwrap();
    let out = issuing()
        .arg("--config")
        .arg(&cfg)
        .args(["serve"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("issuing.toml"), "{err}");
    // A master key that does not match the database is refused at start.
    let data = dir.path().join("d");
    let ok = issuing()
        .arg("--data-dir")
        .arg(&data)
        .args(["admin", "project", "list"])
        .output()
        .await
        .unwrap();
    assert!(ok.status.success());
    let out = issuing()
        .arg("--data-dir")
        .arg(&data)
        .env(
            "ISSUING_MASTER_KEY",
            "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
        )
        .args(["admin", "project", "list"])
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("master key does not match"), "{err}");
}

#[tokio::test]
async fn production_mode_creates_no_demo_project() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("p.db").display());
    let mut child = issuing()
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--database-url")
        .arg(&url)
        .args(["serve", "--listen", "127.0.0.1:0", "--mode", "production"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(std::time::Duration::from_secs(60), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.starts_with("issuing listening on"), "{first}");
    child.kill().await.unwrap();
    let (code, out, _) = run_admin(dir.path(), &url, &["project", "list"]).await;
    assert_eq!((code, out.trim()), (0, ""));
}

both_backends!(
    in_flight_accounts_are_backfilled_for_old_projects,
    |t: TestServer| async move {
        // A project as migration 0002 found it: no in-flight account.
        let old = t.new_project("old").await;
        sqlx::query("DELETE FROM accounts WHERE project_id = $1 AND kind = 'in_flight'")
            .bind(&old.project_id)
            .execute(t.store.pool())
            .await
            .unwrap();
        sqlx::query("DELETE FROM schema_migrations WHERE version = 3")
            .execute(t.store.pool())
            .await
            .unwrap();
        t.store.migrate().await.unwrap();
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM accounts WHERE kind = 'in_flight' AND card_id IS NULL AND project_id = $1")
        .bind(&old.project_id)
        .fetch_one(t.store.pool())
        .await
        .unwrap();
        assert_eq!(n, 1);
        // Projects that had one keep exactly one.
        let (n,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM accounts WHERE kind = 'in_flight' AND card_id IS NULL AND project_id = $1")
        .bind(&t.creds.project_id)
        .fetch_one(t.store.pool())
        .await
        .unwrap();
        assert_eq!(n, 1);
    }
);

/// One JSON object per stdout line.
fn json_lines(out: &str) -> Vec<Value> {
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

both_backends!(admin_key_and_project_commands, |t: TestServer| async move {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::create(t.db.backend).await.unwrap();
    let url = db.url.as_str();
    let admin = |args: &'static [&'static str], extra: Vec<String>| {
        let dir = dir.path().to_owned();
        async move {
            let mut all: Vec<&str> = args.to_vec();
            all.extend(extra.iter().map(String::as_str));
            run_admin(&dir, url, &all).await
        }
    };
    let (code, out, err) = admin(&["project", "create", "--name", "Acme"], vec![]).await;
    assert_eq!(code, 0, "{err}");
    let created: Value = serde_json::from_str(out.trim()).unwrap();
    let project = created["project_id"].as_str().unwrap().to_owned();
    let old = Creds {
        project_id: project.clone(),
        api_key: created["api_key"].as_str().unwrap().to_owned(),
        api_secret: created["api_secret"].as_str().unwrap().to_owned(),
        deposit_address: String::new(),
    };
    let server = ServeProcess::start(dir.path(), url).await;
    let status = |creds: Creds| {
        let base = server.base.clone();
        let t = &t;
        async move {
            let (s, v) = t.call_on(&base, &creds, "project/balance", json!({})).await;
            (s, v["error_slug"].as_str().map(str::to_owned))
        }
    };
    let ok = (200, None);
    // Servers cache unsealed keys for up to 2 s: a revocation, expiry or suspension
    // reaches them within that, so the checks below wait up to 4 s for the answer.
    let expect_status = |creds: Creds, want: (u16, Option<String>)| {
        let status = &status;
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(4);
            loop {
                let got = status(creds.clone()).await;
                if got == want || std::time::Instant::now() > deadline {
                    assert_eq!(got, want);
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    let unknown = (401, Some("api_key_not_found".to_owned()));

    // key list: one valid key, never a secret.
    let (code, out, _) = admin(&["key", "list", "--project"], vec![project.clone()]).await;
    assert_eq!(code, 0);
    let keys = json_lines(&out);
    assert_eq!(keys.len(), 1, "{out}");
    assert_eq!(keys[0]["api_key"], json!(old.api_key));
    assert_eq!(keys[0]["valid"], true);
    assert_eq!(
        (&keys[0]["expires_at"], &keys[0]["revoked_at"]),
        (&Value::Null, &Value::Null)
    );
    assert!(keys[0]["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(!out.contains(&old.api_secret));

    // key rotate: prints the new credentials; the old key works for the grace period.
    let (code, out, err) = admin(&["key", "rotate", "--project"], vec![project.clone()]).await;
    assert_eq!(code, 0, "{err}");
    let rotated: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(rotated["project_id"], json!(project));
    assert!(rotated["old_keys_valid_until"].is_string(), "{rotated}");
    let new = Creds {
        api_key: rotated["api_key"].as_str().unwrap().to_owned(),
        api_secret: rotated["api_secret"].as_str().unwrap().to_owned(),
        ..old.clone()
    };
    assert_ne!(new.api_key, old.api_key);
    expect_status(old.clone(), ok.clone()).await;
    expect_status(new.clone(), ok.clone()).await;
    let (_, out, _) = admin(&["key", "list", "--project"], vec![project.clone()]).await;
    let keys = json_lines(&out);
    assert_eq!(keys.len(), 2, "{out}");
    assert_eq!(keys[0]["expires_at"], rotated["old_keys_valid_until"]);
    assert!(!out.contains(&new.api_secret));

    // key revoke: the running server refuses the key within seconds.
    let (code, out, err) = admin(&["key", "revoke", "--key"], vec![old.api_key.clone()]).await;
    assert_eq!(code, 0, "{err}");
    let revoked: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (
            revoked["api_key"].as_str(),
            revoked["valid_keys_left"].as_u64()
        ),
        (Some(old.api_key.as_str()), Some(1))
    );
    expect_status(old.clone(), unknown.clone()).await;
    expect_status(new.clone(), ok.clone()).await;

    // The last valid key is kept unless --force.
    let (code, _, err) = admin(&["key", "revoke", "--key"], vec![new.api_key.clone()]).await;
    assert_eq!(code, 2);
    assert!(
        err.contains("last valid API key") && err.contains("--force"),
        "{err}"
    );
    expect_status(new.clone(), ok.clone()).await;

    // project suspend / resume.
    let (code, out, err) = admin(&["project", "suspend", "--project"], vec![project.clone()]).await;
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (v["status"].as_str(), v["previous_status"].as_str()),
        (Some("suspended"), Some("active"))
    );
    expect_status(new.clone(), (403, Some("api_key_invalid".to_owned()))).await;
    let (_, out, _) = admin(&["project", "list"], vec![]).await;
    assert_eq!(json_lines(&out)[0]["status"], "suspended");
    let (code, out, err) = admin(&["project", "resume", "--project"], vec![project.clone()]).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(out.trim()).unwrap()["status"],
        "active"
    );
    expect_status(new.clone(), ok.clone()).await;

    // rotate --grace 0 ends the old key at once; then --force revokes the last one.
    let (code, out, err) = admin(
        &["key", "rotate", "--grace", "0", "--project"],
        vec![project.clone()],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let rotated: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(rotated["old_keys_valid_until"], Value::Null);
    let newest = Creds {
        api_key: rotated["api_key"].as_str().unwrap().to_owned(),
        api_secret: rotated["api_secret"].as_str().unwrap().to_owned(),
        ..old.clone()
    };
    expect_status(new.clone(), unknown.clone()).await;
    expect_status(newest.clone(), ok.clone()).await;
    let (code, _, err) = admin(
        &["key", "revoke", "--force", "--key"],
        vec![newest.api_key.clone()],
    )
    .await;
    assert_eq!(code, 0, "{err}");
    expect_status(newest.clone(), unknown.clone()).await;
    let (_, out, _) = admin(&["key", "list", "--project"], vec![project.clone()]).await;
    let keys = json_lines(&out);
    assert_eq!(keys.len(), 3);
    assert!(keys.iter().all(|k| k["valid"] == false), "{out}");
    assert!(keys[0]["revoked_at"].is_string() && keys[2]["revoked_at"].is_string());
    assert!(keys[1]["revoked_at"].is_null() && keys[1]["expires_at"].is_string());
    server.kill().await;

    // Mistakes exit 2 and say what is wrong.
    let cases: &[(&[&str], &str)] = &[
        (&["key", "rotate", "--project", "nope"], "not found"),
        (&["key", "list", "--project", "nope"], "not found"),
        (&["key", "revoke", "--key", "pk_nope"], "not found"),
        (&["project", "suspend", "--project", "nope"], "not found"),
        (&["project", "resume", "--project", "nope"], "not found"),
    ];
    for (args, needle) in cases {
        let (code, _, err) = admin(args, vec![]).await;
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    for grace in ["-1", "x", "7776001"] {
        let (code, _, err) = admin(
            &["key", "rotate", "--project"],
            vec![project.clone(), format!("--grace={grace}")],
        )
        .await;
        assert_eq!(code, 2, "{grace}: {err}");
        assert!(err.contains("--grace"), "{grace}: {err}");
    }
});

both_backends!(
    admin_output_is_clean_and_complete,
    |t: TestServer| async move {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::create(t.db.backend).await.unwrap();
        let url = db.url.as_str();
        let (code, out, _) =
            run_admin(dir.path(), url, &["project", "create", "--name", "Old"]).await;
        assert_eq!(code, 0);
        let created: Value = serde_json::from_str(out.trim()).unwrap();
        let project = created["project_id"].as_str().unwrap();
        // A project from before derived addresses keeps its random one as legacy.
        let store = issuing_store::Store::connect(url).await.unwrap();
        sqlx::query("UPDATE projects SET legacy_deposit_address = 'TLegacyAddress' WHERE id = $1")
            .bind(project)
            .execute(store.pool())
            .await
            .unwrap();
        store.close().await;

        // Run at the default log level: the second run finds every table in place and
        // must print nothing on stderr (PostgreSQL notices included).
        let out = issuing()
            .env_remove("ISSUING_LOG")
            .arg("--data-dir")
            .arg(dir.path())
            .arg("--database-url")
            .arg(url)
            .args(["admin", "project", "list"])
            .output()
            .await
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert_eq!(err.trim(), "", "admin printed on stderr");
        let listed: Value =
            serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
        assert_eq!(
            listed["legacy_deposit_address"], "TLegacyAddress",
            "{listed}"
        );
        assert_eq!(listed["deposit_index"], 0, "{listed}");
        assert_eq!(listed["deposit_address"], created["deposit_address"]);

        // `serve` names its deposit key once.
        let log = dir.path().join("serve.log");
        let mut child = issuing()
            .env("ISSUING_LOG", "info")
            .arg("--data-dir")
            .arg(dir.path())
            .arg("--database-url")
            .arg(url)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        tokio::time::timeout(std::time::Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.starts_with("issuing listening on") {
                    break;
                }
            }
        })
        .await
        .unwrap();
        child.kill().await.unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        assert_eq!(
            text.matches("deposit addresses derive from").count(),
            1,
            "{text}"
        );
    }
);
