use crate::settings::{self, GlobalArgs};
use anyhow::{bail, Context};
use issuing_domain::ledger::AccountKind;
use issuing_domain::time::to_rfc3339;
use issuing_store::{ledger, projects, StoreError};
use issuing_wire::Amount;
use serde_json::json;
use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum AdminCommand {
    /// Projects and their credentials.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Credit a project's master balance with a confirmed TRC20 deposit.
    Deposit {
        /// Project id.
        #[arg(long)]
        project: String,
        /// Amount in USDT, e.g. 100 or 12.50.
        #[arg(long)]
        amount: String,
        /// Chain transaction id; the same reference is never credited twice.
        #[arg(long)]
        reference: Option<String>,
    },
    /// Check the ledger: every transfer balances, every balance equals its entries,
    /// no customer balance is negative. Exits 1 and names each bad account on mismatch.
    VerifyLedger,
}

#[derive(clap::Subcommand)]
pub enum ProjectCommand {
    /// Create a project; prints its credentials as JSON (the secret only this once).
    Create {
        #[arg(long)]
        name: String,
    },
    /// List projects as JSON lines.
    List,
}

/// The operator listing is bounded; a deployment with more projects pages through SQL.
const LIST_LIMIT: i64 = 10_000;

pub async fn run(global: &GlobalArgs, cmd: AdminCommand) -> anyhow::Result<ExitCode> {
    let file = settings::load_file(global)?;
    let (store, master, _) = settings::open_store(global, &file).await?;
    let code = match cmd {
        AdminCommand::Project(ProjectCommand::Create { name }) => {
            let name = name.trim();
            if name.is_empty() {
                bail!("--name must not be empty");
            }
            let creds = issuing_server::projects::create_project(&store, &master, name).await?;
            println!("{}", serde_json::to_string(&creds)?);
            ExitCode::SUCCESS
        }
        AdminCommand::Project(ProjectCommand::List) => {
            let mut conn = store.conn().await?;
            for p in projects::list(&mut conn, LIST_LIMIT).await? {
                let balance =
                    ledger::project_balance(&mut conn, &p.id, AccountKind::Master).await?;
                println!(
                    "{}",
                    json!({
                        "project_id": p.id,
                        "name": p.name,
                        "status": p.status,
                        "deposit_address": p.deposit_address,
                        "balance": balance,
                        "created_at": to_rfc3339(p.created_at),
                    })
                );
            }
            ExitCode::SUCCESS
        }
        AdminCommand::Deposit {
            project,
            amount,
            reference,
        } => {
            let amount = Amount::parse_decimal(amount.trim())
                .ok()
                .filter(|a| a.micros() > 0)
                .with_context(|| format!("--amount `{amount}` must be a positive USDT amount with at most 6 decimals"))?;
            let mut tx = store.begin().await?;
            if projects::get(&mut tx, &project).await?.is_none() {
                bail!("project {project} not found");
            }
            let posted =
                match ledger::deposit(&mut tx, &project, amount, reference.as_deref()).await {
                    Err(StoreError::Conflict) => {
                        bail!("a deposit with this reference was already credited")
                    }
                    other => other?,
                };
            let balance = ledger::project_balance(&mut tx, &project, AccountKind::Master).await?;
            tx.commit().await?;
            println!(
                "{}",
                json!({
                    "project_id": project,
                    "transfer_id": posted.transfer_id,
                    "amount": amount,
                    "balance": balance,
                })
            );
            ExitCode::SUCCESS
        }
        AdminCommand::VerifyLedger => {
            let mut conn = store.conn().await?;
            let problems = ledger::verify(&mut conn).await?;
            if problems.is_empty() {
                println!("ledger ok");
                ExitCode::SUCCESS
            } else {
                for p in &problems {
                    println!("MISMATCH: {p}");
                }
                println!("ledger has {} problem(s)", problems.len());
                ExitCode::from(1)
            }
        }
    };
    store.close().await;
    Ok(code)
}
