//! Wakes this process's workers when another process queues work (PostgreSQL NOTIFY).

use crate::App;
use issuing_store::wakeup::{Listener, Queue};
use std::time::Duration;
use tokio::sync::watch;

const RECONNECT_DELAY: Duration = Duration::from_secs(1);

pub async fn listen(state: App, mut shutdown: watch::Receiver<bool>) {
    loop {
        match Listener::connect(&state.store).await {
            Ok(Some(mut listener)) => loop {
                tokio::select! {
                    r = listener.recv() => match r {
                        Ok(Queue::Orders) => state.orders_wakeup.notify_one(),
                        Ok(Queue::Deliveries) => state.deliveries_wakeup.notify_one(),
                        Err(e) => {
                            tracing::warn!(error = %e, "wake-up listener lost its connection; reconnecting");
                            break;
                        }
                    },
                    _ = shutdown.changed() => return,
                }
            },
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for wake-ups; workers fall back to polling")
            }
        }
        // Work queued while the listener was down is found by the workers' polling.
        state.orders_wakeup.notify_one();
        state.deliveries_wakeup.notify_one();
        tokio::select! {
            _ = tokio::time::sleep(RECONNECT_DELAY) => {}
            _ = shutdown.changed() => return,
        }
    }
}
