//! Stage 2: the project's rules. Every rule that is not inactive is evaluated; any
//! active match declines, with the reason of the matching rule with the lowest
//! (priority, created_at); shadow rules never decline. Every match is recorded.

use super::Decline;
use issuing_domain::controls::rules::{evaluate, Attributes, Mode, Rule};
use issuing_domain::ids::new_id;
use issuing_store::controls::RuleResult;
use serde_json::json;

/// The rules' verdict: a decline (or none) and the results to record.
pub fn check(
    rules: &[Rule],
    project_id: &str,
    card_id: &str,
    transaction_id: &str,
    attributes: &Attributes,
    now: i64,
) -> (Option<Decline>, Vec<RuleResult>) {
    if rules.is_empty() {
        return (None, Vec::new());
    }
    let verdict = evaluate(rules, card_id, attributes);
    let declined = !verdict.declining.is_empty();
    let results = verdict
        .matched
        .iter()
        .map(|r| RuleResult {
            id: new_id(),
            project_id: project_id.to_owned(),
            rule_id: r.id.clone(),
            version: r.version,
            transaction_id: transaction_id.to_owned(),
            card_id: card_id.to_owned(),
            mode: r.mode.as_str().to_owned(),
            decided: if r.mode == Mode::Active && declined {
                "declined"
            } else {
                "none"
            }
            .to_owned(),
            evaluated_at: now,
        })
        .collect();
    let decline = verdict.reason().map(|reason| Decline {
        reason,
        detail: Some(json!({
            "rule_ids": verdict.declining.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        })),
    });
    (decline, results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use issuing_domain::controls::rules::parse_conditions;

    fn rule(id: &str, mode: Mode, priority: i64) -> Rule {
        let (conditions, _) = parse_conditions(
            &json!([{"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}]),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        Rule {
            id: id.into(),
            version: 3,
            mode,
            priority,
            created_at: 1,
            card_ids: vec![],
            conditions,
        }
    }

    #[test]
    fn active_matches_decline_and_every_match_is_recorded() {
        let rules = [
            rule("late", Mode::Active, 200),
            rule("early", Mode::Active, 10),
            rule("watch", Mode::Shadow, 1),
        ];
        let casino = Attributes::new("7995", "US", "Casino", 5);
        let (decline, results) = check(&rules, "p", "c", "t", &casino, 9);
        let decline = decline.unwrap_or_else(|| panic!("declined"));
        assert_eq!(decline.reason, "mcc_blocked");
        assert_eq!(decline.detail, Some(json!({"rule_ids": ["early", "late"]})));
        let mut got: Vec<(String, String, i64)> = results
            .into_iter()
            .map(|r| (r.rule_id, r.decided, r.version))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                ("early".into(), "declined".into(), 3),
                ("late".into(), "declined".into(), 3),
                ("watch".into(), "none".into(), 3)
            ]
        );
    }

    #[test]
    fn shadow_rules_never_decline() {
        let rules = [rule("watch", Mode::Shadow, 1)];
        let (decline, results) = check(
            &rules,
            "p",
            "c",
            "t",
            &Attributes::new("7995", "US", "x", 5),
            9,
        );
        assert_eq!(decline, None);
        assert_eq!(results.len(), 1);
        let (decline, results) = check(
            &rules,
            "p",
            "c",
            "t",
            &Attributes::new("5411", "US", "x", 5),
            9,
        );
        assert_eq!((decline, results.len()), (None, 0));
    }
}
