//! `issuing`: the card-issuing service and its operator commands.
//!
//! It assembles the server (`issuing-server`) for `serve`, calls the core, the console's
//! operator accounts and the store for `admin …`, and the Rust client for `api`, `proxy`,
//! `listen` and `trigger`; nothing depends on it.

mod admin;
mod api;
mod audit;
mod backup;
mod listen;
mod lock;
mod logging;
mod proxy;
mod remote;
mod reveal_demo;
mod serve;
mod settings;
mod trigger;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use settings::GlobalArgs;

/// mimalloc, not the system's malloc: under load glibc's malloc and free took a sixth of
/// the server's CPU, its arenas contended between the runtime's threads
/// (docs/benchmarks.md, issue 21 fourth round).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "issuing",
    version,
    about = "Card issuing service: API server and operator commands"
)]
struct Cli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the API server and its background workers.
    Serve(Box<serve::ServeArgs>),
    /// Operator commands that work directly on the database (no HTTP).
    #[command(subcommand)]
    Admin(admin::AdminCommand),
    /// Subscribe a local receiver to the project's webhooks and print each event as a
    /// JSON line (optionally forwarding it); unsubscribes on Ctrl-C.
    Listen(listen::ListenArgs),
    /// Call one endpoint: seals the JSON body, prints the opened answer on stdout;
    /// exits 0 on success, 1 on an API error, 2 on a usage or transport error.
    Api(api::ApiArgs),
    /// A local plaintext proxy: POST plain JSON to /api/v2/<endpoint>, get plain JSON
    /// back; the proxy seals, forwards and opens.
    Proxy(proxy::ProxyArgs),
    /// Sandbox: make the server send an event (card.created, card.freeze,
    /// card_transaction, …) through real API calls on a new user and card.
    Trigger(trigger::TriggerArgs),
    /// Sandbox: serve a local page that frames a card's single-use reveal page, to see
    /// in a browser how a cardholder is shown a card without the project's server
    /// holding its number.
    RevealDemo(reveal_demo::RevealDemoArgs),
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    // The matches are kept: `admin` records what it was asked in the audit log.
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    logging::init(cli.global.log_format);
    let result = match cli.command {
        Command::Serve(args) => serve::run(&cli.global, *args).await,
        Command::Admin(cmd) => {
            let asked = audit::Invocation::of_admin(&Cli::command(), &matches);
            admin::run(&cli.global, cmd, asked).await
        }
        Command::Listen(args) => listen::run(args).await,
        Command::Api(args) => api::run(args).await,
        Command::Proxy(args) => proxy::run(args).await,
        Command::Trigger(args) => trigger::run(args).await,
        Command::RevealDemo(args) => reveal_demo::run(args).await,
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
