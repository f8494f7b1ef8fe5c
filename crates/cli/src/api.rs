//! `issuing api PATH [JSON]`: one sealed call from the shell.
//!
//! Protocol (what scripts rely on):
//! - stdout: the opened answer's JSON and nothing else (compact, or with `--pretty`
//!   indented), success and API errors alike
//! - exit code 0 on a success, 1 on an API error status (its JSON still on stdout),
//!   2 on a usage or transport error (message on stderr, nothing on stdout)

use crate::remote::{endpoint_path, RemoteArgs};
use anyhow::{bail, Context};
use serde_json::{Map, Value};
use std::io::{Read, Write};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ApiArgs {
    #[command(flatten)]
    remote: RemoteArgs,
    /// The endpoint, e.g. `cards/get` (a leading `/api/v2/` is optional).
    path: String,
    /// The request body, a JSON object (default `{}`); `-` reads it from stdin.
    /// `request_timestamp` is added unless given.
    json: Option<String>,
    /// Pretty-print the answer over several lines.
    #[arg(long)]
    pretty: bool,
    /// Also send this `Idempotency-Key` header (`cards/create`, `cards/topup`, …).
    #[arg(long)]
    idempotency_key: Option<String>,
}

pub async fn run(args: ApiArgs) -> anyhow::Result<ExitCode> {
    let client = args.remote.client()?;
    let path = endpoint_path(&args.path);
    let body = match args.json.as_deref() {
        None => Value::Object(Map::new()),
        Some("-") => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading the request body from stdin")?;
            parse_body(&text, "stdin")?
        }
        Some(text) => parse_body(text, "JSON")?,
    };
    let answer = client
        .request_with_idempotency_key(path, body, args.idempotency_key.as_deref())
        .await?;
    if answer.is_success() && !answer.sealed {
        // The server seals every success; a plain one came from something else.
        bail!(
            "{path}: a success answer that is not sealed (HTTP {}): {}",
            answer.status,
            answer.body
        );
    }
    let mut text = if args.pretty {
        serde_json::to_string_pretty(&answer.body)?
    } else {
        serde_json::to_string(&answer.body)?
    };
    text.push('\n');
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing the answer to stdout")?;
    Ok(if answer.is_success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// A request body: a JSON object; an empty text is `{}`.
fn parse_body(text: &str, what: &str) -> anyhow::Result<Value> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => bail!("the request body ({what}) must be a JSON object"),
        Err(e) => bail!("the request body ({what}) is not valid JSON: {e}"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies_are_json_objects() {
        assert_eq!(parse_body("", "JSON").unwrap(), json!({}));
        assert_eq!(
            parse_body(r#"{"card_id": "c"}"#, "JSON").unwrap(),
            json!({"card_id": "c"})
        );
        assert!(parse_body("[1]", "JSON").is_err());
        assert!(parse_body("{", "stdin").is_err());
    }
}
