use crate::settings::{self, GlobalArgs, ServerArgs};
use issuing_app::projects;
use issuing_server::Mode;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    server: ServerArgs,
}

use issuing_app::projects::DEMO_CREDIT;

pub async fn run(global: &GlobalArgs, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let file = settings::load_file(global)?;
    let config = settings::server_config(&args.server, &file)?;
    let (store, master, resolved) = settings::open_store(global, &file).await?;
    let store = settings::with_reader(store, &args.server, &file).await?;
    let _only_server = lock_sqlite(&store)?;
    tracing::info!(
        database = %settings::redact(&resolved.database_url),
        mode = ?config.mode,
        "starting"
    );

    // Before the demo project, so that it is created with its derived deposit address.
    issuing_app::deposits::keys::prepare(&store, &master, config.mode, config.tron.xpub.as_deref())
        .await?;
    // Production deployments create their projects with `issuing admin project create`.
    let demo = match config.mode {
        Mode::Sandbox => projects::ensure_demo_project(&store, &master, DEMO_CREDIT).await?,
        Mode::Production => None,
    };
    if let Some(creds) = demo {
        println!("Demo project created. The API secret is shown only this once:");
        println!("  project_id:      {}", creds.project_id);
        println!("  api_key:         {}", creds.api_key);
        println!("  api_secret:      {}", creds.api_secret);
        let address = creds.deposit_address.as_deref().unwrap_or("(none)");
        println!("  deposit_address: {address}");
        println!("  balance:         {DEMO_CREDIT} USDT (sandbox credit)");
    }

    // The sandbox's first run also creates the console's first admin.
    let console_admin = match (config.mode, config.console) {
        (Mode::Sandbox, Some(_)) => issuing_console::operators::ensure_first_admin(&store).await?,
        _ => None,
    };
    if let Some(admin) = console_admin {
        println!("Console operator created. Its password is shown only this once:");
        println!("  console_email:    {}", admin.email);
        println!("  console_password: {}", admin.password);
    }

    let server = issuing_server::start(store.clone(), master, config).await?;
    if let Some(at) = server.console_addr {
        println!("issuing console on http://{at}/console/");
    }
    let stop = issuing_server::StopSignal::install()?;
    println!("issuing listening on http://{}/api/v2", server.addr);
    server.wait(stop).await;
    store.close().await;
    Ok(ExitCode::SUCCESS)
}

/// One `issuing serve` per SQLite database (see `lock.rs`).
fn lock_sqlite(store: &issuing_store::Store) -> anyhow::Result<Option<std::fs::File>> {
    let Some(path) = store.sqlite_path() else {
        return Ok(None);
    };
    match crate::lock::try_lock(path)? {
        Some(file) => Ok(Some(file)),
        None => anyhow::bail!(
            "another `issuing serve` is already running on the SQLite database {path} \
             (lock file {}); stop it first, or use PostgreSQL \
             (--database-url postgres://...) to run several servers on one database",
            crate::lock::lock_path(path)
        ),
    }
}
