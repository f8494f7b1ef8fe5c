//! Replay protection beyond one process's life: a copy of an accepted request is refused
//! after the server is killed and restarted (SQLite: the durable ceiling fences the
//! in-memory guard; PostgreSQL: the guard table), identical requests racing each other
//! are accepted once, and a second `issuing serve` on one SQLite database refuses to start.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::process::{issuing, ServeProcess};
use common::{fresh_timestamp, Backend, Creds, TestDb, TestServer};
use issuing_envelope::Key;
use serde_json::{json, Value};

fn sealed(secret: &str, body: &Value) -> String {
    json!({ "encrypted": issuing_envelope::seal(&Key::from_secret(secret), body.to_string().as_bytes()) }).to_string()
}

fn creds_of(server: &ServeProcess) -> Creds {
    Creds {
        project_id: server.banner_value("project_id").unwrap(),
        api_key: server.banner_value("api_key").unwrap(),
        api_secret: server.banner_value("api_secret").unwrap(),
        deposit_address: String::new(),
    }
}

both_backends!(
    a_copy_is_refused_after_sigkill_and_restart,
    |t: TestServer| async move {
        let dir = tempfile::tempdir().unwrap();
        let db = TestDb::create(t.db.backend).await.unwrap();
        let server = ServeProcess::start(dir.path(), &db.url).await;
        let creds = creds_of(&server);
        let body = sealed(
            &creds.api_secret,
            &json!({"request_timestamp": fresh_timestamp(), "external_user_id": "once"}),
        );
        let send = |base: String, body: String| {
            let (t, key, secret) = (&t, creds.api_key.clone(), creds.api_secret.clone());
            async move {
                t.post_raw(&base, "users/create", Some(&key), body, &secret)
                    .await
            }
        };
        let (s, v) = send(server.base.clone(), body.clone()).await;
        assert_eq!(s, 200, "{v}");
        server.kill().await;

        let server = ServeProcess::start(dir.path(), &db.url).await;
        let (s, v) = send(server.base.clone(), body).await;
        let slug = v["error_slug"].as_str().unwrap_or_default();
        assert_eq!(s, 400, "{v}");
        assert!(
            slug == "duplicate_request" || slug == "request_timestamp_out_of_window",
            "{v}"
        );
        // A request signed now is served at once: the restart does not lock clients out.
        let fresh = sealed(
            &creds.api_secret,
            &json!({"request_timestamp": fresh_timestamp(), "external_user_id": "twice"}),
        );
        let (s, v) = send(server.base.clone(), fresh).await;
        assert_eq!(s, 200, "{v}");
        server.kill().await;
    }
);

both_backends!(
    identical_requests_racing_are_accepted_once,
    |t: TestServer| async move {
        let body = sealed(
            &t.creds.api_secret,
            &json!({"request_timestamp": fresh_timestamp()}),
        );
        let mut racing = Vec::new();
        for _ in 0..24 {
            let (t, body) = (&t, body.clone());
            racing.push(async move {
                t.post_raw(
                    &t.base,
                    "system/health",
                    Some(&t.creds.api_key),
                    body,
                    &t.creds.api_secret,
                )
                .await
            });
        }
        let answers = futures::future::join_all(racing).await;
        let accepted = answers.iter().filter(|(s, _)| *s == 200).count();
        let duplicates = answers
            .iter()
            .filter(|(s, v)| *s == 400 && v["error_slug"] == "duplicate_request")
            .count();
        assert_eq!((accepted, duplicates), (1, 23), "{answers:?}");
    }
);

#[tokio::test]
async fn a_second_server_on_one_sqlite_database_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::create(Backend::Sqlite).await.unwrap();
    let first = ServeProcess::start(dir.path(), &db.url).await;
    let out = issuing()
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--database-url")
        .arg(&db.url)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("already running") && err.contains("PostgreSQL"),
        "{err}"
    );
    // The first server is unaffected, and once it is gone a new one starts.
    let (s, _) = reqwest::get(format!("{}/health", first.base))
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(s, 200);
    first.kill().await;
    let again = ServeProcess::start(dir.path(), &db.url).await;
    again.kill().await;
}
