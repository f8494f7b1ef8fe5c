//! A server's settings (`ServerConfig`), filled by the CLI from flags, environment and
//! a config file, or built directly by tests; and the settings of the parts it starts
//! (the sandbox provider, Lithic's API keys, TRC20 deposits, the console's listener).
//! Plain values only: every layer reads the part it needs.

use issuing_domain::catalog::Catalog;
use issuing_domain::chain_deposit;
use issuing_domain::webhooks::AllowedNetworks;
use issuing_wire::Amount;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Simulated provider, KYC and card network; simulation endpoints enabled.
    Sandbox,
    Production,
}

impl Mode {
    pub fn parse(s: &str) -> Option<Mode> {
        match s.to_ascii_lowercase().as_str() {
            "sandbox" => Some(Mode::Sandbox),
            "production" => Some(Mode::Production),
            _ => None,
        }
    }
}

/// The most connections served at once when the descriptor limit allows it.
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// Above the slowest legitimate request (a provider call is bounded at 10 s, database
/// waits at 15 s).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Requests per second per API key: far above what an integration sends (its bursts
/// fit in twice this), low enough that one key cannot take the whole server.
pub const DEFAULT_RATE_LIMIT: u32 = 500;

/// Settings of a running server. The CLI fills it from flags, environment and config
/// file; tests build it directly.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    pub mode: Mode,
    /// Accepted distance of `request_timestamp` from server time (spec: 30 s).
    pub timestamp_window: Duration,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    pub webhook_retry_interval: Duration,
    pub webhook_max_age: Duration,
    /// Time one delivery attempt may take, connection included (CONTRACT §6: 10 s).
    pub webhook_timeout: Duration,
    /// How long an authorization may hold funds before it expires (CONTRACT §9: 7 days).
    pub hold_expiry: Duration,
    /// Subproviders and card products.
    pub catalog: Arc<Catalog>,
    /// Latency and failure injection of the sandbox provider.
    pub sandbox: SandboxConfig,
    /// Connections served at once (lowered to fit the descriptor limit).
    pub max_connections: usize,
    /// Time a request may take once its head arrived, body included (408 after it).
    pub request_timeout: Duration,
    /// Requests per second per API key, with a burst of twice that; 0 turns it off.
    pub rate_limit: u32,
    /// Order workers per process.
    pub order_workers: usize,
    /// Address of the Prometheus listener (`GET /metrics`); none when off.
    pub metrics_listen: Option<SocketAddr>,
    /// TRC20 deposit addresses and the chain watcher.
    pub tron: TronConfig,
    /// How long final webhook deliveries and their events are kept (CONTRACT §13);
    /// zero keeps everything.
    pub retention: Duration,
    /// A subscription whose every attempt has failed for this long is deactivated as
    /// `failing` (CONTRACT §13); zero never deactivates one.
    pub webhook_disable_after: Duration,
    /// On SIGTERM or SIGINT: how long accepted requests may take to finish, and then
    /// how long the workers may take to finish theirs, before what is left is cut off
    /// and its claims handed back.
    pub drain_timeout: Duration,
    /// How often the cleanup worker runs (not a setting: tests shorten it).
    pub cleanup_interval: Duration,
    /// A pause after each page of rows a report's build writes (not a setting: tests
    /// lengthen builds with it to stop a server in the middle of one).
    pub report_page_pause: Duration,
    /// API keys of the `lithic` subproviders, by subprovider code (read by the CLI from
    /// the environment variable each names).
    pub provider_keys: ProviderKeys,
    /// Private networks production may send webhooks to
    /// (`ISSUING_WEBHOOK_ALLOWED_NETWORKS`, CONTRACT §6).
    pub webhook_allowed_networks: AllowedNetworks,
    /// Where the operator console listens (CONTRACT §12); None: no console.
    pub console: Option<ConsoleListen>,
    /// The console's protections an operator may set (docs/console.md).
    pub console_security: ConsoleSecurity,
    /// The base URL cardholders' browsers reach this API listener at, for reveal pages
    /// (CONTRACT §16), such as `https://api.example.com`; None: `http://` and the
    /// listener's own address.
    pub public_url: Option<String>,
}

/// The console's PCI DSS v4 controls that operators may set (docs/console.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSecurity {
    /// A session with no request from its operator for this long ends (8.2.8: at most
    /// 15 minutes). A live region's poll does not count as a request.
    pub idle_timeout: Duration,
    /// How long too many failed logins lock an email (8.3.4: at least 30 minutes);
    /// `issuing admin operator unlock` ends it sooner.
    pub lockout: Duration,
    /// Host names the console answers to besides those of its listen address (a
    /// request naming another `Host` is refused: DNS rebinding).
    pub hosts: Vec<String>,
    /// Reverse proxies in front of the console: from them, the client's address is the
    /// last `X-Forwarded-For` entry that is not one of them.
    pub trusted_proxies: AllowedNetworks,
    /// Card reveals one admin may make in an hour; 0 turns reveals off.
    pub reveals_per_hour: u32,
}

/// 8.2.8: 15 minutes.
pub const DEFAULT_CONSOLE_IDLE_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// 8.3.4: at least 30 minutes.
pub const DEFAULT_CONSOLE_LOCKOUT: Duration = Duration::from_secs(30 * 60);
/// An admin looking up a card now and then needs a few; a script harvesting numbers
/// through a stolen session is stopped after these.
pub const DEFAULT_CONSOLE_REVEALS_PER_HOUR: u32 = 10;

impl Default for ConsoleSecurity {
    fn default() -> Self {
        ConsoleSecurity {
            idle_timeout: DEFAULT_CONSOLE_IDLE_TIMEOUT,
            lockout: DEFAULT_CONSOLE_LOCKOUT,
            hosts: Vec::new(),
            trusted_proxies: AllowedNetworks::default(),
            reveals_per_hour: DEFAULT_CONSOLE_REVEALS_PER_HOUR,
        }
    }
}

/// The operator console's listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsoleListen {
    pub addr: SocketAddr,
    /// The sandbox's default address rather than one the operator set: when it is taken
    /// (another sandbox runs), the server starts without a console and says so.
    pub optional: bool,
}

/// The sandbox's console address when none is set.
pub const DEFAULT_CONSOLE_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8090);

/// Failure injection and latency for tests and demos.
#[derive(Debug, Clone, Default)]
pub struct SandboxConfig {
    /// Added to every provider call.
    pub latency: Duration,
    /// Every card creation is rejected (tests the refund path).
    pub reject_card_create: bool,
    /// Every topup is rejected.
    pub reject_topup: bool,
    /// The first N calls of this process fail transiently (tests the retry path).
    pub transient_failures: u32,
}

/// Provider API keys by subprovider code. Debug never prints them.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ProviderKeys(BTreeMap<String, String>);

impl ProviderKeys {
    pub fn insert(&mut self, subprovider_code: &str, api_key: &str) {
        self.0
            .insert(subprovider_code.to_owned(), api_key.to_owned());
    }

    pub fn get(&self, subprovider_code: &str) -> Option<&str> {
        self.0.get(subprovider_code).map(String::as_str)
    }
}

impl std::fmt::Debug for ProviderKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|k| (k, "***")))
            .finish()
    }
}

/// CONTRACT §13: 30 days.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// CONTRACT §13: 5 days.
pub const DEFAULT_WEBHOOK_DISABLE_AFTER: Duration = Duration::from_secs(5 * 24 * 3600);
/// Requests take milliseconds and a webhook attempt at most 10 s; 20 s leaves room to
/// save the replay memory within the `TimeoutStopSec=30` of docs/operations.md.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

/// Where deposit addresses come from and how the chain watcher finds deposits.
#[derive(Clone)]
pub struct TronConfig {
    /// The operator's `xpub…` of m/44'/195'/0' (`ISSUING_TRON_XPUB`). Unset: production
    /// has no deposit addresses (`wallet_not_found`); the sandbox uses its own test key.
    pub xpub: Option<String>,
    /// Base URL of a TronGrid-compatible API (`ISSUING_TRON_API_URL`); unset: no watcher.
    pub api_url: Option<String>,
    /// Sent as `TRON-PRO-API-KEY` when set (`ISSUING_TRON_API_KEY`).
    pub api_key: Option<String>,
    /// The USDT contract; transfers of other tokens are ignored.
    pub usdt_contract: String,
    /// How often each deposit address is polled (`ISSUING_TRON_POLL_INTERVAL`).
    pub poll_interval: Duration,
    /// Incoming transfers below this are ignored as dust (`ISSUING_TRON_MIN_DEPOSIT`).
    pub min_deposit: Amount,
}

impl Default for TronConfig {
    fn default() -> Self {
        TronConfig {
            xpub: None,
            api_url: None,
            api_key: None,
            usdt_contract: chain_deposit::MAINNET_USDT_CONTRACT.to_owned(),
            // USDT transfers confirm in about a minute; polling faster buys little and
            // costs API quota per address.
            poll_interval: Duration::from_secs(60),
            min_deposit: chain_deposit::DEFAULT_MIN_DEPOSIT,
        }
    }
}

impl std::fmt::Debug for TronConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The API key is a credential; the xpub reveals every deposit address.
        f.debug_struct("TronConfig")
            .field("xpub", &self.xpub.as_ref().map(|_| "***"))
            .field("api_url", &self.api_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "***"))
            .field("usdt_contract", &self.usdt_contract)
            .field("poll_interval", &self.poll_interval)
            .field("min_deposit", &self.min_deposit)
            .finish()
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            mode: Mode::Sandbox,
            timestamp_window: Duration::from_secs(30),
            // Generous for any KYC payload, small enough to bound memory per request.
            max_body_bytes: 256 * 1024,
            webhook_retry_interval: Duration::from_secs(60),
            webhook_max_age: Duration::from_secs(3 * 24 * 3600),
            webhook_timeout: Duration::from_secs(10),
            hold_expiry: Duration::from_secs(7 * 24 * 3600),
            catalog: Arc::new(Catalog::sandbox_default()),
            sandbox: SandboxConfig::default(),
            order_workers: 2,
            metrics_listen: None,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            rate_limit: DEFAULT_RATE_LIMIT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            tron: TronConfig::default(),
            console: None,
            console_security: ConsoleSecurity::default(),
            public_url: None,
            retention: DEFAULT_RETENTION,
            webhook_disable_after: DEFAULT_WEBHOOK_DISABLE_AFTER,
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
            cleanup_interval: Duration::from_secs(10),
            report_page_pause: Duration::ZERO,
            provider_keys: ProviderKeys::default(),
            webhook_allowed_networks: AllowedNetworks::default(),
        }
    }
}
