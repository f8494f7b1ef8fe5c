//! Console operators: the people who may sign in, their roles and passwords. The CLI
//! (`issuing admin operator …`) and the first sandbox run call these; the console shows
//! them on `/console/operators` (admins only, `operators_page.rs`).

use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::Argon2;
use issuing_domain::ids::new_id;
use issuing_domain::time::now_micros;
use issuing_store::operators::{self, OperatorRecord};
use issuing_store::{projects, settings, Store, StoreError};
use rand::RngCore;
use serde::Serialize;

/// The operator the first sandbox run creates.
pub const FIRST_ADMIN_EMAIL: &str = "admin@localhost";
const FIRST_ADMIN_SETTING: &str = "console_first_admin";
/// Longest email accepted (RFC 5321's path limit).
pub const MAX_EMAIL_LEN: usize = 254;
/// Longest password read: Argon2 hashes any length, so the bound is ours.
pub const MAX_PASSWORD_LEN: usize = 1024;
/// Bound on `admin operator list` and the operators page.
const LIST_LIMIT: i64 = 1000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Admin,
    Operator,
    Viewer,
}

impl Role {
    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "operator" => Some(Role::Operator),
            "viewer" => Some(Role::Viewer),
            _ => None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Operator => "operator",
            Role::Viewer => "viewer",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("`{0}` is not an email address")]
    InvalidEmail(String),
    #[error("an operator with the email {0} exists already")]
    EmailTaken(String),
    #[error("no operator has the email {0}")]
    NotFound(String),
    #[error("project {0} not found")]
    ProjectNotFound(String),
    #[error("--project names what a viewer may read; operators and admins read every project")]
    ProjectsForViewersOnly,
    #[error("password hashing failed: {0}")]
    Hashing(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// An operator's credentials, shown once (`admin operator create|reset-password`).
#[derive(Serialize)]
pub struct OperatorCredentials {
    pub email: String,
    pub role: &'static str,
    pub password: String,
}

impl std::fmt::Debug for OperatorCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperatorCredentials")
            .field("email", &self.email)
            .field("role", &self.role)
            .field("password", &"***")
            .finish()
    }
}

/// Emails compare lower-cased and trimmed.
pub fn normalize_email(email: &str) -> Result<String, OperatorError> {
    let e = email.trim().to_ascii_lowercase();
    let valid = e.len() <= MAX_EMAIL_LEN
        && e.split_once('@')
            .is_some_and(|(local, host)| !local.is_empty() && !host.is_empty())
        && !e.chars().any(|c| c.is_whitespace() || c.is_control());
    if valid {
        Ok(e)
    } else {
        Err(OperatorError::InvalidEmail(email.to_owned()))
    }
}

/// 24 characters from 18 random bytes (144 bits), URL-safe base64.
pub fn generate_password() -> String {
    use base64::Engine;
    let mut bytes = [0u8; 18];
    rand::thread_rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Argon2id with the RustCrypto defaults (19 MiB, 2 passes, 1 lane: OWASP's minimum),
/// as a PHC string with its own random salt.
pub fn hash_password(password: &str) -> Result<String, OperatorError> {
    let mut salt = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut salt);
    let salt = SaltString::encode_b64(&salt).map_err(|e| OperatorError::Hashing(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| OperatorError::Hashing(e.to_string()))
}

pub fn verify_password(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash).is_ok_and(|h| {
        Argon2::default()
            .verify_password(password.as_bytes(), &h)
            .is_ok()
    })
}

async fn hash_off_thread(password: String) -> Result<String, OperatorError> {
    tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| OperatorError::Hashing(e.to_string()))?
}

/// Creates an operator with a generated password, shown once. A viewer reads only
/// `projects` (every project when none is named).
pub async fn create(
    store: &Store,
    email: &str,
    role: Role,
    projects: &[String],
) -> Result<OperatorCredentials, OperatorError> {
    let email = normalize_email(email)?;
    if role != Role::Viewer && !projects.is_empty() {
        return Err(OperatorError::ProjectsForViewersOnly);
    }
    let password = generate_password();
    let hash = hash_off_thread(password.clone()).await?;
    let mut tx = store.begin().await?;
    let mut named = Vec::with_capacity(projects.len());
    for p in projects {
        let p = p.trim();
        if projects::get(&mut tx, p).await?.is_none() {
            return Err(OperatorError::ProjectNotFound(p.to_owned()));
        }
        if !named.iter().any(|n| n == p) {
            named.push(p.to_owned());
        }
    }
    insert(&mut tx, &email, role, named, hash).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(OperatorCredentials {
        email,
        role: role.as_str(),
        password,
    })
}

async fn insert(
    conn: &mut issuing_store::Conn,
    email: &str,
    role: Role,
    projects: Vec<String>,
    password_hash: String,
) -> Result<(), OperatorError> {
    let now = now_micros();
    let record = OperatorRecord {
        id: new_id(),
        email: email.to_owned(),
        role: role.as_str().to_owned(),
        projects,
        password_hash,
        status: operators::ACTIVE.to_owned(),
        created_at: now,
        updated_at: now,
        disabled_at: None,
    };
    match operators::insert(conn, &record).await {
        Err(StoreError::Conflict) => Err(OperatorError::EmailTaken(email.to_owned())),
        other => Ok(other?),
    }
}

pub async fn list(store: &Store) -> Result<Vec<OperatorRecord>, OperatorError> {
    let mut conn = store.conn().await?;
    Ok(operators::list(&mut conn, LIST_LIMIT).await?)
}

/// Disables an operator: its sessions end at once and it can no longer sign in.
pub async fn disable(store: &Store, email: &str) -> Result<(), OperatorError> {
    let email = normalize_email(email)?;
    let mut tx = store.begin().await?;
    if !operators::disable(&mut tx, &email, now_micros()).await? {
        return Err(OperatorError::NotFound(email));
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(())
}

/// Ends an email's login lockout before its time (PCI DSS 8.3.4: "or until the user's
/// identity is confirmed"): its failed logins are forgotten. Answers whether it was
/// locked. Works for any email, an operator's or not, as the lockout does.
pub async fn unlock(store: &Store, email: &str) -> Result<bool, OperatorError> {
    let email = normalize_email(email)?;
    let mut tx = store.begin().await?;
    let locked = operators::locked_until(&mut tx, &email, now_micros())
        .await?
        .is_some();
    operators::clear_failures(&mut tx, &email).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(locked)
}

/// Gives an operator a new generated password (shown once) and ends its sessions.
pub async fn reset_password(
    store: &Store,
    email: &str,
) -> Result<OperatorCredentials, OperatorError> {
    let email = normalize_email(email)?;
    let password = generate_password();
    let hash = hash_off_thread(password.clone()).await?;
    let mut tx = store.begin().await?;
    let operator = operators::get_by_email(&mut tx, &email)
        .await?
        .ok_or_else(|| OperatorError::NotFound(email.clone()))?;
    operators::set_password(&mut tx, &email, &hash, now_micros()).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(OperatorCredentials {
        email,
        role: Role::parse(&operator.role).unwrap_or(Role::Viewer).as_str(),
        password,
    })
}

/// The sandbox's first run: creates `admin@localhost` once per database and answers
/// its password on that run only (several processes starting together create one).
pub async fn ensure_first_admin(
    store: &Store,
) -> Result<Option<OperatorCredentials>, OperatorError> {
    {
        let mut conn = store.conn().await?;
        if settings::get(&mut conn, FIRST_ADMIN_SETTING)
            .await?
            .is_some()
        {
            return Ok(None);
        }
    }
    let password = generate_password();
    let hash = hash_off_thread(password.clone()).await?;
    let mut tx = store.begin().await?;
    if !settings::insert_if_absent(&mut tx, FIRST_ADMIN_SETTING, FIRST_ADMIN_EMAIL).await? {
        return Ok(None);
    }
    match insert(&mut tx, FIRST_ADMIN_EMAIL, Role::Admin, Vec::new(), hash).await {
        // Someone created it by hand: keep theirs, and do not try again.
        Err(OperatorError::EmailTaken(_)) => {
            drop(tx);
            let mut tx = store.begin().await?;
            settings::insert_if_absent(&mut tx, FIRST_ADMIN_SETTING, FIRST_ADMIN_EMAIL).await?;
            tx.commit().await.map_err(StoreError::from)?;
            return Ok(None);
        }
        other => other?,
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(Some(OperatorCredentials {
        email: FIRST_ADMIN_EMAIL.to_owned(),
        role: Role::Admin.as_str(),
        password,
    }))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hashes_with_argon2id_and_verifies() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(verify_password(&h, "correct horse"));
        assert!(!verify_password(&h, "correct horse!"));
        assert!(!verify_password("not a hash", "x"));
        assert_ne!(h, hash_password("correct horse").unwrap(), "salted");
    }

    #[test]
    fn normalizes_emails() {
        assert_eq!(
            normalize_email(" Ops@Example.COM ").unwrap(),
            "ops@example.com"
        );
        for bad in [
            "",
            "nobody",
            "@x",
            "a@",
            "a b@c",
            &format!("{}@x", "a".repeat(260)),
        ] {
            assert!(normalize_email(bad).is_err(), "{bad}");
        }
        assert_eq!(generate_password().len(), 24);
    }
}
