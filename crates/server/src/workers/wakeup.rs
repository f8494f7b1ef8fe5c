//! Wakes this process's order workers when another process creates an order.

use crate::state::AppState;
use issuing_store::wakeup::OrderListener;
use std::time::Duration;
use tokio::sync::watch;

const RECONNECT_DELAY: Duration = Duration::from_secs(1);

pub(crate) async fn listen(state: AppState, mut shutdown: watch::Receiver<bool>) {
    loop {
        match OrderListener::connect(&state.store).await {
            Ok(Some(mut listener)) => loop {
                tokio::select! {
                    r = listener.recv() => match r {
                        Ok(()) => state.orders_wakeup.notify_one(),
                        Err(e) => {
                            tracing::warn!(error = %e, "order listener lost its connection; reconnecting");
                            break;
                        }
                    },
                    _ = shutdown.changed() => return,
                }
            },
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for orders; workers fall back to polling")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(RECONNECT_DELAY) => {}
            _ = shutdown.changed() => return,
        }
    }
}
