//! Log output on stderr, filtered by `ISSUING_LOG` (env-filter syntax, default `info`):
//! readable text (the default; colour only when stderr is a terminal and `NO_COLOR` is
//! unset) or one JSON object per line for log collectors (`--log-format json`).

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl std::fmt::Display for LogFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        })
    }
}

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_env("ISSUING_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    match format {
        LogFormat::Text => builder.with_ansi(colour()).init(),
        // Each line carries the request's span (`span`, `spans`) with its request_id.
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

/// Escape codes only for a person at a terminal (https://no-color.org).
fn colour() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
