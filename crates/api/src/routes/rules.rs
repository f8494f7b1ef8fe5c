//! rules/create, rules/update, rules/get, rules/list, rules/delete, rules/results
//! (CONTRACT §11). Every change keeps the rule's version, bumps the project's controls
//! revision in the same transaction (so every process evaluates the new rules from the
//! next authorization on), and counts the project's rules that are not inactive.

use super::filters;
use crate::pipeline::{reply, ApiResult, Caller, RawRequest};
use axum::extract::State;
use issuing_app::network::controls::compile;
use issuing_app::App;
use issuing_domain::controls::rules::{
    parse_conditions, Mode, DEFAULT_PRIORITY, MAX_CARD_IDS, MAX_ENABLED_RULES, MAX_NAME_LEN,
    MAX_PRIORITY,
};
use issuing_domain::ids::new_id;
use issuing_domain::time::{now_micros, to_rfc3339};
use issuing_store::controls::{self, RuleRecord, RuleResult};
use issuing_store::{cards, Conn, StoreError};
use issuing_wire::api::{Page, Rule, RuleCondition, RuleDeleted};
use issuing_wire::{ApiError, ErrorSlug, PageRequest};
use serde_json::Value;

fn not_found() -> ApiError {
    ApiError::new(ErrorSlug::RuleNotFound, "Rule not found")
}

fn view(r: RuleRecord) -> Rule {
    let conditions = r
        .conditions
        .as_array()
        .map(|list| {
            list.iter()
                .map(|c| RuleCondition {
                    attribute: c["attribute"].as_str().unwrap_or_default().to_owned(),
                    operator: c["operator"].as_str().unwrap_or_default().to_owned(),
                    value: c["value"].clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    Rule {
        rule_id: r.id,
        name: r.name,
        conditions,
        mode: r.mode,
        priority: r.priority,
        card_ids: r.card_ids,
        version: r.version,
        created_at: to_rfc3339(r.created_at),
        updated_at: to_rfc3339(r.updated_at),
    }
}

fn present<'a>(req: &'a Value, field: &str) -> Option<&'a Value> {
    req.get(field).filter(|v| !v.is_null())
}

fn name(v: &Value) -> Result<String, ApiError> {
    let n = v
        .as_str()
        .map(str::trim)
        .ok_or_else(|| ApiError::validation("name must be a string"))?;
    if n.is_empty() || n.chars().count() > MAX_NAME_LEN || n.chars().any(char::is_control) {
        return Err(ApiError::validation(format!(
            "name must be 1 to {MAX_NAME_LEN} characters without control characters"
        )));
    }
    Ok(n.to_owned())
}

fn mode(v: &Value) -> Result<Mode, ApiError> {
    v.as_str()
        .map(str::trim)
        .and_then(Mode::parse)
        .ok_or_else(|| ApiError::validation("mode must be one of: active, shadow, inactive"))
}

fn priority(v: &Value) -> Result<i64, ApiError> {
    v.as_i64()
        .filter(|p| (-MAX_PRIORITY..=MAX_PRIORITY).contains(p))
        .ok_or_else(|| {
            ApiError::validation(format!(
                "priority must be an integer from -{MAX_PRIORITY} to {MAX_PRIORITY}"
            ))
        })
}

/// A scope of card ids: each must be a card of the project (404 otherwise). An empty
/// list means every card.
async fn card_ids(
    conn: &mut Conn,
    project_id: &str,
    v: &Value,
) -> Result<Option<Vec<String>>, ApiError> {
    let list = v
        .as_array()
        .ok_or_else(|| ApiError::validation("card_ids must be a list of card ids"))?;
    if list.len() > MAX_CARD_IDS {
        return Err(ApiError::validation(format!(
            "card_ids may name at most {MAX_CARD_IDS} cards"
        )));
    }
    let mut ids = Vec::with_capacity(list.len());
    for id in list {
        let id = id
            .as_str()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .ok_or_else(|| ApiError::validation("card_ids must be a list of card ids"))?;
        if cards::get(conn, project_id, id).await?.is_none() {
            return Err(ApiError::new(
                ErrorSlug::CardNotFound,
                format!("Card {id} not found"),
            ));
        }
        if !ids.iter().any(|x| x == id) {
            ids.push(id.to_owned());
        }
    }
    Ok((!ids.is_empty()).then_some(ids))
}

/// Refuses a rule that would make more than `MAX_ENABLED_RULES` rules that are not
/// inactive (counted under the project's row lock, taken by `bump_revision`).
async fn check_room(conn: &mut Conn, project_id: &str) -> Result<(), ApiError> {
    if controls::count_enabled(conn, project_id).await? >= MAX_ENABLED_RULES {
        return Err(ApiError::new(
            ErrorSlug::RuleLimitReached,
            format!("A project may have at most {MAX_ENABLED_RULES} rules that are not inactive"),
        ));
    }
    Ok(())
}

pub(crate) async fn create(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Rule> {
    let name =
        name(present(&req, "name").ok_or_else(|| ApiError::validation("name is required"))?)?;
    let conditions = present(&req, "conditions")
        .ok_or_else(|| ApiError::validation("conditions is required"))?;
    let (_, conditions) = parse_conditions(conditions)?;
    let mode = present(&req, "mode")
        .map(mode)
        .transpose()?
        .unwrap_or(Mode::Active);
    let priority = present(&req, "priority")
        .map(priority)
        .transpose()?
        .unwrap_or(DEFAULT_PRIORITY);
    let now = now_micros();
    let project_id = &caller.project_id;
    let mut tx = state.store.begin().await?;
    let card_ids = match present(&req, "card_ids") {
        Some(v) => card_ids(&mut tx, project_id, v).await?,
        None => None,
    };
    controls::bump_revision(&mut tx, project_id).await?;
    if mode != Mode::Inactive {
        check_room(&mut tx, project_id).await?;
    }
    let rule = RuleRecord {
        id: new_id(),
        project_id: project_id.clone(),
        name,
        conditions,
        mode: mode.as_str().to_owned(),
        priority,
        card_ids,
        version: 1,
        created_at: now,
        updated_at: now,
    };
    compile(&rule)?;
    controls::save_rule(&mut tx, &rule).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(reply(view(rule)))
}

fn rule_id(req: &Value) -> Result<String, ApiError> {
    req.get("rule_id")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .ok_or_else(|| ApiError::validation("rule_id is required"))
}

pub(crate) async fn update(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Rule> {
    let id = rule_id(&req)?;
    let name = present(&req, "name").map(name).transpose()?;
    let conditions = present(&req, "conditions")
        .map(parse_conditions)
        .transpose()?
        .map(|(_, shown)| shown);
    let mode = present(&req, "mode").map(mode).transpose()?;
    let priority = present(&req, "priority").map(priority).transpose()?;
    let project_id = &caller.project_id;
    let mut tx = state.store.begin().await?;
    let scope = match present(&req, "card_ids") {
        Some(v) => Some(card_ids(&mut tx, project_id, v).await?),
        None => None,
    };
    controls::bump_revision(&mut tx, project_id).await?;
    let prev = controls::get_rule(&mut tx, project_id, &id)
        .await?
        .ok_or_else(not_found)?;
    let mut next = prev.clone();
    if let Some(n) = name {
        next.name = n;
    }
    if let Some(c) = conditions {
        next.conditions = c;
    }
    if let Some(m) = mode {
        next.mode = m.as_str().to_owned();
    }
    if let Some(p) = priority {
        next.priority = p;
    }
    if let Some(s) = scope {
        next.card_ids = s;
    }
    if prev.mode == Mode::Inactive.as_str() && next.mode != Mode::Inactive.as_str() {
        check_room(&mut tx, project_id).await?;
    }
    next.version = prev.version + 1;
    next.updated_at = now_micros().max(prev.updated_at);
    compile(&next)?;
    controls::save_rule(&mut tx, &next).await?;
    tx.commit().await.map_err(StoreError::from)?;
    Ok(reply(view(next)))
}

pub(crate) async fn get(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Rule> {
    let id = rule_id(&req)?;
    let mut conn = state.store.conn().await?;
    let rule = controls::get_rule(&mut conn, &caller.project_id, &id)
        .await?
        .ok_or_else(not_found)?;
    Ok(reply(view(rule)))
}

pub(crate) async fn delete(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<RuleDeleted> {
    let id = rule_id(&req)?;
    let mut tx = state.store.begin().await?;
    controls::bump_revision(&mut tx, &caller.project_id).await?;
    if !controls::delete_rule(&mut tx, &caller.project_id, &id, now_micros()).await? {
        return Err(not_found().into());
    }
    tx.commit().await.map_err(StoreError::from)?;
    Ok(reply(RuleDeleted {
        rule_id: id,
        deleted: true,
    }))
}

pub(crate) async fn list(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Page<Rule>> {
    let page = PageRequest::parse(&req, controls::RULE_SORT_KEYS)?;
    let modes = filters::strings(&req, "mode", "modes")?;
    if let Some(bad) = modes.iter().find(|m| Mode::parse(m).is_none()) {
        return Err(ApiError::validation(format!(
            "mode {bad:?} is not one of: active, shadow, inactive"
        ))
        .into());
    }
    let mut conn = state.store.conn().await?;
    let (items, total) = controls::find_rules(
        &mut conn,
        state.store.backend(),
        &caller.project_id,
        &modes,
        &page,
    )
    .await?;
    Ok(reply(Page::new(
        items.into_iter().map(view).collect(),
        total,
        &page,
    )))
}

fn result_view(r: RuleResult) -> issuing_wire::api::RuleResult {
    issuing_wire::api::RuleResult {
        rule_id: r.rule_id,
        version: r.version,
        transaction_id: r.transaction_id,
        card_id: r.card_id,
        mode: r.mode,
        matched: true,
        decided: r.decided,
        evaluated_at: to_rfc3339(r.evaluated_at),
    }
}

pub(crate) async fn results(
    State(state): State<App>,
    caller: Caller,
    RawRequest(req): RawRequest,
) -> ApiResult<Page<issuing_wire::api::RuleResult>> {
    let page = PageRequest::parse(&req, &["evaluated_at"])?;
    let rule_ids = filters::strings(&req, "rule_id", "rule_ids")?;
    let transaction_ids = filters::strings(&req, "transaction_id", "transaction_ids")?;
    let mut conn = state.store.conn().await?;
    let (items, total) = controls::find_results(
        &mut conn,
        state.store.backend(),
        &caller.project_id,
        &rule_ids,
        &transaction_ids,
        &page,
    )
    .await?;
    Ok(reply(Page::new(
        items.into_iter().map(result_view).collect(),
        total,
        &page,
    )))
}
