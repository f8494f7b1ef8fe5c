//! Running the real `issuing` binary as a child process.

use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub fn issuing() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_issuing"));
    cmd.env_remove("ISSUING_MASTER_KEY")
        .env_remove("ISSUING_DATABASE_URL")
        .env_remove("ISSUING_DATA_DIR")
        .env("ISSUING_LOG", "warn")
        .kill_on_drop(true);
    cmd
}

/// A running `issuing serve` and every line it printed before it started listening.
pub struct ServeProcess {
    pub child: Child,
    pub base: String,
    pub banner: Vec<String>,
}

impl ServeProcess {
    pub async fn start(data_dir: &std::path::Path, database_url: &str) -> ServeProcess {
        Self::start_with(data_dir, database_url, &[]).await
    }

    /// Like `start`, with these environment variables set for the child.
    pub async fn start_env(
        data_dir: &std::path::Path,
        database_url: &str,
        env: &[(&str, &str)],
    ) -> ServeProcess {
        Self::spawn(data_dir, database_url, &[], env).await
    }

    /// `extra` (global options such as `--config`) and environment variables both.
    pub async fn start_with_env(
        data_dir: &std::path::Path,
        database_url: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> ServeProcess {
        Self::spawn(data_dir, database_url, extra, env).await
    }

    /// `extra` goes before `serve` (global options such as `--config`).
    pub async fn start_with(
        data_dir: &std::path::Path,
        database_url: &str,
        extra: &[&str],
    ) -> ServeProcess {
        Self::spawn(data_dir, database_url, extra, &[]).await
    }

    async fn spawn(
        data_dir: &std::path::Path,
        database_url: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> ServeProcess {
        let child = issuing()
            .envs(env.iter().copied())
            .args(extra)
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--database-url")
            .arg(database_url)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn issuing serve");
        Self::from_child(child).await
    }

    async fn from_child(mut child: Child) -> ServeProcess {
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = BufReader::new(stdout).lines();
        let mut banner = Vec::new();
        let base = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = lines.next_line().await.expect("read stdout") {
                if let Some(rest) = line.strip_prefix("issuing listening on ") {
                    return rest.trim_end_matches("/api/v2").to_owned();
                }
                banner.push(line);
            }
            panic!("issuing serve exited before listening; printed {banner:?}");
        })
        .await
        .expect("server did not start in time");
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        ServeProcess {
            child,
            base,
            banner,
        }
    }

    /// `cmd` (global options already given) run as `serve` with at most `nofile` open
    /// descriptors (through util-linux `prlimit`).
    pub async fn spawn_with_limit(cmd: Command, nofile: u32) -> ServeProcess {
        let std = cmd.as_std();
        let mut limited = Command::new("prlimit");
        limited
            .arg(format!("--nofile={nofile}:{nofile}"))
            .arg(std.get_program())
            .args(std.get_args())
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env_remove("ISSUING_MASTER_KEY")
            .env_remove("ISSUING_DATABASE_URL")
            .env_remove("ISSUING_DATA_DIR")
            .env("ISSUING_LOG", "warn")
            .kill_on_drop(true)
            .stdout(Stdio::piped());
        Self::from_child(limited.spawn().expect("spawn prlimit issuing serve")).await
    }

    /// The value printed after `name:` in the first-run banner.
    pub fn banner_value(&self, name: &str) -> Option<String> {
        self.banner.iter().find_map(|l| {
            l.trim()
                .strip_prefix(&format!("{name}:"))
                .map(|v| v.trim().to_owned())
        })
    }

    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// SIGTERM (through `kill`: no unsafe code in tests), then waits at most `within`
    /// for the process to exit; returns its exit code, or None if it did not exit.
    pub async fn terminate(mut self, within: Duration) -> Option<i32> {
        let pid = self.child.id()?;
        let sent = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .await
            .expect("run kill");
        assert!(sent.success(), "kill -TERM {pid} failed");
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(status) => status.expect("wait for issuing serve").code(),
            Err(_) => {
                let _ = self.child.kill().await;
                None
            }
        }
    }
}
