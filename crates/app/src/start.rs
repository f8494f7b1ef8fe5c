//! Building the application's services and starting its background workers: what a
//! server process does before its listeners open.

use crate::provider::sandbox::SandboxProvider;
use crate::provider::unconfigured::UnconfiguredProvider;
use crate::provider::{Provider, Providers};
use crate::{workers, App, MasterKey, Mode, ServerConfig, Services};
use issuing_store::group_commit::GroupCommit;
use issuing_store::Store;
use std::sync::Arc;
use tokio::sync::{watch, Notify};
use tokio::task::JoinSet;

/// Upper bound on order workers per process: each holds a database connection.
const MAX_ORDER_WORKERS: usize = 8;

impl App {
    /// The services of one server: its providers, deposit key and batch writers. The
    /// store must already be migrated and the master key bound to it.
    pub async fn start(
        store: Store,
        master: MasterKey,
        config: ServerConfig,
    ) -> anyhow::Result<App> {
        let builtin: Arc<dyn Provider> = match config.mode {
            Mode::Sandbox => Arc::new(SandboxProvider::new(store.clone(), config.sandbox.clone())),
            Mode::Production => Arc::new(UnconfiguredProvider),
        };
        let metrics: Arc<crate::metrics::Metrics> = Arc::default();
        let providers = Providers::new(
            builtin,
            &config.catalog,
            &config.provider_keys,
            &crate::provider::lithic::Deps {
                store: store.clone(),
                master: master.clone(),
                metrics: metrics.clone(),
            },
        )?;
        if config.mode == Mode::Production
            && config
                .catalog
                .subproviders()
                .iter()
                .any(|s| providers.lithic(&s.code).is_none())
        {
            tracing::warn!(
                "production mode: subproviders of kind sandbox have no card provider; their card operations will fail"
            );
        }
        let deposit_key = crate::deposits::keys::prepare(
            &store,
            &master,
            config.mode,
            config.tron.xpub.as_deref(),
        )
        .await?;
        crate::deposits::keys::announce(deposit_key.as_ref());
        if let Some(key) = &deposit_key {
            crate::deposits::keys::backfill(&store, &key.xpub).await?;
        }
        let decision_http = crate::webhooks::http::client(
            config.mode,
            std::time::Duration::from_millis(u64::from(
                issuing_domain::controls::decision::MAX_TIMEOUT_MS,
            )),
            &config.webhook_allowed_networks,
        )?;
        let orders_wakeup = Arc::new(Notify::new());
        let deliveries_wakeup = Arc::new(Notify::new());
        let born = Arc::<crate::flows::born::Born>::default();
        let master_writer = crate::flows::master_writer::MasterWriter::start(
            store.clone(),
            orders_wakeup.clone(),
            deliveries_wakeup.clone(),
            born.clone(),
        );
        let controls = Arc::new(crate::network::controls::ControlsCache::default());
        let auth_writer = crate::network::auth_writer::AuthWriter::start(
            store.clone(),
            controls.clone(),
            config.hold_expiry,
            crate::batch_writer::Wakeups {
                orders: orders_wakeup.clone(),
                deliveries: deliveries_wakeup.clone(),
            },
        );
        Ok(App::new(Services {
            store: store.clone(),
            master,
            config: Arc::new(config),
            providers,
            orders_wakeup,
            born,
            deliveries_wakeup,
            reports_wakeup: Arc::new(Notify::new()),
            master_writer,
            metrics,
            deposit_key: deposit_key.map(Arc::new),
            auth_writer,
            user_writer: crate::flows::user_writer::UserWriter::start(store.clone()),
            issue_writer: crate::workers::issued::IssueWriter::start(store.clone()),
            decisions: GroupCommit::start(store.clone(), "decisions"),
            webhook_outcomes: crate::workers::outcomes::OutcomeWriter::start(store.clone()),
            decision_http,
        }))
    }
}

/// Starts the background workers into `tasks`: they take no new work once `shutdown`
/// fires, and cut short what they hold and hand their claims back once `hand_back` does.
pub fn spawn_workers(
    app: &App,
    tasks: &mut JoinSet<()>,
    shutdown: &watch::Receiver<bool>,
    hand_back: &watch::Receiver<bool>,
) {
    let order_workers = app.config.order_workers.clamp(1, MAX_ORDER_WORKERS);
    for _ in 0..order_workers {
        tasks.spawn(workers::orders::run(
            app.clone(),
            shutdown.clone(),
            hand_back.clone(),
        ));
    }
    tasks.spawn(workers::deliveries::run(
        app.clone(),
        shutdown.clone(),
        hand_back.clone(),
    ));
    tasks.spawn(workers::holds::run(app.clone(), shutdown.clone()));
    if app.config.tron.api_url.is_some() {
        tasks.spawn(workers::chain::run(app.clone(), shutdown.clone()));
    } else {
        tracing::info!("ISSUING_TRON_API_URL is not set: no chain watcher (deposits come from admin deposit, and simulate/project/deposit in the sandbox)");
    }
    if app.store.backend() == issuing_store::Backend::Postgres {
        tasks.spawn(workers::wakeup::listen(app.clone(), shutdown.clone()));
    }
    tasks.spawn(workers::cleanup::run(app.clone(), shutdown.clone()));
    tasks.spawn(crate::reports::build::run(app.clone(), shutdown.clone()));
    tasks.spawn(workers::reconcile::run(app.clone(), shutdown.clone()));
}
