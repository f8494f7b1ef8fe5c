use crate::provider::sandbox::SandboxConfig;
use issuing_domain::catalog::Catalog;
use issuing_domain::chain_deposit;
use issuing_wire::Amount;
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
}

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
            max_connections: crate::connections::DEFAULT_MAX_CONNECTIONS,
            rate_limit: DEFAULT_RATE_LIMIT,
            request_timeout: crate::pipeline::timeout::DEFAULT_REQUEST_TIMEOUT,
            tron: TronConfig::default(),
        }
    }
}
