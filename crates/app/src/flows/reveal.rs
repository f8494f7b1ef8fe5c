//! Reveal sessions (CONTRACT §16): a card's details shown to the cardholder's browser
//! without passing through the project's server.
//!
//! - `create` (`cards/reveal/create`): for a card whose details we can read (the
//!   sandbox, a Lithic program with PAN access), a session of our own page: 32 random
//!   bytes of token, of which the database keeps the hash. For a Lithic program without
//!   PAN access, an embed session at Lithic: its URLs are the answer and no card data
//!   passes through us. Either way the session is audited.
//! - `view` (`GET /reveal/{token}`): judged first (unknown 404; used or expired 410;
//!   another origin asking 403, left unused), then used by one conditional UPDATE in the
//!   transaction that writes the `card.details_viewed` event and the audit row; only
//!   after that commits are the details opened, for that one answer.

use super::{card_for_user, details};
use crate::App;
use issuing_domain::ids::new_id;
use issuing_domain::reveal as rules;
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_store::audit::{self, NewAudit};
use issuing_store::cards::{self, CardRecord};
use issuing_store::events::{self, NewEvent};
use issuing_store::reveal_sessions::{self as store, NewRevealSession};
use issuing_wire::api::{CardsRevealCreate, RevealSession};
use issuing_wire::{ApiError, ErrorSlug};
use serde_json::json;

/// The audit log's actor for what a project does through the API.
pub const API_ACTOR: &str = "api";
/// The audit log's actor for what a cardholder's browser does.
pub const CARDHOLDER_ACTOR: &str = "cardholder";
pub use rules::VIEWED_EVENT;

/// Card statuses whose details may be shown.
fn showable(status: &str) -> bool {
    matches!(status, "active" | "frozen")
}

fn not_showable(card: &CardRecord) -> ApiError {
    ApiError::new(
        ErrorSlug::CardNotActive,
        format!("Card is {}; its details cannot be shown", card.status),
    )
}

/// `cards/reveal/create` for the caller's project.
pub async fn create(
    state: &App,
    project_id: &str,
    r: &CardsRevealCreate,
) -> Result<RevealSession, ApiError> {
    let sandbox = state.config.mode == crate::Mode::Sandbox;
    let card = {
        let mut conn = state.store.conn().await?;
        card_for_user(
            &mut conn,
            project_id,
            Some(&r.card_id),
            r.external_user_id.as_deref(),
        )
        .await?
    };
    let target_origin = rules::target_origin(&r.target_origin, sandbox)?;
    let ttl = rules::ttl_seconds(r.ttl_seconds)?;
    if !showable(&card.status) {
        return Err(not_showable(&card));
    }
    let plaintext = state
        .catalog()
        .subprovider(&card.subprovider_code)
        .is_some_and(|s| s.plaintext_details);
    let lithic = state.providers.lithic(&card.subprovider_code);
    let now = now_micros();
    let expires_at = now + ttl * 1_000_000;
    let id = new_id();
    let (token_hash, kind, url, urls) = match (plaintext, lithic) {
        (true, _) => {
            let issued = match lithic {
                Some(_) => card.provider_card_id.is_some(),
                None => card.secrets_enc.is_some(),
            };
            if !issued {
                return Err(not_showable(&card));
            }
            let (token, hash) = rules::new_token();
            let base = state
                .config
                .public_url
                .as_deref()
                .unwrap_or("")
                .trim_end_matches('/');
            (
                Some(hash),
                store::PAGE,
                format!("{base}/reveal/{token}"),
                None,
            )
        }
        (false, Some(lithic)) => {
            let token = card
                .provider_card_id
                .as_deref()
                .ok_or_else(|| not_showable(&card))?;
            let urls = crate::provider::bounded(lithic.embed_session(
                token,
                &target_origin,
                expires_at / 1_000_000,
            ))
            .await
            .map_err(|e| crate::provider::failed_call(&card.id, "embed session", &e))?;
            (None, store::LITHIC_EMBED, urls.pan.clone(), Some(urls))
        }
        (false, None) => {
            return Err(ApiError::new(
                ErrorSlug::CardDetailsPlaintextUnavailable,
                "The card's provider does not expose card details",
            ))
        }
    };
    let mut tx = state.store.begin().await?;
    store::insert(
        &mut tx,
        &NewRevealSession {
            id: &id,
            project_id,
            card_id: &card.id,
            token_hash: token_hash.as_deref(),
            kind,
            target_origin: &target_origin,
            created_at: now,
            expires_at,
        },
    )
    .await?;
    audit::append(
        &mut tx,
        &NewAudit {
            at: now,
            actor: API_ACTOR,
            action: "card.reveal_session.create",
            project_id: Some(project_id),
            targets: &json!({
                "card_id": card.id, "reveal_id": id, "target_origin": target_origin, "kind": kind,
            }),
            result: &format!("created, expires {}", to_rfc3339(expires_at)),
        },
    )
    .await?;
    tx.commit().await.map_err(issuing_store::StoreError::from)?;
    Ok(RevealSession {
        reveal_id: id,
        url,
        expires_at: to_rfc3339(expires_at),
        urls,
    })
}

/// What a GET of a reveal page comes to.
pub enum View {
    /// No session has this token (404).
    NotFound,
    /// Used, expired, or its card can no longer be shown (410); the origin allowed to
    /// frame the answer.
    Gone { target_origin: String },
    /// Another origin asks (403); the session stays unused.
    Forbidden,
    /// The details, for this one answer (200).
    Shown(Shown),
}

/// A card's details for one page. Debug never prints them.
pub struct Shown {
    pub target_origin: String,
    /// Grouped by four.
    pub pan: String,
    /// `MM/YY`.
    pub exp: String,
    pub cvv: String,
}

impl std::fmt::Debug for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shown")
            .field("target_origin", &self.target_origin)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for View {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            View::NotFound => f.write_str("NotFound"),
            View::Gone { target_origin } => write!(f, "Gone({target_origin})"),
            View::Forbidden => f.write_str("Forbidden"),
            View::Shown(s) => write!(f, "Shown({s:?})"),
        }
    }
}

/// A GET of `/reveal/{token}` with the request's `Origin` and `Referer`.
pub async fn view(
    state: &App,
    token: &str,
    origin: Option<&str>,
    referer: Option<&str>,
) -> Result<View, ApiError> {
    if !rules::plausible_token(token) {
        return Ok(View::NotFound);
    }
    let hash = rules::token_hash(token);
    let now = now_micros();
    let session = {
        let mut conn = state.store.conn().await?;
        store::by_token(&mut conn, &hash).await?
    };
    let Some(session) = session else {
        return Ok(View::NotFound);
    };
    let gone = || View::Gone {
        target_origin: session.target_origin.clone(),
    };
    if session.used_at.is_some() || session.expires_at <= now {
        return Ok(gone());
    }
    if !rules::request_allowed(&session.target_origin, origin, referer) {
        tracing::info!(reveal_id = %session.id, "reveal page asked for by another origin: refused, left unused");
        return Ok(View::Forbidden);
    }

    let mut tx = state.store.begin().await?;
    // Another request (here or in another process) may have used it since the read.
    let Some(used) = store::consume(&mut tx, &hash, now).await? else {
        return Ok(gone());
    };
    let card = cards::get(&mut tx, &used.project_id, &used.card_id).await?;
    let Some(card) = card.filter(|c| showable(&c.status)) else {
        // Dropping the transaction leaves the session unused; its card shows nothing.
        return Ok(gone());
    };
    let viewed_at = to_rfc3339(now);
    events::insert(
        &mut tx,
        &NewEvent {
            project_id: &used.project_id,
            event_type: VIEWED_EVENT,
            card_id: Some(&card.id),
            order_id: None,
            payload: &json!({ "card_id": card.id, "reveal_id": used.id, "viewed_at": viewed_at }),
            now,
        },
    )
    .await?;
    audit::append(
        &mut tx,
        &NewAudit {
            at: now,
            actor: CARDHOLDER_ACTOR,
            action: VIEWED_EVENT,
            project_id: Some(&used.project_id),
            targets: &json!({ "card_id": card.id, "reveal_id": used.id }),
            result: "viewed",
        },
    )
    .await?;
    tx.commit().await.map_err(issuing_store::StoreError::from)?;
    state.deliveries_wakeup.notify_one();

    // Opened only now, for this answer; a Lithic card is read from Lithic.
    let opened = details::open(state, &card).await?;
    let text = |v: &serde_json::Value| v.as_str().map(str::to_owned).unwrap_or_default();
    let exp = match (card.expiry_month, card.expiry_year) {
        (Some(m), Some(y)) => rules::expiry(m, y),
        _ => String::new(),
    };
    Ok(View::Shown(Shown {
        target_origin: used.target_origin,
        pan: rules::grouped_pan(&text(&opened.card_number)),
        exp,
        cvv: text(&opened.cvv),
    }))
}
