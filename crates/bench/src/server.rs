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
    launch: Launch,
}

/// Longest wait for the first-run output.
const START_TIMEOUT: Duration = Duration::from_secs(60);
const RSS_SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// What `issuing serve` printed before it listened: `name: value` lines and the
/// listeners' addresses.
#[derive(Default)]
struct Banner {
    fields: std::collections::HashMap<String, String>,
    base_url: Option<String>,
    console_url: Option<String>,
}

impl Banner {
    fn take(&mut self, name: &str) -> Option<String> {
        self.fields.remove(name)
    }
}

/// Reads the child's stdout until it listens, then keeps draining it.
async fn read_banner(child: &mut Child) -> anyhow::Result<Banner> {
    let stdout = child.stdout.take().context("no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let mut banner = Banner::default();
    let read = async {
        while let Some(line) = lines.next_line().await? {
            let line = line.trim();
            if let Some(v) = line.strip_prefix("issuing console on ") {
                banner.console_url = Some(v.trim_end_matches("/console/").to_owned());
            } else if let Some(v) = line.strip_prefix("issuing listening on ") {
                banner.base_url = Some(v.trim_end_matches("/api/v2").to_owned());
                break;
            } else if let Some((name, value)) = line.split_once(':') {
                banner
                    .fields
                    .insert(name.trim().to_owned(), value.trim().to_owned());
            }
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(START_TIMEOUT, read)
        .await
        .context("the server did not start in time")??;
    // Keep draining stdout so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(banner)
}

/// How a server is run beyond its data: options before the command (`--config`) and
/// environment variables (a provider's API key), for `serve` and `admin` alike.
#[derive(Default, Clone)]
pub struct Launch {
    pub global: Vec<String>,
    pub env: Vec<(String, String)>,
}

/// A project's credentials.
pub struct Project {
    pub project_id: String,
    pub api_key: String,
    pub api_secret: String,
}

impl Server {
    /// A sandbox server on its first run: the demo project and the console's first
    /// admin come from what it prints.
    pub async fn start(
        binary: &Path,
        data_dir: &Path,
        database_url: Option<&str>,
        extra: &[String],
    ) -> anyhow::Result<Server> {
        let mut extra = extra.to_vec();
        extra.extend(["--console-listen".to_owned(), "127.0.0.1:0".to_owned()]);
        let (server, mut banner) = Self::spawn(
            binary,
            data_dir,
            database_url,
            &extra,
            Launch::default(),
            None,
        )
        .await?;
        let (Some(project_id), Some(api_key), Some(api_secret), Some(console_url), Some(password)) = (
            banner.take("project_id"),
            banner.take("api_key"),
            banner.take("api_secret"),
            banner.console_url.take(),
            banner.take("console_password"),
        ) else {
            bail!("the server did not print demo and console credentials (is the data directory fresh?)");
        };
        Ok(Server {
            project_id,
            api_key,
            api_secret,
            console_url,
            console_password: password,
            ..server
        })
    }

    /// A server on a database prepared beforehand (`issuing admin project create`):
    /// production mode prints no credentials.
    pub async fn start_with(
        binary: &Path,
        data_dir: &Path,
        database_url: Option<&str>,
        launch: Launch,
        project: Project,
    ) -> anyhow::Result<Server> {
        Ok(
            Self::spawn(binary, data_dir, database_url, &[], launch, Some(project))
                .await?
                .0,
        )
    }

    async fn spawn(
        binary: &Path,
        data_dir: &Path,
        database_url: Option<&str>,
        extra: &[String],
        launch: Launch,
        project: Option<Project>,
    ) -> anyhow::Result<(Server, Banner)> {
        let mut cmd = command(binary, data_dir, database_url, &launch);
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--rate-limit", "0"])
            .args(extra)
            .env("ISSUING_LOG_FORMAT", "text")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(data_dir.join("serve.log"))?)
            .kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        let pid = child.id().context("the server exited at once")?;
        let mut banner = read_banner(&mut child).await?;
        let base_url = banner
            .base_url
            .take()
            .context("the server printed no address")?;
        let peak_rss_kib = Arc::new(AtomicU64::new(0));
        let max_rss_kib = Arc::new(AtomicU64::new(0));
        spawn_rss_sampler(pid, peak_rss_kib.clone(), max_rss_kib.clone());
        let project = project.unwrap_or(Project {
            project_id: String::new(),
            api_key: String::new(),
            api_secret: String::new(),
        });
        let server = Server {
            child,
            pid,
            base_url,
            project_id: project.project_id,
            api_key: project.api_key,
            api_secret: project.api_secret,
            console_url: String::new(),
            console_password: String::new(),
            peak_rss_kib,
            max_rss_kib,
            binary: binary.to_owned(),
            data_dir: data_dir.to_owned(),
            database_url: database_url.map(str::to_owned),
            launch,
        };
        Ok((server, banner))
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
        admin(
            &self.binary,
            &self.data_dir,
            self.database_url.as_deref(),
            &self.launch,
            args,
        )
        .await
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

/// `issuing` with the global options of this server (data, database, `launch`).
fn command(binary: &Path, data_dir: &Path, database_url: Option<&str>, launch: &Launch) -> Command {
    let mut cmd = Command::new(binary);
    cmd.args(&launch.global).arg("--data-dir").arg(data_dir);
    if let Some(url) = database_url {
        cmd.arg("--database-url").arg(url);
    }
    cmd.envs(launch.env.iter().map(|(k, v)| (k, v)));
    cmd
}

/// Runs `issuing admin ARGS…`; answers what it printed, or fails with it.
pub async fn admin(
    binary: &Path,
    data_dir: &Path,
    database_url: Option<&str>,
    launch: &Launch,
    args: &[&str],
) -> anyhow::Result<String> {
    let out = command(binary, data_dir, database_url, launch)
        .arg("admin")
        .args(args)
        .output()
        .await?;
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
