//! Idempotent execution of money-moving requests (CONTRACT §5): the key of a request,
//! its claim, and the answer stored with the change it made. Where the key comes from
//! (a header or a field) is the API's business (`issuing-api`'s `pipeline/idempotency.rs`).

use issuing_domain::time::now_micros;
use issuing_store::idempotency::{self, Claim, Key};
use issuing_store::{Conn, Store, StoreError};
use issuing_wire::{ApiError, ErrorSlug};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::time::Duration;

/// Spec: a key stays valid for 7 days.
const KEY_TTL: Duration = Duration::from_secs(7 * 24 * 3600);
/// The same, in the store's microseconds.
pub const KEY_TTL_MICROS: i64 = 7 * 24 * 3600 * 1_000_000;
/// How long a claim protects a request still executing. Longer than any request may
/// take; after it a crashed request's key can be taken over.
const CLAIM_TTL: Duration = Duration::from_secs(60);

/// A claimed idempotency key, handed to the flow so it can store its response in the
/// transaction that makes its change.
#[derive(Clone)]
pub struct IdempotencyToken {
    project_id: String,
    endpoint: &'static str,
    key: String,
    hash: String,
}

impl IdempotencyToken {
    /// The key of `request` for `endpoint` (its hash leaves out the timestamp and key).
    pub fn new(project_id: &str, endpoint: &'static str, key: String, request: &Value) -> Self {
        IdempotencyToken {
            project_id: project_id.to_owned(),
            endpoint,
            key,
            hash: request_hash(request),
        }
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    /// The project and endpoint the key belongs to.
    pub fn scope(&self) -> (&str, &'static str) {
        (&self.project_id, self.endpoint)
    }

    pub fn hash(&self) -> &str {
        &self.hash
    }

    pub fn as_key(&self) -> Key<'_> {
        Key {
            project_id: &self.project_id,
            endpoint: self.endpoint,
            key: &self.key,
            request_hash: &self.hash,
        }
    }

    pub async fn complete(&self, conn: &mut Conn, body: &Value) -> Result<(), StoreError> {
        idempotency::complete(conn, &self.as_key(), 200, &body.to_string()).await
    }
}

/// The parameters that must match on a retry: the request without its timestamp and key.
fn request_hash(req: &Value) -> String {
    let mut params = req.clone();
    if let Some(obj) = params.as_object_mut() {
        obj.remove("request_timestamp");
        obj.remove("idempotency_key");
    }
    // serde_json's map keeps keys sorted, so equal objects serialise equally.
    let digest = Sha256::digest(params.to_string().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// What an idempotent request answers: the work's fresh answer, or the answer stored
/// under a key that finished before.
#[derive(Debug)]
pub enum Answer {
    Fresh(Value),
    Stored { status: i64, body: String },
}

/// Runs `work` at most once per (project, endpoint, key). A finished key answers its
/// stored response; a key still executing or used with other parameters answers 400
/// `idempotency_conflict`; a failed request releases the key for a corrected retry.
pub async fn run<F, Fut>(
    store: &Store,
    project_id: &str,
    endpoint: &'static str,
    key: String,
    req: &Value,
    work: F,
) -> Result<Answer, ApiError>
where
    F: FnOnce(IdempotencyToken) -> Fut,
    Fut: std::future::Future<Output = Result<Value, ApiError>>,
{
    let token = IdempotencyToken::new(project_id, endpoint, key, req);
    let now = now_micros();
    let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
    let claim = {
        let mut tx = store.begin().await?;
        let claim = idempotency::claim(
            &mut tx,
            &token.as_key(),
            now,
            now + micros(CLAIM_TTL),
            now + micros(KEY_TTL),
        )
        .await?;
        tx.commit().await.map_err(StoreError::from)?;
        claim
    };
    match claim {
        Claim::Acquired => {}
        Claim::Done { status, body } => return Ok(Answer::Stored { status, body }),
        refused => return Err(conflict(&refused)),
    }
    let kept = token.clone();
    match work(token).await {
        Ok(body) => Ok(Answer::Fresh(body)),
        Err(e) => {
            let mut conn = store.conn().await?;
            if let Err(release_err) = idempotency::release(&mut conn, &kept.as_key()).await {
                tracing::warn!(error = %release_err, "could not release idempotency key; it expires on its own");
            }
            Err(e)
        }
    }
}

/// Why a key that is not free refuses a request: still executing, or other parameters.
pub fn conflict(claim: &Claim) -> ApiError {
    let message = match claim {
        Claim::ParametersDiffer => "This idempotency key was used with different parameters",
        Claim::Acquired | Claim::InProgress | Claim::Done { .. } => {
            "A request with this idempotency key is still in progress"
        }
    };
    ApiError::new(ErrorSlug::IdempotencyConflict, message)
}
