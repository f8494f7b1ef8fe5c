//! A process's cache of each project's compiled rules and decision endpoint, keyed by
//! the project's `controls_revision`. Every authorization reads the revision with its
//! card (one query it makes anyway), so a hit costs nothing more and a change made by
//! any process on the same database is seen by the next authorization: the change
//! bumped the revision in its own transaction. Bounded by `MAX_PROJECTS`.

use issuing_domain::controls::decision::{CallMode, OnTimeout};
use issuing_domain::controls::rules::{parse_conditions, Mode, Rule};
use issuing_store::controls::{self, RuleRecord};
use issuing_store::writer::BatchConn;
use issuing_wire::ApiError;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Projects whose controls one process keeps; past it an entry is dropped (and read
/// again when its project next authorizes).
const MAX_PROJECTS: usize = 10_000;

/// A project's decision endpoint, ready to call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub url: String,
    pub timeout: Duration,
    pub on_timeout: OnTimeout,
    pub mode: CallMode,
}

/// What an authorization needs of its project's controls.
#[derive(Debug, Default)]
pub struct ProjectControls {
    pub revision: i64,
    /// Rules that are not inactive, compiled.
    pub rules: Vec<Rule>,
    pub endpoint: Option<Endpoint>,
}

#[derive(Default)]
pub struct ControlsCache {
    entries: Mutex<HashMap<String, Arc<ProjectControls>>>,
    /// Revision 0: the project never had a rule or an endpoint.
    none: Arc<ProjectControls>,
}

impl ControlsCache {
    /// The project's controls at `revision` (read with the card): from memory when they
    /// are that revision, else read on `conn` and kept.
    pub async fn get(
        &self,
        conn: &mut BatchConn<'_>,
        project_id: &str,
        revision: i64,
    ) -> Result<Arc<ProjectControls>, ApiError> {
        if revision == 0 {
            return Ok(self.none.clone());
        }
        if let Some(hit) = self.lookup(project_id, revision) {
            return Ok(hit);
        }
        let loaded = Arc::new(load(conn, project_id, revision).await?);
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if entries.len() >= MAX_PROJECTS && !entries.contains_key(project_id) {
            if let Some(victim) = entries.keys().next().cloned() {
                entries.remove(&victim);
            }
        }
        entries.insert(project_id.to_owned(), loaded.clone());
        Ok(loaded)
    }

    fn lookup(&self, project_id: &str, revision: i64) -> Option<Arc<ProjectControls>> {
        let entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        entries
            .get(project_id)
            .filter(|c| c.revision == revision)
            .cloned()
    }
}

/// Reads and compiles a project's controls. Rules were validated when written; one that
/// no longer parses is a broken invariant, answered as an internal error rather than
/// skipped (skipping an active rule would approve what it declines).
async fn load(
    conn: &mut BatchConn<'_>,
    project_id: &str,
    revision: i64,
) -> Result<ProjectControls, ApiError> {
    let records = controls::enabled_rules(conn, project_id).await?;
    let rules = records.iter().map(compile).collect::<Result<Vec<_>, _>>()?;
    let endpoint = controls::get_endpoint(conn, project_id)
        .await?
        .map(|e| -> Result<Endpoint, ApiError> {
            let bad = || {
                tracing::error!(project_id, "stored decision endpoint cannot be read");
                ApiError::internal()
            };
            Ok(Endpoint {
                timeout: Duration::from_millis(u64::try_from(e.timeout_ms).map_err(|_| bad())?),
                on_timeout: OnTimeout::parse(&e.on_timeout).ok_or_else(bad)?,
                mode: CallMode::parse(&e.mode).ok_or_else(bad)?,
                url: e.url,
            })
        })
        .transpose()?;
    Ok(ProjectControls {
        revision,
        rules,
        endpoint,
    })
}

pub fn compile(r: &RuleRecord) -> Result<Rule, ApiError> {
    let broken = |what: &str| {
        tracing::error!(rule_id = %r.id, what, "stored rule cannot be compiled");
        ApiError::internal()
    };
    let (conditions, _) = parse_conditions(&r.conditions).map_err(|_| broken("conditions"))?;
    Ok(Rule {
        id: r.id.clone(),
        version: r.version,
        mode: Mode::parse(&r.mode).ok_or_else(|| broken("mode"))?,
        priority: r.priority,
        created_at: r.created_at,
        card_ids: r.card_ids.clone().unwrap_or_default(),
        conditions,
    })
}
