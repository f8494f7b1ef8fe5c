//! What the commands that talk to a running server over HTTP share (`listen`, `api`,
//! `proxy`, `trigger`): the credentials, endpoint paths, the standard error object and
//! the SIGINT/SIGTERM handlers.

use anyhow::Context;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use issuing_client::Client;
use serde_json::json;

/// The project credentials and server of the HTTP commands: flags or the same
/// `ISSUING_*` variables as the Python client.
#[derive(clap::Args, Clone)]
pub struct RemoteArgs {
    /// Base URL of the issuing API (without /api/v2).
    #[arg(
        long,
        env = "ISSUING_BASE_URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub base_url: String,
    /// The project's API key.
    #[arg(long, env = "ISSUING_API_KEY")]
    pub api_key: String,
    /// The project's API secret (prefer the environment variable: flags show up in `ps`).
    #[arg(long, env = "ISSUING_API_SECRET", hide_env_values = true)]
    pub api_secret: String,
}

impl RemoteArgs {
    pub fn client(&self) -> anyhow::Result<Client> {
        Client::new(&self.base_url, &self.api_key, &self.api_secret)
            .context("--base-url / --api-key / --api-secret")
    }
}

/// An endpoint path as a user may write it: `cards/get`, `/cards/get`,
/// `/api/v2/cards/get` or `api/v2/cards/get` all name `cards/get`.
pub fn endpoint_path(raw: &str) -> &str {
    let path = raw.trim().trim_start_matches('/');
    path.strip_prefix("api/v2/").unwrap_or(path)
}

/// The API's standard error object with a status, for local answers (receiver, proxy).
pub fn error_response(status: StatusCode, slug: &str, message: &str) -> Response {
    (
        status,
        Json(json!({"success": false, "error": message, "error_slug": slug})),
    )
        .into_response()
}

/// SIGINT and SIGTERM, registered at once (a handler installed lazily would leave a
/// window in which the default action kills the process).
pub struct Signals {
    #[cfg(unix)]
    interrupt: tokio::signal::unix::Signal,
    #[cfg(unix)]
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    pub fn new() -> anyhow::Result<Signals> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Ok(Signals {
                interrupt: signal(SignalKind::interrupt()).context("installing SIGINT handler")?,
                terminate: signal(SignalKind::terminate()).context("installing SIGTERM handler")?,
            })
        }
        #[cfg(not(unix))]
        {
            Ok(Signals {})
        }
    }

    /// The name of the next signal received.
    pub async fn next(&mut self) -> &'static str {
        #[cfg(unix)]
        {
            tokio::select! {
                _ = self.interrupt.recv() => "interrupted",
                _ = self.terminate.recv() => "terminated",
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            "interrupted"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_paths_lose_the_api_prefix() {
        for raw in [
            "system/health",
            "/system/health",
            "/api/v2/system/health",
            "api/v2/system/health",
            " system/health ",
        ] {
            assert_eq!(endpoint_path(raw), "system/health", "{raw}");
        }
    }
}
