//! Subproviders and card products. They are operator configuration (a section of the
//! config file); the built-in sandbox catalog of CONTRACT §8 is used when none is given.

use issuing_wire::{Amount, ApiError, ErrorSlug, MICROS_PER_UNIT};
use serde::Deserialize;
use std::collections::HashSet;

const MAX_CODE_LEN: usize = 64;
const MAX_NAME_CHARS: usize = 256;
/// Far above any real catalog; lookups are linear scans.
const MAX_ENTRIES: usize = 1000;
const BPS_PER_UNIT: i128 = 10_000;
/// A percent parsed as an Amount is in millionths of a percent; one basis point is 1/100 %.
const PERCENT_MICROS_PER_BP: i64 = 10_000;
const MAX_PERCENT_MICROS: i64 = 100_000_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreeDsMethod {
    /// Out of band: the cardholder confirms in an app (cards/3ds/confirm).
    Oob,
    /// A one-time password is sent (webhook `card_otp`).
    Otp,
}

impl ThreeDsMethod {
    pub const fn as_str(self) -> &'static str {
        match self {
            ThreeDsMethod::Oob => "OOB",
            ThreeDsMethod::Otp => "OTP",
        }
    }

    /// Any letter case: an operator writing `otp` means OTP.
    pub fn parse(text: &str) -> Option<Self> {
        [ThreeDsMethod::Oob, ThreeDsMethod::Otp]
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(text.trim()))
    }
}

/// Who issues a subprovider's cards (CONTRACT §14).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProviderKind {
    /// The built-in provider: simulated in sandbox mode, refused in production.
    Sandbox,
    /// A Lithic program.
    Lithic(LithicSettings),
}

/// Where a Lithic program is and how its API key is found; the key itself comes from
/// the environment variable named here, never from the config file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LithicSettings {
    /// `https://sandbox.lithic.com` or `https://api.lithic.com`, without a trailing `/`.
    pub base_url: String,
    pub api_key_env: String,
    /// What one ASA decision may take (CONTRACT §14: default 2 s).
    pub asa_budget_ms: u64,
}

/// CONTRACT §14's default ASA budget, and the range an operator may set: Lithic's own
/// wait for an answer is several seconds, and below 100 ms no decision fits.
pub const DEFAULT_ASA_BUDGET_MS: u64 = 2_000;
const ASA_BUDGET_RANGE_MS: std::ops::RangeInclusive<u64> = 100..=5_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Subprovider {
    pub code: String,
    pub kind: ProviderKind,
    /// Cardholders under it must name a `product_code`.
    pub requires_product_code: bool,
    /// cards/details may answer the PAN and CVV in plaintext.
    pub plaintext_details: bool,
    pub withdraw_supported: bool,
    pub three_ds_method: ThreeDsMethod,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pricing {
    pub issue_fee: Amount,
    /// Basis points: 1% = 100.
    pub topup_fee_bps: i64,
    pub topup_fee_fixed: Amount,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub topup_min: Amount,
    pub topup_max: Amount,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Product {
    pub code: String,
    pub name: String,
    pub subprovider_code: String,
    pub active: bool,
    /// ISO 4217, uppercase, e.g. "USD".
    pub card_currency: String,
    /// Zero when `pricing_problem` is set.
    pub pricing: Pricing,
    /// Zero when `limits_problem` is set.
    pub limits: Limits,
    /// Why the configured pricing is unusable; the product then answers `invalid_pricing`.
    pub pricing_problem: Option<String>,
    /// Why the configured limits are unusable (`card_product_limits_invalid`).
    pub limits_problem: Option<String>,
}

impl Product {
    /// The percent part rounded up to the micro-unit (never undercharge), plus the fixed
    /// part. Meaningful only once `check_usable` passed.
    pub fn topup_fee(&self, amount: Amount) -> Amount {
        let scaled = i128::from(amount.micros()) * i128::from(self.pricing.topup_fee_bps);
        // Integer division truncates toward zero, which is already up for negatives.
        let mut percent = scaled / BPS_PER_UNIT;
        if scaled % BPS_PER_UNIT > 0 {
            percent += 1;
        }
        let total = percent + i128::from(self.pricing.topup_fee_fixed.micros());
        let saturated = if total < 0 { i64::MIN } else { i64::MAX };
        Amount::from_micros(i64::try_from(total).unwrap_or(saturated))
    }

    /// Whether the operator's pricing and limits for this product can be used at all.
    pub fn check_usable(&self) -> Result<(), ApiError> {
        if let Some(problem) = &self.pricing_problem {
            return Err(ApiError::new(ErrorSlug::InvalidPricing, problem.clone()));
        }
        if let Some(problem) = &self.limits_problem {
            return Err(ApiError::new(
                ErrorSlug::CardProductLimitsInvalid,
                problem.clone(),
            ));
        }
        Ok(())
    }

    /// Both limits are inclusive.
    pub fn check_topup_amount(&self, amount: Amount) -> Result<(), ApiError> {
        // Zero limits stand in for broken ones; they must not read as "above maximum".
        if let Some(problem) = &self.limits_problem {
            return Err(ApiError::new(
                ErrorSlug::CardProductLimitsInvalid,
                problem.clone(),
            ));
        }
        if amount < self.limits.topup_min {
            return Err(ApiError::new(
                ErrorSlug::AmountBelowMinimum,
                format!(
                    "Amount is below the minimum of {} USDT",
                    self.limits.topup_min
                ),
            ));
        }
        if amount > self.limits.topup_max {
            return Err(ApiError::new(
                ErrorSlug::AmountAboveMaximum,
                format!(
                    "Amount is above the maximum of {} USDT",
                    self.limits.topup_max
                ),
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Catalog {
    subproviders: Vec<Subprovider>,
    products: Vec<Product>,
}

impl Catalog {
    /// CONTRACT §8, exactly.
    pub fn sandbox_default() -> Catalog {
        let sub = |code: &str, restricted: bool| Subprovider {
            code: code.to_owned(),
            kind: ProviderKind::Sandbox,
            requires_product_code: restricted,
            plaintext_details: !restricted,
            withdraw_supported: !restricted,
            three_ds_method: if restricted {
                ThreeDsMethod::Otp
            } else {
                ThreeDsMethod::Oob
            },
        };
        let units = |n: i64| Amount::from_micros(n * MICROS_PER_UNIT);
        let cents = |n: i64| Amount::from_micros(n * 10_000);
        let product = |code: &str, name: &str, subprovider: &str, active: bool| Product {
            code: code.to_owned(),
            name: name.to_owned(),
            subprovider_code: subprovider.to_owned(),
            active,
            card_currency: "USD".to_owned(),
            pricing: Pricing {
                issue_fee: units(2),
                topup_fee_bps: 100,
                topup_fee_fixed: cents(50),
            },
            limits: Limits {
                topup_min: units(10),
                topup_max: units(5000),
            },
            pricing_problem: None,
            limits_problem: None,
        };
        Catalog {
            subproviders: vec![sub("sandbox", false), sub("sandbox_restricted", true)],
            products: vec![
                product("virtual_usd", "Virtual USD card", "sandbox", true),
                product(
                    "virtual_usd_restricted",
                    "Virtual USD card (restricted provider)",
                    "sandbox_restricted",
                    true,
                ),
                product(
                    "virtual_usd_retired",
                    "Virtual USD card (retired)",
                    "sandbox",
                    false,
                ),
            ],
        }
    }

    /// Structural mistakes fail the load, all of them named in one message. Unusable
    /// pricing or limits only disable that product (see `warnings`), so one typo in a fee
    /// does not take the whole service down.
    pub fn from_config(cfg: &CatalogConfig) -> Result<Catalog, String> {
        if cfg.subproviders.len() > MAX_ENTRIES || cfg.products.len() > MAX_ENTRIES {
            return Err(format!(
                "invalid catalog: at most {MAX_ENTRIES} subproviders and {MAX_ENTRIES} products"
            ));
        }
        let mut errors = Vec::new();
        if cfg.products.is_empty() {
            errors.push("no card products are configured".to_owned());
        }

        let mut seen = HashSet::new();
        let mut subproviders = Vec::with_capacity(cfg.subproviders.len());
        for s in &cfg.subproviders {
            check_code("subprovider", &s.code, &mut seen, &mut errors);
            let three_ds_method = ThreeDsMethod::parse(&s.three_ds_method).unwrap_or_else(|| {
                errors.push(format!(
                    "subprovider {:?}: unknown three_ds_method {:?} (expected OOB or OTP)",
                    s.code, s.three_ds_method
                ));
                ThreeDsMethod::Oob
            });
            let kind = parse_kind(s, &mut errors);
            subproviders.push(Subprovider {
                code: s.code.clone(),
                kind,
                requires_product_code: s.requires_product_code,
                plaintext_details: s.plaintext_details,
                withdraw_supported: s.withdraw_supported,
                three_ds_method,
            });
        }

        let mut seen = HashSet::new();
        let mut products = Vec::with_capacity(cfg.products.len());
        for p in &cfg.products {
            check_code("product", &p.code, &mut seen, &mut errors);
            match subproviders.iter().find(|s| s.code == p.subprovider) {
                None => errors.push(format!(
                    "product {:?} references unknown subprovider {:?}",
                    p.code, p.subprovider
                )),
                // Lithic amounts are US cents, taken 1:1 as card currency units.
                Some(s)
                    if matches!(s.kind, ProviderKind::Lithic(_))
                        && !p.card_currency.trim().eq_ignore_ascii_case("USD") =>
                {
                    errors.push(format!(
                        "product {:?}: a lithic subprovider issues USD cards only",
                        p.code
                    ))
                }
                Some(_) => {}
            }
            let name = p.name.as_deref().unwrap_or(&p.code).trim();
            if name.is_empty() || name.chars().count() > MAX_NAME_CHARS {
                errors.push(format!(
                    "product {:?}: name must be 1 to {MAX_NAME_CHARS} characters",
                    p.code
                ));
            }
            let currency = p.card_currency.trim();
            if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_alphabetic()) {
                errors.push(format!(
                    "product {:?}: card_currency {:?} is not a 3-letter currency code",
                    p.code, p.card_currency
                ));
            }
            let (pricing, pricing_problem) = split(parse_pricing(p));
            let (limits, limits_problem) = split(parse_limits(p));
            products.push(Product {
                code: p.code.clone(),
                name: name.to_owned(),
                subprovider_code: p.subprovider.clone(),
                active: p.active,
                card_currency: currency.to_ascii_uppercase(),
                pricing,
                limits,
                pricing_problem,
                limits_problem,
            });
        }

        if errors.is_empty() {
            Ok(Catalog {
                subproviders,
                products,
            })
        } else {
            Err(format!("invalid catalog: {}", errors.join("; ")))
        }
    }

    pub fn subprovider(&self, code: &str) -> Option<&Subprovider> {
        self.subproviders.iter().find(|s| s.code == code)
    }

    pub fn product(&self, code: &str) -> Option<&Product> {
        self.products.iter().find(|p| p.code == code)
    }

    /// In config order.
    pub fn products(&self) -> &[Product] {
        &self.products
    }

    /// In config order.
    pub fn subproviders(&self) -> &[Subprovider] {
        &self.subproviders
    }

    /// The unusable pricing and limits recorded at load, for the server to log at start.
    pub fn warnings(&self) -> Vec<String> {
        self.products
            .iter()
            .flat_map(|p| [&p.pricing_problem, &p.limits_problem])
            .flatten()
            .cloned()
            .collect()
    }
}

/// The `[catalog]` section of the config file.
#[derive(Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct CatalogConfig {
    #[serde(default)]
    pub subproviders: Vec<SubproviderConfig>,
    #[serde(default)]
    pub products: Vec<ProductConfig>,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct SubproviderConfig {
    pub code: String,
    #[serde(default)]
    pub requires_product_code: bool,
    #[serde(default = "yes")]
    pub plaintext_details: bool,
    #[serde(default = "yes")]
    pub withdraw_supported: bool,
    /// "OOB" or "OTP".
    #[serde(default = "default_three_ds_method")]
    pub three_ds_method: String,
    /// `sandbox` (default) or `lithic`.
    #[serde(default)]
    pub kind: Option<String>,
    /// Lithic only: the API's base URL.
    #[serde(default)]
    pub base_url: Option<String>,
    /// Lithic only: the environment variable holding the API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// Lithic only: milliseconds one ASA decision may take (default 2000).
    #[serde(default)]
    pub asa_budget_ms: Option<u64>,
}

/// A subprovider's kind and its settings; problems are added to `errors`.
fn parse_kind(s: &SubproviderConfig, errors: &mut Vec<String>) -> ProviderKind {
    let code = &s.code;
    match s.kind.as_deref().map(str::trim).unwrap_or("sandbox") {
        "sandbox" => {
            if s.base_url.is_some() || s.api_key_env.is_some() || s.asa_budget_ms.is_some() {
                errors.push(format!(
                    "subprovider {code:?}: base_url, api_key_env and asa_budget_ms apply to kind \"lithic\" only"
                ));
            }
            ProviderKind::Sandbox
        }
        "lithic" => {
            let base_url = s.base_url.as_deref().map(str::trim).unwrap_or("");
            let url_ok = url::Url::parse(base_url).is_ok_and(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host().is_some()
                    && u.query().is_none()
                    && u.username().is_empty()
            });
            if !url_ok {
                errors.push(format!(
                    "subprovider {code:?}: base_url must be an http(s) URL such as https://sandbox.lithic.com"
                ));
            }
            let api_key_env = s.api_key_env.as_deref().map(str::trim).unwrap_or("");
            let env_ok = !api_key_env.is_empty()
                && api_key_env
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            if !env_ok {
                errors.push(format!(
                    "subprovider {code:?}: api_key_env must name an environment variable such as ISSUING_LITHIC_API_KEY"
                ));
            }
            let asa_budget_ms = s.asa_budget_ms.unwrap_or(DEFAULT_ASA_BUDGET_MS);
            if !ASA_BUDGET_RANGE_MS.contains(&asa_budget_ms) {
                errors.push(format!(
                    "subprovider {code:?}: asa_budget_ms must be between {} and {}",
                    ASA_BUDGET_RANGE_MS.start(),
                    ASA_BUDGET_RANGE_MS.end()
                ));
            }
            ProviderKind::Lithic(LithicSettings {
                base_url: base_url.trim_end_matches('/').to_owned(),
                api_key_env: api_key_env.to_owned(),
                asa_budget_ms,
            })
        }
        other => {
            errors.push(format!(
                "subprovider {code:?}: unknown kind {other:?} (expected sandbox or lithic)"
            ));
            ProviderKind::Sandbox
        }
    }
}

/// Amounts are decimal strings (`"2.00"`) so that no float ever touches money.
#[derive(Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ProductConfig {
    pub code: String,
    /// Defaults to the code.
    #[serde(default)]
    pub name: Option<String>,
    pub subprovider: String,
    #[serde(default = "yes")]
    pub active: bool,
    #[serde(default = "default_card_currency")]
    pub card_currency: String,
    pub issue_fee: String,
    /// A decimal percent with at most 2 places: "1" or "1.25".
    pub topup_fee_percent: String,
    pub topup_fee_fixed: String,
    pub topup_min: String,
    pub topup_max: String,
}

fn yes() -> bool {
    true
}

fn default_three_ds_method() -> String {
    ThreeDsMethod::Oob.as_str().to_owned()
}

fn default_card_currency() -> String {
    "USD".to_owned()
}

/// Codes appear in URLs, logs and database rows: keep them plain.
fn check_code(kind: &str, code: &str, seen: &mut HashSet<String>, errors: &mut Vec<String>) {
    let plain = (1..=MAX_CODE_LEN).contains(&code.len())
        && code
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !plain {
        errors.push(format!(
            "{kind} code {code:?} must be 1 to {MAX_CODE_LEN} of a-z, 0-9 and _"
        ));
    } else if !seen.insert(code.to_owned()) {
        errors.push(format!("duplicate {kind} code {code:?}"));
    }
}

fn split<T: Default>(parsed: Result<T, String>) -> (T, Option<String>) {
    match parsed {
        Ok(v) => (v, None),
        Err(problem) => (T::default(), Some(problem)),
    }
}

fn decimal(field: &str, text: &str, problems: &mut Vec<String>) -> Option<Amount> {
    match Amount::parse_decimal(text.trim()) {
        Ok(a) => Some(a),
        Err(e) => {
            problems.push(format!("{field} {text:?} is unusable ({e})"));
            None
        }
    }
}

fn fee(field: &str, text: &str, problems: &mut Vec<String>) -> Amount {
    match decimal(field, text, problems) {
        Some(a) if a < Amount::ZERO => {
            problems.push(format!("{field} must not be negative"));
            Amount::ZERO
        }
        Some(a) => a,
        None => Amount::ZERO,
    }
}

fn parse_pricing(p: &ProductConfig) -> Result<Pricing, String> {
    let mut problems = Vec::new();
    let issue_fee = fee("issue_fee", &p.issue_fee, &mut problems);
    let topup_fee_fixed = fee("topup_fee_fixed", &p.topup_fee_fixed, &mut problems);
    let percent = Amount::parse_decimal(p.topup_fee_percent.trim())
        .ok()
        .map(Amount::micros)
        .filter(|m| m % PERCENT_MICROS_PER_BP == 0);
    let topup_fee_bps = match percent {
        None => {
            problems.push(format!(
                "topup_fee_percent {:?} is not a percent with at most 2 decimals",
                p.topup_fee_percent
            ));
            0
        }
        Some(m) if m < 0 => {
            problems.push("topup_fee_percent must not be negative".to_owned());
            0
        }
        Some(m) if m > MAX_PERCENT_MICROS => {
            problems.push("topup_fee_percent must be at most 100".to_owned());
            0
        }
        Some(m) => m / PERCENT_MICROS_PER_BP,
    };
    if problems.is_empty() {
        Ok(Pricing {
            issue_fee,
            topup_fee_bps,
            topup_fee_fixed,
        })
    } else {
        Err(format!(
            "Card product {} has unusable pricing: {}",
            p.code,
            problems.join("; ")
        ))
    }
}

fn parse_limits(p: &ProductConfig) -> Result<Limits, String> {
    let mut problems = Vec::new();
    let min = decimal("topup_min", &p.topup_min, &mut problems);
    let max = decimal("topup_max", &p.topup_max, &mut problems);
    if min.is_some_and(|m| m <= Amount::ZERO) {
        problems.push("topup_min must be greater than zero".to_owned());
    }
    if max.is_some_and(|m| m <= Amount::ZERO) {
        problems.push("topup_max must be greater than zero".to_owned());
    }
    if let (Some(min), Some(max)) = (min, max) {
        if min > max {
            problems.push(format!("topup_min {min} is above topup_max {max}"));
        }
    }
    match (min, max) {
        (Some(topup_min), Some(topup_max)) if problems.is_empty() => Ok(Limits {
            topup_min,
            topup_max,
        }),
        _ => Err(format!(
            "Card product {} has unusable limits: {}",
            p.code,
            problems.join("; ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amt(text: &str) -> Amount {
        Amount::parse_decimal(text).unwrap()
    }

    fn load(toml_text: &str) -> Result<Catalog, String> {
        let cfg: CatalogConfig = toml::from_str(toml_text).unwrap();
        Catalog::from_config(&cfg)
    }

    #[test]
    fn sandbox_default_is_contract_section_8() {
        let c = Catalog::sandbox_default();
        let codes: Vec<&str> = c.subproviders().iter().map(|s| s.code.as_str()).collect();
        assert_eq!(codes, ["sandbox", "sandbox_restricted"]);

        let s = c.subprovider("sandbox").unwrap();
        assert!(!s.requires_product_code);
        assert!(s.plaintext_details);
        assert!(s.withdraw_supported);
        assert_eq!(s.three_ds_method, ThreeDsMethod::Oob);
        assert_eq!(s.three_ds_method.as_str(), "OOB");

        let r = c.subprovider("sandbox_restricted").unwrap();
        assert!(r.requires_product_code);
        assert!(!r.plaintext_details);
        assert!(!r.withdraw_supported);
        assert_eq!(r.three_ds_method, ThreeDsMethod::Otp);
        assert_eq!(r.three_ds_method.as_str(), "OTP");

        let codes: Vec<&str> = c.products().iter().map(|p| p.code.as_str()).collect();
        assert_eq!(
            codes,
            [
                "virtual_usd",
                "virtual_usd_restricted",
                "virtual_usd_retired"
            ]
        );
        for (code, sub, active) in [
            ("virtual_usd", "sandbox", true),
            ("virtual_usd_restricted", "sandbox_restricted", true),
            ("virtual_usd_retired", "sandbox", false),
        ] {
            let p = c.product(code).unwrap();
            assert_eq!(p.subprovider_code, sub);
            assert_eq!(p.active, active);
            assert_eq!(p.card_currency, "USD");
            assert!(!p.name.is_empty() && p.name != p.code);
            assert_eq!(p.pricing.issue_fee, amt("2.00"));
            assert_eq!(p.pricing.topup_fee_bps, 100);
            assert_eq!(p.pricing.topup_fee_fixed, amt("0.50"));
            assert_eq!(p.limits.topup_min, amt("10.00"));
            assert_eq!(p.limits.topup_max, amt("5000.00"));
            assert_eq!(p.check_usable(), Ok(()));
        }
        assert!(c.product("nope").is_none());
        assert!(c.subprovider("nope").is_none());
        assert!(c.warnings().is_empty());
    }

    #[test]
    fn lithic_subproviders() {
        let product = |sub: &str, currency: &str| {
            format!(
                r#"
            [[products]]
            code = "p_{sub}"
            subprovider = "{sub}"
            card_currency = "{currency}"
            issue_fee = "1"
            topup_fee_percent = "0"
            topup_fee_fixed = "0"
            topup_min = "1"
            topup_max = "100"
            "#
            )
        };
        let c = load(&format!(
            r#"
            [[subproviders]]
            code = "lithic_us"
            kind = "lithic"
            base_url = "https://sandbox.lithic.com/"
            api_key_env = "ISSUING_LITHIC_API_KEY"
            {}"#,
            product("lithic_us", "USD")
        ))
        .unwrap();
        let s = c.subprovider("lithic_us").unwrap();
        assert_eq!(
            s.kind,
            ProviderKind::Lithic(LithicSettings {
                base_url: "https://sandbox.lithic.com".into(),
                api_key_env: "ISSUING_LITHIC_API_KEY".into(),
                asa_budget_ms: DEFAULT_ASA_BUDGET_MS,
            })
        );
        assert_eq!(
            Catalog::sandbox_default().subproviders()[0].kind,
            ProviderKind::Sandbox
        );
        for (sub, want) in [
            (
                r#"kind = "lithic"
                api_key_env = "K""#,
                "base_url must be",
            ),
            (
                r#"kind = "lithic"
                base_url = "ftp://x""#,
                "base_url must be",
            ),
            (
                r#"kind = "lithic"
                base_url = "https://x"
                api_key_env = "my key""#,
                "api_key_env must",
            ),
            (
                r#"kind = "lithic"
                base_url = "https://x"
                api_key_env = "K"
                asa_budget_ms = 50"#,
                "asa_budget_ms must be",
            ),
            (r#"base_url = "https://x""#, "apply to kind"),
            (r#"kind = "visa""#, "unknown kind"),
        ] {
            let e = load(&format!(
                "[[subproviders]]\ncode = \"l\"\n{sub}\n{}",
                product("l", "USD")
            ))
            .unwrap_err();
            assert!(e.contains(want), "{sub}: {e}");
        }
        let e = load(&format!(
            r#"
            [[subproviders]]
            code = "l"
            kind = "lithic"
            base_url = "https://x"
            api_key_env = "K"
            {}"#,
            product("l", "EUR")
        ))
        .unwrap_err();
        assert!(e.contains("USD cards only"), "{e}");
    }

    #[test]
    fn sandbox_default_written_as_config_is_the_same() {
        let c = load(
            r#"
            [[subproviders]]
            code = "sandbox"

            [[subproviders]]
            code = "sandbox_restricted"
            requires_product_code = true
            plaintext_details = false
            withdraw_supported = false
            three_ds_method = "OTP"

            [[products]]
            code = "virtual_usd"
            name = "Virtual USD card"
            subprovider = "sandbox"
            issue_fee = "2.00"
            topup_fee_percent = "1"
            topup_fee_fixed = "0.50"
            topup_min = "10.00"
            topup_max = "5000.00"

            [[products]]
            code = "virtual_usd_restricted"
            name = "Virtual USD card (restricted provider)"
            subprovider = "sandbox_restricted"
            issue_fee = "2"
            topup_fee_percent = "1.00"
            topup_fee_fixed = "0.5"
            topup_min = "10"
            topup_max = "5000"

            [[products]]
            code = "virtual_usd_retired"
            name = "Virtual USD card (retired)"
            subprovider = "sandbox"
            active = false
            card_currency = "usd"
            issue_fee = "2.00"
            topup_fee_percent = "1"
            topup_fee_fixed = "0.50"
            topup_min = "10.00"
            topup_max = "5000.00"
            "#,
        )
        .unwrap();
        assert_eq!(c, Catalog::sandbox_default());
    }

    #[test]
    fn topup_fees() {
        let c = Catalog::sandbox_default();
        let p = c.product("virtual_usd").unwrap();
        assert_eq!(p.topup_fee(amt("100.00")), amt("1.50"));
        assert_eq!(p.topup_fee(amt("10.00")), amt("0.60"));
        assert_eq!(p.topup_fee(amt("5000.00")), amt("50.50"));
        // 1% of one micro-unit rounds up to a whole micro-unit: never undercharge.
        assert_eq!(p.topup_fee(amt("0.000001")), amt("0.500001"));
        assert_eq!(p.topup_fee(amt("10.000001")), amt("0.600001"));
        assert_eq!(p.topup_fee(amt("10.0001")), amt("0.600001"));
        assert_eq!(p.topup_fee(amt("10.0100")), amt("0.6001"));

        let mut q = p.clone();
        q.pricing.topup_fee_bps = 125;
        q.pricing.topup_fee_fixed = Amount::ZERO;
        assert_eq!(q.topup_fee(amt("100")), amt("1.25"));
        // The largest amount the wire allows does not overflow.
        let huge = amt("1000000000000");
        q.pricing.topup_fee_bps = 10_000;
        assert_eq!(q.topup_fee(huge), huge);
    }

    #[test]
    fn topup_amount_boundaries() {
        let c = Catalog::sandbox_default();
        let p = c.product("virtual_usd").unwrap();
        assert_eq!(p.check_topup_amount(amt("10.00")), Ok(()));
        assert_eq!(p.check_topup_amount(amt("5000.00")), Ok(()));
        let below = p.check_topup_amount(amt("9.999999")).unwrap_err();
        assert_eq!(below.slug, ErrorSlug::AmountBelowMinimum);
        assert_eq!(below.status(), 422);
        assert_eq!(below.message, "Amount is below the minimum of 10.00 USDT");
        let above = p.check_topup_amount(amt("5000.000001")).unwrap_err();
        assert_eq!(above.slug, ErrorSlug::AmountAboveMaximum);
        assert_eq!(above.status(), 422);
        assert_eq!(above.message, "Amount is above the maximum of 5000.00 USDT");
    }

    const SUBS: &str = r#"
        [[subproviders]]
        code = "acme"
        three_ds_method = "otp"
    "#;

    fn product(code: &str, fields: &str) -> String {
        format!(
            r#"
            [[products]]
            code = "{code}"
            subprovider = "acme"
            {fields}
            "#
        )
    }

    const GOOD: &str = r#"
        issue_fee = "1.00"
        topup_fee_percent = "1.25"
        topup_fee_fixed = "0"
        topup_min = "5"
        topup_max = "100"
    "#;

    #[test]
    fn from_config_records_unusable_pricing_and_limits() {
        let bad_pricing = r#"
            issue_fee = "-1.00"
            topup_fee_percent = "1.255"
            topup_fee_fixed = "abc"
            topup_min = "5"
            topup_max = "100"
        "#;
        let bad_limits = r#"
            issue_fee = "1.00"
            topup_fee_percent = "1"
            topup_fee_fixed = "0.10"
            topup_min = "100"
            topup_max = "5"
        "#;
        let text = format!(
            "{SUBS}{}{}{}",
            product("good", GOOD),
            product("bad_pricing", bad_pricing),
            product("bad_limits", bad_limits)
        );
        let c = load(&text).unwrap();

        let good = c.product("good").unwrap();
        assert_eq!(good.name, "good");
        assert_eq!(good.card_currency, "USD");
        assert!(good.active);
        assert_eq!(good.pricing.topup_fee_bps, 125);
        assert_eq!(good.limits.topup_min, amt("5"));
        assert_eq!(good.check_usable(), Ok(()));
        assert_eq!(
            c.subprovider("acme").unwrap().three_ds_method,
            ThreeDsMethod::Otp
        );
        let acme = c.subprovider("acme").unwrap();
        assert!(acme.plaintext_details && acme.withdraw_supported && !acme.requires_product_code);

        let p = c.product("bad_pricing").unwrap();
        assert_eq!(p.pricing, Pricing::default());
        assert_eq!(p.limits_problem, None);
        let e = p.check_usable().unwrap_err();
        assert_eq!(e.slug, ErrorSlug::InvalidPricing);
        assert_eq!(e.status(), 422);
        for part in [
            "bad_pricing",
            "issue_fee",
            "topup_fee_percent",
            "topup_fee_fixed",
        ] {
            assert!(e.message.contains(part), "{}", e.message);
        }

        let p = c.product("bad_limits").unwrap();
        assert_eq!(p.limits, Limits::default());
        assert_eq!(p.pricing_problem, None);
        let e = p.check_usable().unwrap_err();
        assert_eq!(e.slug, ErrorSlug::CardProductLimitsInvalid);
        assert_eq!(
            e.message,
            "Card product bad_limits has unusable limits: topup_min 100.00 is above topup_max 5.00"
        );
        assert_eq!(
            p.check_topup_amount(amt("50")).unwrap_err().slug,
            ErrorSlug::CardProductLimitsInvalid
        );

        let warnings = c.warnings();
        assert_eq!(warnings.len(), 2);
        assert!(warnings[0].starts_with("Card product bad_pricing has unusable pricing"));
        assert!(warnings[1].starts_with("Card product bad_limits has unusable limits"));
    }

    #[test]
    fn unusable_values_each_recorded() {
        let pricing = |issue: &str, percent: &str| {
            let fields = format!(
                "issue_fee = \"{issue}\"\ntopup_fee_percent = \"{percent}\"\n\
                 topup_fee_fixed = \"0\"\ntopup_min = \"1\"\ntopup_max = \"2\""
            );
            let c = load(&format!("{SUBS}{}", product("p", &fields))).unwrap();
            c.product("p").unwrap().pricing_problem.clone()
        };
        assert_eq!(pricing("0", "0"), None);
        assert_eq!(pricing("0.000001", "100"), None);
        assert!(pricing("0.0000001", "1").unwrap().contains("issue_fee"));
        assert!(pricing("", "1").unwrap().contains("issue_fee"));
        assert!(pricing("1", "100.01").unwrap().contains("at most 100"));
        assert!(pricing("1", "-1").unwrap().contains("negative"));
        assert!(pricing("1", "0.001")
            .unwrap()
            .contains("at most 2 decimals"));
        assert!(pricing("1", "one").unwrap().contains("topup_fee_percent"));

        let limits = |min: &str, max: &str| {
            let fields = format!(
                "issue_fee = \"0\"\ntopup_fee_percent = \"0\"\n\
                 topup_fee_fixed = \"0\"\ntopup_min = \"{min}\"\ntopup_max = \"{max}\""
            );
            let c = load(&format!("{SUBS}{}", product("p", &fields))).unwrap();
            c.product("p").unwrap().limits_problem.clone()
        };
        assert_eq!(limits("1", "1"), None);
        assert!(limits("0", "1")
            .unwrap()
            .contains("topup_min must be greater than zero"));
        assert!(limits("-1", "1").unwrap().contains("topup_min"));
        assert!(limits("1", "0")
            .unwrap()
            .contains("topup_max must be greater than zero"));
        assert!(limits("x", "1").unwrap().contains("topup_min \"x\""));
        assert!(limits("1", "1e30").unwrap().contains("topup_max"));
    }

    #[test]
    fn structural_errors_fail_the_load() {
        let err = |text: String| load(&text).unwrap_err();

        let e = err(format!(
            "{SUBS}{}{}",
            product("p", GOOD),
            product("p", GOOD)
        ));
        assert!(e.contains("duplicate product code \"p\""), "{e}");

        let e = err(format!("{SUBS}{SUBS}{}", product("p", GOOD)));
        assert!(e.contains("duplicate subprovider code \"acme\""), "{e}");

        let text = product("p", GOOD).replace("\"acme\"", "\"ghost\"");
        let e = err(format!("{SUBS}{text}"));
        assert!(
            e.contains("product \"p\" references unknown subprovider \"ghost\""),
            "{e}"
        );

        let e = err(SUBS.to_owned());
        assert!(e.contains("no card products"), "{e}");
        assert!(Catalog::from_config(&CatalogConfig::default()).is_err());

        let e = err(format!(
            "{}{}",
            SUBS.replace("otp", "sms"),
            product("p", GOOD)
        ));
        assert!(e.contains("unknown three_ds_method \"sms\""), "{e}");

        for bad in ["Upper", "has-dash", "", &"x".repeat(65)] {
            let e = err(format!("{SUBS}{}", product(bad, GOOD)));
            assert!(
                e.contains("must be 1 to 64 of a-z, 0-9 and _"),
                "{bad}: {e}"
            );
        }
        assert!(load(&format!("{SUBS}{}", product(&"x".repeat(64), GOOD))).is_ok());

        let e = err(format!(
            "{SUBS}{}",
            product("p", &format!("{GOOD}\ncard_currency = \"dollars\""))
        ));
        assert!(e.contains("card_currency"), "{e}");

        // Several mistakes are named together.
        let e = err(format!(
            "{SUBS}{}{}",
            product("A", GOOD),
            product("b", GOOD).replace("\"acme\"", "\"ghost\"")
        ));
        assert!(e.contains("\"A\"") && e.contains("ghost"), "{e}");
    }

    #[test]
    fn unknown_config_keys_are_refused() {
        let text = format!("{SUBS}{}", product("p", &format!("{GOOD}\nfee = \"1\"")));
        assert!(toml::from_str::<CatalogConfig>(&text).is_err());
        let text = "[[subproviders]]\ncode = \"a\"\nwithdraw = true\n";
        assert!(toml::from_str::<CatalogConfig>(text).is_err());
        assert!(toml::from_str::<CatalogConfig>("currency = \"USD\"").is_err());
    }

    #[test]
    fn three_ds_methods() {
        assert_eq!(ThreeDsMethod::parse("OOB"), Some(ThreeDsMethod::Oob));
        assert_eq!(ThreeDsMethod::parse("otp"), Some(ThreeDsMethod::Otp));
        assert_eq!(ThreeDsMethod::parse("sms"), None);
    }
}
