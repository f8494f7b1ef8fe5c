use crate::audit;
use crate::settings::{self, GlobalArgs};
use anyhow::{bail, Context};
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
    /// API keys: rotate, revoke, list.
    #[command(subcommand)]
    Key(KeyCommand),
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
    /// Card providers of the catalog's `lithic` subproviders: enrol them with Lithic, show
    /// what is enrolled.
    #[command(subcommand)]
    Provider(ProviderCommand),
    /// Check the ledger: every transfer balances, every balance equals its entries,
    /// no customer balance is negative. Exits 1 and names each bad account on mismatch.
    VerifyLedger,
    /// Reconcile a subprovider's settlements of one UTC date: the provider's (Lithic's
    /// settlement details, the sandbox provider's records) against the clearings and
    /// refunds applied here. Prints the result as JSON, keeps it for the date, and
    /// exits 1 when there are breaks (2 when the provider could not be read).
    Reconcile {
        /// The subprovider's code in the catalog (`sandbox` for the sandbox).
        #[arg(long)]
        subprovider: String,
        /// The UTC date, YYYY-MM-DD.
        #[arg(long)]
        date: String,
    },
    /// Operators of the web console: create, list, disable, reset-password, unlock.
    #[command(subcommand)]
    Operator(OperatorCommand),
    /// Copy a SQLite database to FILE, consistent while `serve` runs. The master key is
    /// not in the copy; `--master-key-to` writes it to a separate file.
    Backup {
        /// The backup file to create (must not exist).
        #[arg(long)]
        to: std::path::PathBuf,
        /// Also write the master key (base64) to this file; keep it apart from the backup.
        #[arg(long)]
        master_key_to: Option<std::path::PathBuf>,
    },
    /// Replace the SQLite database with a backup; refused while a server runs on it.
    Restore {
        /// The backup file made by `admin backup`.
        #[arg(long)]
        from: std::path::PathBuf,
        /// The master key file saved with the backup; installed as the data directory's
        /// master.key when it has none.
        #[arg(long)]
        master_key_from: Option<std::path::PathBuf>,
        /// Replace an existing database (it is kept beside, renamed).
        #[arg(long)]
        force: bool,
    },
    /// Sandbox only: fresh credentials for the database's demo project (created if
    /// missing), printed as JSON. Rotates its key with no grace: the previous secret
    /// stops working at once.
    Demo {
        /// `sandbox` or `production` (refused), as for `serve`.
        #[arg(long, env = "ISSUING_MODE")]
        mode: Option<String>,
    },
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
    /// Suspend a project: its requests get 403 api_key_invalid and its webhooks wait;
    /// orders already in flight still finish.
    Suspend {
        #[arg(long)]
        project: String,
    },
    /// Resume a suspended project; its waiting webhooks are sent.
    Resume {
        #[arg(long)]
        project: String,
    },
}

#[derive(clap::Subcommand)]
pub enum ProviderCommand {
    /// Register this service with Lithic for a `lithic` subprovider: the ASA responder
    /// (`<public-url>/provider/lithic/<code>/asa`), an event subscription
    /// (`…/events`), and both signing secrets, stored sealed with the master key.
    /// Prints what was enrolled as JSON. Running it again re-enrols (same subscription).
    Enroll {
        /// The subprovider's code in the catalog (its kind must be `lithic`).
        #[arg(long)]
        subprovider: String,
        /// The public base URL Lithic reaches this service's API listener at.
        #[arg(long)]
        public_url: String,
    },
    /// One JSON line per `lithic` subprovider: configuration (never the key), what is
    /// enrolled, and what Lithic reports as enrolled now.
    Status,
}

#[derive(clap::Subcommand)]
pub enum KeyCommand {
    /// Issue a new API key and secret (printed once, as JSON); the project's other keys
    /// keep working for the grace period.
    Rotate {
        #[arg(long)]
        project: String,
        /// Seconds the old keys stay valid; 0 revokes them at once (at most 90 days).
        #[arg(long, default_value_t = DEFAULT_GRACE_SECS)]
        grace: u64,
    },
    /// Revoke a key at once, in every server process.
    Revoke {
        #[arg(long)]
        key: String,
        /// Also revoke the project's last valid key (leaving it without a working key).
        #[arg(long)]
        force: bool,
    },
    /// List a project's keys as JSON lines, oldest first (never secrets).
    List {
        #[arg(long)]
        project: String,
    },
}

#[derive(clap::Subcommand)]
pub enum OperatorCommand {
    /// Create an operator; prints `{"email", "role", "password"}` (the password only
    /// this once).
    Create {
        #[arg(long)]
        email: String,
        /// `admin` (also manages operators, may reveal card details), `operator` (reads
        /// everything and acts) or `viewer` (reads only).
        #[arg(long, value_parser = ["admin", "operator", "viewer"])]
        role: String,
        /// A project a viewer may read (repeat for several; none: every project).
        #[arg(long = "project")]
        projects: Vec<String>,
    },
    /// List operators as JSON lines (never passwords).
    List,
    /// Disable an operator: its sessions end at once.
    Disable {
        #[arg(long)]
        email: String,
    },
    /// Give an operator a new generated password (printed once); its sessions end.
    ResetPassword {
        #[arg(long)]
        email: String,
    },
    /// End an email's login lockout now (after confirming who asks); prints
    /// `{"email", "was_locked"}`.
    Unlock {
        #[arg(long)]
        email: String,
    },
}

/// Old keys keep working this long after a rotation unless `--grace` says otherwise.
const DEFAULT_GRACE_SECS: u64 = 24 * 60 * 60;
const MAX_GRACE_SECS: u64 = 90 * 24 * 60 * 60;

/// The operator listing is bounded; a deployment with more projects pages through SQL.
const LIST_LIMIT: i64 = 10_000;

/// Runs an admin command, then appends its audit row (CONTRACT §12): every command,
/// whatever it is and however it ends, once the database can be opened.
pub async fn run(
    global: &GlobalArgs,
    cmd: AdminCommand,
    asked: audit::Invocation,
) -> anyhow::Result<ExitCode> {
    let result = execute(global, cmd).await;
    if let Err(e) = record(global, &asked, &result).await {
        eprintln!("warning: the audit log could not be written: {e:#}");
    }
    result
}

async fn record(
    global: &GlobalArgs,
    asked: &audit::Invocation,
    result: &anyhow::Result<ExitCode>,
) -> anyhow::Result<()> {
    let file = settings::load_file(global)?;
    // A command refused before it opened its database leaves no database behind.
    let Some(store) = settings::existing_store(global, &file).await? else {
        return Ok(());
    };
    // Nor migrates one (an empty PostgreSQL database stays empty).
    if !issuing_store::audit::exists(&store).await {
        store.close().await;
        return Ok(());
    }
    let mut tx = store.begin().await?;
    issuing_store::audit::append(
        &mut tx,
        &issuing_store::audit::NewAudit {
            at: issuing_domain::time::now_micros(),
            actor: issuing_store::audit::CLI,
            action: &asked.action,
            project_id: asked.project_id(),
            targets: &asked.targets,
            result: &audit::outcome(result),
        },
    )
    .await?;
    tx.commit().await?;
    store.close().await;
    Ok(())
}

async fn execute(global: &GlobalArgs, cmd: AdminCommand) -> anyhow::Result<ExitCode> {
    let file = settings::load_file(global)?;
    if let AdminCommand::Demo { mode } = &cmd {
        // Decided before the database is touched, from the settings `serve` reads.
        let args = settings::ServerArgs {
            mode: mode.clone(),
            ..Default::default()
        };
        if settings::server_config(&args, &file)?.mode != issuing_server::Mode::Sandbox {
            eprintln!("error: `admin demo` works only in sandbox mode (the mode is production)");
            return Ok(ExitCode::from(2));
        }
    }
    if let AdminCommand::Restore {
        from,
        master_key_from,
        force,
    } = &cmd
    {
        // Before anything opens (and so creates) the database.
        return crate::backup::restore(global, &file, from, master_key_from.as_deref(), *force)
            .await;
    }
    let (store, master, _) = settings::open_store(global, &file).await?;
    let code = match cmd {
        AdminCommand::Backup { to, master_key_to } => {
            crate::backup::backup(&store, &master, &to, master_key_to.as_deref()).await?
        }
        AdminCommand::Restore { .. } => unreachable!("handled before the store is opened"),
        AdminCommand::Project(ProjectCommand::Create { name }) => {
            let name = name.trim();
            if name.is_empty() {
                bail!("--name must not be empty");
            }
            // The deposit key a server with this environment would use, so the project
            // gets the address that server shows.
            let config = settings::server_config_from_env(&file)?;
            prepare_deposit_key(&store, &master, config.mode, &config).await?;
            let creds = issuing_app::projects::create_project(&store, &master, name).await?;
            println!("{}", serde_json::to_string(&creds)?);
            ExitCode::SUCCESS
        }
        AdminCommand::Project(ProjectCommand::List) => {
            let mut conn = store.conn().await?;
            for p in projects::list(&mut conn, LIST_LIMIT).await? {
                let balance = ledger::master_balance(&mut conn, &p.id).await?;
                println!(
                    "{}",
                    json!({
                        "project_id": p.id,
                        "name": p.name,
                        "status": p.status,
                        "deposit_address": p.deposit_address,
                        "deposit_index": p.deposit_index,
                        "legacy_deposit_address": p.legacy_deposit_address,
                        "balance": balance,
                        "created_at": to_rfc3339(p.created_at),
                    })
                );
            }
            ExitCode::SUCCESS
        }
        AdminCommand::Project(ProjectCommand::Suspend { project }) => {
            set_status(&store, &project, issuing_app::projects::SUSPENDED).await?
        }
        AdminCommand::Project(ProjectCommand::Resume { project }) => {
            set_status(&store, &project, issuing_app::projects::ACTIVE).await?
        }
        AdminCommand::Key(KeyCommand::Rotate { project, grace }) => {
            if grace > MAX_GRACE_SECS {
                bail!("--grace must be at most {MAX_GRACE_SECS} seconds (90 days)");
            }
            let rotated = issuing_app::projects::rotate_key(
                &store,
                &master,
                &project,
                std::time::Duration::from_secs(grace),
            )
            .await?;
            println!("{}", serde_json::to_string(&rotated)?);
            ExitCode::SUCCESS
        }
        AdminCommand::Key(KeyCommand::Revoke { key, force }) => {
            let revoked = issuing_app::projects::revoke_key(&store, key.trim(), force).await?;
            println!("{}", serde_json::to_string(&revoked)?);
            ExitCode::SUCCESS
        }
        AdminCommand::Key(KeyCommand::List { project }) => {
            let now = issuing_domain::time::now_micros();
            for k in issuing_app::projects::list_keys(&store, &project).await? {
                println!(
                    "{}",
                    json!({
                        "api_key": k.api_key,
                        "project_id": k.project_id,
                        "created_at": to_rfc3339(k.created_at),
                        "expires_at": k.expires_at.map(to_rfc3339),
                        "revoked_at": k.revoked_at.map(to_rfc3339),
                        "valid": k.valid_at(now),
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
            // The request form exactly: `10`, `10.50`; no sign, exponent or spaces.
            let amount = Amount::parse_positive(&serde_json::Value::String(amount.clone()))
                .ok()
                .with_context(|| format!("--amount `{amount}` must be a positive USDT amount such as 250 or 10.50, with at most 6 decimals"))?;
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
            let balance = ledger::master_balance(&mut tx, &project).await?;
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
        AdminCommand::Demo { .. } => {
            let config = settings::server_config_from_env(&file)?;
            prepare_deposit_key(&store, &master, issuing_server::Mode::Sandbox, &config).await?;
            let creds = demo_credentials(&store, &master).await?;
            println!("{}", serde_json::to_string(&creds)?);
            ExitCode::SUCCESS
        }
        AdminCommand::Operator(cmd) => operator(&store, cmd).await?,
        AdminCommand::Provider(cmd) => {
            let config = settings::server_config_from_env(&file)?;
            match cmd {
                ProviderCommand::Enroll {
                    subprovider,
                    public_url,
                } => {
                    let enrolled = issuing_app::provider::lithic::admin::enroll(
                        &store,
                        &master,
                        &config.catalog,
                        &config.provider_keys,
                        subprovider.trim(),
                        &public_url,
                    )
                    .await?;
                    println!("{enrolled}");
                }
                ProviderCommand::Status => {
                    let all = issuing_app::provider::lithic::admin::status(
                        &store,
                        &master,
                        &config.catalog,
                        &config.provider_keys,
                    )
                    .await?;
                    for line in all {
                        println!("{line}");
                    }
                }
            }
            ExitCode::SUCCESS
        }
        AdminCommand::Reconcile { subprovider, date } => {
            let config = settings::server_config_from_env(&file)?;
            let code = subprovider.trim();
            let lithic = match config.catalog.subprovider(code).map(|s| &s.kind) {
                Some(issuing_domain::catalog::ProviderKind::Lithic(_)) => {
                    Some(issuing_app::provider::lithic::admin::provider(
                        &store,
                        &master,
                        &config.catalog,
                        &config.provider_keys,
                        code,
                    )?)
                }
                Some(_) => None,
                None => bail!("no subprovider {code} in the catalog"),
            };
            let src = issuing_app::reconcile::Sources {
                store: &store,
                catalog: &config.catalog,
                lithic: lithic.as_ref(),
            };
            let result = issuing_app::reconcile::run(&src, code, date.trim()).await?;
            println!("{}", issuing_app::reconcile::to_json(&result));
            if result.status != "done" {
                ExitCode::from(2)
            } else if result.missing_here + result.missing_there + result.amount_mismatch > 0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        AdminCommand::VerifyLedger => {
            let problems =
                issuing_app::ledger_check::verify(&store, issuing_store::audit::CLI).await?;
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

async fn operator(store: &issuing_store::Store, cmd: OperatorCommand) -> anyhow::Result<ExitCode> {
    use issuing_console::operators::{self, Role};
    match cmd {
        OperatorCommand::Create {
            email,
            role,
            projects,
        } => {
            let role = Role::parse(&role).context("--role must be admin, operator or viewer")?;
            let created = operators::create(store, &email, role, &projects).await?;
            println!("{}", serde_json::to_string(&created)?);
        }
        OperatorCommand::List => {
            for o in operators::list(store).await? {
                println!(
                    "{}",
                    json!({
                        "email": o.email,
                        "role": o.role,
                        "projects": o.projects,
                        "status": o.status,
                        "created_at": to_rfc3339(o.created_at),
                        "disabled_at": o.disabled_at.map(to_rfc3339),
                    })
                );
            }
        }
        OperatorCommand::Disable { email } => {
            operators::disable(store, &email).await?;
            let email = operators::normalize_email(&email)?;
            println!("{}", json!({"email": email, "status": "disabled"}));
        }
        OperatorCommand::ResetPassword { email } => {
            let reset = operators::reset_password(store, &email).await?;
            println!("{}", serde_json::to_string(&reset)?);
        }
        OperatorCommand::Unlock { email } => {
            let was_locked = operators::unlock(store, &email).await?;
            let email = operators::normalize_email(&email)?;
            println!("{}", json!({"email": email, "was_locked": was_locked}));
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn prepare_deposit_key(
    store: &issuing_store::Store,
    master: &issuing_server::MasterKey,
    mode: issuing_server::Mode,
    config: &issuing_server::ServerConfig,
) -> anyhow::Result<()> {
    let key =
        issuing_app::deposits::keys::prepare(store, master, mode, config.tron.xpub.as_deref())
            .await?;
    // Projects created while no key was known get their addresses now, as at a start.
    if let Some(key) = key {
        issuing_app::deposits::keys::backfill(store, &key.xpub).await?;
    }
    Ok(())
}

async fn set_status(
    store: &issuing_store::Store,
    project: &str,
    status: &str,
) -> anyhow::Result<ExitCode> {
    let before = issuing_app::projects::set_project_status(store, project, status).await?;
    println!(
        "{}",
        json!({"project_id": project, "status": status, "previous_status": before})
    );
    Ok(ExitCode::SUCCESS)
}

/// Fresh credentials of the demo project: a new project's own, or a rotated key (grace
/// 0, so the previous keys stop working) for an existing one.
async fn demo_credentials(
    store: &issuing_store::Store,
    master: &issuing_server::MasterKey,
) -> anyhow::Result<issuing_app::projects::NewProjectCredentials> {
    if let Some(created) = issuing_app::projects::ensure_demo_project(
        store,
        master,
        issuing_app::projects::DEMO_CREDIT,
    )
    .await?
    {
        return Ok(created);
    }
    let project_id = issuing_app::projects::demo_project_id(store)
        .await?
        .context("the database names no demo project")?;
    let mut conn = store.conn().await?;
    let project = projects::get(&mut conn, &project_id)
        .await?
        .with_context(|| format!("the demo project {project_id} does not exist"))?;
    drop(conn);
    let rotated =
        issuing_app::projects::rotate_key(store, master, &project_id, std::time::Duration::ZERO)
            .await?;
    Ok(issuing_app::projects::NewProjectCredentials {
        project_id,
        api_key: rotated.api_key,
        api_secret: rotated.api_secret,
        deposit_address: project.deposit_address,
    })
}
