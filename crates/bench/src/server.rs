//! The server under test: a real `issuing serve` child process on a fresh database, its
//! credentials read from its first-run output, its memory sampled from /proc.

use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub struct Server {
    child: Child,
    pub pid: u32,
    pub base_url: String,
    pub project_id: String,
    pub api_key: String,
    pub api_secret: String,
    /// The operator console (`--console-listen 127.0.0.1:0`) and its first admin.
    pub console_url: String,
    pub console_password: String,
    /// Highest resident set size seen since the last `take_peak_rss`, in KiB.
    peak_rss_kib: Arc<AtomicU64>,
    /// Highest resident set size over the whole run, in KiB.
    pub max_rss_kib: Arc<AtomicU64>,
    binary: PathBuf,
    data_dir: PathBuf,
    database_url: Option<String>,
}

/// Longest wait for the first-run output.
const START_TIMEOUT: Duration = Duration::from_secs(60);
const RSS_SAMPLE_EVERY: Duration = Duration::from_millis(100);

impl Server {
    pub async fn start(
        binary: &Path,
        data_dir: &Path,
        database_url: Option<&str>,
        extra: &[String],
    ) -> anyhow::Result<Server> {
        let mut cmd = Command::new(binary);
        cmd.arg("--data-dir").arg(data_dir);
        if let Some(url) = database_url {
            cmd.arg("--database-url").arg(url);
        }
        cmd.args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--rate-limit",
            "0",
            "--console-listen",
            "127.0.0.1:0",
        ])
        .args(extra)
        .env("ISSUING_LOG_FORMAT", "text")
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(data_dir.join("serve.log"))?)
        .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let pid = child.id().context("the server exited at once")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let (mut project_id, mut api_key, mut api_secret, mut base_url) = (None, None, None, None);
        let (mut console_url, mut console_password) = (None, None);
        let read = async {
            while let Some(line) = lines.next_line().await? {
                let line = line.trim();
                let field = |name: &str| {
                    line.strip_prefix(name)
                        .map(|rest| rest.trim_start_matches(':').trim().to_owned())
                };
                if let Some(v) = field("project_id") {
                    project_id = Some(v);
                } else if let Some(v) = field("api_key") {
                    api_key = Some(v);
                } else if let Some(v) = field("api_secret") {
                    api_secret = Some(v);
                } else if let Some(v) = field("console_password") {
                    console_password = Some(v);
                } else if let Some(v) = line.strip_prefix("issuing console on ") {
                    console_url = Some(v.trim_end_matches("/console/").to_owned());
                } else if let Some(v) = line.strip_prefix("issuing listening on ") {
                    base_url = Some(v.trim_end_matches("/api/v2").to_owned());
                    break;
                }
            }
            anyhow::Ok(())
        };
        tokio::time::timeout(START_TIMEOUT, read)
            .await
            .context("the server did not start in time")??;
        // Keep draining stdout so the child never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let (
            Some(project_id),
            Some(api_key),
            Some(api_secret),
            Some(base_url),
            Some(console_url),
            Some(console_password),
        ) = (
            project_id,
            api_key,
            api_secret,
            base_url,
            console_url,
            console_password,
        )
        else {
            bail!("the server did not print demo and console credentials (is the data directory fresh?)");
        };
        let peak_rss_kib = Arc::new(AtomicU64::new(0));
        let max_rss_kib = Arc::new(AtomicU64::new(0));
        spawn_rss_sampler(pid, peak_rss_kib.clone(), max_rss_kib.clone());
        Ok(Server {
            child,
            pid,
            base_url,
            project_id,
            api_key,
            api_secret,
            console_url,
            console_password,
            peak_rss_kib,
            max_rss_kib,
            binary: binary.to_owned(),
            data_dir: data_dir.to_owned(),
            database_url: database_url.map(str::to_owned),
        })
    }

    /// The highest RSS since the previous call, in MiB.
    pub fn take_peak_rss_mib(&self) -> f64 {
        self.peak_rss_kib.swap(0, Ordering::Relaxed) as f64 / 1024.0
    }

    /// The CPU time (user + system, all threads) the server has used so far, in seconds;
    /// 0 when /proc cannot be read. On a machine shared with other work a scenario's
    /// CPU per request moves less than its rate does.
    pub fn cpu_secs(&self) -> f64 {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)) else {
            return 0.0;
        };
        // Fields after the command name (which may hold spaces) end with ')'; utime and
        // stime are the 14th and 15th fields, the 12th and 13th after it.
        let ticks: u64 = stat
            .rsplit_once(')')
            .map(|(_, rest)| {
                rest.split_whitespace()
                    .skip(11)
                    .take(2)
                    .filter_map(|f| f.parse::<u64>().ok())
                    .sum()
            })
            .unwrap_or(0);
        ticks as f64 / CLOCK_TICKS_PER_SEC
    }

    /// Runs `issuing admin ARGS…` on the same database.
    pub async fn admin(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut cmd = Command::new(&self.binary);
        cmd.arg("--data-dir").arg(&self.data_dir);
        if let Some(url) = &self.database_url {
            cmd.arg("--database-url").arg(url);
        }
        let out = cmd.arg("admin").args(args).output().await?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            bail!(
                "issuing admin {} failed: {}{}",
                args.join(" "),
                text,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(text)
    }

    /// The database the server runs on, as a URL this process can open.
    pub fn database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => format!("sqlite://{}", self.data_dir.join("issuing.db").display()),
        }
    }

    /// SIGTERM (through `kill`, so no unsafe code here), then wait for a clean exit.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        let _ = Command::new("kill")
            .arg(self.pid.to_string())
            .status()
            .await;
        match tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await {
            Ok(status) => {
                status?;
            }
            Err(_) => {
                self.child.kill().await?;
            }
        }
        Ok(())
    }
}

/// `sysconf(_SC_CLK_TCK)`, which is 100 on every Linux this runs on (asking needs libc).
const CLOCK_TICKS_PER_SEC: f64 = 100.0;

fn spawn_rss_sampler(pid: u32, peak: Arc<AtomicU64>, max: Arc<AtomicU64>) {
    tokio::spawn(async move {
        let path = format!("/proc/{pid}/status");
        loop {
            let Ok(status) = tokio::fs::read_to_string(&path).await else {
                return;
            };
            if let Some(kib) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            {
                peak.fetch_max(kib, Ordering::Relaxed);
                max.fetch_max(kib, Ordering::Relaxed);
            }
            tokio::time::sleep(RSS_SAMPLE_EVERY).await;
        }
    });
}
