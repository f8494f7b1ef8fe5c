use crate::settings::{self, GlobalArgs, ServerArgs};
use issuing_server::{projects, Mode};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    server: ServerArgs,
}

use issuing_server::projects::DEMO_CREDIT;

pub async fn run(global: &GlobalArgs, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let file = settings::load_file(global)?;
    let config = settings::server_config(&args.server, &file)?;
    let (store, master, resolved) = settings::open_store(global, &file).await?;
    tracing::info!(
        database = %settings::redact(&resolved.database_url),
        mode = ?config.mode,
        "starting"
    );

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
        println!("  deposit_address: {}", creds.deposit_address);
        println!("  balance:         {DEMO_CREDIT} USDT (sandbox credit)");
    }

    let server = issuing_server::start(store.clone(), master, config).await?;
    println!("issuing listening on http://{}/api/v2", server.addr);
    server.wait().await;
    store.close().await;
    Ok(ExitCode::SUCCESS)
}
