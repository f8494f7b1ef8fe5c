//! The audit row of every `issuing admin` command (CONTRACT §12), written by one hook
//! around the admin dispatcher: what was asked (the subcommand path and the options
//! given on the command line) and how it ended. A command added to `admin` is audited
//! without any code of its own.

use clap::parser::ValueSource;
use clap::ArgMatches;
use serde_json::{Map, Value};
use std::process::ExitCode;

/// Options whose values are never written down, by a part of their name.
const SECRET_PARTS: &[&str] = &[
    "password",
    "secret",
    "token",
    "api_key",
    "credential",
    "private",
];
/// Longest option value kept.
const MAX_VALUE_LEN: usize = 200;

/// An admin command as typed: `admin key revoke` and `{"key": "pk_…"}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub action: String,
    pub targets: Value,
}

impl Invocation {
    /// The `admin …` subcommand in `root` (the binary's matches); global options such as
    /// `--database-url` are left out, and so is anything that came from the environment
    /// or a default.
    pub fn of_admin(cmd: &clap::Command, root: &ArgMatches) -> Invocation {
        let globals: Vec<String> = cmd
            .get_arguments()
            .filter(|a| a.is_global_set())
            .map(|a| a.get_id().to_string())
            .collect();
        let mut path = Vec::new();
        let (mut at, mut leaf) = (root, cmd);
        while let Some((name, sub)) = at.subcommand() {
            path.push(name.to_owned());
            at = sub;
            match leaf.find_subcommand(name) {
                Some(c) => leaf = c,
                None => break,
            }
        }
        let mut targets = Map::new();
        for id in at.ids() {
            let id = id.as_str();
            // Arguments only: the derive also records each struct's argument group.
            let is_arg = leaf.get_arguments().any(|a| a.get_id() == id);
            if !is_arg
                || globals.iter().any(|g| g == id)
                || at.value_source(id) != Some(ValueSource::CommandLine)
            {
                continue;
            }
            let Some(raw) = at.get_raw(id) else { continue };
            let values: Vec<Value> = raw
                .map(|v| {
                    if is_secret(id) {
                        Value::String("***".into())
                    } else {
                        Value::String(v.to_string_lossy().chars().take(MAX_VALUE_LEN).collect())
                    }
                })
                .collect();
            let value = match <[Value; 1]>::try_from(values) {
                Ok([one]) => one,
                Err(many) => Value::Array(many),
            };
            targets.insert(id.to_owned(), value);
        }
        Invocation {
            action: path.join(" "),
            targets: Value::Object(targets),
        }
    }

    /// The project the command was about, when it named one.
    pub fn project_id(&self) -> Option<&str> {
        self.targets.get("project").and_then(Value::as_str)
    }
}

fn is_secret(id: &str) -> bool {
    let id = id.to_ascii_lowercase().replace('-', "_");
    SECRET_PARTS.iter().any(|p| id.contains(p))
}

/// How a command ended, as the audit log says it.
pub fn outcome(result: &anyhow::Result<ExitCode>) -> String {
    match result {
        Ok(code) if *code == ExitCode::SUCCESS => "ok".to_owned(),
        Ok(_) => "failed (non-zero exit)".to_owned(),
        Err(e) => format!("error: {e:#}"),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::{Arg, ArgAction, Command};

    fn cli() -> Command {
        Command::new("issuing")
            .arg(Arg::new("database_url").long("database-url").global(true))
            .subcommand(
                Command::new("admin").subcommand(
                    Command::new("provider").subcommand(
                        Command::new("enroll")
                            .arg(
                                Arg::new("project")
                                    .long("project")
                                    .action(ArgAction::Append),
                            )
                            .arg(Arg::new("api_key").long("api-key"))
                            .arg(Arg::new("force").long("force").action(ArgAction::SetTrue))
                            .arg(Arg::new("mode").long("mode").env("ISSUING_TEST_AUDIT_MODE")),
                    ),
                ),
            )
    }

    #[test]
    fn records_the_path_and_the_options_given_never_secrets() {
        let cmd = cli();
        let m = cmd.clone().get_matches_from([
            "issuing",
            "--database-url",
            "postgres://u:pw@h/db",
            "admin",
            "provider",
            "enroll",
            "--project",
            "p1",
            "--api-key",
            "live_secret",
            "--force",
        ]);
        let i = Invocation::of_admin(&cmd, &m);
        assert_eq!(i.action, "admin provider enroll");
        assert_eq!(
            i.targets,
            serde_json::json!({"project": "p1", "api_key": "***", "force": "true"})
        );
        assert_eq!(i.project_id(), Some("p1"));
        let m = cmd.clone().get_matches_from([
            "issuing",
            "admin",
            "provider",
            "enroll",
            "--project",
            "a",
            "--project",
            "b",
        ]);
        let i = Invocation::of_admin(&cmd, &m);
        assert_eq!(i.targets, serde_json::json!({"project": ["a", "b"]}));
        assert_eq!(i.project_id(), None);
    }
}
