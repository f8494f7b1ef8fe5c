//! Text rules of every request, checked once for the whole request: no string value
//! and no object key may hold a control character (`char::is_control`: NUL and the
//! other C0 controls, DEL, C1). PostgreSQL cannot store NUL in text, and no field of
//! the API has a use for any of them. The API's envelope layer applies it to every
//! `/api/v2` request, and the Lithic routes to every signed message (the same rule for
//! whatever reaches the store).

use serde_json::Value;
use std::fmt::Write;

/// One step of a field path.
enum Step<'a> {
    Root,
    Key(&'a str),
    Index(usize),
}

/// The first string value or object key holding a control character, as a field path:
/// `kyc_data.address.line1`, `items[2]`, or the key itself when the key is the problem.
/// Iterative, so nesting cannot exhaust the stack; a path is only spelled out for the
/// field that fails (each visited value costs one small `steps` entry).
pub fn find_control_char(value: &Value) -> Option<String> {
    // steps[i] = (index of the parent step, this step).
    let mut steps: Vec<(usize, Step<'_>)> = vec![(0, Step::Root)];
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((v, at)) = stack.pop() {
        match v {
            Value::String(s) if has_control(s) => return Some(spell(&steps, at)),
            Value::Array(items) => {
                // Reversed, so the first bad item is the one reported.
                for (i, item) in items.iter().enumerate().rev() {
                    steps.push((at, Step::Index(i)));
                    stack.push((item, steps.len() - 1));
                }
            }
            Value::Object(map) => {
                if let Some(key) = map.keys().find(|k| has_control(k)) {
                    steps.push((at, Step::Key(key)));
                    return Some(spell(&steps, steps.len() - 1));
                }
                for (key, item) in map.iter().rev() {
                    steps.push((at, Step::Key(key)));
                    stack.push((item, steps.len() - 1));
                }
            }
            _ => {}
        }
    }
    None
}

/// The path from the root to `steps[at]`.
fn spell(steps: &[(usize, Step<'_>)], mut at: usize) -> String {
    let mut chain = Vec::new();
    while at != 0 {
        chain.push(&steps[at].1);
        at = steps[at].0;
    }
    let mut path = String::new();
    for step in chain.into_iter().rev() {
        match step {
            Step::Root => {}
            Step::Key(k) => {
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
            }
            Step::Index(i) => {
                let _ = write!(path, "[{i}]");
            }
        }
    }
    path
}

/// Whether `s` holds a control character.
pub fn has_control(s: &str) -> bool {
    s.chars().any(char::is_control)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn clean_values_pass() {
        let v = json!({
            "external_user_id": "alice",
            "kyc_data": {"address": {"line1": "1 Main St", "city": "Zürich 東京 🙂"}},
            "items": ["a", 1, null, true, {"x": "y"}],
            "amount": 10.5,
        });
        assert_eq!(find_control_char(&v), None);
        assert!(!has_control("Zürich 東京 🙂"));
        assert!(has_control("a\u{0}"));
    }

    #[test]
    fn names_the_field() {
        let v = json!({"kyc_data": {"address": {"line1": "1 Main\u{0} St"}}});
        assert_eq!(
            find_control_char(&v).as_deref(),
            Some("kyc_data.address.line1")
        );
        let v = json!({"items": ["a", "b", "c\u{7}"]});
        assert_eq!(find_control_char(&v).as_deref(), Some("items[2]"));
        let v = json!({"a": [{"b": [1, {"c": "\u{1b}"}]}]});
        assert_eq!(find_control_char(&v).as_deref(), Some("a[0].b[1].c"));
        let v = json!({"a": "ok", "z": "\u{0}", "m": "\n"});
        // The first in key order (serde_json keeps keys sorted).
        assert_eq!(find_control_char(&v).as_deref(), Some("m"));
        assert_eq!(find_control_char(&json!("\u{85}")).as_deref(), Some(""));
    }

    #[test]
    fn every_control_character_is_refused() {
        for c in (0u32..0x20).chain([0x7f]).chain(0x80..0xa0) {
            let c = char::from_u32(c).unwrap();
            let v = json!({ "f": format!("a{c}b") });
            assert_eq!(find_control_char(&v).as_deref(), Some("f"), "{c:?}");
        }
        // Not control characters: format characters, separators, private use.
        for s in ["\u{200b}", "\u{2028}", "\u{feff}", "\u{e000}", "\u{a0}"] {
            assert_eq!(find_control_char(&json!({ "f": s })), None, "{s:?}");
        }
    }

    #[test]
    fn keys_are_checked_too() {
        let v = json!({"kyc_data": {"li\u{0}ne1": "x"}});
        assert_eq!(
            find_control_char(&v).as_deref(),
            Some("kyc_data.li\u{0}ne1")
        );
        assert_eq!(find_control_char(&json!({"\t": 1})).as_deref(), Some("\t"));
    }

    #[test]
    fn deep_nesting_does_not_overflow() {
        let mut v = json!("bad\u{0}");
        for _ in 0..20_000 {
            v = Value::Array(vec![v]);
        }
        let path = find_control_char(&v).unwrap();
        assert_eq!(path, "[0]".repeat(20_000));
        // Dropping a deep Value recurses; leak it instead of overflowing the test stack.
        std::mem::forget(v);
    }
}
