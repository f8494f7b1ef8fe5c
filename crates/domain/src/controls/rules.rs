//! Authorization rules (CONTRACT §11): conditions on the merchant and the amount, the
//! modes, and which rules decline an authorization and with what reason. Pure: the
//! rules come in compiled, the authorization as its attributes.

use super::limits::is_mcc;
use issuing_wire::{Amount, ApiError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// At most this many rules that are not `inactive` per project.
pub const MAX_ENABLED_RULES: i64 = 50;
pub const MAX_CONDITIONS: usize = 20;
pub const MAX_VALUES: usize = 500;
pub const MAX_TEXT_LEN: usize = 128;
pub const MAX_NAME_LEN: usize = 128;
pub const MAX_CARD_IDS: usize = 100;
pub const DEFAULT_PRIORITY: i64 = 100;
/// Priorities are bounded so that sorting and storage never overflow.
pub const MAX_PRIORITY: i64 = 1_000_000;

/// Why a rule declined (`failure_reason`).
pub const REASON_MCC: &str = "mcc_blocked";
pub const REASON_COUNTRY: &str = "country_blocked";
pub const REASON_MERCHANT: &str = "merchant_blocked";
pub const REASON_RULE: &str = "rule_declined";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    Active,
    Shadow,
    Inactive,
}

impl Mode {
    pub const fn as_str(self) -> &'static str {
        match self {
            Mode::Active => "active",
            Mode::Shadow => "shadow",
            Mode::Inactive => "inactive",
        }
    }

    pub fn parse(s: &str) -> Option<Mode> {
        [Mode::Active, Mode::Shadow, Mode::Inactive]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attribute {
    Mcc,
    MerchantCountry,
    MerchantName,
    Amount,
}

impl Attribute {
    fn parse(s: &str) -> Option<Attribute> {
        match s {
            "mcc" => Some(Attribute::Mcc),
            "merchant_country" => Some(Attribute::MerchantCountry),
            "merchant_name" => Some(Attribute::MerchantName),
            "amount" => Some(Attribute::Amount),
            _ => None,
        }
    }
}

/// One condition, validated; `value` is kept in the form the API answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub attribute: Attribute,
    pub test: Test,
}

/// What a condition tests, with its operand normalised for matching.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Test {
    /// `is_one_of` (`negate` false) or `is_not_one_of`: values compared exactly for MCCs,
    /// upper case for countries, case-insensitively for merchant names.
    OneOf {
        values: Vec<String>,
        negate: bool,
    },
    /// `contains`, case-insensitive (merchant_name only); the needle in lower case.
    Contains(String),
    /// Amount comparisons, in micro-units.
    GreaterThan(i64),
    GreaterOrEqual(i64),
    LessThan(i64),
    LessOrEqual(i64),
}

/// The attributes of an authorization the rules look at, normalised once for every
/// rule: the country in upper case, the merchant name in lower case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    mcc: String,
    merchant_country: String,
    merchant_name: String,
    amount: i64,
}

impl Attributes {
    pub fn new(mcc: &str, merchant_country: &str, merchant_name: &str, amount: i64) -> Self {
        Attributes {
            mcc: mcc.to_owned(),
            merchant_country: merchant_country.to_ascii_uppercase(),
            merchant_name: merchant_name.to_lowercase(),
            amount,
        }
    }
}

impl Condition {
    pub fn holds(&self, a: &Attributes) -> bool {
        let text = |attribute| match attribute {
            Attribute::Mcc => a.mcc.as_str(),
            Attribute::MerchantCountry => a.merchant_country.as_str(),
            Attribute::MerchantName => a.merchant_name.as_str(),
            Attribute::Amount => "",
        };
        match &self.test {
            Test::OneOf { values, negate } => {
                let v = text(self.attribute);
                values.iter().any(|x| x == v) != *negate
            }
            Test::Contains(needle) => text(self.attribute).contains(needle.as_str()),
            Test::GreaterThan(x) => a.amount > *x,
            Test::GreaterOrEqual(x) => a.amount >= *x,
            Test::LessThan(x) => a.amount < *x,
            Test::LessOrEqual(x) => a.amount <= *x,
        }
    }
}

fn bad(i: usize, why: impl std::fmt::Display) -> ApiError {
    ApiError::validation(format!("conditions[{i}]: {why}"))
}

/// Validates one condition `{attribute, operator, value}`; answers it and its
/// normalised JSON (what is stored and shown).
pub fn parse_condition(i: usize, raw: &Value) -> Result<(Condition, Value), ApiError> {
    let field = |name: &str| raw.get(name).and_then(Value::as_str).map(str::trim);
    let attribute_name = field("attribute").ok_or_else(|| bad(i, "attribute is required"))?;
    let attribute = Attribute::parse(attribute_name).ok_or_else(|| {
        bad(
            i,
            "attribute must be one of: mcc, merchant_country, merchant_name, amount",
        )
    })?;
    let operator = field("operator").ok_or_else(|| bad(i, "operator is required"))?;
    let value = raw.get("value").unwrap_or(&Value::Null);
    let misfit = || {
        bad(
            i,
            format!("operator {operator} does not apply to {attribute_name}"),
        )
    };
    let (test, shown) = match operator {
        "is_one_of" | "is_not_one_of" => {
            if attribute == Attribute::Amount {
                return Err(misfit());
            }
            let list = value
                .as_array()
                .filter(|l| !l.is_empty() && l.len() <= MAX_VALUES)
                .ok_or_else(|| {
                    bad(
                        i,
                        format!("value must be a list of 1 to {MAX_VALUES} strings"),
                    )
                })?;
            let mut shown = Vec::with_capacity(list.len());
            let mut values = Vec::with_capacity(list.len());
            for v in list {
                let s = v
                    .as_str()
                    .map(str::trim)
                    .filter(|s| !s.is_empty() && s.chars().count() <= MAX_TEXT_LEN)
                    .ok_or_else(|| {
                        bad(
                            i,
                            format!("values must be strings of 1 to {MAX_TEXT_LEN} characters"),
                        )
                    })?;
                let (show, compare) = match attribute {
                    Attribute::Mcc if !is_mcc(s) => {
                        return Err(bad(i, format!("mcc {s:?} is not 4 digits")))
                    }
                    Attribute::MerchantCountry
                        if !(s.len() == 2 && s.bytes().all(|b| b.is_ascii_alphabetic())) =>
                    {
                        return Err(bad(
                            i,
                            format!("merchant_country {s:?} is not an ISO alpha-2 code"),
                        ))
                    }
                    Attribute::MerchantCountry => {
                        (s.to_ascii_uppercase(), s.to_ascii_uppercase())
                    }
                    Attribute::MerchantName => (s.to_owned(), s.to_lowercase()),
                    _ => (s.to_owned(), s.to_owned()),
                };
                shown.push(Value::String(show));
                values.push(compare);
            }
            let test = Test::OneOf {
                values,
                negate: operator == "is_not_one_of",
            };
            (test, Value::Array(shown))
        }
        "contains" => {
            if attribute != Attribute::MerchantName {
                return Err(misfit());
            }
            let s = value
                .as_str()
                .map(str::trim)
                .filter(|s| !s.is_empty() && s.chars().count() <= MAX_TEXT_LEN)
                .ok_or_else(|| {
                    bad(
                        i,
                        format!("value must be a string of 1 to {MAX_TEXT_LEN} characters"),
                    )
                })?;
            (Test::Contains(s.to_lowercase()), Value::String(s.to_owned()))
        }
        "greater_than" | "greater_or_equal" | "less_than" | "less_or_equal" => {
            if attribute != Attribute::Amount {
                return Err(misfit());
            }
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.as_str().to_owned(),
                _ => String::new(),
            };
            let amount = Amount::parse_decimal(&text)
                .ok()
                .filter(|a| a.micros() >= 0)
                .ok_or_else(|| bad(i, "value must be a decimal amount such as \"100.00\""))?;
            let m = amount.micros();
            let test = match operator {
                "greater_than" => Test::GreaterThan(m),
                "greater_or_equal" => Test::GreaterOrEqual(m),
                "less_than" => Test::LessThan(m),
                _ => Test::LessOrEqual(m),
            };
            (test, Value::String(amount.to_string()))
        }
        _ => {
            return Err(bad(
                i,
                "operator must be one of: is_one_of, is_not_one_of, contains, greater_than, greater_or_equal, less_than, less_or_equal",
            ))
        }
    };
    let shown = serde_json::json!({
        "attribute": attribute_name,
        "operator": operator,
        "value": shown,
    });
    Ok((Condition { attribute, test }, shown))
}

/// Validates a rule's conditions: 1 to `MAX_CONDITIONS`.
pub fn parse_conditions(raw: &Value) -> Result<(Vec<Condition>, Value), ApiError> {
    let list = raw
        .as_array()
        .filter(|l| !l.is_empty() && l.len() <= MAX_CONDITIONS)
        .ok_or_else(|| {
            ApiError::validation(format!(
                "conditions must be a list of 1 to {MAX_CONDITIONS} conditions"
            ))
        })?;
    let mut parsed = Vec::with_capacity(list.len());
    let mut shown = Vec::with_capacity(list.len());
    for (i, c) in list.iter().enumerate() {
        let (cond, json) = parse_condition(i, c)?;
        parsed.push(cond);
        shown.push(json);
    }
    Ok((parsed, Value::Array(shown)))
}

/// A rule ready to be evaluated (the current version of a rule that is not inactive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub id: String,
    pub version: i64,
    pub mode: Mode,
    pub priority: i64,
    pub created_at: i64,
    /// Empty: every card of the project.
    pub card_ids: Vec<String>,
    pub conditions: Vec<Condition>,
}

impl Rule {
    pub fn matches(&self, card_id: &str, a: &Attributes) -> bool {
        self.applies_to(card_id) && self.conditions.iter().all(|c| c.holds(a))
    }

    /// Whether authorizations on `card_id` are evaluated against this rule at all: it
    /// is not inactive and its scope is every card or names this one.
    pub fn applies_to(&self, card_id: &str) -> bool {
        self.mode != Mode::Inactive
            && (self.card_ids.is_empty() || self.card_ids.iter().any(|c| c == card_id))
    }

    /// The `failure_reason` this rule gives when it declines.
    pub fn reason(&self) -> &'static str {
        let all = |attr| self.conditions.iter().all(|c| c.attribute == attr);
        if all(Attribute::Mcc) {
            REASON_MCC
        } else if all(Attribute::MerchantCountry) {
            REASON_COUNTRY
        } else if all(Attribute::MerchantName) {
            REASON_MERCHANT
        } else {
            REASON_RULE
        }
    }
}

/// What the rules say about one authorization.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verdict<'r> {
    /// Every matching rule (active and shadow), to be recorded.
    pub matched: Vec<&'r Rule>,
    /// The matching active rules, lowest (priority, created_at) first; non-empty means
    /// declined.
    pub declining: Vec<&'r Rule>,
}

impl Verdict<'_> {
    /// The decline reason, from the first declining rule.
    pub fn reason(&self) -> Option<&'static str> {
        self.declining.first().map(|r| r.reason())
    }
}

/// Evaluates every rule for an authorization on `card_id`. Shadow rules never decline.
pub fn evaluate<'r>(rules: &'r [Rule], card_id: &str, a: &Attributes) -> Verdict<'r> {
    let matched: Vec<&Rule> = rules.iter().filter(|r| r.matches(card_id, a)).collect();
    let mut declining: Vec<&Rule> = matched
        .iter()
        .copied()
        .filter(|r| r.mode == Mode::Active)
        .collect();
    declining
        .sort_by(|x, y| (x.priority, x.created_at, &x.id).cmp(&(y.priority, y.created_at, &y.id)));
    Verdict { matched, declining }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(id: &str, mode: Mode, priority: i64, created_at: i64, conditions: Value) -> Rule {
        let (conditions, _) = parse_conditions(&conditions).unwrap_or_else(|e| panic!("{e}"));
        Rule {
            id: id.into(),
            version: 1,
            mode,
            priority,
            created_at,
            card_ids: vec![],
            conditions,
        }
    }

    fn purchase(mcc: &str, country: &str, name: &str, amount: i64) -> Attributes {
        Attributes::new(mcc, country, name, amount)
    }

    #[test]
    fn operators_fit_their_attributes() {
        for (attribute, operator, value) in [
            ("amount", "is_one_of", json!(["1"])),
            ("mcc", "contains", json!("54")),
            ("merchant_country", "greater_than", json!("1")),
            ("merchant_name", "less_than", json!("1")),
            ("mcc", "is_one_of", json!(["541"])),
            ("merchant_country", "is_one_of", json!(["USA"])),
            ("amount", "greater_than", json!("-1")),
            ("amount", "greater_than", json!("1.0000001")),
            ("mcc", "is_one_of", json!([])),
            ("mcc", "matches", json!(["5411"])),
            ("color", "is_one_of", json!(["red"])),
        ] {
            let c = json!({"attribute": attribute, "operator": operator, "value": value});
            assert!(parse_condition(0, &c).is_err(), "{c}");
        }
        let (_, shown) = parse_condition(
            0,
            &json!({"attribute": "merchant_country", "operator": "is_one_of", "value": ["us"]}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(shown["value"], json!(["US"]));
        let (_, shown) = parse_condition(
            0,
            &json!({"attribute": "amount", "operator": "greater_than", "value": 100}),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(shown["value"], json!("100.00"));
    }

    #[test]
    fn matching() {
        let mcc = rule(
            "a",
            Mode::Active,
            100,
            1,
            json!([{"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}]),
        );
        let p = purchase("7995", "US", "Casino", 1);
        assert!(mcc.matches("c", &p));
        assert!(!mcc.matches("c", &purchase("5411", "US", "Shop", 1)));
        let name = rule(
            "b",
            Mode::Active,
            100,
            1,
            json!([{"attribute": "merchant_name", "operator": "contains", "value": "CASINO"}]),
        );
        assert!(name.matches("c", &purchase("5411", "US", "Grand casino royale", 1)));
        let allow = rule(
            "c",
            Mode::Active,
            100,
            1,
            json!([{"attribute": "merchant_country", "operator": "is_not_one_of", "value": ["us", "ca"]}]),
        );
        assert!(!allow.matches("c", &purchase("5411", "us", "x", 1)));
        assert!(allow.matches("c", &purchase("5411", "FR", "x", 1)));
        let big = rule(
            "d",
            Mode::Active,
            100,
            1,
            json!([
                {"attribute": "amount", "operator": "greater_or_equal", "value": "100"},
                {"attribute": "mcc", "operator": "is_one_of", "value": ["5411"]}
            ]),
        );
        assert!(big.matches("c", &purchase("5411", "US", "x", 100_000_000)));
        assert!(!big.matches("c", &purchase("5411", "US", "x", 99_999_999)));
        assert!(!big.matches("c", &purchase("5412", "US", "x", 100_000_000)));
        assert_eq!(big.reason(), REASON_RULE);
        let mut scoped = mcc.clone();
        scoped.card_ids = vec!["other".into()];
        assert!(!scoped.matches("c", &p));
        assert!(!scoped.applies_to("c") && scoped.applies_to("other"));
        assert!(mcc.applies_to("c"), "no scope: every card");
        let mut off = mcc.clone();
        off.mode = Mode::Inactive;
        assert!(!off.matches("c", &p));
        assert!(!off.applies_to("c"));
    }

    #[test]
    fn reason_from_lowest_priority_then_oldest() {
        let rules = vec![
            rule(
                "country",
                Mode::Active,
                10,
                5,
                json!([{"attribute": "merchant_country", "operator": "is_one_of", "value": ["RU"]}]),
            ),
            rule(
                "mcc",
                Mode::Active,
                10,
                3,
                json!([{"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}]),
            ),
            rule(
                "name",
                Mode::Active,
                50,
                1,
                json!([{"attribute": "merchant_name", "operator": "is_one_of", "value": ["Bad"]}]),
            ),
            rule(
                "shadow",
                Mode::Shadow,
                1,
                1,
                json!([{"attribute": "mcc", "operator": "is_one_of", "value": ["7995"]}]),
            ),
        ];
        let v = evaluate(&rules, "c", &purchase("7995", "RU", "bad", 1));
        assert_eq!(v.matched.len(), 4);
        let ids: Vec<&str> = v.declining.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, ["mcc", "country", "name"]);
        assert_eq!(v.reason(), Some(REASON_MCC));
        // Shadow rules alone never decline.
        let v = evaluate(&rules[3..], "c", &purchase("7995", "RU", "bad", 1));
        assert_eq!((v.matched.len(), v.reason()), (1, None));
        let v = evaluate(&rules, "c", &purchase("5411", "DE", "good", 1));
        assert_eq!(v, Verdict::default());
    }
}
