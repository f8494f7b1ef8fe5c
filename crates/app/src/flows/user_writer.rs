//! The users' writer: users/create in batches, one insert statement per batch, through
//! the batch writers' loop (`batch_writer.rs`).
//!
//! Inserted one autocommit statement each on a pooled connection, every new user on
//! SQLite paid the driver's thread hand-over and a turn at the one write lock (waiting
//! in SQLite's busy handler, which sleeps in steps of milliseconds, behind the batch
//! writers), and on PostgreSQL a commit of its own. Here a writer drains its queue and
//! inserts the batch's users in one statement, skipping those whose external id is
//! taken (`users::insert_many`), commits once, and answers every caller after the commit
//! is durable.
//!
//! - Two creates of one external id in one project: the first (in arrival order) makes
//!   the user, the other answers `user_already_exists`, in one batch or in two. Users are
//!   spread over writers by project and external id, so copies always meet in one
//!   writer, in arrival order.
//! - An unexpected error fails the batch, whose users are then inserted one per
//!   transaction (the loop's rerun), so only the faulty one fails.

use crate::batch_writer::{picked, ApplyFn, BatchWriter, Queued, Shape, Wakeups};
use issuing_store::group_commit::Stats;
use issuing_store::users::{self, UserRecord};
use issuing_store::writer::BatchConn;
use issuing_store::{Store, StoreError};
use issuing_wire::{ApiError, ErrorSlug};
use std::collections::HashSet;
use std::sync::Arc;

/// PostgreSQL writers; users are spread over them by project and external id.
const POSTGRES_STRIPES: usize = 2;

/// The handle to the writers. Cloning shares them.
#[derive(Clone, Debug)]
pub struct UserWriter(BatchWriter<UserRecord, ()>);

impl UserWriter {
    /// Starts the writers on `store`; they run until every handle is dropped.
    pub fn start(store: Store) -> UserWriter {
        let shape = Shape::of(store.backend(), POSTGRES_STRIPES);
        let apply: ApplyFn<UserRecord, ()> = Arc::new(|mut conn, users, only| {
            Box::pin(async move {
                let answers = insert_all(&mut conn, &picked(&users, only)).await?;
                Ok((answers, Queued::default()))
            })
        });
        UserWriter(BatchWriter::start(
            store,
            "users",
            shape,
            apply,
            Wakeups::default(),
        ))
    }

    pub fn stats(&self) -> &Stats {
        self.0.stats()
    }

    /// Inserts `user` in its writer's next batch; answers once that batch is durable,
    /// `user_already_exists` if its external id was taken in its project.
    pub async fn create(&self, user: UserRecord) -> Result<(), ApiError> {
        let key = format!("{}\u{0}{}", user.project_id, user.external_user_id);
        self.0.submit(&key, user).await
    }
}

/// Each user's answer: inserted, or its external id taken (before the batch, or by an
/// earlier user of it).
async fn insert_all(
    conn: &mut BatchConn<'_>,
    batch: &[&UserRecord],
) -> Result<Vec<Result<(), ApiError>>, StoreError> {
    let mut seen = HashSet::with_capacity(batch.len());
    let firsts: Vec<&UserRecord> = batch
        .iter()
        .copied()
        .filter(|u| seen.insert((u.project_id.as_str(), u.external_user_id.as_str())))
        .collect();
    let inserted = users::insert_many(conn, &firsts).await?;
    Ok(batch
        .iter()
        .map(|u| {
            if inserted.contains(&u.id) {
                Ok(())
            } else {
                Err(already_exists())
            }
        })
        .collect())
}

fn already_exists() -> ApiError {
    ApiError::new(ErrorSlug::UserAlreadyExists, "User already exists")
}
