//! Projects: the list with balances, one project's page (balance, deposit address,
//! keys without secrets, users, cards, subscriptions), and its actions: suspend and
//! resume, rotate and revoke a key (`projects.rs`, as `issuing admin` does).

use super::audit::{finish, record};
use super::cards::{card_row, CardRow};
use super::session::{Act, NoFields};
use super::view::{self, render, Ctx, PageResult};
use super::{Console, ConsoleError, Op, PAGE_SIZE};
use askama::Template;
use axum::extract::{Path, Query, State};
use axum::Extension;
use issuing_app::projects as admin;
use issuing_domain::time::now_micros;
use issuing_store::console::{self as reads, CardQuery};
use issuing_store::{ledger, projects};
use serde::Deserialize;
use serde_json::json;
use std::time::Duration;

/// Rows of each related list on a project page (the newest).
const RELATED_SHOWN: i64 = 20;
/// A rotation's default grace, as `issuing admin key rotate`.
const DEFAULT_GRACE_SECS: u64 = 24 * 60 * 60;
const MAX_GRACE_SECS: u64 = 90 * 24 * 60 * 60;

#[derive(Deserialize)]
pub(crate) struct ListQuery {
    before: Option<String>,
}

struct ProjectRow {
    id: String,
    name: String,
    status: String,
    badge: &'static str,
    balance: String,
    created_at: String,
}

#[derive(Template)]
#[template(path = "console/projects.html")]
struct ProjectsPage {
    ctx: Ctx,
    rows: Vec<ProjectRow>,
    next: Option<String>,
    here: String,
}

pub(crate) async fn list(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Query(query): Query<ListQuery>,
) -> PageResult {
    let before = view::cursor(&query.before)?;
    let mut conn = console.app.store.reader().conn().await?;
    let rows = reads::projects_page(&mut conn, &op.scope, before.as_ref(), PAGE_SIZE + 1).await?;
    let (rows, next) = view::split_page(rows, PAGE_SIZE, |p| (p.project.created_at, &p.project.id));
    render(&ProjectsPage {
        ctx: op.ctx(&console, "projects"),
        here: view::link("/console/projects", &[("before", query.before.as_deref())]),
        next: next.map(|n| view::link("/console/projects", &[("before", Some(&n))])),
        rows: rows
            .into_iter()
            .map(|r| ProjectRow {
                badge: view::badge(&r.project.status),
                balance: view::money(r.balance),
                created_at: view::time(r.project.created_at),
                id: r.project.id,
                name: r.project.name,
                status: r.project.status,
            })
            .collect(),
    })
}

struct KeyRow {
    api_key: String,
    created_at: String,
    expires_at: String,
    revoked_at: String,
    valid: bool,
}

struct UserRow {
    id: String,
    external_user_id: String,
    created_at: String,
}

struct SubscriptionRow {
    id: String,
    title: String,
    url: String,
    active: bool,
    event_types: String,
    created_at: String,
}

#[derive(Template)]
#[template(path = "console/project.html")]
struct ProjectPage {
    ctx: Ctx,
    id: String,
    name: String,
    status: String,
    badge: &'static str,
    balance: String,
    deposit_address: String,
    created_at: String,
    keys: Vec<KeyRow>,
    users: Vec<UserRow>,
    rows: Vec<CardRow>,
    subscriptions: Vec<SubscriptionRow>,
}

pub(crate) async fn show(
    State(console): State<Console>,
    Extension(op): Extension<Op>,
    Path(project_id): Path<String>,
) -> PageResult {
    op.may_see(&project_id)?;
    let mut conn = console.app.store.reader().conn().await?;
    let p = projects::get(&mut conn, &project_id)
        .await?
        .ok_or(ConsoleError::NotFound)?;
    let balance = ledger::master_balance(&mut conn, &p.id).await?;
    let keys = projects::list_keys(&mut conn, &p.id).await?;
    let users = reads::project_users(&mut conn, &p.id, RELATED_SHOWN).await?;
    let cards = reads::cards_page(
        &mut conn,
        &op.scope,
        &CardQuery {
            project_id: Some(p.id.clone()),
            ..Default::default()
        },
        None,
        RELATED_SHOWN,
    )
    .await?;
    let subscriptions = reads::project_subscriptions(&mut conn, &p.id, RELATED_SHOWN).await?;
    let now = now_micros();
    render(&ProjectPage {
        ctx: op.ctx(&console, "projects"),
        badge: view::badge(&p.status),
        balance: balance.to_string(),
        deposit_address: view::opt(p.deposit_address.as_deref()),
        created_at: view::time(p.created_at),
        keys: keys
            .into_iter()
            .map(|k| KeyRow {
                valid: k.valid_at(now),
                created_at: view::time(k.created_at),
                expires_at: view::opt_time(k.expires_at),
                revoked_at: view::opt_time(k.revoked_at),
                api_key: k.api_key,
            })
            .collect(),
        users: users
            .into_iter()
            .map(|u| UserRow {
                created_at: view::time(u.created_at),
                id: u.id,
                external_user_id: u.external_user_id,
            })
            .collect(),
        rows: cards.into_iter().map(card_row).collect(),
        subscriptions: subscriptions
            .into_iter()
            .map(|s| SubscriptionRow {
                event_types: if s.event_types.is_empty() {
                    "all".to_owned()
                } else {
                    s.event_types.join(", ")
                },
                created_at: view::time(s.created_at),
                id: s.id,
                title: s.title,
                url: s.url,
                active: s.active,
            })
            .collect(),
        id: p.id,
        name: p.name,
        status: p.status,
    })
}

async fn set_status(console: Console, op: Op, project_id: String, status: &str) -> PageResult {
    let result = admin::set_project_status(&console.app.store, &project_id, status)
        .await
        .map(|before| format!("Project is {status} (was {before})."))
        .map_err(|e| e.to_string());
    let action = if status == admin::ACTIVE {
        "project.resume"
    } else {
        "project.suspend"
    };
    finish(
        &console,
        &op,
        action,
        Some(&project_id),
        json!({ "project_id": project_id }),
        result,
        &format!("/console/projects/{project_id}"),
    )
    .await
}

pub(crate) async fn suspend(
    State(console): State<Console>,
    Path(project_id): Path<String>,
    Act(op, NoFields {}): Act<NoFields>,
) -> PageResult {
    set_status(console, op, project_id, admin::SUSPENDED).await
}

pub(crate) async fn resume(
    State(console): State<Console>,
    Path(project_id): Path<String>,
    Act(op, NoFields {}): Act<NoFields>,
) -> PageResult {
    set_status(console, op, project_id, admin::ACTIVE).await
}

#[derive(Deserialize)]
pub(crate) struct RotateForm {
    #[serde(default)]
    grace: String,
}

#[derive(Template)]
#[template(path = "console/key_rotated.html")]
struct RotatedPage {
    ctx: Ctx,
    project_id: String,
    api_key: String,
    api_secret: String,
    old_keys_valid_until: String,
}

/// A new key and secret, shown once on a page that is never cached.
pub(crate) async fn rotate_key(
    State(console): State<Console>,
    Path(project_id): Path<String>,
    Act(op, form): Act<RotateForm>,
) -> PageResult {
    let grace = match form.grace.trim() {
        "" => DEFAULT_GRACE_SECS,
        g => g
            .parse::<u64>()
            .ok()
            .filter(|g| *g <= MAX_GRACE_SECS)
            .ok_or_else(|| {
                ConsoleError::BadRequest(format!(
                    "The grace period must be 0 to {MAX_GRACE_SECS} seconds."
                ))
            })?,
    };
    let rotated = admin::rotate_key(
        &console.app.store,
        &console.app.master,
        &project_id,
        Duration::from_secs(grace),
    )
    .await;
    let back = format!("/console/projects/{project_id}");
    let rotated = match rotated {
        Ok(r) => r,
        Err(e) => {
            return finish(
                &console,
                &op,
                "key.rotate",
                Some(&project_id),
                json!({ "project_id": project_id, "grace_seconds": grace }),
                Err(e.to_string()),
                &back,
            )
            .await
        }
    };
    record(
        &console,
        &op,
        "key.rotate",
        Some(&project_id),
        &json!({ "project_id": project_id, "api_key": rotated.api_key, "grace_seconds": grace }),
        &Ok(String::new()),
    )
    .await?;
    render(&RotatedPage {
        ctx: op.ctx(&console, "projects"),
        old_keys_valid_until: view::opt(rotated.old_keys_valid_until.as_deref()),
        project_id: rotated.project_id,
        api_key: rotated.api_key,
        api_secret: rotated.api_secret,
    })
}

#[derive(Deserialize)]
pub(crate) struct RevokeForm {
    #[serde(default)]
    api_key: String,
}

pub(crate) async fn revoke_key(
    State(console): State<Console>,
    Path(project_id): Path<String>,
    Act(op, form): Act<RevokeForm>,
) -> PageResult {
    let key = form.api_key.trim().to_owned();
    // Only a key of the project in the URL: the form cannot reach another project's.
    let belongs = {
        let mut conn = console.app.store.conn().await?;
        projects::list_keys(&mut conn, &project_id)
            .await?
            .iter()
            .any(|k| k.api_key == key)
    };
    if !belongs {
        return Err(ConsoleError::NotFound);
    }
    let result = admin::revoke_key(&console.app.store, &key, false)
        .await
        .map(|r| {
            format!(
                "Key {} revoked; {} valid key(s) left.",
                r.api_key, r.valid_keys_left
            )
        })
        .map_err(|e| e.to_string());
    finish(
        &console,
        &op,
        "key.revoke",
        Some(&project_id),
        json!({ "project_id": project_id, "api_key": key }),
        result,
        &format!("/console/projects/{project_id}"),
    )
    .await
}
