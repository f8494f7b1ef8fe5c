//! Settings resolution: a flag beats its `ISSUING_*` environment variable, which beats
//! the config file, which beats the default. Everything is validated before the server
//! starts, with messages that name the setting.

use anyhow::{bail, Context};
use issuing_server::{MasterKey, Mode, ServerConfig};
use issuing_store::Store;
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct GlobalArgs {
    /// Data directory: SQLite database and generated master key.
    #[arg(long, env = "ISSUING_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// Database URL: a SQLite path or `sqlite://path`, or `postgres://…`.
    #[arg(long, env = "ISSUING_DATABASE_URL", global = true)]
    pub database_url: Option<String>,
    /// Optional TOML config file holding the same settings (and more).
    #[arg(long, env = "ISSUING_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    /// Log lines on stderr: `text` (colour only on a terminal) or `json` (one object a line).
    #[arg(
        long,
        env = "ISSUING_LOG_FORMAT",
        global = true,
        value_enum,
        default_value_t
    )]
    pub log_format: crate::logging::LogFormat,
}

/// The config file. Every key is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    /// Address of the Prometheus listener (`GET /metrics`); off when absent.
    pub metrics_listen: Option<String>,
    pub database_url: Option<String>,
    /// A PostgreSQL standby for the console's pages (`ISSUING_DATABASE_READ_URL`).
    pub database_read_url: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub mode: Option<String>,
    pub webhook_retry_interval: Option<u64>,
    pub webhook_max_age: Option<u64>,
    /// Seconds one delivery attempt may take (1 to 10; CONTRACT default 10).
    pub webhook_timeout: Option<u64>,
    pub hold_expiry: Option<u64>,
    pub rate_limit: Option<u32>,
    pub max_connections: Option<usize>,
    pub max_body_bytes: Option<usize>,
    /// Subproviders and card products; the built-in sandbox catalog when absent.
    pub catalog: Option<issuing_domain::catalog::CatalogConfig>,
    pub sandbox: Option<SandboxFileConfig>,
    pub order_workers: Option<usize>,
    /// Seconds final webhook deliveries and their events are kept; 0 keeps everything.
    pub retention: Option<u64>,
    /// Seconds of nothing but failed attempts before a subscription is deactivated; 0 never.
    pub webhook_disable_after: Option<u64>,
    /// Seconds a stopping server gives accepted requests, then its workers, to finish.
    pub drain_timeout: Option<u64>,
    /// TRC20 deposit addresses and the chain watcher (the `ISSUING_TRON_*` settings).
    pub tron: Option<TronFileConfig>,
    /// Address of the operator console; `off` for none.
    pub console_listen: Option<String>,
    /// Comma-separated networks (CIDR) production may send webhooks to although they
    /// are private (`ISSUING_WEBHOOK_ALLOWED_NETWORKS`).
    pub webhook_allowed_networks: Option<String>,
    /// The base URL cardholders' browsers reach the API at (reveal pages).
    pub public_url: Option<String>,
    /// Seconds without a request after which a console session ends.
    pub console_idle_timeout: Option<u64>,
    /// Seconds too many failed logins lock an email.
    pub console_lockout: Option<u64>,
    /// Comma-separated host names the console answers to besides its listen address.
    pub console_hosts: Option<String>,
    /// Comma-separated networks (CIDR) of reverse proxies in front of the console.
    pub console_trusted_proxies: Option<String>,
    /// Card reveals one admin may make in an hour; 0 turns them off.
    pub console_reveals_per_hour: Option<u32>,
}

/// `[tron]` in the config file; each key as its `ISSUING_TRON_*` variable.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TronFileConfig {
    pub xpub: Option<String>,
    pub api_url: Option<String>,
    pub api_key: Option<String>,
    pub usdt_contract: Option<String>,
    pub poll_interval: Option<u64>,
    pub min_deposit: Option<String>,
}

/// Latency and failure injection of the sandbox provider, for demos and drills.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxFileConfig {
    #[serde(default)]
    pub latency_ms: u64,
    #[serde(default)]
    pub reject_card_create: bool,
    #[serde(default)]
    pub reject_topup: bool,
    #[serde(default)]
    pub transient_failures: u32,
}

pub fn load_file(global: &GlobalArgs) -> anyhow::Result<FileConfig> {
    let Some(path) = &global.config else {
        return Ok(FileConfig::default());
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("config file {} is invalid", path.display()))
}

pub struct Resolved {
    pub data_dir: PathBuf,
    pub database_url: String,
}

/// The data directory and database URL the settings name, touching nothing.
fn storage_names(global: &GlobalArgs, file: &FileConfig) -> (PathBuf, String) {
    let data_dir = global
        .data_dir
        .clone()
        .or_else(|| file.data_dir.clone())
        .unwrap_or_else(|| PathBuf::from("./data"));
    let database_url = global
        .database_url
        .clone()
        .or_else(|| file.database_url.clone())
        .unwrap_or_else(|| format!("sqlite://{}", data_dir.join("issuing.db").display()));
    (data_dir, database_url)
}

pub fn resolve_storage(global: &GlobalArgs, file: &FileConfig) -> anyhow::Result<Resolved> {
    let (data_dir, database_url) = storage_names(global, file);
    std::fs::create_dir_all(&data_dir).with_context(|| {
        format!(
            "--data-dir / ISSUING_DATA_DIR: cannot create {}",
            data_dir.display()
        )
    })?;
    if database_url.trim().is_empty() {
        bail!("--database-url / ISSUING_DATABASE_URL must not be empty");
    }
    if database_url.contains("://")
        && !["sqlite://", "postgres://", "postgresql://"]
            .iter()
            .any(|p| database_url.starts_with(p))
    {
        bail!("--database-url / ISSUING_DATABASE_URL must be a SQLite path, sqlite://… or postgres://…");
    }
    Ok(Resolved {
        data_dir,
        database_url,
    })
}

/// Connects, migrates and binds the master key: what every command needs first.
pub async fn open_store(
    global: &GlobalArgs,
    file: &FileConfig,
) -> anyhow::Result<(Store, MasterKey, Resolved)> {
    let resolved = resolve_storage(global, file)?;
    secure_files(&resolved)?;
    let store = Store::connect(&resolved.database_url)
        .await
        .with_context(|| {
            format!(
                "cannot open the database ({})",
                redact(&resolved.database_url)
            )
        })?;
    store.migrate().await.context("database migration failed")?;
    let master = load_master_key(&resolved.data_dir)?;
    master.bind_to(&store).await?;
    Ok((store, master, resolved))
}

/// The store reading through the standby the settings name, if any: it must be
/// PostgreSQL, as the database is.
pub async fn with_reader(
    store: Store,
    args: &ServerArgs,
    file: &FileConfig,
) -> anyhow::Result<Store> {
    let Some(url) = args
        .database_read_url
        .clone()
        .or_else(|| file.database_read_url.clone())
        .filter(|u| !u.trim().is_empty())
    else {
        return Ok(store);
    };
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        bail!("--database-read-url / ISSUING_DATABASE_READ_URL must be a postgres://… URL");
    }
    if store.backend() != issuing_store::Backend::Postgres {
        bail!("--database-read-url / ISSUING_DATABASE_READ_URL needs a PostgreSQL database (ISSUING_DATABASE_URL)");
    }
    let reader = Store::connect(&url)
        .await
        .with_context(|| format!("cannot open the read database ({})", redact(&url)))?;
    Ok(store.with_reader(reader))
}

/// The database the settings name, only if it already exists (a SQLite file is not
/// created): for writing down what a command did without creating a database the
/// command itself never touched.
pub async fn existing_store(
    global: &GlobalArgs,
    file: &FileConfig,
) -> anyhow::Result<Option<Store>> {
    let (_, url) = storage_names(global, file);
    if let Some(path) = sqlite_path(&url) {
        if !path.is_file() {
            return Ok(None);
        }
    }
    let store = Store::connect(&url)
        .await
        .with_context(|| format!("cannot open the database ({})", redact(&url)))?;
    Ok(Some(store))
}

/// The data directory is the owner's alone (0700), and so are the SQLite database and
/// its WAL and shared-memory files (0600: SQLite creates the latter two with the
/// database file's mode), whatever the umask. Files from older versions are tightened.
fn secure_files(resolved: &Resolved) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let private = |path: &Path, mode: u32| -> anyhow::Result<()> {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .with_context(|| format!("restricting the permissions of {}", path.display()))
        };
        private(&resolved.data_dir, 0o700)?;
        let key = resolved.data_dir.join("master.key");
        if key.exists() {
            private(&key, 0o600)?;
        }
        if let Some(db) = sqlite_path(&resolved.database_url) {
            if !db.exists() {
                // An empty file is a valid new database; creating it here fixes its mode.
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(false)
                    .mode(0o600)
                    .open(&db)
                    .with_context(|| format!("creating {}", db.display()))?;
            }
            for suffix in ["", "-wal", "-shm"] {
                let f = PathBuf::from(format!("{}{suffix}", db.display()));
                if f.exists() {
                    private(&f, 0o600)?;
                }
            }
        }
    }
    #[cfg(not(unix))]
    let _ = resolved;
    Ok(())
}

/// The file of a SQLite database URL; None for PostgreSQL.
pub(crate) fn sqlite_path(url: &str) -> Option<PathBuf> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return None;
    }
    let path = url.strip_prefix("sqlite://").unwrap_or(url);
    let path = path.split('?').next().unwrap_or(path);
    (!path.is_empty() && path != ":memory:").then(|| PathBuf::from(path))
}

/// `ISSUING_MASTER_KEY` (base64 of 32 bytes) when set, so several servers can share one;
/// otherwise `<data dir>/master.key`, generated on first use with owner-only permissions.
fn load_master_key(data_dir: &Path) -> anyhow::Result<MasterKey> {
    if let Ok(text) = std::env::var("ISSUING_MASTER_KEY") {
        return MasterKey::from_base64(&text).context("ISSUING_MASTER_KEY");
    }
    let path = data_dir.join("master.key");
    match std::fs::read_to_string(&path) {
        Ok(text) => MasterKey::from_base64(&text).with_context(|| format!("{}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = MasterKey::generate();
            match write_private(&path, &key.to_base64()) {
                Ok(()) => {
                    tracing::info!(path = %path.display(), "generated a new master key");
                    Ok(key)
                }
                // Another process created it first; use theirs (it may still be writing).
                Err(e)
                    if e.downcast_ref::<std::io::Error>()
                        .is_some_and(|io| io.kind() == std::io::ErrorKind::AlreadyExists) =>
                {
                    read_when_complete(&path)
                }
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn read_when_complete(path: &Path) -> anyhow::Result<MasterKey> {
    // The writer syncs a 44-byte file; a short bounded wait covers the gap.
    for _ in 0..50 {
        if let Ok(key) = std::fs::read_to_string(path)
            .map_err(anyhow::Error::from)
            .and_then(|t| Ok(MasterKey::from_base64(&t)?))
        {
            return Ok(key);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    anyhow::bail!("{} exists but holds no valid master key", path.display())
}

pub(crate) fn write_private(path: &Path, contents: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut f = options
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()?;
    Ok(())
}

/// Hides a password in a database URL before it is printed.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let creds = &url[s + 3..at];
            match creds.split_once(':') {
                Some((user, _)) => format!("{}{}:***{}", &url[..s + 3], user, &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ServerArgs {
    /// Address to listen on.
    #[arg(long, env = "ISSUING_LISTEN")]
    pub listen: Option<String>,
    /// A PostgreSQL standby (`postgres://…`, several hosts allowed) for the console's
    /// pages; never for anything that decides money.
    #[arg(long, env = "ISSUING_DATABASE_READ_URL")]
    pub database_read_url: Option<String>,
    /// `sandbox` (default: simulated provider and card network) or `production`.
    #[arg(long, env = "ISSUING_MODE")]
    pub mode: Option<String>,
    /// Seconds between webhook delivery attempts.
    #[arg(long, env = "ISSUING_WEBHOOK_RETRY_INTERVAL")]
    pub webhook_retry_interval: Option<u64>,
    /// Seconds after which an undelivered webhook is marked failed.
    #[arg(long, env = "ISSUING_WEBHOOK_MAX_AGE")]
    pub webhook_max_age: Option<u64>,
    /// Seconds an authorization may hold card funds before it expires.
    #[arg(long, env = "ISSUING_HOLD_EXPIRY")]
    pub hold_expiry: Option<u64>,
    /// Requests per second per API key (bursts of twice that); 0 turns the limit off.
    #[arg(long, env = "ISSUING_RATE_LIMIT")]
    pub rate_limit: Option<u32>,
    /// Connections served at once (lowered to fit the descriptor limit).
    #[arg(long, env = "ISSUING_MAX_CONNECTIONS")]
    pub max_connections: Option<usize>,
    /// Address of the operator console (`/console/`), or `off`. Default: 127.0.0.1:8090
    /// in sandbox mode, off in production.
    #[arg(long, env = "ISSUING_CONSOLE_LISTEN")]
    pub console_listen: Option<String>,
    /// Seconds final webhook deliveries and their events are kept (default 2592000,
    /// 30 days); 0 keeps everything.
    #[arg(long, env = "ISSUING_RETENTION")]
    pub retention: Option<u64>,
    /// Seconds of nothing but failed attempts after which a webhook subscription is
    /// deactivated (default 432000, 5 days); 0 never deactivates one.
    #[arg(long, env = "ISSUING_WEBHOOK_DISABLE_AFTER")]
    pub webhook_disable_after: Option<u64>,
    /// Seconds a server stopped with SIGTERM or SIGINT gives accepted requests, then its
    /// workers, to finish (default 20).
    #[arg(long, env = "ISSUING_DRAIN_TIMEOUT")]
    pub drain_timeout: Option<u64>,
    /// Address for Prometheus metrics (`GET /metrics`), e.g. 127.0.0.1:9090; off when unset.
    #[arg(long, env = "ISSUING_METRICS_LISTEN")]
    pub metrics_listen: Option<String>,
    /// Extended public key (`xpub…`) of the account m/44'/195'/0' that project deposit
    /// addresses derive from (child 0/n). Unset: no addresses in production; the sandbox
    /// uses its own test key.
    #[arg(long, env = "ISSUING_TRON_XPUB")]
    pub tron_xpub: Option<String>,
    /// Base URL of a TronGrid-compatible API; the chain watcher runs only when set.
    #[arg(long, env = "ISSUING_TRON_API_URL")]
    pub tron_api_url: Option<String>,
    /// API key sent as `TRON-PRO-API-KEY` (prefer the environment variable to the flag).
    #[arg(long, env = "ISSUING_TRON_API_KEY", hide_env_values = true)]
    pub tron_api_key: Option<String>,
    /// USDT contract address (default: mainnet TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t).
    #[arg(long, env = "ISSUING_TRON_USDT_CONTRACT")]
    pub tron_usdt_contract: Option<String>,
    /// Seconds between polls of each deposit address (default 60).
    #[arg(long, env = "ISSUING_TRON_POLL_INTERVAL")]
    pub tron_poll_interval: Option<u64>,
    /// Smallest incoming USDT transfer credited, e.g. 1 or 0.5 (default 1); smaller ones
    /// are ignored as dust.
    #[arg(long, env = "ISSUING_TRON_MIN_DEPOSIT")]
    pub tron_min_deposit: Option<String>,
    /// Private networks production may deliver webhooks to, comma-separated CIDRs such
    /// as 10.0.0.0/8,fd00::/8 (default none: only public addresses).
    #[arg(long, env = "ISSUING_WEBHOOK_ALLOWED_NETWORKS")]
    pub webhook_allowed_networks: Option<String>,
    /// The base URL cardholders' browsers reach this API at, such as
    /// https://api.example.com: reveal pages (cards/reveal/create) are under it. Default:
    /// http:// and the listen address.
    #[arg(long, env = "ISSUING_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Seconds without a request after which a console session ends (default 900, PCI
    /// DSS 8.2.8's 15 minutes; 60 to 43200).
    #[arg(long, env = "ISSUING_CONSOLE_IDLE_TIMEOUT")]
    pub console_idle_timeout: Option<u64>,
    /// Seconds 10 failed console logins lock an email (default 1800, PCI DSS 8.3.4's
    /// 30 minutes; `issuing admin operator unlock` ends it sooner).
    #[arg(long, env = "ISSUING_CONSOLE_LOCKOUT")]
    pub console_lockout: Option<u64>,
    /// Host names the console answers to besides those of its listen address,
    /// comma-separated (such as console.example.com behind a proxy).
    #[arg(long, env = "ISSUING_CONSOLE_HOSTS")]
    pub console_hosts: Option<String>,
    /// Reverse proxies in front of the console, comma-separated CIDRs: from them the
    /// client's address is read from X-Forwarded-For (default none).
    #[arg(long, env = "ISSUING_CONSOLE_TRUSTED_PROXIES")]
    pub console_trusted_proxies: Option<String>,
    /// Card reveals one console admin may make in an hour (default 10; 0 turns reveals
    /// off).
    #[arg(long, env = "ISSUING_CONSOLE_REVEALS_PER_HOUR")]
    pub console_reveals_per_hour: Option<u32>,
}

/// The serve settings as the environment and config file give them (no flags): what
/// admin commands that create projects read, so they derive addresses from the same key
/// a server would.
pub fn server_config_from_env(file: &FileConfig) -> anyhow::Result<ServerConfig> {
    #[derive(clap::Parser)]
    struct EnvOnly {
        #[command(flatten)]
        server: ServerArgs,
    }
    let parsed = <EnvOnly as clap::Parser>::try_parse_from(["issuing"])
        .context("reading the ISSUING_* environment")?;
    server_config(&parsed.server, file)
}

/// Bound on durations counted in seconds: far beyond any use, far from overflowing
/// microseconds.
const MAX_RETENTION_SECS: u64 = 10 * 365 * 24 * 3600;

pub fn server_config(args: &ServerArgs, file: &FileConfig) -> anyhow::Result<ServerConfig> {
    let mut config = ServerConfig::default();
    if let Some(listen) = args.listen.clone().or_else(|| file.listen.clone()) {
        config.listen = listen.parse::<SocketAddr>().with_context(|| {
            format!("--listen / ISSUING_LISTEN: `{listen}` is not an address like 127.0.0.1:8080")
        })?;
    }
    if let Some(at) = args
        .metrics_listen
        .clone()
        .or_else(|| file.metrics_listen.clone())
    {
        let at = at.trim();
        // An empty value (e.g. ISSUING_METRICS_LISTEN="") leaves metrics off.
        if !at.is_empty() {
            config.metrics_listen = Some(at.parse::<SocketAddr>().with_context(|| {
                format!("--metrics-listen / ISSUING_METRICS_LISTEN: `{at}` is not an address like 127.0.0.1:9090")
            })?);
        }
    }
    if let Some(mode) = args.mode.clone().or_else(|| file.mode.clone()) {
        config.mode = Mode::parse(&mode).with_context(|| {
            format!("--mode / ISSUING_MODE: `{mode}` must be sandbox or production")
        })?;
    }
    if let Some(secs) = args.webhook_retry_interval.or(file.webhook_retry_interval) {
        if secs == 0 {
            bail!("ISSUING_WEBHOOK_RETRY_INTERVAL must be at least 1 second");
        }
        config.webhook_retry_interval = Duration::from_secs(secs);
    }
    if let Some(secs) = args.webhook_max_age.or(file.webhook_max_age) {
        if secs == 0 {
            bail!("ISSUING_WEBHOOK_MAX_AGE must be at least 1 second");
        }
        config.webhook_max_age = Duration::from_secs(secs);
    }
    if let Some(secs) = args.hold_expiry.or(file.hold_expiry) {
        if secs == 0 {
            bail!("ISSUING_HOLD_EXPIRY must be at least 1 second");
        }
        config.hold_expiry = Duration::from_secs(secs);
    }
    if let Some(rate) = args.rate_limit.or(file.rate_limit) {
        config.rate_limit = rate;
    }
    if let Some(n) = args.max_connections.or(file.max_connections) {
        if !(16..=1_000_000).contains(&n) {
            bail!("max_connections must be between 16 and 1000000");
        }
        config.max_connections = n;
    }
    if let Some(secs) = file.webhook_timeout {
        if !(1..=10).contains(&secs) {
            bail!("webhook_timeout must be between 1 and 10 seconds");
        }
        config.webhook_timeout = Duration::from_secs(secs);
    }
    if let Some(bytes) = file.max_body_bytes {
        if !(1024..=16 * 1024 * 1024).contains(&bytes) {
            bail!("max_body_bytes must be between 1 KiB and 16 MiB");
        }
        config.max_body_bytes = bytes;
    }
    if let Some(catalog) = &file.catalog {
        let catalog = issuing_domain::catalog::Catalog::from_config(catalog)
            .map_err(|e| anyhow::anyhow!("catalog in the config file: {e}"))?;
        for warning in catalog.warnings() {
            tracing::warn!("catalog: {warning}");
        }
        config.catalog = std::sync::Arc::new(catalog);
    }
    if let Some(s) = &file.sandbox {
        // Below the provider call timeout, or every call would time out.
        if s.latency_ms > 5_000 {
            bail!("sandbox.latency_ms must be at most 5000");
        }
        config.sandbox = issuing_app::provider::sandbox::SandboxConfig {
            latency: Duration::from_millis(s.latency_ms),
            reject_card_create: s.reject_card_create,
            reject_topup: s.reject_topup,
            transient_failures: s.transient_failures,
        };
    }
    if let Some(secs) = args.retention.or(file.retention) {
        if secs > MAX_RETENTION_SECS {
            bail!("ISSUING_RETENTION must be at most {MAX_RETENTION_SECS} seconds (10 years); 0 keeps everything");
        }
        config.retention = Duration::from_secs(secs);
    }
    if let Some(secs) = args.webhook_disable_after.or(file.webhook_disable_after) {
        if secs > MAX_RETENTION_SECS {
            bail!("ISSUING_WEBHOOK_DISABLE_AFTER must be at most {MAX_RETENTION_SECS} seconds (10 years); 0 never disables");
        }
        config.webhook_disable_after = Duration::from_secs(secs);
    }
    if let Some(secs) = args.drain_timeout.or(file.drain_timeout) {
        if !(1..=3_600).contains(&secs) {
            bail!("ISSUING_DRAIN_TIMEOUT must be between 1 and 3600 seconds");
        }
        config.drain_timeout = Duration::from_secs(secs);
    }
    if let Some(n) = file.order_workers {
        if !(1..=8).contains(&n) {
            bail!("order_workers must be between 1 and 8");
        }
        config.order_workers = n;
    }
    config.tron = tron_config(
        args,
        file.tron.as_ref().unwrap_or(&TronFileConfig::default()),
    )?;
    if let Some(nets) = args
        .webhook_allowed_networks
        .clone()
        .or_else(|| file.webhook_allowed_networks.clone())
    {
        config.webhook_allowed_networks = issuing_domain::webhooks::AllowedNetworks::parse(&nets)
            .map_err(|e| {
            anyhow::anyhow!("--webhook-allowed-networks / ISSUING_WEBHOOK_ALLOWED_NETWORKS: {e}")
        })?;
    }
    config.provider_keys = provider_keys(&config.catalog, |name| std::env::var(name).ok());
    config.console = console_listen(args, file, config.mode)?;
    config.console_security = console_security(args, file)?;
    if let Some(url) = args.public_url.clone().or_else(|| file.public_url.clone()) {
        let url = url.trim().trim_end_matches('/');
        if !url.is_empty() {
            config.public_url = Some(public_url(url)?);
        }
    }
    Ok(config)
}

/// `--public-url`: an http(s) URL with a host, perhaps a path, no query or credentials.
fn public_url(url: &str) -> anyhow::Result<String> {
    let ok = reqwest::Url::parse(url).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https")
            && u.host_str().is_some()
            && u.query().is_none()
            && u.fragment().is_none()
            && u.username().is_empty()
            && u.password().is_none()
    });
    if !ok {
        bail!("--public-url / ISSUING_PUBLIC_URL must be the http(s) URL browsers reach the API at, such as https://api.example.com");
    }
    Ok(url.to_owned())
}

/// The console's PCI DSS settings (docs/console.md), checked.
fn console_security(
    args: &ServerArgs,
    file: &FileConfig,
) -> anyhow::Result<issuing_app::config::ConsoleSecurity> {
    let mut c = issuing_app::config::ConsoleSecurity::default();
    if let Some(secs) = args.console_idle_timeout.or(file.console_idle_timeout) {
        if !(60..=43_200).contains(&secs) {
            bail!("ISSUING_CONSOLE_IDLE_TIMEOUT must be between 60 and 43200 seconds");
        }
        c.idle_timeout = Duration::from_secs(secs);
    }
    if let Some(secs) = args.console_lockout.or(file.console_lockout) {
        if !(60..=7 * 24 * 3600).contains(&secs) {
            bail!("ISSUING_CONSOLE_LOCKOUT must be between 60 and 604800 seconds");
        }
        c.lockout = Duration::from_secs(secs);
    }
    if let Some(hosts) = args
        .console_hosts
        .clone()
        .or_else(|| file.console_hosts.clone())
    {
        for h in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
            let valid = h.len() <= 253
                && h.chars().all(|ch| {
                    ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '[' | ']' | ':')
                });
            if !valid {
                bail!("--console-hosts / ISSUING_CONSOLE_HOSTS: `{h}` is not a host name");
            }
            c.hosts.push(h.to_ascii_lowercase());
        }
    }
    if let Some(nets) = args
        .console_trusted_proxies
        .clone()
        .or_else(|| file.console_trusted_proxies.clone())
    {
        c.trusted_proxies =
            issuing_domain::webhooks::AllowedNetworks::parse(&nets).map_err(|e| {
                anyhow::anyhow!("--console-trusted-proxies / ISSUING_CONSOLE_TRUSTED_PROXIES: {e}")
            })?;
    }
    if let Some(n) = args
        .console_reveals_per_hour
        .or(file.console_reveals_per_hour)
    {
        if n > 1_000 {
            bail!("ISSUING_CONSOLE_REVEALS_PER_HOUR must be at most 1000 (0 turns reveals off)");
        }
        c.reveals_per_hour = n;
    }
    Ok(c)
}

/// The console's address: as set (`off` or empty for none), else 127.0.0.1:8090 in the
/// sandbox (given up with a warning when taken) and none in production.
fn console_listen(
    args: &ServerArgs,
    file: &FileConfig,
    mode: Mode,
) -> anyhow::Result<Option<issuing_app::config::ConsoleListen>> {
    use issuing_app::config::{ConsoleListen, DEFAULT_CONSOLE_LISTEN};
    match args
        .console_listen
        .clone()
        .or_else(|| file.console_listen.clone())
    {
        Some(at) if at.trim().is_empty() || at.trim().eq_ignore_ascii_case("off") => Ok(None),
        Some(at) => {
            let addr = at.trim().parse::<SocketAddr>().with_context(|| {
                format!("--console-listen / ISSUING_CONSOLE_LISTEN: `{at}` is not an address like 127.0.0.1:8090 (or off)")
            })?;
            Ok(Some(ConsoleListen {
                addr,
                optional: false,
            }))
        }
        None if mode == Mode::Sandbox => Ok(Some(ConsoleListen {
            addr: DEFAULT_CONSOLE_LISTEN,
            optional: true,
        })),
        None => Ok(None),
    }
}

/// The API key of each `lithic` subprovider, from the environment variable it names
/// (never from the config file). A subprovider without one is refused by `serve`.
pub fn provider_keys(
    catalog: &issuing_domain::catalog::Catalog,
    env: impl Fn(&str) -> Option<String>,
) -> issuing_app::config::ProviderKeys {
    let mut keys = issuing_app::config::ProviderKeys::default();
    for s in catalog.subproviders() {
        if let issuing_domain::catalog::ProviderKind::Lithic(l) = &s.kind {
            if let Some(key) = env(&l.api_key_env).filter(|k| !k.trim().is_empty()) {
                keys.insert(&s.code, key.trim());
            }
        }
    }
    keys
}

/// The `ISSUING_TRON_*` settings, checked. An empty value counts as unset.
fn tron_config(
    args: &ServerArgs,
    file: &TronFileConfig,
) -> anyhow::Result<issuing_app::config::TronConfig> {
    let pick = |flag: &Option<String>, file: &Option<String>| {
        flag.clone()
            .or_else(|| file.clone())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let mut tron = issuing_app::config::TronConfig::default();
    if let Some(xpub) = pick(&args.tron_xpub, &file.xpub) {
        // Checked here so a bad key stops the start with a message naming the setting.
        issuing_domain::tron_hd::AccountXpub::parse(&xpub)
            .map_err(|e| anyhow::anyhow!("--tron-xpub / ISSUING_TRON_XPUB: {e}"))?;
        tron.xpub = Some(xpub);
    }
    if let Some(url) = pick(&args.tron_api_url, &file.api_url) {
        let parsed = reqwest::Url::parse(&url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
        if parsed.is_none() {
            bail!("--tron-api-url / ISSUING_TRON_API_URL must be an http(s) URL such as https://api.trongrid.io");
        }
        tron.api_url = Some(url);
    }
    tron.api_key = pick(&args.tron_api_key, &file.api_key);
    if let Some(contract) = pick(&args.tron_usdt_contract, &file.usdt_contract) {
        if !issuing_domain::trc20::is_valid(&contract) {
            bail!("--tron-usdt-contract / ISSUING_TRON_USDT_CONTRACT: `{contract}` is not a Tron address");
        }
        tron.usdt_contract = contract;
    }
    if let Some(secs) = args.tron_poll_interval.or(file.poll_interval) {
        if !(1..=86_400).contains(&secs) {
            bail!("ISSUING_TRON_POLL_INTERVAL must be between 1 and 86400 seconds");
        }
        tron.poll_interval = Duration::from_secs(secs);
    }
    if let Some(min) = pick(&args.tron_min_deposit, &file.min_deposit) {
        tron.min_deposit = issuing_wire::Amount::parse_positive(&serde_json::Value::String(
            min.clone(),
        ))
        .map_err(|_| {
            anyhow::anyhow!(
                "ISSUING_TRON_MIN_DEPOSIT: `{min}` must be a positive USDT amount such as 1 or 0.5"
            )
        })?;
    }
    Ok(tron)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("postgres://u:pw@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("sqlite://x.db"), "sqlite://x.db");
    }

    #[test]
    fn validates_server_settings() {
        let file = FileConfig::default();
        let bad = ServerArgs {
            listen: Some("nope".into()),
            ..Default::default()
        };
        assert!(server_config(&bad, &file).is_err());
        let bad = ServerArgs {
            mode: Some("staging".into()),
            ..Default::default()
        };
        assert!(server_config(&bad, &file).is_err());
        let ok = ServerArgs {
            listen: Some("127.0.0.1:0".into()),
            mode: Some("Production".into()),
            ..Default::default()
        };
        let c = server_config(&ok, &file).unwrap();
        assert_eq!(c.mode, Mode::Production);
    }

    #[test]
    fn validates_tron_settings() {
        let file = FileConfig::default();
        let c = server_config(&ServerArgs::default(), &file).unwrap();
        assert_eq!(c.tron.api_url, None);
        assert_eq!(c.tron.usdt_contract, "TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t");
        let xprv = "xprv9s21ZrQH143K3QTDL4LXw2F7HEK3wJUD2nW2nRk4stbPy6cq3jPPqjiChkVvvNKmPGJxWUtg6LnF5kejMRNNU3TGtRBeJgk33yuGBxrMPHi";
        let bad = ServerArgs {
            tron_xpub: Some(xprv.into()),
            ..Default::default()
        };
        let e = server_config(&bad, &file).unwrap_err().to_string();
        assert!(e.contains("ISSUING_TRON_XPUB") && !e.contains(xprv), "{e}");
        for (args, name) in [
            (
                ServerArgs {
                    tron_api_url: Some("ftp://x".into()),
                    ..Default::default()
                },
                "ISSUING_TRON_API_URL",
            ),
            (
                ServerArgs {
                    tron_min_deposit: Some("0".into()),
                    ..Default::default()
                },
                "ISSUING_TRON_MIN_DEPOSIT",
            ),
            (
                ServerArgs {
                    tron_poll_interval: Some(0),
                    ..Default::default()
                },
                "ISSUING_TRON_POLL_INTERVAL",
            ),
            (
                ServerArgs {
                    tron_usdt_contract: Some("Tnope".into()),
                    ..Default::default()
                },
                "ISSUING_TRON_USDT_CONTRACT",
            ),
        ] {
            let e = server_config(&args, &file).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
        }
        let file = FileConfig {
            tron: Some(TronFileConfig {
                api_url: Some("http://127.0.0.1:9".into()),
                min_deposit: Some("0.5".into()),
                poll_interval: Some(5),
                ..Default::default()
            }),
            ..Default::default()
        };
        let c = server_config(&ServerArgs::default(), &file).unwrap();
        assert_eq!(c.tron.api_url.as_deref(), Some("http://127.0.0.1:9"));
        assert_eq!(c.tron.min_deposit.micros(), 500_000);
        assert_eq!(c.tron.poll_interval, Duration::from_secs(5));
    }

    #[test]
    fn console_is_on_in_the_sandbox_and_off_in_production_until_set() {
        use issuing_app::config::ConsoleListen;
        let file = FileConfig::default();
        let c = server_config(&ServerArgs::default(), &file).unwrap();
        assert_eq!(
            c.console,
            Some(ConsoleListen {
                addr: "127.0.0.1:8090".parse().unwrap(),
                optional: true
            })
        );
        let prod = ServerArgs {
            mode: Some("production".into()),
            ..Default::default()
        };
        assert_eq!(server_config(&prod, &file).unwrap().console, None);
        let set = ServerArgs {
            mode: Some("production".into()),
            console_listen: Some("0.0.0.0:9443".into()),
            ..Default::default()
        };
        assert_eq!(
            server_config(&set, &file).unwrap().console,
            Some(ConsoleListen {
                addr: "0.0.0.0:9443".parse().unwrap(),
                optional: false
            })
        );
        let off = ServerArgs {
            console_listen: Some("off".into()),
            ..Default::default()
        };
        assert_eq!(server_config(&off, &file).unwrap().console, None);
        let bad = ServerArgs {
            console_listen: Some("console".into()),
            ..Default::default()
        };
        let e = server_config(&bad, &file).unwrap_err().to_string();
        assert!(e.contains("--console-listen"), "{e}");
    }

    #[test]
    fn long_running_settings() {
        let c = server_config(&ServerArgs::default(), &FileConfig::default()).unwrap();
        assert_eq!(c.retention, Duration::from_secs(2_592_000));
        assert_eq!(c.webhook_disable_after, Duration::from_secs(432_000));
        assert_eq!(c.drain_timeout, Duration::from_secs(20));
        let file = FileConfig {
            retention: Some(0),
            webhook_disable_after: Some(0),
            drain_timeout: Some(5),
            ..Default::default()
        };
        let c = server_config(&ServerArgs::default(), &file).unwrap();
        assert!(c.retention.is_zero() && c.webhook_disable_after.is_zero());
        assert_eq!(c.drain_timeout, Duration::from_secs(5));
        let flag = ServerArgs {
            retention: Some(600),
            ..Default::default()
        };
        assert_eq!(
            server_config(&flag, &file).unwrap().retention,
            Duration::from_secs(600),
            "a flag beats the file"
        );
        for (args, name) in [
            (
                ServerArgs {
                    drain_timeout: Some(0),
                    ..Default::default()
                },
                "ISSUING_DRAIN_TIMEOUT",
            ),
            (
                ServerArgs {
                    retention: Some(u64::MAX),
                    ..Default::default()
                },
                "ISSUING_RETENTION",
            ),
            (
                ServerArgs {
                    webhook_disable_after: Some(u64::MAX),
                    ..Default::default()
                },
                "ISSUING_WEBHOOK_DISABLE_AFTER",
            ),
        ] {
            let e = server_config(&args, &FileConfig::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains(name), "{e}");
        }
    }

    #[test]
    fn allowed_networks_and_provider_keys() {
        let c = server_config(&ServerArgs::default(), &FileConfig::default()).unwrap();
        assert!(c.webhook_allowed_networks.is_empty());
        let args = ServerArgs {
            webhook_allowed_networks: Some("127.0.0.0/8, 10.0.0.0/8".into()),
            ..Default::default()
        };
        let c = server_config(&args, &FileConfig::default()).unwrap();
        assert!(c
            .webhook_allowed_networks
            .permits("10.2.3.4".parse().unwrap()));
        let bad = ServerArgs {
            webhook_allowed_networks: Some("10.0.0.0/99".into()),
            ..Default::default()
        };
        let e = server_config(&bad, &FileConfig::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("ISSUING_WEBHOOK_ALLOWED_NETWORKS"), "{e}");

        let catalog: issuing_domain::catalog::CatalogConfig = toml::from_str(
            r#"
            [[subproviders]]
            code = "lithic_us"
            kind = "lithic"
            base_url = "https://sandbox.lithic.com"
            api_key_env = "TEST_LITHIC_KEY"
            [[products]]
            code = "p"
            subprovider = "lithic_us"
            issue_fee = "1"
            topup_fee_percent = "0"
            topup_fee_fixed = "0"
            topup_min = "1"
            topup_max = "10"
            "#,
        )
        .unwrap();
        let catalog = issuing_domain::catalog::Catalog::from_config(&catalog).unwrap();
        let keys = provider_keys(&catalog, |n| (n == "TEST_LITHIC_KEY").then(|| "k1".into()));
        assert_eq!(keys.get("lithic_us"), Some("k1"));
        assert_eq!(format!("{keys:?}"), "{\"lithic_us\": \"***\"}");
        assert!(provider_keys(&catalog, |_| None).get("lithic_us").is_none());
    }

    #[test]
    fn console_security_and_public_url() {
        let c = server_config(&ServerArgs::default(), &FileConfig::default()).unwrap();
        assert_eq!(c.console_security.idle_timeout, Duration::from_secs(900));
        assert_eq!(c.console_security.lockout, Duration::from_secs(1800));
        assert_eq!(c.console_security.reveals_per_hour, 10);
        assert!(c.console_security.hosts.is_empty() && c.public_url.is_none());
        let file = FileConfig {
            console_idle_timeout: Some(300),
            console_hosts: Some("Console.Example.com, 10.0.0.5".into()),
            public_url: Some("https://api.example.com/".into()),
            ..Default::default()
        };
        let args = ServerArgs {
            console_lockout: Some(3600),
            console_reveals_per_hour: Some(0),
            console_trusted_proxies: Some("10.0.0.0/8".into()),
            ..Default::default()
        };
        let c = server_config(&args, &file).unwrap();
        assert_eq!(c.console_security.idle_timeout, Duration::from_secs(300));
        assert_eq!(c.console_security.lockout, Duration::from_secs(3600));
        assert_eq!(c.console_security.reveals_per_hour, 0);
        assert_eq!(
            c.console_security.hosts,
            ["console.example.com", "10.0.0.5"]
        );
        assert!(c
            .console_security
            .trusted_proxies
            .contains("10.1.2.3".parse().unwrap()));
        assert_eq!(c.public_url.as_deref(), Some("https://api.example.com"));
        for (args, name) in [
            (
                ServerArgs {
                    console_idle_timeout: Some(5),
                    ..Default::default()
                },
                "ISSUING_CONSOLE_IDLE_TIMEOUT",
            ),
            (
                ServerArgs {
                    console_lockout: Some(0),
                    ..Default::default()
                },
                "ISSUING_CONSOLE_LOCKOUT",
            ),
            (
                ServerArgs {
                    console_hosts: Some("evil host".into()),
                    ..Default::default()
                },
                "ISSUING_CONSOLE_HOSTS",
            ),
            (
                ServerArgs {
                    console_trusted_proxies: Some("nope".into()),
                    ..Default::default()
                },
                "ISSUING_CONSOLE_TRUSTED_PROXIES",
            ),
            (
                ServerArgs {
                    public_url: Some("ftp://x".into()),
                    ..Default::default()
                },
                "ISSUING_PUBLIC_URL",
            ),
            (
                ServerArgs {
                    public_url: Some("https://x/?a=b".into()),
                    ..Default::default()
                },
                "ISSUING_PUBLIC_URL",
            ),
        ] {
            let e = server_config(&args, &FileConfig::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains(name), "{e}");
        }
    }

    #[test]
    fn metrics_listen_is_off_unless_set() {
        let none = ServerArgs::default();
        let c = server_config(&none, &FileConfig::default()).unwrap();
        assert_eq!(c.metrics_listen, None);
        let file = FileConfig {
            metrics_listen: Some("127.0.0.1:9090".into()),
            ..Default::default()
        };
        let c = server_config(&none, &file).unwrap();
        assert_eq!(c.metrics_listen, Some("127.0.0.1:9090".parse().unwrap()));
        let flag = ServerArgs {
            metrics_listen: Some("0.0.0.0:9100".into()),
            ..Default::default()
        };
        let c = server_config(&flag, &file).unwrap();
        assert_eq!(c.metrics_listen, Some("0.0.0.0:9100".parse().unwrap()));
        let bad = ServerArgs {
            metrics_listen: Some("metrics".into()),
            ..Default::default()
        };
        let e = server_config(&bad, &file).unwrap_err().to_string();
        assert!(e.contains("--metrics-listen"), "{e}");
    }
}
