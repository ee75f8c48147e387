//! Exact parsing of the numbers the API takes: signed 64-bit values and TTLs in seconds.
//!
//! A number that is well formed but outside the signed 64-bit range is an overflow (HTTP 422),
//! so clients can tell "you typed nonsense" from "that is too big".

use serde_json::Value;

use crate::CoreError;

/// Longest TTL accepted: ten years, in seconds.
pub const MAX_TTL_SECONDS: u32 = 315_360_000;

/// Parses a decimal integer such as `42`, `-7` or `+3` given as parameter `name`.
///
/// # Errors
/// [`CoreError::InvalidNumber`] when `raw` is not a decimal integer, [`CoreError::Overflow`]
/// when it is one but does not fit in an `i64`.
pub fn parse_i64(name: &str, raw: &str) -> Result<i64, CoreError> {
    let digits = raw.strip_prefix(['+', '-']).unwrap_or(raw);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CoreError::InvalidNumber { name: name.to_owned() });
    }
    // The text is a well-formed integer, so the only way `parse` can fail is range.
    raw.parse::<i64>().map_err(|_| CoreError::Overflow)
}

/// Parses a TTL in whole seconds, `1..=MAX_TTL_SECONDS`.
///
/// # Errors
/// [`CoreError::InvalidTtl`] for anything else.
pub fn parse_ttl(raw: &str) -> Result<u32, CoreError> {
    let invalid = CoreError::InvalidTtl { max: MAX_TTL_SECONDS };
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid);
    }
    match raw.parse::<u32>() {
        Ok(seconds) if (1..=MAX_TTL_SECONDS).contains(&seconds) => Ok(seconds),
        _ => Err(invalid),
    }
}

/// Reads a JSON value as an exact `i64`.
///
/// # Errors
/// [`CoreError::InvalidBody`] when the value is not an integer, [`CoreError::Overflow`] when it
/// is an integer outside the `i64` range (serde_json hands those over as `u64` or as `f64`).
pub fn i64_from_json(name: &str, value: &Value) -> Result<i64, CoreError> {
    let not_integer = || CoreError::InvalidBody { reason: format!("field `{name}` must be a whole number") };
    let Value::Number(number) = value else {
        return Err(not_integer());
    };
    if let Some(exact) = number.as_i64() {
        return Ok(exact);
    }
    if number.is_u64() {
        return Err(CoreError::Overflow);
    }
    if let Some(exact) = small_integral_float(number) {
        return Ok(exact);
    }
    // A float: only an integral one past the i64 range is an overflow; 1.5 is simply wrong.
    match number.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() >= 9.223_372_036_854_776e18 => Err(CoreError::Overflow),
        _ => Err(not_integer()),
    }
}

/// A float with no fraction, such as `5.0` or `-2e3`, is read as that integer, as JSON Schema's
/// `integer` reads it, while it is below 2^48. Up there serde_json's parse (off by at most one
/// unit in the last place) cannot turn an integer into another integer, since one unit is at
/// most 1/32; past it, integers must be written as integers.
const EXACT_FLOAT_LIMIT: f64 = 281_474_976_710_656.0;

fn small_integral_float(number: &serde_json::Number) -> Option<i64> {
    let f = number.as_f64().filter(|_| number.is_f64())?;
    (f.fract() == 0.0 && f.abs() < EXACT_FLOAT_LIMIT).then_some(f as i64)
}

/// Reads an optional JSON TTL.
///
/// # Errors
/// [`CoreError::InvalidTtl`] when present and not `1..=MAX_TTL_SECONDS`.
pub fn ttl_from_json(value: Option<&Value>) -> Result<Option<u32>, CoreError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| small_integral_float(n).and_then(|i| u64::try_from(i).ok()))
            .and_then(|s| u32::try_from(s).ok())
            .filter(|s| (1..=MAX_TTL_SECONDS).contains(s))
            .map(Some)
            .ok_or(CoreError::InvalidTtl { max: MAX_TTL_SECONDS }),
        Some(_) => Err(CoreError::InvalidTtl { max: MAX_TTL_SECONDS }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parses_the_whole_i64_range_exactly() {
        assert_eq!(parse_i64("by", "9223372036854775807"), Ok(i64::MAX));
        assert_eq!(parse_i64("by", "-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_i64("by", "+3"), Ok(3));
        assert_eq!(parse_i64("by", "007"), Ok(7));
    }

    #[test]
    fn out_of_range_integers_overflow() {
        assert_eq!(parse_i64("by", "9223372036854775808"), Err(CoreError::Overflow));
        assert_eq!(parse_i64("by", "-9223372036854775809"), Err(CoreError::Overflow));
        assert_eq!(parse_i64("by", &"9".repeat(400)), Err(CoreError::Overflow));
    }

    #[test]
    fn malformed_numbers_are_invalid() {
        for bad in ["", "-", "+", "1.5", "1e3", " 1", "0x10", "١", "--1", "NaN"] {
            assert_eq!(parse_i64("by", bad).unwrap_err().code(), "invalid_number", "{bad:?}");
        }
    }

    #[test]
    fn ttl_bounds() {
        assert_eq!(parse_ttl("1"), Ok(1));
        assert_eq!(parse_ttl("315360000"), Ok(MAX_TTL_SECONDS));
        for bad in ["0", "315360001", "-1", "", "1.5", "99999999999"] {
            assert!(parse_ttl(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn json_integers_are_exact_and_range_checked() {
        assert_eq!(i64_from_json("value", &json!(9_007_199_254_740_993_i64)), Ok(9_007_199_254_740_993));
        assert_eq!(i64_from_json("value", &json!(u64::MAX)), Err(CoreError::Overflow));
        let huge: Value = serde_json::from_str("1e30").unwrap();
        assert_eq!(i64_from_json("value", &huge), Err(CoreError::Overflow));
        let big_literal: Value = serde_json::from_str("99999999999999999999999").unwrap();
        assert_eq!(i64_from_json("value", &big_literal), Err(CoreError::Overflow));
        for bad in [json!(1.5), json!("1"), json!(null), json!(true), json!([1])] {
            assert_eq!(i64_from_json("value", &bad).unwrap_err().code(), "invalid_body");
        }
    }

    #[test]
    fn integral_floats_below_two_to_the_53_are_integers() {
        let read = |text: &str| i64_from_json("value", &serde_json::from_str::<Value>(text).unwrap());
        assert_eq!(read("5.0"), Ok(5));
        assert_eq!(read("-2e3"), Ok(-2000));
        assert_eq!(read("281474976710655.0"), Ok(281_474_976_710_655));
        // Larger floats may be a rounded neighbour: they must be written as integers.
        assert_eq!(read("9007199254740991.0").unwrap_err().code(), "invalid_body");
        assert_eq!(read("5.5").unwrap_err().code(), "invalid_body");
        assert_eq!(ttl_from_json(Some(&serde_json::from_str::<Value>("60.0").unwrap())), Ok(Some(60)));
    }

    #[test]
    fn json_ttl() {
        assert_eq!(ttl_from_json(None), Ok(None));
        assert_eq!(ttl_from_json(Some(&json!(60))), Ok(Some(60)));
        for bad in [json!(0), json!(-1), json!(1.5), json!("60"), json!(4_000_000_000_u64)] {
            assert!(ttl_from_json(Some(&bad)).is_err(), "{bad}");
        }
    }
}
