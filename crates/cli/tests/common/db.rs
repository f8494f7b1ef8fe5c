//! Fresh databases per test: a temporary SQLite file, or a new PostgreSQL database that
//! is dropped when the test ends (also when it panics).

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

pub struct TestDb {
    pub url: String,
    pub backend: Backend,
    pg_drop: Option<(String, String)>,
    _dir: tempfile::TempDir,
}

/// `ISSUING_TEST_POSTGRES_URL` names a server and maintenance database to create test
/// databases from; `ISSUING_TEST_POSTGRES=off` skips the PostgreSQL half of each test.
pub fn postgres_admin_url() -> Option<String> {
    if std::env::var("ISSUING_TEST_POSTGRES").is_ok_and(|v| v == "off") {
        return None;
    }
    Some(
        std::env::var("ISSUING_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned()),
    )
}

fn with_database(admin_url: &str, name: &str) -> String {
    let (base, query) = match admin_url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (admin_url, String::new()),
    };
    let slash = base
        .rfind('/')
        .filter(|i| *i > "postgres://".len())
        .unwrap_or(base.len());
    format!("{}/{}{}", &base[..slash], name, query)
}

impl TestDb {
    pub async fn create(backend: Backend) -> Option<TestDb> {
        let dir = tempfile::tempdir().unwrap();
        match backend {
            Backend::Sqlite => Some(TestDb {
                url: format!("sqlite://{}", dir.path().join("test.db").display()),
                backend,
                pg_drop: None,
                _dir: dir,
            }),
            Backend::Postgres => {
                let Some(admin) = postgres_admin_url() else {
                    eprintln!("skipping PostgreSQL half: ISSUING_TEST_POSTGRES=off");
                    return None;
                };
                static N: AtomicU64 = AtomicU64::new(0);
                let name = format!(
                    "issuing_t_{}_{}_{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::SeqCst),
                    rand_suffix()
                );
                use sqlx::Connection;
                let mut conn = sqlx::PgConnection::connect(&admin).await.unwrap_or_else(|e| {
                    panic!("PostgreSQL is unreachable at {admin}: {e} (set ISSUING_TEST_POSTGRES=off to skip)")
                });
                sqlx::query(&format!("CREATE DATABASE {name}"))
                    .execute(&mut conn)
                    .await
                    .unwrap();
                conn.close().await.ok();
                Some(TestDb {
                    url: with_database(&admin, &name),
                    backend,
                    pg_drop: Some((admin, name)),
                    _dir: dir,
                })
            }
        }
    }
}

fn rand_suffix() -> u32 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .subsec_nanos()
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some((admin, name)) = self.pg_drop.take() else {
            return;
        };
        // Drop runs inside the test's runtime; a separate thread with its own runtime
        // can block on the async driver without stalling it.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                use sqlx::Connection;
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                    let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                        .execute(&mut conn)
                        .await;
                }
            });
        })
        .join();
    }
}
