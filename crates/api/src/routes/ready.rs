//! `GET /ready`: the readiness probe. Plain JSON, no credentials. Ready means the
//! database answers a trivial query within `WITHIN`; `GET /health` (liveness) does not
//! touch the database at all.

use crate::pipeline::HttpError;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use issuing_app::App;
use issuing_store::{stats, Store};
use issuing_wire::{ApiError, ErrorSlug};
use std::time::Duration;

const WITHIN: Duration = Duration::from_secs(2);

pub(super) async fn ready(State(state): State<App>) -> Response {
    match check(&state.store, WITHIN).await {
        Ok(()) => Json(serde_json::json!({"success": true, "status": "ready"})).into_response(),
        Err(reason) => {
            tracing::warn!(%reason, "not ready: the database does not answer");
            HttpError(ApiError::new(
                ErrorSlug::NotReady,
                "Not ready: the database does not answer",
            ))
            .into_response()
        }
    }
}

/// Ok when the database answers a trivial query within `within`.
pub(crate) async fn check(store: &Store, within: Duration) -> Result<(), String> {
    match tokio::time::timeout(within, stats::ping(store)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("no answer within {} ms", within.as_millis())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_closed_pool_is_not_ready() {
        let path = std::env::temp_dir().join(format!(
            "issuing-ready-{}-{}.db",
            std::process::id(),
            issuing_domain::ids::new_id()
        ));
        let url = format!("sqlite://{}", path.display());
        let Ok(store) = Store::connect(&url).await else {
            panic!("cannot open {url}");
        };
        assert_eq!(check(&store, WITHIN).await, Ok(()));
        store.close().await;
        assert!(check(&store, WITHIN).await.is_err());
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }
}
