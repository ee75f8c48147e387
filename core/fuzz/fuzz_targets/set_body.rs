//! Fuzzes the body of `PUT /v1/counters/:ns/:key` ([`parse_set_body`]) and the JSON number
//! readers under it ([`i64_from_json`], [`ttl_from_json`]), which batch ops use as well.
//!
//! The body is client JSON, so beyond "never panics" it checks that only the documented errors
//! come out, that an accepted value is exactly the number sent (every in-range JSON integer is
//! read as itself, and an accepted value survives being written into a fresh body), and that a
//! JSON TTL is either absent or in bounds.
#![no_main]

use edgecount_core::http::body::parse_set_body;
use edgecount_core::number::{i64_from_json, ttl_from_json, MAX_TTL_SECONDS};
use edgecount_core::CoreError;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };

    match parse_set_body(text) {
        Ok(n) => assert_eq!(parse_set_body(&format!("{{\"value\":{n}}}")), Ok(n)),
        Err(error) => assert!(
            matches!(error, CoreError::InvalidBody { .. } | CoreError::Overflow),
            "undocumented error {error:?}"
        ),
    }

    // Any JSON value may sit where a number is expected, in `value`, `by` or `ttl`.
    let Ok(value) = serde_json::from_str::<Value>(text) else { return };
    let read = i64_from_json("value", &value);
    // Every JSON integer in range is read exactly, and whatever is read is the number sent.
    if let Some(exact) = value.as_i64() {
        assert_eq!(read, Ok(exact));
    }
    match read {
        Ok(n) => assert_eq!(value.as_f64(), Some(n as f64), "{value}"),
        Err(error) => assert!(
            matches!(error, CoreError::InvalidBody { .. } | CoreError::Overflow),
            "undocumented error {error:?}"
        ),
    }
    match ttl_from_json(Some(&value)) {
        Ok(Some(seconds)) => assert!((1..=MAX_TTL_SECONDS).contains(&seconds)),
        Ok(None) => assert!(value.is_null()),
        Err(error) => assert!(matches!(error, CoreError::InvalidTtl { .. })),
    }
});
