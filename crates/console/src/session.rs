//! Signing in and out, sessions, the CSRF token and roles.
//!
//! - The cookie holds 32 random bytes; the database only their SHA-256, with the
//!   session's CSRF token and its end (12 hours after login). A session ends at logout,
//!   at its end, after `idle_timeout` (15 minutes) without a request of its operator (a
//!   live region's poll is not one), and when its operator is disabled or given a new
//!   password.
//! - 10 failed logins for one email within 10 minutes lock that email for `lockout`
//!   (30 minutes, or until `issuing admin operator unlock`), whether or not an operator
//!   has it (so a lockout says nothing about accounts). 5 failed logins from one client
//!   address within 10 minutes block that address for 10 minutes: one address alone
//!   never reaches an email's lockout, so it cannot keep operators out. Every failure is
//!   audited and logged with the email and the address.
//! - Every POST needs the session's CSRF token (`Act`, `Signed`); viewers may not act.

use super::operators::{self, Role, MAX_EMAIL_LEN, MAX_PASSWORD_LEN};
use super::security::ClientAddress;
use super::view::{self, render_status, ConsoleError, Ctx};
use super::{see_other, Console};
use askama::Template;
use axum::extract::{FromRequest, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Form};
use issuing_domain::time::now_micros;
use issuing_store::audit::{self, NewAudit};
use issuing_store::console::Scope;
use issuing_store::operators::{self as store_ops, FailuresOf};
use issuing_store::StoreError;
use rand::RngCore;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::sync::OnceLock;
use tokio::sync::watch;

const COOKIE: &str = "issuing_console";
const SESSION_MICROS: i64 = 12 * 3600 * 1_000_000;
/// CONTRACT §12 and PCI DSS 8.3.4: at most 10 failures (within 10 minutes) per email.
const EMAIL_FAILURES: i64 = 10;
const FAILURE_WINDOW: i64 = 10 * 60 * 1_000_000;
/// Per client address: fewer failures than an email's lockout needs, and a block at
/// least as long as the email's window, so one address alone never locks an email.
const ADDRESS_RULE: store_ops::Lockout = store_ops::Lockout {
    max_failures: 5,
    window: FAILURE_WINDOW,
    lock: FAILURE_WINDOW,
};
const _: () = assert!(ADDRESS_RULE.max_failures * 2 <= EMAIL_FAILURES);
const _: () = assert!(ADDRESS_RULE.lock >= FAILURE_WINDOW);
/// Rows the purge deletes per pass.
const PURGE_BATCH: i64 = 1000;
const FLASH_OK: &str = "ok:";
const FLASH_ERROR: &str = "error:";

/// The signed-in operator of a request.
#[derive(Debug, Clone)]
pub(crate) struct Op {
    pub email: String,
    pub role: Role,
    pub scope: Scope,
    csrf: String,
    token_hash: String,
    flash: Option<String>,
}

impl Op {
    pub fn ctx(&self, console: &Console, nav: &'static str) -> Ctx {
        let (flash, flash_error) = match self.flash.as_deref() {
            Some(f) if f.starts_with(FLASH_ERROR) => {
                (Some(f[FLASH_ERROR.len()..].to_owned()), true)
            }
            Some(f) => (Some(f.trim_start_matches(FLASH_OK).to_owned()), false),
            None => (None, false),
        };
        Ctx {
            email: self.email.clone(),
            role: self.role.as_str(),
            csrf: self.csrf.clone(),
            flash,
            flash_error,
            can_act: self.role != Role::Viewer,
            is_admin: self.role == Role::Admin,
            sandbox: console.sandbox(),
            nav,
        }
    }

    /// A project outside a viewer's scope does not exist for it.
    pub fn may_see(&self, project_id: &str) -> Result<(), ConsoleError> {
        if self.scope.allows(project_id) {
            Ok(())
        } else {
            Err(ConsoleError::NotFound)
        }
    }

    /// Shows `message` once on the next page.
    pub async fn flash(
        &self,
        console: &Console,
        result: &Result<String, String>,
    ) -> Result<(), StoreError> {
        let text = match result {
            Ok(m) => format!("{FLASH_OK}{m}"),
            Err(m) => format!("{FLASH_ERROR}{m}"),
        };
        let mut conn = console.app.store.conn().await?;
        store_ops::set_flash(&mut conn, &self.token_hash, Some(&text)).await
    }
}

/// An email's lockout rule, its lock as long as the operator set (default 30 minutes).
pub(crate) fn email_rule(console: &Console) -> store_ops::Lockout {
    store_ops::Lockout {
        max_failures: EMAIL_FAILURES,
        window: FAILURE_WINDOW,
        lock: micros(console.app.config.console_security.lockout),
    }
}

fn micros(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// The idle timeout in microseconds.
fn idle(console: &Console) -> i64 {
    micros(console.app.config.console_security.idle_timeout)
}

/// How stale a session's `last_seen_at` may be before a request writes it again. A
/// write on every page view halved the console's fast pages (one more statement and a
/// commit per view, the bench's `console:` rows). Noting activity late can only end a
/// session early, never late: it ends between `idle - touch_every` and `idle` after its
/// last request, which stays within PCI DSS 8.2.8's "15 minutes or less". A hundredth
/// of the idle time, at most 10 s (9 s at the default 15 minutes).
fn touch_every(console: &Console) -> i64 {
    (idle(console) / 100).min(10_000_000)
}

/// A live region's refresh (htmx's GET with `HX-Request`): it does not keep a session
/// alive, or an open tab would never go idle.
fn is_poll(req: &Request) -> bool {
    req.method() == axum::http::Method::GET && req.headers().contains_key("hx-request")
}

fn random_token() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 32];
    rand::thread_rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Compares secrets in time that does not depend on where they differ.
fn same_secret(a: &str, b: &str) -> bool {
    let (a, b) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

fn session_cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE && !value.is_empty()).then_some(value)
        })
}

fn set_cookie(console: &Console, value: &str, max_age: i64) -> HeaderValue {
    // Secure in production, where the console is reached over TLS (or a tunnel to
    // loopback, which browsers treat as secure); the sandbox runs on plain loopback.
    let secure = if console.sandbox() { "" } else { "; Secure" };
    let text =
        format!("{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}");
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Every signed-in route: the session's operator, or a 303 to the login page.
pub(crate) async fn require(
    State(console): State<Console>,
    mut req: Request,
    next: Next,
) -> Response {
    let hash = session_cookie(req.headers()).map(token_hash);
    let activity = !is_poll(&req);
    let found = match hash {
        Some(h) => lookup(&console, &h, activity).await,
        None => Ok(None),
    };
    match found {
        Ok(Some(op)) => {
            req.extensions_mut().insert(op);
            next.run(req).await
        }
        Ok(None) => see_other("/console/login"),
        Err(e) => ConsoleError::from(e).into_response(),
    }
}

/// The live session of a token hash; `activity` (a request of the operator's, not a
/// poll) restarts its idle time.
async fn lookup(console: &Console, hash: &str, activity: bool) -> Result<Option<Op>, StoreError> {
    let now = now_micros();
    let mut conn = console.app.store.conn().await?;
    let Some(s) = store_ops::session(&mut conn, hash, now, now - idle(console)).await? else {
        return Ok(None);
    };
    if activity && now - s.last_seen_at >= touch_every(console) {
        store_ops::touch_session(&mut conn, hash, now).await?;
    }
    let Some(role) = Role::parse(&s.operator.role) else {
        tracing::error!(email = %s.operator.email, "console operator has an unknown role");
        return Ok(None);
    };
    if s.flash.is_some() {
        store_ops::set_flash(&mut conn, hash, None).await?;
    }
    Ok(Some(Op {
        scope: match role {
            Role::Viewer => Scope::of(&s.operator.projects),
            Role::Admin | Role::Operator => Scope::All,
        },
        email: s.operator.email,
        role,
        csrf: s.csrf_token,
        token_hash: s.token_hash,
        flash: s.flash,
    }))
}

#[derive(Deserialize)]
struct Posted<T> {
    #[serde(default)]
    csrf: String,
    #[serde(flatten)]
    fields: T,
}

/// A signed-in POST form whose CSRF token matches the session's.
pub(crate) struct Signed<T>(pub Op, pub T);

impl<T: DeserializeOwned + Send> FromRequest<Console> for Signed<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &Console) -> Result<Self, Response> {
        let op = req
            .extensions()
            .get::<Op>()
            .cloned()
            .ok_or_else(|| see_other("/console/login"))?;
        let Form(posted) = Form::<Posted<T>>::from_request(req, state)
            .await
            .map_err(|e| ConsoleError::BadRequest(e.body_text()).into_response())?;
        if !same_secret(&posted.csrf, &op.csrf) {
            return Err(ConsoleError::Forbidden(
                "The form's token does not match your session; reload the page and try again.",
            )
            .into_response());
        }
        Ok(Signed(op, posted.fields))
    }
}

/// A `Signed` form from an operator or admin: viewers change nothing (403).
pub(crate) struct Act<T>(pub Op, pub T);

impl<T: DeserializeOwned + Send> FromRequest<Console> for Act<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &Console) -> Result<Self, Response> {
        if req
            .extensions()
            .get::<Op>()
            .is_some_and(|op| op.role == Role::Viewer)
        {
            return Err(
                ConsoleError::Forbidden("Viewers can look but not change anything.")
                    .into_response(),
            );
        }
        let Signed(op, fields) = Signed::<T>::from_request(req, state).await?;
        Ok(Act(op, fields))
    }
}

/// A form with no fields but the token.
#[derive(Deserialize)]
pub(crate) struct NoFields {}

#[derive(Template)]
#[template(path = "console/login.html")]
struct LoginPage {
    email: String,
    error: Option<String>,
}

pub(crate) async fn login_form() -> Response {
    render_status(
        StatusCode::OK,
        &LoginPage {
            email: String::new(),
            error: None,
        },
    )
}

#[derive(Deserialize)]
pub(crate) struct LoginForm {
    #[serde(default)]
    email: String,
    #[serde(default)]
    password: String,
}

fn refused(email: &str, status: StatusCode, error: String) -> Response {
    render_status(
        status,
        &LoginPage {
            email: email.chars().take(MAX_EMAIL_LEN).collect(),
            error: Some(error),
        },
    )
}

/// A hash no password matches, checked when the email has no operator so that a wrong
/// email costs as long as a wrong password.
fn decoy_hash() -> &'static str {
    static DECOY: OnceLock<String> = OnceLock::new();
    DECOY.get_or_init(|| {
        operators::hash_password(&operators::generate_password()).unwrap_or_default()
    })
}

pub(crate) async fn login(
    State(console): State<Console>,
    Extension(client): Extension<ClientAddress>,
    Form(form): Form<LoginForm>,
) -> Response {
    match try_login(&console, &client.0, form).await {
        Ok(r) => r,
        Err(e) => ConsoleError::from(e).into_response(),
    }
}

async fn try_login(
    console: &Console,
    address: &str,
    form: LoginForm,
) -> Result<Response, StoreError> {
    const WRONG: &str = "Wrong email or password.";
    let now = now_micros();
    let store = &console.app.store;
    let blocked = {
        let mut conn = store.conn().await?;
        store_ops::blocked_until(&mut conn, FailuresOf::Address, address, now).await?
    };
    if let Some(until) = blocked {
        tracing::warn!(
            address,
            "console: login refused, too many failures from this address"
        );
        return Ok(address_blocked(&form.email, until));
    }
    let email = match operators::normalize_email(&form.email) {
        Ok(email) if form.password.len() <= MAX_PASSWORD_LEN => email,
        // Not an email (or an absurd password): a failure of the address alone.
        _ => {
            let mut tx = store.begin().await?;
            store_ops::count_failure(&mut tx, FailuresOf::Address, address, now, ADDRESS_RULE)
                .await?;
            tx.commit().await.map_err(StoreError::from)?;
            tracing::warn!(address, "console: failed login (not an email)");
            return Ok(refused(&form.email, StatusCode::UNAUTHORIZED, WRONG.into()));
        }
    };
    let (locked, operator) = {
        let mut conn = store.conn().await?;
        (
            store_ops::locked_until(&mut conn, &email, now).await?,
            store_ops::get_by_email(&mut conn, &email)
                .await?
                .filter(|o| o.status == store_ops::ACTIVE),
        )
    };
    if let Some(until) = locked {
        tracing::warn!(email = %email, address, "console: login refused, the email is locked");
        return Ok(locked_out(&email, until));
    }
    let hash = operator
        .as_ref()
        .map(|o| o.password_hash.clone())
        .unwrap_or_else(|| decoy_hash().to_owned());
    let password = form.password;
    let matches = verify(console, hash, password).await;
    let operator = operator.filter(|_| matches);
    let mut tx = store.begin().await?;
    let Some(operator) = operator else {
        let locked = failed(
            &mut tx,
            console,
            &email,
            address,
            now,
            ("console.login_failed", "wrong email or password"),
        )
        .await?;
        tx.commit().await.map_err(StoreError::from)?;
        return Ok(match locked {
            Some(until) => locked_out(&email, until),
            None => refused(&email, StatusCode::UNAUTHORIZED, WRONG.into()),
        });
    };
    let token = random_token();
    store_ops::clear_failures(&mut tx, &email).await?;
    store_ops::clear(&mut tx, FailuresOf::Address, address).await?;
    store_ops::create_session(
        &mut tx,
        &store_ops::NewSession {
            token_hash: &token_hash(&token),
            operator_id: &operator.id,
            csrf_token: &random_token(),
            created_at: now,
            expires_at: now + SESSION_MICROS,
        },
    )
    .await?;
    audit::append(
        &mut tx,
        &NewAudit {
            at: now,
            actor: &email,
            action: "console.login",
            project_id: None,
            targets: &json!({ "email": email, "address": address }),
            result: "ok",
        },
    )
    .await?;
    tx.commit().await.map_err(StoreError::from)?;
    let mut res = see_other("/console/");
    res.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie(console, &token, SESSION_MICROS / 1_000_000),
    );
    Ok(res)
}

/// Whether `password` matches `hash` (Argon2id, off the runtime's threads, a few at a
/// time).
pub(crate) async fn verify(console: &Console, hash: String, password: String) -> bool {
    let _turn = console.hashing.acquire().await;
    tokio::task::spawn_blocking(move || operators::verify_password(&hash, &password))
        .await
        .unwrap_or(false)
}

/// One failed authentication of `email` from `address` (a login, or a password asked
/// again before a reveal): counted for both, audited as `action`, and logged with both
/// (PCI DSS 10.2.1.4). Answers the end of the email's lock when this failure locked it.
pub(crate) async fn failed(
    tx: &mut issuing_store::Tx,
    console: &Console,
    email: &str,
    address: &str,
    now: i64,
    (action, result): (&str, &str),
) -> Result<Option<i64>, StoreError> {
    let locked = store_ops::record_failure(tx, email, now, email_rule(console)).await?;
    let blocked =
        store_ops::count_failure(tx, FailuresOf::Address, address, now, ADDRESS_RULE).await?;
    let targets = json!({ "email": email, "address": address });
    audit::append(
        tx,
        &NewAudit {
            at: now,
            actor: email,
            action,
            project_id: None,
            targets: &targets,
            result,
        },
    )
    .await?;
    if let Some(until) = locked {
        audit::append(
            tx,
            &NewAudit {
                at: now,
                actor: email,
                action: "console.lockout",
                project_id: None,
                targets: &targets,
                result: &format!("locked until {}", view::time(until)),
            },
        )
        .await?;
    }
    tracing::warn!(
        email = %email,
        address,
        action,
        locked = locked.is_some(),
        address_blocked = blocked.is_some(),
        "console: failed authentication"
    );
    Ok(locked)
}

fn address_blocked(email: &str, until: i64) -> Response {
    refused(
        email,
        StatusCode::TOO_MANY_REQUESTS,
        format!(
            "Too many failed sign-ins from your address. Try again after {} UTC.",
            view::time(until)
        ),
    )
}

fn locked_out(email: &str, until: i64) -> Response {
    refused(
        email,
        StatusCode::TOO_MANY_REQUESTS,
        format!(
            "Too many failed sign-ins for this email. Try again after {} UTC.",
            view::time(until)
        ),
    )
}

pub(crate) async fn logout(
    State(console): State<Console>,
    Signed(op, NoFields {}): Signed<NoFields>,
) -> Result<Response, ConsoleError> {
    let mut tx = console.app.store.begin().await?;
    store_ops::delete_session(&mut tx, &op.token_hash).await?;
    audit::append(
        &mut tx,
        &NewAudit {
            at: now_micros(),
            actor: &op.email,
            action: "console.logout",
            project_id: None,
            targets: &json!({ "email": op.email }),
            result: "ok",
        },
    )
    .await?;
    tx.commit().await.map_err(StoreError::from)?;
    let mut res = see_other("/console/login");
    res.headers_mut()
        .insert(header::SET_COOKIE, set_cookie(&console, "", 0));
    Ok(res)
}

/// Deletes expired sessions and stale login failures now and then.
pub(crate) async fn purge_loop(console: Console, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(super::PURGE_EVERY) => {}
            _ = shutdown.changed() => return,
        }
        let now = now_micros();
        let result = async {
            let mut tx = console.app.store.begin().await?;
            let n = store_ops::purge_expired(
                &mut tx,
                now,
                now - idle(&console),
                now - FAILURE_WINDOW,
                PURGE_BATCH,
            )
            .await?;
            tx.commit().await.map_err(StoreError::from)?;
            Ok::<_, StoreError>(n)
        }
        .await;
        if let Err(e) = result {
            tracing::warn!(error = %e, "console: purging sessions failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_session_cookie_and_compares_secrets() {
        let mut h = HeaderMap::new();
        h.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; issuing_console=tok; b=2"),
        );
        assert_eq!(session_cookie(&h), Some("tok"));
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("", "abc"));
        assert_eq!(token_hash("x").len(), 64);
    }
}
