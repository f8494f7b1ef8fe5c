//! A small migration runner: ordered, embedded SQL files per backend, each applied once
//! in its own transaction and recorded in `schema_migrations`. On PostgreSQL an advisory
//! lock keeps several starting servers from migrating at the same time.

use crate::{Backend, Store, StoreError};
use sqlx::{Executor, Row};

struct Migration {
    version: i64,
    name: &'static str,
    sqlite: &'static str,
    postgres: &'static str,
}

impl Store {
    /// Applies the migrations this database has not had yet.
    pub async fn migrate(&self) -> Result<(), StoreError> {
        run(self).await
    }
}

const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "foundation",
        sqlite: include_str!("../migrations/sqlite/0001_foundation.sql"),
        postgres: include_str!("../migrations/postgres/0001_foundation.sql"),
    },
    Migration {
        version: 2,
        name: "cards",
        sqlite: include_str!("../migrations/sqlite/0002_cards.sql"),
        postgres: include_str!("../migrations/postgres/0002_cards.sql"),
    },
    Migration {
        version: 3,
        name: "in_flight_accounts",
        sqlite: include_str!("../migrations/sqlite/0003_in_flight_accounts.sql"),
        postgres: include_str!("../migrations/postgres/0003_in_flight_accounts.sql"),
    },
    Migration {
        version: 4,
        name: "webhooks",
        sqlite: include_str!("../migrations/sqlite/0004_webhooks.sql"),
        postgres: include_str!("../migrations/postgres/0004_webhooks.sql"),
    },
    Migration {
        version: 5,
        name: "card_transactions",
        sqlite: include_str!("../migrations/sqlite/0005_card_transactions.sql"),
        postgres: include_str!("../migrations/postgres/0005_card_transactions.sql"),
    },
    Migration {
        version: 6,
        name: "key_expiry",
        sqlite: include_str!("../migrations/sqlite/0006_key_expiry.sql"),
        postgres: include_str!("../migrations/postgres/0006_key_expiry.sql"),
    },
    Migration {
        version: 7,
        name: "chain_deposits",
        sqlite: include_str!("../migrations/sqlite/0007_chain_deposits.sql"),
        postgres: include_str!("../migrations/postgres/0007_chain_deposits.sql"),
    },
    Migration {
        version: 8,
        name: "spend_controls",
        sqlite: include_str!("../migrations/sqlite/0008_spend_controls.sql"),
        postgres: include_str!("../migrations/postgres/0008_spend_controls.sql"),
    },
    Migration {
        version: 9,
        name: "retention",
        sqlite: include_str!("../migrations/sqlite/0009_retention.sql"),
        postgres: include_str!("../migrations/postgres/0009_retention.sql"),
    },
    Migration {
        version: 10,
        name: "console",
        sqlite: include_str!("../migrations/sqlite/0010_console.sql"),
        postgres: include_str!("../migrations/postgres/0010_console.sql"),
    },
    Migration {
        version: 11,
        name: "lithic",
        sqlite: include_str!("../migrations/sqlite/0011_lithic.sql"),
        postgres: include_str!("../migrations/postgres/0011_lithic.sql"),
    },
    Migration {
        version: 12,
        name: "console_indexes",
        sqlite: include_str!("../migrations/sqlite/0012_console_indexes.sql"),
        postgres: include_str!("../migrations/postgres/0012_console_indexes.sql"),
    },
    Migration {
        version: 13,
        name: "debt_accounts",
        sqlite: include_str!("../migrations/sqlite/0013_debt_accounts.sql"),
        postgres: include_str!("../migrations/postgres/0013_debt_accounts.sql"),
    },
    Migration {
        version: 14,
        name: "failing_deliveries",
        sqlite: include_str!("../migrations/sqlite/0014_failing_deliveries.sql"),
        postgres: include_str!("../migrations/postgres/0014_failing_deliveries.sql"),
    },
    Migration {
        version: 15,
        name: "card_usage",
        sqlite: include_str!("../migrations/sqlite/0015_card_usage.sql"),
        postgres: include_str!("../migrations/postgres/0015_card_usage.sql"),
    },
    Migration {
        version: 16,
        name: "cards_by_status",
        sqlite: include_str!("../migrations/sqlite/0016_cards_by_status.sql"),
        postgres: include_str!("../migrations/postgres/0016_cards_by_status.sql"),
    },
    Migration {
        version: 17,
        name: "cardholders_by_user",
        sqlite: include_str!("../migrations/sqlite/0017_cardholders_by_user.sql"),
        postgres: include_str!("../migrations/postgres/0017_cardholders_by_user.sql"),
    },
    Migration {
        version: 18,
        name: "card_usage_per_statement",
        sqlite: include_str!("../migrations/sqlite/0018_card_usage_per_statement.sql"),
        postgres: include_str!("../migrations/postgres/0018_card_usage_per_statement.sql"),
    },
    Migration {
        version: 19,
        name: "orders_hot_updates",
        sqlite: include_str!("../migrations/sqlite/0019_orders_hot_updates.sql"),
        postgres: include_str!("../migrations/postgres/0019_orders_hot_updates.sql"),
    },
    Migration {
        version: 20,
        name: "ledger_rows_without_foreign_keys",
        sqlite: include_str!("../migrations/sqlite/0020_ledger_rows_without_foreign_keys.sql"),
        postgres: include_str!("../migrations/postgres/0020_ledger_rows_without_foreign_keys.sql"),
    },
    Migration {
        version: 22,
        name: "reveal_sessions",
        sqlite: include_str!("../migrations/sqlite/0022_reveal_sessions.sql"),
        postgres: include_str!("../migrations/postgres/0022_reveal_sessions.sql"),
    },
    Migration {
        version: 23,
        name: "disputes",
        sqlite: include_str!("../migrations/sqlite/0023_disputes.sql"),
        postgres: include_str!("../migrations/postgres/0023_disputes.sql"),
    },
    Migration {
        version: 24,
        name: "reports",
        sqlite: include_str!("../migrations/sqlite/0024_reports.sql"),
        postgres: include_str!("../migrations/postgres/0024_reports.sql"),
    },
    Migration {
        version: 25,
        name: "statements",
        sqlite: include_str!("../migrations/sqlite/0025_statements.sql"),
        postgres: include_str!("../migrations/postgres/0025_statements.sql"),
    },
    Migration {
        version: 26,
        name: "console_disputes",
        sqlite: include_str!("../migrations/sqlite/0026_console_disputes.sql"),
        postgres: include_str!("../migrations/postgres/0026_console_disputes.sql"),
    },
    Migration {
        version: 27,
        name: "reconciliation",
        sqlite: include_str!("../migrations/sqlite/0027_reconciliation.sql"),
        postgres: include_str!("../migrations/postgres/0027_reconciliation.sql"),
    },
];

/// Arbitrary constant naming this service's migration lock.
const PG_MIGRATION_LOCK: i64 = 0x1550_1e55;

pub(crate) async fn run(store: &Store) -> Result<(), StoreError> {
    let mut conn = store.pool().acquire().await?;
    if store.backend() == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(PG_MIGRATION_LOCK)
            .execute(&mut *conn)
            .await?;
    }
    let result = apply_pending(store, &mut conn).await;
    if store.backend() == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(PG_MIGRATION_LOCK)
            .execute(&mut *conn)
            .await?;
    }
    result
}

async fn apply_pending(store: &Store, conn: &mut sqlx::AnyConnection) -> Result<(), StoreError> {
    // Asked first: `CREATE TABLE IF NOT EXISTS` on an existing table makes PostgreSQL
    // send a notice that every command would print on stderr. (The clause stays for two
    // SQLite processes migrating a new file at once.)
    let exists = match store.backend() {
        Backend::Sqlite => {
            "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
        }
        Backend::Postgres => {
            "SELECT COUNT(*) AS n FROM pg_catalog.pg_tables \
             WHERE schemaname = current_schema() AND tablename = 'schema_migrations'"
        }
    };
    let n: i64 = sqlx::query(exists)
        .fetch_one(&mut *conn)
        .await?
        .try_get("n")?;
    if n == 0 {
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations (\
               version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
        )
        .await?;
    }
    let applied: Vec<i64> = sqlx::query("SELECT version FROM schema_migrations")
        .fetch_all(&mut *conn)
        .await?
        .iter()
        .map(|r| r.try_get::<i64, _>("version"))
        .collect::<Result<_, _>>()?;
    for m in MIGRATIONS {
        if applied.contains(&m.version) {
            continue;
        }
        let sql = match store.backend() {
            Backend::Sqlite => m.sqlite,
            Backend::Postgres => m.postgres,
        };
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        tx.execute(sqlx::raw_sql(sql)).await?;
        sqlx::query(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
        )
        .bind(m.version)
        .bind(m.name)
        .bind(issuing_domain::time::now_micros())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        tracing::info!(version = m.version, name = m.name, "applied migration");
    }
    Ok(())
}
