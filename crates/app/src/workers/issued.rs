//! The issued cards' writer: an issue order's step after the provider made its card
//! (the card recorded, the order saved) in batches, through the batch writers' loop
//! (`batch_writer.rs`).
//!
//! Each issue was a write transaction of its own from the order worker: on SQLite a turn
//! at the one write lock and four statements handed one by one to the driver's thread,
//! on PostgreSQL a commit of its own. Here a writer drains its queue and saves the
//! batch's orders in one statement, then records the cards of those it saved in a
//! second, commits once, and answers every worker after the commit is durable.
//!
//! - Each order's save is fenced on its worker's lease, as `orders::save_step` is: a
//!   worker that lost its lease saves nothing and its card is left for the worker that
//!   holds the order now (which repeats the provider's call with the same key and gets
//!   the same card), and it alone answers `LeaseLost`.
//! - An unexpected error fails the batch, whose steps are then saved one per
//!   transaction (the loop's rerun), so only the faulty one fails.

use crate::batch_writer::{picked, ApplyFn, BatchWriter, Queued, Shape, Wakeups};
use issuing_store::cards;
use issuing_store::group_commit::Stats;
use issuing_store::orders::{self, Lease, OrderRecord, Step};
use issuing_store::writer::BatchConn;
use issuing_store::{Store, StoreError};
use issuing_wire::ApiError;
use std::sync::Arc;

/// PostgreSQL writers; orders are spread over them by id.
const POSTGRES_STRIPES: usize = 2;

/// The provider's card for an issue order, with the order's step as its worker saves it.
pub struct IssuedCard {
    pub order: OrderRecord,
    /// The worker holding the order's lease.
    pub worker: String,
    /// Released if the order is complete with its card, else renewed for its next step.
    pub lease: Lease,
    pub card_id: String,
    pub provider_card_id: String,
    pub label: String,
    /// The card's number and code sealed under the master key; None when the provider
    /// keeps them.
    pub secrets_enc: Option<String>,
    pub expiry_month: i64,
    pub expiry_year: i64,
    pub now: i64,
}

/// The handle to the writers. Cloning shares them.
#[derive(Clone, Debug)]
pub struct IssueWriter(BatchWriter<IssuedCard, ()>);

impl IssueWriter {
    /// Starts the writers on `store`; they run until every handle is dropped.
    pub fn start(store: Store) -> IssueWriter {
        let shape = Shape::of(store.backend(), POSTGRES_STRIPES);
        let apply: ApplyFn<IssuedCard, ()> = Arc::new(|mut conn, issued, only| {
            Box::pin(async move {
                let answers = save_all(&mut conn, &picked(&issued, only)).await?;
                Ok((answers, Queued::default()))
            })
        });
        IssueWriter(BatchWriter::start(
            store,
            "card_issues",
            shape,
            apply,
            Wakeups::default(),
        ))
    }

    pub fn stats(&self) -> &Stats {
        self.0.stats()
    }

    /// Saves `issued` in its writer's next batch; answers once that batch is durable,
    /// `LeaseLost` (and nothing saved) if its worker no longer holds the order.
    pub async fn save(&self, issued: IssuedCard) -> Result<(), ApiError> {
        let order_id = issued.order.id.clone();
        self.0.submit(&order_id, issued).await
    }
}

/// Each step's answer: saved with its card, or its lease lost (nothing written for it).
async fn save_all(
    conn: &mut BatchConn<'_>,
    batch: &[&IssuedCard],
) -> Result<Vec<Result<(), ApiError>>, StoreError> {
    let steps: Vec<Step<'_>> = batch
        .iter()
        .map(|i| Step {
            order: &i.order,
            worker: &i.worker,
            lease: i.lease,
        })
        .collect();
    let datas = orders::step_datas(&steps);
    // The orders first: a card is recorded only for a step its worker could save.
    let [rows]: [_; 1] = conn
        .together(&[orders::steps_part(&steps, &datas)])
        .await?
        .try_into()
        .map_err(|_| StoreError::Corrupt("the orders' saves answered out of shape".into()))?;
    let saved = orders::saved(&steps, &rows)?;
    let marks: Vec<(&str, &str, cards::Issued<'_>)> = batch
        .iter()
        .zip(&saved)
        .filter(|(_, saved)| **saved)
        .map(|(i, _)| {
            let issued = cards::Issued {
                provider_card_id: &i.provider_card_id,
                label: &i.label,
                secrets_enc: i.secrets_enc.as_deref(),
                expiry_month: i.expiry_month,
                expiry_year: i.expiry_year,
                now: i.now,
            };
            (i.order.project_id.as_str(), i.card_id.as_str(), issued)
        })
        .collect();
    if !marks.is_empty() {
        conn.together(&[cards::issued_part(&marks)]).await?;
    }
    Ok(batch
        .iter()
        .zip(saved)
        .map(|(i, saved)| {
            if saved {
                Ok(())
            } else {
                Err(StoreError::LeaseLost(i.order.id.clone()).into())
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use issuing_domain::ids::new_id;

    fn order(id: &str, card_id: &str) -> OrderRecord {
        OrderRecord {
            id: id.into(),
            project_id: "p".into(),
            order_type: "card_issue".into(),
            status: "completed".into(),
            card_id: Some(card_id.into()),
            balance_before: None,
            balance_after: None,
            last_error: None,
            last_error_slug: None,
            data: serde_json::json!({}),
            issue_status: Some("completed".into()),
            topup_status: None,
            is_issued: Some(true),
            provider_card_status: Some("ACTIVE".into()),
            attempts: 1,
            next_attempt_at: None,
            created_at: 1,
            updated_at: 2,
            completed_at: Some(2),
            failed_at: None,
        }
    }

    fn issued(order_id: &str, card_id: &str, lease: Lease) -> IssuedCard {
        IssuedCard {
            order: order(order_id, card_id),
            worker: "w1".into(),
            lease,
            card_id: card_id.into(),
            provider_card_id: format!("prov_{card_id}"),
            label: "Card".into(),
            secrets_enc: Some("sealed".into()),
            expiry_month: 11,
            expiry_year: 2030,
            now: 2,
        }
    }

    /// A step is saved, and its card recorded, only while its worker holds the order: the
    /// step of a worker that lost its lease writes nothing (its card stays pending) and
    /// fails alone; the others of its batch are saved, a renewed lease kept.
    #[tokio::test]
    async fn a_lost_lease_saves_nothing_and_fails_alone() {
        let path = std::env::temp_dir().join(format!("issuing-issued-{}.db", new_id()));
        let store = Store::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap();
        lost_lease_on(&store).await;
        store.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }

        if std::env::var("ISSUING_TEST_POSTGRES").is_ok_and(|v| v == "off") {
            return;
        }
        let admin = std::env::var("ISSUING_TEST_POSTGRES_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
        // Named by process: test runs from several checkouts may share one server.
        let name = format!("issuing_issued_test_{}", std::process::id());
        let mut maintenance = <sqlx::PgConnection as sqlx::Connection>::connect(&admin)
            .await
            .unwrap();
        for sql in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            sqlx::query(&sql).execute(&mut maintenance).await.unwrap();
        }
        let url = match admin.rsplit_once('/') {
            Some((server, _)) => format!("{server}/{name}"),
            None => panic!("ISSUING_TEST_POSTGRES_URL names no database: {admin}"),
        };
        let store = Store::connect(&url).await.unwrap();
        lost_lease_on(&store).await;
        store.close().await;
        sqlx::query(&format!("DROP DATABASE {name} WITH (FORCE)"))
            .execute(&mut maintenance)
            .await
            .unwrap();
    }

    async fn lost_lease_on(store: &Store) {
        store.migrate().await.unwrap();
        let mut conn = store.conn().await.unwrap();
        let mut setup = vec![
            "INSERT INTO projects (id, name, created_at) VALUES ('p', 'p', 0)".to_owned(),
            "INSERT INTO users (id, project_id, external_user_id, created_at, updated_at) \
             VALUES ('u', 'p', 'ext', 0, 0)"
                .to_owned(),
            "INSERT INTO cardholders (id, project_id, user_id, external_user_id, subprovider_code, \
             registration_status, kyc_status, kyc_level, created_at, updated_at) \
             VALUES ('h', 'p', 'u', 'ext', 'sandbox', 'approved', 'approved', 'full', 0, 0)"
                .to_owned(),
        ];
        for (order, card, holder) in [("o1", "c1", "w1"), ("o2", "c2", "w2"), ("o3", "c3", "w1")] {
            setup.push(format!(
                "INSERT INTO cards (id, project_id, user_id, external_user_id, cardholder_id, \
                 product_code, subprovider_code, card_currency, status, created_at, updated_at) \
                 VALUES ('{card}', 'p', 'u', 'ext', 'h', 'virtual', 'sandbox', 'USD', 'pending', 0, 0)"
            ));
            setup.push(format!(
                "INSERT INTO orders (id, project_id, order_type, status, card_id, data, attempts, \
                 locked_until, locked_by, created_at, updated_at) VALUES ('{order}', 'p', \
                 'card_issue', 'processing', '{card}', '{{}}', 1, 99, '{holder}', 1, 1)"
            ));
        }
        for sql in &setup {
            sqlx::query(sql).execute(&mut *conn).await.unwrap();
        }
        drop(conn);

        let writer = IssueWriter::start(store.clone());
        let (o1, o2, o3) = tokio::join!(
            writer.save(issued("o1", "c1", Lease::Release)),
            writer.save(issued("o2", "c2", Lease::Release)),
            writer.save(issued("o3", "c3", Lease::Renew { until: 77 })),
        );
        assert!(o1.is_ok(), "{o1:?}");
        assert!(o2.is_err(), "o2's lease is w2's: {o2:?}");
        assert!(o3.is_ok(), "{o3:?}");

        let mut conn = store.conn().await.unwrap();
        let cards: Vec<(String, String, Option<String>)> =
            sqlx::query_as("SELECT id, status, provider_card_id FROM cards ORDER BY id")
                .fetch_all(&mut *conn)
                .await
                .unwrap();
        assert_eq!(
            cards,
            [
                ("c1".into(), "active".into(), Some("prov_c1".into())),
                ("c2".into(), "pending".into(), None),
                ("c3".into(), "active".into(), Some("prov_c3".into())),
            ]
        );
        let orders: Vec<(String, String, Option<i64>, Option<String>)> =
            sqlx::query_as("SELECT id, status, locked_until, locked_by FROM orders ORDER BY id")
                .fetch_all(&mut *conn)
                .await
                .unwrap();
        assert_eq!(
            orders,
            [
                ("o1".into(), "completed".into(), None, None),
                (
                    "o2".into(),
                    "processing".into(),
                    Some(99),
                    Some("w2".into())
                ),
                ("o3".into(), "completed".into(), Some(77), Some("w1".into())),
            ]
        );
    }
}
