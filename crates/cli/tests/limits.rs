//! Limits that keep abusive clients from hurting others: per-key rate limits, the
//! standard error object on answers the HTTP layer makes itself, idle and slow clients
//! under a low descriptor limit, and private file permissions whatever the umask.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::process::{issuing, ServeProcess};
use common::{TestDb, TestServer};
use issuing_server::ServerConfig;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends raw bytes, returns (status, body as JSON or Null).
async fn raw(addr: &str, bytes: &[u8]) -> (u16, Value) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(15), s.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| serde_json::from_str(b).unwrap_or(Value::Null))
        .unwrap_or(Value::Null);
    (status, body)
}

fn host(t: &TestServer) -> String {
    t.base.trim_start_matches("http://").to_owned()
}

both_backends_with!(
    a_key_over_its_rate_gets_429_with_retry_after,
    ServerConfig {
        rate_limit: 5,
        ..Default::default()
    },
    |t: TestServer| async move {
        // A burst of twice the rate passes, then the key is limited.
        let mut statuses = Vec::new();
        let mut limited = None;
        for _ in 0..14 {
            let resp = t
                .http
                .post(format!("{}/api/v2/system/health", t.base))
                .header("API-KEY", &t.creds.api_key)
                .body("{}")
                .send()
                .await
                .unwrap();
            statuses.push(resp.status().as_u16());
            if resp.status() == 429 && limited.is_none() {
                let retry: u64 = resp.headers()["retry-after"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                let body: Value = resp.json().await.unwrap();
                limited = Some((retry, body));
            }
        }
        let ok = statuses.iter().filter(|s| **s != 429).count();
        assert!((10..=11).contains(&ok), "burst of 10: {statuses:?}");
        let (retry, body) = limited.expect("some requests were limited");
        assert!(retry >= 1);
        assert_eq!(
            body,
            json!({"success": false, "error": body["error"], "error_slug": "rate_limited"})
        );
        assert!(body["error"].as_str().is_some_and(|m| !m.is_empty()));
        // Another key is not affected.
        let other = t.new_project("other").await;
        let (s, _) = t.call_as(&other, "system/health", json!({})).await;
        assert_eq!(s, 200);
        // After waiting, the key works again.
        tokio::time::sleep(Duration::from_millis(1200)).await;
        t.ok("system/health", json!({})).await;
    }
);

both_backends_with!(
    a_zero_rate_limit_turns_it_off,
    ServerConfig {
        rate_limit: 0,
        ..Default::default()
    },
    |t: TestServer| async move {
        for _ in 0..60 {
            t.ok("system/health", json!({})).await;
        }
    }
);

both_backends!(
    answers_of_the_http_layer_carry_the_error_object,
    |t: TestServer| async move {
        let addr = host(&t);
        let long_uri = format!(
            "POST /api/v2/{} HTTP/1.1\r\nHost: x\r\n\r\n",
            "a".repeat(70_000)
        );
        let many_headers = format!(
            "POST /api/v2/system/health HTTP/1.1\r\nHost: x\r\n{}\r\n",
            (0..200)
                .map(|i| format!("X-H{i}: v\r\n"))
                .collect::<String>()
        );
        let chunked = "POST /api/v2/system/health HTTP/1.1\r\nHost: x\r\nAPI-KEY: k\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nnot hex\r\n0\r\n\r\n".to_string();
        for (name, req, statuses) in [
            ("long URI", long_uri, &[414u16, 431][..]),
            ("many headers", many_headers, &[431][..]),
            ("bad request line", "BLAH\r\n\r\n".to_string(), &[400][..]),
            (
                "bad content-length",
                "POST /api/v2/system/health HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"
                    .to_string(),
                &[400][..],
            ),
        ] {
            let (status, body) = raw(&addr, req.as_bytes()).await;
            assert!(statuses.contains(&status), "{name}: {status}");
            assert_eq!(body["success"], false, "{name}: {body}");
            assert!(
                body["error_slug"].is_string() && body["error"].is_string(),
                "{name}: {body}"
            );
        }
        // An invalid chunked body is the client's error (400), not a size problem. A real
        // key is needed to get as far as reading the body.
        let chunked = chunked.replace("API-KEY: k", &format!("API-KEY: {}", t.creds.api_key));
        let (status, body) = raw(&addr, chunked.as_bytes()).await;
        assert_eq!(
            (status, body["error_slug"].as_str()),
            (400, Some("invalid_request")),
            "{body}"
        );
    }
);

/// The real binary under a descriptor limit of 256: hundreds of idle and slow clients
/// do not keep a normal request from being answered, and a connection that sent no
/// complete request is closed within 30 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_clients_do_not_starve_real_ones() {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDb::create(common::Backend::Sqlite).await.unwrap();
    let mut cmd = issuing();
    cmd.arg("--data-dir")
        .arg(dir.path())
        .arg("--database-url")
        .arg(&db.url);
    let server = ServeProcess::spawn_with_limit(cmd, 256).await;
    let addr = server.base.trim_start_matches("http://").to_owned();

    let mut idle = Vec::new();
    for _ in 0..300 {
        if let Ok(Ok(s)) =
            tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(&addr)).await
        {
            idle.push(s);
        }
    }
    // Slow clients: a header byte every second.
    let mut slow = Vec::new();
    for _ in 0..40 {
        let addr = addr.clone();
        slow.push(tokio::spawn(async move {
            let Ok(mut s) = TcpStream::connect(&addr).await else {
                return;
            };
            for b in b"POST /api/v2/system/health HTTP/1.1\r\nHost: x\r\n"
                .iter()
                .cycle()
                .take(120)
            {
                if s.write_all(&[*b]).await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }));
    }
    assert!(idle.len() > 250, "opened {} idle sockets", idle.len());
    let started = Instant::now();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let resp = client
        .get(format!("{}/health", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "took {:?}",
        started.elapsed()
    );

    // A connection that sends nothing is closed by the server.
    let mut quiet = TcpStream::connect(&addr).await.unwrap();
    let opened = Instant::now();
    let mut buf = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(35), quiet.read(&mut buf))
        .await
        .expect("the server never closed a silent connection")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert!(opened.elapsed() < Duration::from_secs(30));
    for s in slow {
        s.abort();
    }
    server.kill().await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_files_are_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 000 && exec \"$0\" --data-dir {} admin project create --name perms",
            data.display()
        ))
        .arg(env!("CARGO_BIN_EXE_issuing"))
        .env_remove("ISSUING_MASTER_KEY")
        .env_remove("ISSUING_DATABASE_URL")
        .env_remove("ISSUING_DATA_DIR")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&data), 0o700);
    let mut checked = 0;
    for entry in std::fs::read_dir(&data).unwrap() {
        let path = entry.unwrap().path();
        assert_eq!(mode(&path), 0o600, "{}", path.display());
        checked += 1;
    }
    assert!(checked >= 2, "the database and the master key");
    assert!(data.join("issuing.db").exists() && data.join("master.key").exists());
}

both_backends_with!(
    a_request_whose_body_never_completes_gets_408,
    ServerConfig {
        request_timeout: Duration::from_secs(1),
        ..Default::default()
    },
    |t: TestServer| async move {
        let addr = host(&t);
        let started = Instant::now();
        let head = format!(
            "POST /api/v2/system/health HTTP/1.1\r\nHost: x\r\nAPI-KEY: {}\r\nContent-Length: 100\r\n\r\n{{\"encr",
            t.creds.api_key
        );
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(head.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        // Read until the answer's body is complete (the connection may stay open).
        while !String::from_utf8_lossy(&out).contains("}") {
            let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
                .await
                .expect("no answer to a stalled body")
                .unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8_lossy(&out).to_string();
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        let body: Value = serde_json::from_str(text.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!(body["error_slug"], "request_timeout");
        assert_eq!(body["success"], false);
        assert!(started.elapsed() < Duration::from_secs(5));
    }
);
