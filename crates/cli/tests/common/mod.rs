//! Test harness: a real server on port 0 over a fresh database, spoken to through the
//! real envelope. Each test runs on SQLite and on PostgreSQL (see `both_backends!`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use issuing_envelope::Key;
use issuing_server::{MasterKey, RunningServer, ServerConfig};
use issuing_store::Store;
use serde_json::{json, Value};
use std::time::{SystemTime, UNIX_EPOCH};

pub mod cards;
pub mod console;
pub mod db;
pub mod lithic;
pub mod pgproxy;
pub mod process;
pub mod receiver;
pub mod spend;
pub mod tron;
pub use db::{Backend, TestDb};

/// Runs the test body once per backend, as two test functions in a module.
#[macro_export]
macro_rules! both_backends {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                $crate::common::run_case(common::Backend::Sqlite, $body).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                $crate::common::run_case(common::Backend::Postgres, $body).await;
            }
        }
    };
}

/// Like `both_backends!`, with the server built from `$config` (a `ServerConfig`).
#[macro_export]
macro_rules! both_backends_with {
    ($name:ident, $config:expr, $body:expr) => {
        mod $name {
            use super::*;
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                $crate::common::run_case_with(common::Backend::Sqlite, $config, $body).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                $crate::common::run_case_with(common::Backend::Postgres, $config, $body).await;
            }
        }
    };
}

pub async fn run_case<F, Fut>(backend: Backend, body: F)
where
    F: FnOnce(TestServer) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    run_case_with(backend, ServerConfig::default(), body).await;
}

pub async fn run_case_with<F, Fut>(backend: Backend, config: ServerConfig, body: F)
where
    F: FnOnce(TestServer) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let Some(server) = TestServer::start_with(backend, config).await else {
        return;
    };
    body(server).await;
}

/// Asserts that a typed SDK call failed with this HTTP status and `error_slug` (and a
/// message), as `TestServer::expect_error` does for raw calls; returns the error.
#[track_caller]
pub fn api_error<T: std::fmt::Debug>(
    result: Result<T, issuing_client::ClientError>,
    status: u16,
    slug: &str,
) -> issuing_client::ClientError {
    let e = match result {
        Ok(v) => panic!("expected {status} {slug}, got success: {v:?}"),
        Err(e) => e,
    };
    assert_eq!((e.status(), e.slug()), (Some(status), Some(slug)), "{e}");
    match &e {
        issuing_client::ClientError::Api { message, .. } => assert!(!message.is_empty(), "{e}"),
        other => panic!("not an API error: {other}"),
    }
    e
}

#[derive(Debug, Clone)]
pub struct Creds {
    pub project_id: String,
    pub api_key: String,
    pub api_secret: String,
    pub deposit_address: String,
}

pub struct TestServer {
    pub base: String,
    pub store: Store,
    pub master: MasterKey,
    pub creds: Creds,
    pub http: reqwest::Client,
    pub db: TestDb,
    server: Option<RunningServer>,
}

pub fn now_micros() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// Timestamps must be unique per (key, path) within 30 s; a counter keeps two requests
/// issued in the same microsecond apart.
pub fn fresh_timestamp() -> i64 {
    use std::sync::atomic::{AtomicI64, Ordering};
    static LAST: AtomicI64 = AtomicI64::new(0);
    let now = now_micros();
    let mut prev = LAST.load(Ordering::SeqCst);
    loop {
        let next = now.max(prev + 1);
        match LAST.compare_exchange(prev, next, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return next,
            Err(p) => prev = p,
        }
    }
}

impl TestServer {
    /// None when the backend is switched off for this run (PostgreSQL with
    /// `ISSUING_TEST_POSTGRES=off`).
    pub async fn start(backend: Backend) -> Option<TestServer> {
        Self::start_with(backend, ServerConfig::default()).await
    }

    pub async fn start_with(backend: Backend, config: ServerConfig) -> Option<TestServer> {
        let db = TestDb::create(backend).await?;
        let url = db.url.clone();
        Some(Self::start_at(db, &url, None, config).await)
    }

    /// A server on `db` reached through `url` (another form of its URL: several hosts,
    /// a proxy), reading the console's pages through `read_url` when given.
    pub async fn start_at(
        db: TestDb,
        url: &str,
        read_url: Option<&str>,
        mut config: ServerConfig,
    ) -> TestServer {
        let mut store = Store::connect(url).await.expect("connect");
        if let Some(read_url) = read_url {
            store = store.with_reader(Store::connect(read_url).await.expect("connect reader"));
        }
        store.migrate().await.expect("migrate");
        let master = MasterKey::generate();
        master.bind_to(&store).await.expect("bind master key");
        config.listen = "127.0.0.1:0".parse().unwrap();
        let server = issuing_server::start(store.clone(), master.clone(), config)
            .await
            .expect("start server");
        let creds = create_project(&store, &master, "test project").await;
        TestServer {
            base: format!("http://{}", server.addr),
            store,
            master,
            creds,
            http: reqwest::Client::new(),
            db,
            server: Some(server),
        }
    }

    /// A second server process on the same database (same master key).
    pub async fn sibling(&self) -> RunningServer {
        self.sibling_with(ServerConfig::default()).await
    }

    pub async fn sibling_with(&self, config: ServerConfig) -> RunningServer {
        let config = ServerConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            ..config
        };
        let store = Store::connect(&self.db.url).await.unwrap();
        issuing_server::start(store, self.master.clone(), config)
            .await
            .unwrap()
    }

    /// Where the server serves the operator console (when started with `console`).
    pub fn console_addr(&self) -> Option<std::net::SocketAddr> {
        self.server.as_ref().and_then(|s| s.console_addr)
    }

    /// Where the server serves `GET /metrics` (when started with `metrics_listen`).
    pub fn metrics_addr(&self) -> Option<std::net::SocketAddr> {
        self.server.as_ref().and_then(|s| s.metrics_addr)
    }

    /// Stops this test's own server (its workers too); the database stays.
    pub async fn stop_server(&mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await;
        }
    }

    pub async fn new_project(&self, name: &str) -> Creds {
        create_project(&self.store, &self.master, name).await
    }

    pub async fn deposit(&self, project_id: &str, amount_micros: i64) {
        let mut tx = self.store.begin().await.unwrap();
        issuing_store::ledger::deposit(
            &mut tx,
            project_id,
            issuing_wire::Amount::from_micros(amount_micros),
            None,
        )
        .await
        .unwrap();
        tx.commit().await.unwrap();
    }

    /// The typed SDK (`issuing_client::Client`) for the default project: what tests use
    /// for well-formed requests. It never retries, so a test sees every answer exactly
    /// as the server gave it.
    pub fn sdk(&self) -> issuing_client::Client {
        self.sdk_as(&self.creds)
    }

    /// The typed SDK for another project of this server.
    pub fn sdk_as(&self, creds: &Creds) -> issuing_client::Client {
        self.sdk_on(&self.base, creds)
    }

    /// The typed SDK for any server (a child process, a sibling), retries off.
    pub fn sdk_on(&self, base: &str, creds: &Creds) -> issuing_client::Client {
        issuing_client::Client::new(base, &creds.api_key, &creds.api_secret)
            .expect("SDK client")
            .with_retry_policy(issuing_client::RetryPolicy::none())
    }

    /// Calls `path` as the default project with a fresh timestamp.
    pub async fn call(&self, path: &str, body: Value) -> (u16, Value) {
        self.call_as(&self.creds, path, body).await
    }

    pub async fn call_as(&self, creds: &Creds, path: &str, body: Value) -> (u16, Value) {
        self.call_on(&self.base, creds, path, body).await
    }

    /// Calls any server (a child process, a sibling) with these credentials.
    pub async fn call_on(
        &self,
        base: &str,
        creds: &Creds,
        path: &str,
        mut body: Value,
    ) -> (u16, Value) {
        if body.get("request_timestamp").is_none() {
            body["request_timestamp"] = json!(fresh_timestamp());
        }
        let sealed = issuing_envelope::seal(
            &Key::from_secret(&creds.api_secret),
            body.to_string().as_bytes(),
        );
        self.post_raw(
            base,
            path,
            Some(&creds.api_key),
            json!({ "encrypted": sealed }).to_string(),
            &creds.api_secret,
        )
        .await
    }

    /// Posts a raw body; opens a sealed response with `secret`, returns plain ones as is.
    pub async fn post_raw(
        &self,
        base: &str,
        path: &str,
        api_key: Option<&str>,
        body: String,
        secret: &str,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .post(format!("{base}/api/v2/{path}"))
            .header("Content-Type", "application/json")
            .body(body);
        if let Some(k) = api_key {
            req = req.header("API-KEY", k);
        }
        let resp = req.send().await.expect("request");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap();
        let outer: Value =
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("non-JSON response: {text}"));
        let value = match outer.get("encrypted").and_then(Value::as_str) {
            Some(sealed) => {
                let plain = issuing_envelope::open(&Key::from_secret(secret), sealed)
                    .expect("open response");
                serde_json::from_slice(&plain).unwrap()
            }
            None => outer,
        };
        (status, value)
    }

    /// Asserts an error status and slug; returns the body.
    pub async fn expect_error(&self, path: &str, body: Value, status: u16, slug: &str) -> Value {
        let (s, v) = self.call(path, body).await;
        assert_eq!(
            (s, v["error_slug"].as_str()),
            (status, Some(slug)),
            "{path}: {v}"
        );
        assert_eq!(v["success"], json!(false));
        assert!(v["error"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
        v
    }

    pub async fn ok(&self, path: &str, body: Value) -> Value {
        let (s, v) = self.call(path, body).await;
        assert_eq!(s, 200, "{path}: {v}");
        assert_eq!(v["success"], json!(true), "{path}: {v}");
        v
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        // Stopping the server lets the database be dropped cleanly; TestDb's own Drop
        // removes it afterwards.
        if let Some(server) = self.server.take() {
            drop(server);
        }
    }
}

pub async fn create_project(store: &Store, master: &MasterKey, name: &str) -> Creds {
    let c = issuing_app::projects::create_project(store, master, name)
        .await
        .unwrap();
    Creds {
        project_id: c.project_id.clone(),
        api_key: c.api_key.clone(),
        api_secret: c.api_secret.clone(),
        deposit_address: c.deposit_address.clone().unwrap_or_default(),
    }
}
