//! Request bodies of the counter routes.

use serde::Deserialize;
use serde_json::Value;

use crate::number::i64_from_json;
use crate::CoreError;

/// Largest body accepted by `PUT /v1/counters/:ns/:key`.
pub const MAX_COUNTER_BODY_BYTES: usize = 4096;

/// Whether a body sent with this `Content-Type` is read as JSON. Besides JSON media types,
/// a missing header and `text/plain` are accepted: `fetch(url, {body: JSON.stringify(..)})`
/// and `navigator.sendBeacon` label strings `text/plain`, and web pages should not have to
/// set headers to count. Forms, multipart and binary bodies are refused.
#[must_use]
pub fn is_json_content_type(content_type: Option<&str>) -> bool {
    let Some(content_type) = content_type else {
        return true;
    };
    let media = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    media == "application/json"
        || media == "text/plain"
        || (media.starts_with("application/") && media.ends_with("+json"))
}

/// Reads a JSON object into `T`. serde reads a struct from an array too, by position (`[42]`
/// as `{"value": 42}`), which no client means: only an object is accepted.
///
/// # Errors
/// serde_json's error, or "expected a JSON object" for any other JSON value.
pub(crate) fn from_json_object<'a, T: Deserialize<'a>>(text: &'a str) -> Result<T, serde_json::Error> {
    if !text.trim_start().starts_with('{') {
        return Err(<serde_json::Error as serde::de::Error>::custom("expected a JSON object"));
    }
    serde_json::from_str(text)
}

/// `{"value": N}`. A struct (not a map) so that a repeated `value` is refused rather than
/// silently taking the last one.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetBody {
    value: Value,
}

/// Parses the body of `PUT /v1/counters/:ns/:key`.
///
/// # Errors
/// [`CoreError::InvalidBody`] for malformed JSON, a missing, repeated or extra field, or a value
/// that is not an integer; [`CoreError::Overflow`] for an integer outside `i64`.
pub fn parse_set_body(text: &str) -> Result<i64, CoreError> {
    let body: SetBody = from_json_object(text).map_err(|e| CoreError::InvalidBody {
        reason: format!("must be a JSON object like {{\"value\": 42}} ({})", describe(&e)),
    })?;
    i64_from_json("value", &body.value)
}

/// serde_json's message without its line and column suffix, which means little to a client
/// that sent a one-line body.
fn describe(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.find(" at line ") {
        Some(cut) => text[..cut].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_an_array_read_by_position() {
        assert!(matches!(parse_set_body("[1]"), Err(CoreError::InvalidBody { .. })));
        assert!(matches!(parse_set_body(" [1]"), Err(CoreError::InvalidBody { .. })));
        assert_eq!(parse_set_body(" {\"value\": 1}"), Ok(1));
    }

    #[test]
    fn reads_exact_values() {
        assert_eq!(parse_set_body(r#"{"value": 9007199254740993}"#), Ok(9_007_199_254_740_993));
        assert_eq!(parse_set_body(r#"{"value":-9223372036854775808}"#), Ok(i64::MIN));
    }

    #[test]
    fn refuses_malformed_bodies() {
        for bad in [
            "",
            "{",
            "[]",
            "null",
            r#"{"value": "1"}"#,
            r#"{"value": 1.5}"#,
            r#"{}"#,
            r#"{"value": 1, "value": 2}"#,
            r#"{"value": 1, "extra": true}"#,
            r#"{"VALUE": 1}"#,
        ] {
            assert_eq!(parse_set_body(bad).unwrap_err().code(), "invalid_body", "{bad:?}");
        }
        let deep = format!("{}1{}", "[".repeat(10_000), "]".repeat(10_000));
        assert_eq!(parse_set_body(&format!(r#"{{"value": {deep}}}"#)).unwrap_err().code(), "invalid_body");
    }

    #[test]
    fn out_of_range_values_overflow() {
        assert_eq!(parse_set_body(r#"{"value": 9223372036854775808}"#), Err(CoreError::Overflow));
        assert_eq!(parse_set_body(r#"{"value": -9223372036854775809}"#), Err(CoreError::Overflow));
    }

    #[test]
    fn content_types() {
        assert!(is_json_content_type(None));
        assert!(is_json_content_type(Some("application/json; charset=utf-8")));
        assert!(is_json_content_type(Some("application/merge-patch+json")));
        assert!(is_json_content_type(Some("text/plain;charset=UTF-8")));
        assert!(!is_json_content_type(Some("text/html")));
        assert!(!is_json_content_type(Some("multipart/form-data; boundary=x")));
        assert!(!is_json_content_type(Some("application/x-www-form-urlencoded")));
    }
}
