//! wh/decision/set, wh/decision/get, wh/decision/delete (CONTRACT §11): the project's
//! one real-time decision endpoint. Its URL follows the rules of wh/subscribe (the SSRF
//! guard in production). Every change bumps the project's controls revision, so the
//! next authorization in any process sees it.

use crate::pipeline::{reply, ApiResult, Caller, RawRequest};
use axum::extract::State;
use issuing_app::webhooks::guard;
use issuing_app::App;
use issuing_app::Mode;
use issuing_domain::controls::decision::parse_settings;
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_domain::webhooks::WebhookUrl;
use issuing_store::controls::{self, DecisionEndpoint as Record};
use issuing_store::writer::AsBatch;
use issuing_store::StoreError;
use issuing_wire::api::DecisionEndpoint;
use issuing_wire::{ApiError, ErrorSlug};
use serde_json::Value;

fn view(e: Option<Record>) -> DecisionEndpoint {
    match e {
        None => DecisionEndpoint {
            configured: false,
            url: None,
            timeout_ms: None,
            on_timeout: None,
            mode: None,
            created_at: None,
            updated_at: None,
        },
        Some(e) => DecisionEndpoint {
            configured: true,
            url: Some(e.url),
            timeout_ms: u32::try_from(e.timeout_ms).ok(),
            on_timeout: Some(e.on_timeout),
            mode: Some(e.mode),
            created_at: Some(to_rfc3339(e.created_at)),
            updated_at: Some(to_rfc3339(e.updated_at)),
        },
    }
}

fn text<'a>(req: &'a Value, field: &str) -> Result<Option<&'a str>, ApiError> {
    match req.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(ApiError::validation(format!("{field} must be a string"))),
    }
}

pub(crate) async fn set(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<DecisionEndpoint> {
    let url = WebhookUrl::parse(text(&req, "url")?.unwrap_or_default())?;
    let settings = parse_settings(
        req.get("timeout_ms"),
        text(&req, "on_timeout")?,
        text(&req, "mode")?,
    )?;
    if state.config.mode == Mode::Production {
        guard::check_subscription(&url, &state.config.webhook_allowed_networks).await?;
    }
    let now = now_micros();
    let record = Record {
        project_id: caller.project_id.clone(),
        url: url.as_str().to_owned(),
        timeout_ms: i64::from(settings.timeout_ms),
        on_timeout: settings.on_timeout.as_str().to_owned(),
        mode: settings.mode.as_str().to_owned(),
        created_at: now,
        updated_at: now,
    };
    let mut tx = state.store.begin().await?;
    controls::bump_revision(&mut tx, &caller.project_id).await?;
    controls::put_endpoint(&mut tx, &record).await?;
    let saved = controls::get_endpoint(&mut tx.as_batch(), &caller.project_id).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(reply(view(saved)))
}

pub(crate) async fn get(State(state): State<App>, caller: Caller) -> ApiResult<DecisionEndpoint> {
    let mut conn = state.store.conn().await?;
    Ok(reply(view(
        controls::get_endpoint(&mut conn.as_batch(), &caller.project_id).await?,
    )))
}

pub(crate) async fn delete(
    State(state): State<App>,
    caller: Caller,
) -> ApiResult<DecisionEndpoint> {
    let mut tx = state.store.begin().await?;
    controls::bump_revision(&mut tx, &caller.project_id).await?;
    if !controls::delete_endpoint(&mut tx, &caller.project_id).await? {
        return Err(ApiError::new(
            ErrorSlug::DecisionWebhookNotFound,
            "The project has no decision webhook",
        )
        .into());
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(reply(view(None)))
}
