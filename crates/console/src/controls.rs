//! Spend controls (CONTRACT §11) on the card and transaction pages: a card's limits
//! with what their windows counted (read by the function that answers
//! `cards/limits/get`, so both show the same numbers), the rules that apply to a card
//! (scoped by the domain's own rule), the matches the rules log recorded (shadow ones
//! labelled as never declining), and why a transaction was declined, in words.

use super::view;
use super::ConsoleError;
use issuing_app::network::controls::compile;
use issuing_domain::controls::rules::Mode;
use issuing_store::card_txs::CardTxRecord;
use issuing_store::cards::CardRecord;
use issuing_store::controls::{self, RuleMatch, RuleRecord};
use issuing_store::writer::AsBatch;
use issuing_store::Conn;
use issuing_wire::Amount;
use serde_json::Value;

/// One limit of a card, as the card page shows it.
pub(crate) struct LimitRow {
    pub interval: String,
    pub mccs: String,
    pub limit: String,
    pub spent: String,
    pub used_count: u64,
    pub remaining: String,
    pub window: String,
}

/// A card's limits section: the zone of its calendar windows and each limit, or why
/// they cannot be shown.
pub(crate) struct LimitsView {
    pub timezone: String,
    pub rows: Vec<LimitRow>,
    pub error: Option<&'static str>,
}

fn rfc3339_shown(t: &Option<String>) -> String {
    t.as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| view::time(t.timestamp_micros()))
        .unwrap_or_else(|| "…".to_owned())
}

fn interval_words(interval: &str, window_seconds: Option<u32>) -> String {
    match (interval, window_seconds) {
        ("rolling", Some(s)) => format!("rolling {s} s"),
        ("per_authorization", _) => "per authorization".to_owned(),
        ("all_time", _) => "all time".to_owned(),
        (other, _) => other.to_owned(),
    }
}

fn limit_words(amount: Option<String>, count: Option<u64>) -> String {
    let amount = amount.map(|a| format!("{a} USD"));
    let count = count.map(|c| format!("{c} authorizations"));
    match (amount, count) {
        (Some(a), Some(c)) => format!("{a} and {c}"),
        (Some(a), None) => a,
        (None, Some(c)) => c,
        (None, None) => "—".to_owned(),
    }
}

/// The card's limits and their usage now, exactly as `cards/limits/get` answers them.
pub(crate) async fn card_limits(conn: &mut Conn, card: &CardRecord) -> LimitsView {
    let now = issuing_domain::time::now_micros();
    match issuing_app::network::limits::view(conn, card, now).await {
        Ok(l) => LimitsView {
            timezone: l.timezone,
            error: None,
            rows: l
                .limits
                .into_iter()
                .map(|u| LimitRow {
                    window: match (u.interval.as_str(), &u.window_start) {
                        ("per_authorization", _) => "each authorization alone".to_owned(),
                        (_, None) => "since the card's first authorization".to_owned(),
                        (_, start) => {
                            format!(
                                "{} → {}",
                                rfc3339_shown(start),
                                rfc3339_shown(&u.window_end)
                            )
                        }
                    },
                    interval: interval_words(&u.interval, u.window_seconds),
                    mccs: if u.mccs.is_empty() {
                        "all".to_owned()
                    } else {
                        u.mccs.join(", ")
                    },
                    limit: limit_words(
                        u.amount.map(|a| a.as_str().to_owned()),
                        u.count.map(u64::from),
                    ),
                    spent: u.spent.as_str().to_owned(),
                    used_count: u.used_count,
                    remaining: limit_words(
                        u.remaining_amount.map(|a| a.as_str().to_owned()),
                        u.remaining_count,
                    ),
                })
                .collect(),
        },
        Err(e) => {
            tracing::error!(card_id = %card.id, error = %e.message, "console: card limits unreadable");
            LimitsView {
                timezone: card.limits_timezone.clone().unwrap_or_default(),
                rows: Vec::new(),
                error: Some("The card's limits cannot be read; the cause is in the server log."),
            }
        }
    }
}

/// One rule that applies to a card.
pub(crate) struct RuleRow {
    pub id: String,
    pub name: String,
    pub mode: String,
    pub shadow: bool,
    pub priority: i64,
    pub scope: String,
    pub version: i64,
    pub conditions: String,
    /// The `failure_reason` it gives when it declines.
    pub reason: &'static str,
}

/// A rule's conditions in words: "mcc is one of 7995, 7801 and amount greater than 100".
fn conditions_words(conditions: &Value) -> String {
    let list = conditions.as_array().map(Vec::as_slice).unwrap_or_default();
    let words: Vec<String> = list
        .iter()
        .map(|c| {
            let value = match &c["value"] {
                Value::Array(values) => values
                    .iter()
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
                    .collect::<Vec<_>>()
                    .join(", "),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!(
                "{} {} {value}",
                c["attribute"].as_str().unwrap_or("?"),
                c["operator"].as_str().unwrap_or("?").replace('_', " "),
            )
        })
        .collect();
    words.join(" and ")
}

fn scope_words(card_id: &str, card_ids: Option<&[String]>) -> String {
    match card_ids {
        None => "every card of the project".to_owned(),
        Some(ids) => match ids.iter().filter(|c| *c != card_id).count() {
            0 => "this card only".to_owned(),
            1 => "this card and 1 other".to_owned(),
            n => format!("this card and {n} others"),
        },
    }
}

/// The rules evaluated for authorizations on `card`, in the order they are evaluated:
/// the project's rules that are not inactive (at most 50), project-wide or scoped to
/// this card. A stored rule that no longer compiles is left out (and logged by
/// `compile`): the network would refuse it the same way.
pub(crate) async fn card_rules(
    conn: &mut Conn,
    card: &CardRecord,
) -> Result<Vec<RuleRow>, ConsoleError> {
    let rules = controls::enabled_rules(&mut conn.as_batch(), &card.project_id).await?;
    Ok(rules
        .into_iter()
        .filter_map(|r| {
            let compiled = compile(&r).ok()?;
            compiled
                .applies_to(&card.id)
                .then(|| rule_row(&card.id, r, compiled.reason()))
        })
        .collect())
}

fn rule_row(card_id: &str, r: RuleRecord, reason: &'static str) -> RuleRow {
    RuleRow {
        shadow: r.mode == Mode::Shadow.as_str(),
        scope: scope_words(card_id, r.card_ids.as_deref()),
        conditions: conditions_words(&r.conditions),
        reason,
        id: r.id,
        name: r.name,
        mode: r.mode,
        priority: r.priority,
        version: r.version,
    }
}

/// One recorded match of a rule.
pub(crate) struct MatchRow {
    pub at: String,
    pub transaction_id: String,
    pub rule_id: String,
    pub rule_name: String,
    pub version: i64,
    pub mode: String,
    pub shadow: bool,
    /// What the match did, in words.
    pub effect: &'static str,
    pub badge: &'static str,
}

pub(crate) fn match_row(m: RuleMatch) -> MatchRow {
    let r = m.result;
    let shadow = r.mode == Mode::Shadow.as_str();
    let (effect, badge) = match (shadow, r.decided.as_str()) {
        (true, _) => ("recorded only (shadow rules never decline)", "warn"),
        (false, "declined") => ("declined the authorization", "bad"),
        _ => ("none", ""),
    };
    MatchRow {
        at: view::time(r.evaluated_at),
        rule_name: m.rule_name.unwrap_or_else(|| "—".to_owned()),
        transaction_id: r.transaction_id,
        rule_id: r.rule_id,
        version: r.version,
        mode: r.mode,
        shadow,
        effect,
        badge,
    }
}

/// Matches of these transactions, newest first, at most `shown`; and whether there were
/// more than that.
pub(crate) async fn matches_of(
    conn: &mut Conn,
    project_id: &str,
    transaction_ids: &[String],
    shown: i64,
) -> Result<(Vec<MatchRow>, bool), ConsoleError> {
    let mut found =
        controls::results_of_transactions(conn, project_id, transaction_ids, shown + 1).await?;
    let more = found.len() > usize::try_from(shown).unwrap_or(0);
    found.truncate(usize::try_from(shown).unwrap_or(0));
    Ok((found.into_iter().map(match_row).collect(), more))
}

/// What `failure_reason` means, in words.
fn reason_words(reason: &str) -> &'static str {
    match reason {
        "card_not_active" => "The card was not active (frozen, closed, or not issued yet).",
        "mcc_blocked" => "An active rule blocks this merchant category (MCC).",
        "country_blocked" => "An active rule blocks the merchant's country.",
        "merchant_blocked" => "An active rule blocks this merchant by name.",
        "rule_declined" => "All the conditions of an active rule held.",
        "spending_limit_exceeded" => "It would have gone past one of the card's spending limits.",
        "insufficient_funds" => "The card's available funds were below the amount.",
        "webhook_declined" => "The project's decision webhook declined it.",
        "webhook_timeout" => {
            "The decision webhook gave no answer in time, and its on_timeout is decline."
        }
        "webhook_error" => {
            "The decision webhook's answer was not usable, and its on_timeout is decline."
        }
        "expired" => "The hold was not cleared within the hold expiry and was released.",
        _ => "",
    }
}

/// A JSON number of units (as `card_tx_data` carries amounts) shown as money.
fn units(v: &Value) -> Option<String> {
    let f = v.as_f64()?;
    Some(Amount::from_micros((f * 1_000_000.0).round() as i64).to_string())
}

/// The limit that declined, from the `decline` object.
fn limit_words_of(d: &Value) -> String {
    let interval = interval_words(
        d["interval"].as_str().unwrap_or("?"),
        d["window_seconds"]
            .as_u64()
            .and_then(|s| u32::try_from(s).ok()),
    );
    let limit = limit_words(units(&d["limit"]), d["count"].as_u64());
    let mccs = match d["mccs"].as_array() {
        Some(m) if !m.is_empty() => format!(
            " (MCCs {})",
            m.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        _ => String::new(),
    };
    if d["interval"] == "per_authorization" {
        return format!("The per-authorization limit of {limit}{mccs}: this amount is above it.");
    }
    format!(
        "The {interval} limit of {limit}{mccs}: its window had already counted {} USD and {} authorizations before this one.",
        units(&d["spent"]).unwrap_or_else(|| "0.00".to_owned()),
        d["used_count"].as_u64().unwrap_or(0),
    )
}

pub(crate) struct RuleRef {
    pub id: String,
    pub name: String,
}

/// Why a transaction was declined: its reason in words and the details of the
/// `decline` object (the limit, or the declining rules with their names).
pub(crate) struct DeclineView {
    pub reason: String,
    pub words: &'static str,
    pub limit: Option<String>,
    /// Declining rules, the one that gave the reason first.
    pub rules: Vec<RuleRef>,
    pub decision_reason: Option<String>,
}

pub(crate) fn decline_view(t: &CardTxRecord, matches: &[MatchRow]) -> Option<DeclineView> {
    if t.status != "declined" {
        return None;
    }
    let reason = t.failure_reason.clone().unwrap_or_default();
    let detail = t.decline.as_ref();
    let limit = detail
        .filter(|d| d.get("interval").is_some())
        .map(limit_words_of);
    let rules = detail
        .and_then(|d| d["rule_ids"].as_array())
        .map(|ids| {
            ids.iter()
                .filter_map(Value::as_str)
                .map(|id| {
                    let name = matches
                        .iter()
                        .find(|m| m.rule_id == id)
                        .map(|m| m.rule_name.clone())
                        .unwrap_or_else(|| "—".to_owned());
                    RuleRef {
                        id: id.to_owned(),
                        name,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Some(DeclineView {
        words: reason_words(&reason),
        reason,
        limit,
        rules,
        decision_reason: t.decision_reason.clone(),
    })
}

/// What the project's decision webhook did for this transaction, in words.
pub(crate) fn webhook_words(t: &CardTxRecord) -> String {
    let reason = t.failure_reason.as_deref();
    let on_timeout = t.decision_on_timeout.as_deref();
    match t.decision_state.as_deref() {
        None => "Not asked.".to_owned(),
        Some(issuing_store::card_txs::AWAITING) => format!(
            "Waiting for its answer until {}; without one, on_timeout ({}) applies.",
            view::opt_time(t.decision_deadline),
            on_timeout.unwrap_or("decline")
        ),
        Some(_) => match (reason, on_timeout) {
            (None, None) => "Approved without a call (stand_in mode, on_timeout approve).".into(),
            (None, Some("approve")) => {
                "Approved: by the webhook, or by on_timeout approve after no usable answer.".into()
            }
            (None, Some(_)) => "Approved by the webhook.".into(),
            (Some("webhook_declined"), _) => match &t.decision_reason {
                Some(why) => format!("Declined by the webhook, which said: {why}"),
                None => "Declined by the webhook (it gave no reason).".into(),
            },
            (Some("webhook_timeout"), None) => {
                "Declined without a call (stand_in mode, or no time left to call), by on_timeout decline.".into()
            }
            (Some("webhook_timeout"), Some(_)) => {
                "No answer within its timeout_ms; declined by on_timeout decline.".into()
            }
            (Some("webhook_error"), _) => {
                "Its answer was not usable (status, seal or body); declined by on_timeout decline.".into()
            }
            (Some(other), _) => format!("Declined while its answer was awaited: {other}."),
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn conditions_read_as_words() {
        let c = json!([
            {"attribute": "mcc", "operator": "is_one_of", "value": ["7995", "7801"]},
            {"attribute": "amount", "operator": "greater_than", "value": "100"}
        ]);
        assert_eq!(
            conditions_words(&c),
            "mcc is one of 7995, 7801 and amount greater than 100"
        );
        assert_eq!(scope_words("c", None), "every card of the project");
        assert_eq!(
            scope_words("c", Some(&["c".to_owned(), "d".to_owned()][..])),
            "this card and 1 other"
        );
    }

    #[test]
    fn a_limit_decline_reads_as_words() {
        let d = json!({"interval": "daily", "limit": 20.0, "spent": 15.5, "used_count": 2});
        assert_eq!(
            limit_words_of(&d),
            "The daily limit of 20.00 USD: its window had already counted 15.50 USD and 2 authorizations before this one."
        );
        let d = json!({"interval": "per_authorization", "limit": 5.0, "mccs": ["5411"]});
        assert_eq!(
            limit_words_of(&d),
            "The per-authorization limit of 5.00 USD (MCCs 5411): this amount is above it."
        );
    }
}
