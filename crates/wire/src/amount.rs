use serde::{Serialize, Serializer};
use std::fmt;

/// USDT has 6 fractional digits; amounts are integer micro-units inside the service.
pub const MICROS_PER_UNIT: i64 = 1_000_000;
const FRACTION_DIGITS: usize = 6;

/// Upper bound on any single amount: 10^12 USDT. Far above any real card flow, and low
/// enough that sums of many amounts can never overflow an i64 of micro-units.
const MAX_MICROS: i64 = 1_000_000_000_000 * MICROS_PER_UNIT;

/// An amount of money in micro-units. Signed so that ledger movements can be shown as
/// debits and credits; request parsing only ever yields positive amounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Amount(i64);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AmountError {
    #[error("amount is not a decimal number")]
    NotANumber,
    #[error("amount has more than 6 fractional digits")]
    TooPrecise,
    #[error("amount must be greater than zero")]
    NotPositive,
    #[error("amount is too large")]
    TooLarge,
}

impl Amount {
    pub const ZERO: Amount = Amount(0);

    pub const fn from_micros(micros: i64) -> Self {
        Amount(micros)
    }

    pub const fn micros(self) -> i64 {
        self.0
    }

    /// Parses a positive request amount: a decimal string (`"12.50"`) or a JSON number.
    /// Zero, negatives, exponents that lose digits and more than 6 decimals are refused.
    pub fn parse_positive(value: &serde_json::Value) -> Result<Amount, AmountError> {
        let text = match value {
            serde_json::Value::String(s) => s.trim().to_owned(),
            // serde_json prints floats in their shortest round-trip form, which is the
            // decimal the client wrote for any amount with at most 15 significant digits.
            serde_json::Value::Number(n) => n.to_string(),
            _ => return Err(AmountError::NotANumber),
        };
        let amount = Self::parse_decimal(&text)?;
        if amount.0 <= 0 {
            return Err(AmountError::NotPositive);
        }
        Ok(amount)
    }

    /// Parses `[-]digits[.digits][e[+-]digits]` exactly, without floating point.
    pub fn parse_decimal(text: &str) -> Result<Amount, AmountError> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let (mantissa, exponent) = match rest.find(['e', 'E']) {
            Some(i) => {
                let exp: i32 = rest[i + 1..].parse().map_err(|_| AmountError::NotANumber)?;
                (&rest[..i], exp)
            }
            None => (rest, 0),
        };
        let (int_part, frac_part) = match mantissa.split_once('.') {
            Some((i, f)) => (i, f),
            None => (mantissa, ""),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(AmountError::NotANumber);
        }
        if !int_part.bytes().all(|b| b.is_ascii_digit())
            || !frac_part.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(AmountError::NotANumber);
        }
        // All digits as one integer, with the decimal point `scale` places from the right.
        let digits = format!("{int_part}{frac_part}");
        let digits = digits.trim_start_matches('0');
        let scale = frac_part.len() as i64 - i64::from(exponent);
        if scale > FRACTION_DIGITS as i64 {
            return Err(AmountError::TooPrecise);
        }
        let trailing_zeros = digits.len() - digits.trim_end_matches('0').len();
        let significant = digits.trim_end_matches('0');
        let scale = scale - trailing_zeros as i64;
        if significant.is_empty() {
            return Ok(Amount(0));
        }
        if scale > FRACTION_DIGITS as i64 {
            return Err(AmountError::TooPrecise);
        }
        let shift = FRACTION_DIGITS as i64 - scale;
        if significant.len() as i64 + shift > 19 {
            return Err(AmountError::TooLarge);
        }
        let mut micros: i64 = significant.parse().map_err(|_| AmountError::TooLarge)?;
        for _ in 0..shift {
            micros = micros.checked_mul(10).ok_or(AmountError::TooLarge)?;
        }
        if micros > MAX_MICROS {
            return Err(AmountError::TooLarge);
        }
        Ok(Amount(if negative { -micros } else { micros }))
    }

    pub fn checked_add(self, other: Amount) -> Option<Amount> {
        self.0.checked_add(other.0).map(Amount)
    }

    pub fn checked_sub(self, other: Amount) -> Option<Amount> {
        self.0.checked_sub(other.0).map(Amount)
    }
}

/// Decimal string with at least 2 and at most 6 fractional digits: `"12.50"`, `"0.000001"`.
impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let abs = self.0.unsigned_abs();
        let units = abs / MICROS_PER_UNIT as u64;
        let frac = abs % MICROS_PER_UNIT as u64;
        let mut frac_text = format!("{frac:06}");
        while frac_text.len() > 2 && frac_text.ends_with('0') {
            frac_text.pop();
        }
        write!(f, "{sign}{units}.{frac_text}")
    }
}

impl Serialize for Amount {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Result<i64, AmountError> {
        Amount::parse_positive(&v).map(Amount::micros)
    }

    #[test]
    fn parses_strings_and_numbers() {
        assert_eq!(parse(json!("12.50")), Ok(12_500_000));
        assert_eq!(parse(json!("10")), Ok(10_000_000));
        assert_eq!(parse(json!("0.000001")), Ok(1));
        assert_eq!(parse(json!(12.5)), Ok(12_500_000));
        assert_eq!(parse(json!(0.000001)), Ok(1));
        assert_eq!(parse(json!(100)), Ok(100_000_000));
        assert_eq!(parse(json!(".5")), Ok(500_000));
        assert_eq!(parse(json!("1.230000")), Ok(1_230_000));
        assert_eq!(parse(json!("1.2300000")), Err(AmountError::TooPrecise));
    }

    #[test]
    fn rejects_bad_amounts() {
        assert_eq!(parse(json!("0")), Err(AmountError::NotPositive));
        assert_eq!(parse(json!("-1")), Err(AmountError::NotPositive));
        assert_eq!(parse(json!("0.0000001")), Err(AmountError::TooPrecise));
        assert_eq!(parse(json!(0.0000001)), Err(AmountError::TooPrecise));
        assert_eq!(parse(json!("abc")), Err(AmountError::NotANumber));
        assert_eq!(parse(json!("1.2.3")), Err(AmountError::NotANumber));
        assert_eq!(parse(json!("")), Err(AmountError::NotANumber));
        assert_eq!(parse(json!(".")), Err(AmountError::NotANumber));
        assert_eq!(parse(json!(null)), Err(AmountError::NotANumber));
        assert_eq!(parse(json!(true)), Err(AmountError::NotANumber));
        assert_eq!(parse(json!("1e30")), Err(AmountError::TooLarge));
        assert_eq!(
            parse(json!("99999999999999999999999")),
            Err(AmountError::TooLarge)
        );
    }

    #[test]
    fn formats() {
        assert_eq!(Amount(12_500_000).to_string(), "12.50");
        assert_eq!(Amount(10_000_000).to_string(), "10.00");
        assert_eq!(Amount(1).to_string(), "0.000001");
        assert_eq!(Amount(-2_000_000).to_string(), "-2.00");
        assert_eq!(Amount(0).to_string(), "0.00");
        assert_eq!(Amount(1_234_560).to_string(), "1.23456");
    }

    #[test]
    fn format_then_parse_round_trips() {
        for m in [1, 10, 999_999, 1_000_000, 123_456_789, MAX_MICROS] {
            let a = Amount(m);
            assert_eq!(Amount::parse_decimal(&a.to_string()), Ok(a));
        }
    }
}
