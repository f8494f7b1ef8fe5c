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
    #[error("amount is not a plain decimal number such as 10.50")]
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

    /// Micro-units counted by someone else (a provider's cents), held to the bound of
    /// every parsed amount: at most 10^12 USDT either way, so sums cannot overflow.
    pub fn checked_from_micros(micros: i64) -> Result<Amount, AmountError> {
        if micros.checked_abs().is_some_and(|m| m <= MAX_MICROS) {
            Ok(Amount(micros))
        } else {
            Err(AmountError::TooLarge)
        }
    }

    /// Parses a positive request amount: a decimal string (`"12.50"`) or a JSON number
    /// written the same way (`12.5`). Both must have the plain form `0|[1-9][0-9]*`
    /// with an optional `.` and 1 to 6 digits; exponents, signs, spaces, a leading or
    /// trailing dot, leading zeros and zero are refused.
    ///
    /// A number is judged by the text the client wrote: serde_json's
    /// `arbitrary_precision` feature keeps it (`Number::as_str`), so `1e3` or `10.0000000`
    /// cannot pass as the float they round to.
    pub fn parse_positive(value: &serde_json::Value) -> Result<Amount, AmountError> {
        let amount = match value {
            serde_json::Value::String(s) => Self::parse_decimal(s)?,
            serde_json::Value::Number(n) => Self::parse_decimal(n.as_str())?,
            _ => return Err(AmountError::NotANumber),
        };
        if amount.0 <= 0 {
            return Err(AmountError::NotPositive);
        }
        Ok(amount)
    }

    /// Parses `[-](0|[1-9][0-9]*)[.d{1,6}]` exactly, without floating point. Nothing
    /// else is a number here: no `+`, exponent, spaces, leading zeros or bare dot.
    /// The sign is for the service's own signed amounts; requests use `parse_positive`.
    pub fn parse_decimal(text: &str) -> Result<Amount, AmountError> {
        let (negative, rest) = match text.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (int_part, frac_part) = match rest.split_once('.') {
            Some((i, f)) => (i, Some(f)),
            None => (rest, None),
        };
        let all_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !all_digits(int_part) || (int_part.len() > 1 && int_part.starts_with('0')) {
            return Err(AmountError::NotANumber);
        }
        let frac = frac_part.unwrap_or("");
        if frac_part.is_some() && !all_digits(frac) {
            return Err(AmountError::NotANumber);
        }
        if frac.len() > FRACTION_DIGITS {
            return Err(AmountError::TooPrecise);
        }
        // At most 13 integer digits fit below MAX_MICROS; checked before parsing so
        // that no length of digits can overflow.
        if int_part.len() > 13 {
            return Err(AmountError::TooLarge);
        }
        let units: i64 = int_part.parse().map_err(|_| AmountError::NotANumber)?;
        let frac_micros: i64 = if frac.is_empty() {
            0
        } else {
            let padded = format!("{frac:0<width$}", width = FRACTION_DIGITS);
            padded.parse().map_err(|_| AmountError::NotANumber)?
        };
        let micros = units
            .checked_mul(MICROS_PER_UNIT)
            .and_then(|m| m.checked_add(frac_micros))
            .ok_or(AmountError::TooLarge)?;
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

    /// A JSON number as the client wrote it (the request parser keeps its text).
    fn number(text: &str) -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_str(text).unwrap();
        assert!(v.is_number(), "{text}");
        v
    }

    #[test]
    fn parses_strings_and_numbers() {
        assert_eq!(parse(json!("12.50")), Ok(12_500_000));
        assert_eq!(parse(json!("10.50")), Ok(10_500_000));
        assert_eq!(parse(json!("10")), Ok(10_000_000));
        assert_eq!(parse(json!("0.5")), Ok(500_000));
        assert_eq!(parse(json!("0.000001")), Ok(1));
        assert_eq!(parse(json!("1.230000")), Ok(1_230_000));
        assert_eq!(parse(json!("1000000000000")), Ok(MAX_MICROS));
        assert_eq!(parse(json!(10)), Ok(10_000_000));
        assert_eq!(parse(json!(12.5)), Ok(12_500_000));
        assert_eq!(parse(json!(100)), Ok(100_000_000));
        assert_eq!(parse(number("10.5")), Ok(10_500_000));
        assert_eq!(parse(number("10.50")), Ok(10_500_000));
        assert_eq!(parse(number("0.000001")), Ok(1));
        assert_eq!(parse(number("10.000000")), Ok(10_000_000));
    }

    #[test]
    fn rejects_bad_amounts() {
        use AmountError::*;
        assert_eq!(parse(json!("0")), Err(NotPositive));
        assert_eq!(parse(json!("0.0")), Err(NotPositive));
        assert_eq!(parse(json!("-1")), Err(NotPositive));
        assert_eq!(parse(json!("-0")), Err(NotPositive));
        assert_eq!(parse(json!("1.2300000")), Err(TooPrecise));
        assert_eq!(parse(json!("0.0000001")), Err(TooPrecise));
        assert_eq!(parse(json!("1e30")), Err(NotANumber));
        assert_eq!(parse(json!("1000000000000.000001")), Err(TooLarge));
        assert_eq!(parse(json!("10000000000000")), Err(TooLarge));
        assert_eq!(parse(json!("99999999999999999999999")), Err(TooLarge));
        assert_eq!(parse(json!(null)), Err(NotANumber));
        assert_eq!(parse(json!(true)), Err(NotANumber));
        assert_eq!(parse(json!(["1"])), Err(NotANumber));
        assert_eq!(parse(json!({"amount": "1"})), Err(NotANumber));
    }

    #[test]
    fn refuses_every_form_but_the_plain_one() {
        use AmountError::*;
        for text in [
            "",
            ".",
            "abc",
            "1.2.3",
            ".5",
            "5.",
            "0010",
            "00",
            "01.5",
            "+1",
            "+1.5",
            " 1",
            "1 ",
            "\t1",
            "1\n",
            "1 000",
            "1,5",
            "1e3",
            "1E3",
            "1e-2",
            "1.5e1",
            "0x10",
            "1_000",
            "١٢",
            "１",
            "10.5\u{0}",
            "NaN",
            "inf",
            "--1",
            "-",
            "1.-5",
            "1.+5",
        ] {
            assert_eq!(parse(json!(text)), Err(NotANumber), "{text:?}");
        }
        assert_eq!(parse(json!("1.0000000")), Err(TooPrecise));
    }

    #[test]
    fn numbers_are_judged_by_their_text() {
        use AmountError::*;
        for text in [
            "1e3", "1E3", "1e-7", "1.5e1", "1e308", "1e400", "10.0e0", "0.1e1", "-1e3",
        ] {
            assert!(parse(number(text)).is_err(), "{text}");
        }
        assert_eq!(parse(number("1e3")), Err(NotANumber));
        assert_eq!(parse(number("-0")), Err(NotPositive));
        assert_eq!(parse(number("-5")), Err(NotPositive));
        assert_eq!(parse(number("0")), Err(NotPositive));
        assert_eq!(parse(number("0.0000001")), Err(TooPrecise));
        // Rounds to a valid f64 amount, but the client wrote 7 decimals.
        assert_eq!(parse(number("10.0000010")), Err(TooPrecise));
        assert_eq!(parse(number("0.10000000000000000001")), Err(TooPrecise));
        assert_eq!(
            parse(number("123456789012345678901234567890")),
            Err(TooLarge)
        );
    }

    #[test]
    fn parse_decimal_keeps_the_sign_for_signed_amounts() {
        assert_eq!(Amount::parse_decimal("-2.00"), Ok(Amount(-2_000_000)));
        assert_eq!(Amount::parse_decimal("-0.000001"), Ok(Amount(-1)));
        assert_eq!(Amount::parse_decimal("0"), Ok(Amount(0)));
        assert_eq!(Amount::parse_decimal("-01"), Err(AmountError::NotANumber));
        assert_eq!(Amount::parse_decimal("- 1"), Err(AmountError::NotANumber));
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
        for m in [
            1,
            10,
            999_999,
            1_000_000,
            123_456_789,
            MAX_MICROS,
            -1,
            -MAX_MICROS,
        ] {
            let a = Amount(m);
            assert_eq!(Amount::parse_decimal(&a.to_string()), Ok(a));
        }
    }

    #[test]
    fn counted_micros_keep_the_bound() {
        for m in [0, 1, -1, MAX_MICROS, -MAX_MICROS] {
            assert_eq!(Amount::checked_from_micros(m), Ok(Amount(m)));
        }
        for m in [MAX_MICROS + 1, -MAX_MICROS - 1, i64::MAX, i64::MIN] {
            assert_eq!(
                Amount::checked_from_micros(m),
                Err(AmountError::TooLarge),
                "{m}"
            );
        }
    }
}
