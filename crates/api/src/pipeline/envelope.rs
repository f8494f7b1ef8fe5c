//! The envelope layer: authenticates the API key, opens the sealed request, enforces the
//! timestamp window and replay guard, and seals whatever the router answers.

use super::extract::{Caller, Plaintext};
use super::key_cache::CachedKey;
use super::reply::error_response;
use crate::replay::{Admission, Ticket};
use crate::ApiState;
use axum::body::Body;
use axum::extract::{OriginalUri, Request, State};
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use issuing_domain::time::now_micros;
use issuing_envelope::Key;
use issuing_store::projects;
use issuing_wire::{ApiError, ErrorSlug};
use serde_json::Value;
use std::sync::Arc;
use std::time::Instant;

/// Our own responses are small; the bound only guards against a handler bug.
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// Endpoints that never write (paths as the router sees them, inside `/api/v2`). Any
/// other request is treated as one that may write.
const READ_ONLY_PATHS: &[&str] = &[
    "/system/health",
    "/system/time",
    "/project/balance",
    "/project/txs",
    "/users/get",
    "/users/find",
    "/cardholders/get",
    "/cardholders/find",
    "/cards/products",
    "/cards/get",
    "/cards/find",
    "/cards/balance",
    "/cards/txs",
    "/orders/check",
    "/wh/subscriptions",
    "/wh/deliveries",
];

/// Paths that do not need `request_timestamp` (the client calls it to learn the time).
const UNTIMED_PATHS: &[&str] = &["/api/v2/system/time"];

pub(crate) async fn envelope_layer(
    State(state): State<ApiState>,
    req: Request,
    next: Next,
) -> Response {
    match open_request(&state, req).await {
        Ok((req, key, guard_row)) => {
            // Text rules for the whole request (no control characters), answered sealed
            // like any validation error: the caller has proved it holds the key.
            let refused = req
                .extensions()
                .get::<Plaintext>()
                .and_then(|p| super::text::check_request(&p.0).err());
            // Nothing is answered before what it wrote, or read, is durable (a no-op on
            // PostgreSQL; on SQLite the shared log fsync, see issuing_store's wal_sync).
            // Reads wait only while a write may not be durable yet.
            let path = req.uri().path();
            let read_only = READ_ONLY_PATHS.contains(&path.strip_prefix("/api/v2").unwrap_or(path));
            let writing = if read_only {
                None
            } else {
                state.app.store.writing()
            };
            let response = match refused {
                Some(e) => error_response(&e),
                None => next.run(req).await,
            };
            let mut synced = if read_only {
                state.app.store.sync_read().await
            } else {
                state.app.store.sync().await
            };
            drop(writing);
            // The replay guard's row too (PostgreSQL: it committed without waiting for
            // the log flush, see replay/durable.rs).
            if synced.is_ok() {
                synced = state.replay.durable(guard_row).await;
            }
            let response = match synced {
                Ok(()) => response,
                // The database went away before the answer could be made durable: the
                // client retries (with the same idempotency key) once it is back.
                Err(e) if e.is_unavailable() || state.app.store.availability().unavailable => {
                    tracing::warn!(error = %e, "the answer could not be made durable: the database is unavailable");
                    error_response(&ApiError::unavailable())
                }
                Err(e) => {
                    tracing::error!(error = %e, "the database log could not be synced");
                    error_response(&ApiError::internal())
                }
            };
            seal_response(&key, response).await
        }
        Err(e) => error_response(&e),
    }
}

/// The largest body `path` accepts: the server's limit, but for evidence files
/// (CONTRACT §15: 4 MiB decoded, bodies up to 8 MiB on that one endpoint).
fn body_limit(state: &ApiState, path: &str) -> usize {
    if path.ends_with("/disputes/evidence/add") {
        state
            .app
            .config
            .max_body_bytes
            .max(issuing_app::disputes::evidence::MAX_BODY_BYTES)
    } else {
        state.app.config.max_body_bytes
    }
}

/// Whether reading the body failed because it exceeded the limit.
fn is_length_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.to_string().contains("length limit exceeded") {
            return true;
        }
        source = s.source();
    }
    false
}

fn plain(slug: ErrorSlug, message: &str) -> ApiError {
    ApiError::new(slug, message)
}

/// The opened request, its key, and the ticket of its replay guard row if the answer
/// must wait for that row to be durable.
async fn open_request(
    state: &ApiState,
    req: Request,
) -> Result<(Request, Key, Option<Ticket>), ApiError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let path = req
        .extensions()
        .get::<OriginalUri>()
        .map(|u| u.path().to_owned())
        .unwrap_or_else(|| req.uri().path().to_owned());
    let limit = body_limit(state, &path);
    if declared.is_some_and(|n| n > limit) {
        return Err(plain(ErrorSlug::PayloadTooLarge, "Request body too large"));
    }
    let api_key = req
        .headers()
        .get("API-KEY")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .ok_or_else(|| plain(ErrorSlug::ApiKeyNotFound, "API key not found"))?
        .to_owned();

    let cached = lookup_key(state, &api_key).await?;
    if !cached.active {
        return Err(plain(
            ErrorSlug::ApiKeyInvalid,
            "You do not have access to this API.",
        ));
    }
    let key = cached.key;

    let (mut parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|e| {
        // Over the limit is 413; a body that breaks off or is malformed (bad
        // chunked encoding) is the client's error too, but a 400.
        if is_length_limit(&e) {
            plain(ErrorSlug::PayloadTooLarge, "Request body too large")
        } else {
            plain(ErrorSlug::InvalidRequest, "Malformed request body")
        }
    })?;
    let missing = || {
        plain(
            ErrorSlug::EncryptedPayloadMissing,
            "Encrypted payload not found",
        )
    };
    let malformed = || {
        plain(
            ErrorSlug::DecryptionFailed,
            "Invalid encrypted payload format",
        )
    };
    let outer: Value = serde_json::from_slice(&bytes).map_err(|_| missing())?;
    let sealed = match outer.get("encrypted") {
        None | Some(Value::Null) => return Err(missing()),
        Some(Value::String(s)) => s,
        Some(_) => return Err(malformed()),
    };
    let plaintext = issuing_envelope::open(&key, sealed).map_err(|e| match e {
        // Well-formed but not sealed with this key's secret (or altered on the way):
        // the usual cause is a wrong or outdated API secret, so say so.
        issuing_envelope::OpenError::Authentication => plain(
            ErrorSlug::DecryptionFailed,
            "The payload could not be decrypted with this API key's secret \
             (wrong secret, or the body was altered)",
        ),
        other => ApiError::new(
            ErrorSlug::DecryptionFailed,
            format!("Invalid encrypted payload format: {other}"),
        ),
    })?;
    let not_object = || {
        plain(
            ErrorSlug::DecryptionFailed,
            "The decrypted payload is not a JSON object",
        )
    };
    let request: Value = serde_json::from_slice(&plaintext).map_err(|_| not_object())?;
    if !request.is_object() {
        return Err(not_object());
    }

    let guard_row = if UNTIMED_PATHS.contains(&path.as_str()) {
        None
    } else {
        check_timestamp(state, &api_key, &path, &request).await?
    };

    parts.extensions.insert(Caller {
        project_id: cached.project_id,
    });
    parts.extensions.insert(Plaintext(Arc::new(request)));
    Ok((Request::from_parts(parts, Body::empty()), key, guard_row))
}

/// The project and unsealed key behind `api_key`, from the cache or the database.
async fn lookup_key(state: &ApiState, api_key: &str) -> Result<CachedKey, ApiError> {
    let now = Instant::now();
    if let Some(hit) = state.keys.get(api_key, now) {
        return Ok(hit);
    }
    let record = {
        let mut conn = state.app.store.conn().await?;
        projects::find_api_key(&mut conn, api_key).await?
    }
    .ok_or_else(|| plain(ErrorSlug::ApiKeyNotFound, "API key not found"))?;
    let secret = state.app.master.open_secret(&record.secret_enc).ok_or_else(|| {
        tracing::error!(project_id = %record.project_id, "API secret cannot be decrypted with the master key");
        plain(
            ErrorSlug::ApiKeyInvalid,
            "You do not have access to this API.",
        )
    })?;
    let cached = CachedKey {
        project_id: record.project_id,
        active: record.project_status == "active",
        key: Key::from_secret(secret.expose()),
    };
    state.keys.put(api_key, cached.clone(), now);
    Ok(cached)
}

/// Says how far off the timestamp is, and names the likely unit mistake: a timestamp in
/// milliseconds or seconds is 10^3 or 10^6 times too small.
fn out_of_window_message(ts: i64, now: i64, window: i64) -> String {
    let off_secs = (ts.saturating_sub(now)) as f64 / 1e6;
    let mut msg = format!(
        "Request timestamp outside allowed window: server time is {now} (microseconds since \
         the epoch), request_timestamp is {ts}, {off_secs:.1} s away; the window is ±{} s",
        window / 1_000_000
    );
    let near = |scaled: i64| scaled.abs_diff(now) <= window.unsigned_abs();
    if near(ts.saturating_mul(1_000)) {
        msg.push_str(". request_timestamp looks like milliseconds: send microseconds");
    } else if near(ts.saturating_mul(1_000_000)) {
        msg.push_str(". request_timestamp looks like seconds: send microseconds");
    } else {
        msg.push_str(". Check the clock, or ask system/time for the server's time");
    }
    msg
}

async fn check_timestamp(
    state: &ApiState,
    api_key: &str,
    path: &str,
    request: &Value,
) -> Result<Option<Ticket>, ApiError> {
    let ts = match request.get("request_timestamp") {
        None | Some(Value::Null) => {
            return Err(plain(
                ErrorSlug::RequestTimestampMissing,
                "Request timestamp not found in encrypted payload",
            ))
        }
        Some(Value::Number(n)) => n.as_i64(),
        Some(Value::String(s)) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
            s.parse().ok()
        }
        Some(_) => None,
    }
    .ok_or_else(|| {
        plain(
            ErrorSlug::RequestTimestampInvalid,
            "Invalid timestamp format",
        )
    })?;

    let window = i64::try_from(state.app.config.timestamp_window.as_micros()).unwrap_or(i64::MAX);
    let now = now_micros();
    if ts.abs_diff(now) > window.unsigned_abs() {
        return Err(ApiError::new(
            ErrorSlug::RequestTimestampOutOfWindow,
            out_of_window_message(ts, now, window),
        ));
    }
    // Remembered until the timestamp itself leaves the window: after that the window
    // check refuses the copy, so the guard row is no longer needed.
    let expires_at = ts.saturating_add(window);
    let (admission, guard_row) = state.replay.admit(api_key, path, ts, expires_at).await?;
    match admission {
        Admission::Fresh => Ok(guard_row),
        Admission::Duplicate => Err(plain(
            ErrorSlug::DuplicateRequest,
            "Duplicate request detected",
        )),
        Admission::BeforeFence(fence) => Err(ApiError::new(
            ErrorSlug::RequestTimestampOutOfWindow,
            format!(
                "Request timestamp {ts} is older than this server's restart fence {fence}: \
                 requests signed before the restart are refused; sign again with a fresh \
                 request_timestamp"
            ),
        )),
        Admission::Full => Err(plain(
            ErrorSlug::RateLimited,
            "Too many requests in the replay window; retry shortly",
        )),
    }
}

async fn seal_response(key: &Key, response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let bytes = match axum::body::to_bytes(body, MAX_RESPONSE_BYTES).await {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(error = %e, "response body could not be read for sealing");
            let (p, b) = error_response(&ApiError::internal()).into_parts();
            parts = p;
            axum::body::to_bytes(b, MAX_RESPONSE_BYTES)
                .await
                .unwrap_or_default()
        }
    };
    let sealed = serde_json::json!({ "encrypted": issuing_envelope::seal(key, &bytes) });
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(sealed.to_string()))
}

#[cfg(test)]
mod tests {
    use super::out_of_window_message;

    #[test]
    fn names_the_unit_mistake() {
        let now = 1_795_292_237_930_214;
        let w = 30_000_000;
        assert!(out_of_window_message(now / 1_000, now, w).contains("milliseconds"));
        assert!(out_of_window_message(now / 1_000_000, now, w).contains("seconds"));
        let m = out_of_window_message(now - 120_000_000, now, w);
        assert!(
            m.contains("-120.0 s away") && m.contains("system/time"),
            "{m}"
        );
    }
}
