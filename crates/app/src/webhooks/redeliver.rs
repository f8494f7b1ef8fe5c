//! Queueing a delivery again, with the same id and a fresh retry window: what
//! `wh/redeliver` and the console's `Redeliver` button both do.

use crate::App;
use issuing_domain::time::now_micros;
use issuing_store::deliveries::{self, DeliveryRecord};
use issuing_store::wakeup::{announce, Queue};
use issuing_store::writer::AsBatch;
use issuing_store::StoreError;
use issuing_wire::{ApiError, ErrorSlug};

/// Sets one delivery of the project pending again; answers it as it is now.
pub async fn one(
    state: &App,
    project_id: &str,
    delivery_id: &str,
) -> Result<DeliveryRecord, ApiError> {
    let now = now_micros();
    let mut tx = state.store.begin().await?;
    if deliveries::get(&mut tx, project_id, delivery_id)
        .await?
        .is_none()
    {
        return Err(ApiError::new(
            ErrorSlug::DeliveryNotFound,
            "Delivery not found",
        ));
    }
    if !deliveries::redeliver(&mut tx, project_id, delivery_id, now).await? {
        return Err(ApiError::new(
            ErrorSlug::SubscriptionInactive,
            "The delivery's subscription is inactive",
        ));
    }
    let d = deliveries::get(&mut tx, project_id, delivery_id)
        .await?
        .ok_or_else(ApiError::internal)?;
    announce(&mut tx.as_batch(), Queue::Deliveries).await?;
    tx.commit().await.map_err(StoreError::from)?;
    state.deliveries_wakeup.notify_one();
    Ok(d)
}

/// Sets the project's deliveries that failed since `since` pending again (at most
/// `limit`, optionally of one subscription); answers how many.
pub async fn failed_since(
    state: &App,
    project_id: &str,
    since: i64,
    subscription_id: Option<&str>,
    limit: i64,
) -> Result<u64, ApiError> {
    let now = now_micros();
    let mut tx = state.store.begin().await?;
    let queued =
        deliveries::redeliver_failed_since(&mut tx, project_id, since, subscription_id, limit, now)
            .await?;
    if queued > 0 {
        announce(&mut tx.as_batch(), Queue::Deliveries).await?;
    }
    tx.commit().await.map_err(StoreError::from)?;
    state.deliveries_wakeup.notify_one();
    Ok(queued)
}
