//! Fuzzes the number and query parsers: [`parse_i64`], [`parse_ttl`] and
//! [`CounterQuery::parse`], which read `?by=`, `?ttl=` and `?consistency=` from the URL.
//!
//! The numbers are exact by design (a too-large `by` is an overflow, never a clamp or a wrap),
//! so beyond "never panics" it checks that accepted numbers agree with the standard library,
//! that only well-formed integers are reported as overflows, that TTLs stay in bounds, and
//! that a parsed query written out again parses to the same thing.
#![no_main]

use edgecount_core::http::query::CounterQuery;
use edgecount_core::number::{parse_i64, parse_ttl, MAX_TTL_SECONDS};
use edgecount_core::CoreError;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };

    match parse_i64("by", text) {
        Ok(n) => {
            assert_eq!(text.parse::<i64>(), Ok(n));
            assert_eq!(parse_i64("by", &n.to_string()), Ok(n));
        }
        Err(CoreError::Overflow) => {
            // Documented as "a decimal integer that does not fit": an optional sign, then digits.
            let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
            assert!(!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()), "{text:?}");
            assert!(text.parse::<i64>().is_err());
        }
        Err(CoreError::InvalidNumber { .. }) => assert!(text.parse::<i64>().is_err(), "{text:?}"),
        Err(other) => panic!("parse_i64({text:?}) gave an undocumented error: {other:?}"),
    }

    if let Ok(seconds) = parse_ttl(text) {
        assert!((1..=MAX_TTL_SECONDS).contains(&seconds));
        assert_eq!(parse_ttl(&seconds.to_string()), Ok(seconds));
    }

    if let Ok(query) = CounterQuery::parse(text) {
        if let Some(ttl) = query.ttl {
            assert!((1..=MAX_TTL_SECONDS).contains(&ttl));
        }
        let mut again = vec![format!("consistency={}", if query.strong { "strong" } else { "eventual" })];
        again.extend(query.by.map(|by| format!("by={by}")));
        again.extend(query.ttl.map(|ttl| format!("ttl={ttl}")));
        assert_eq!(CounterQuery::parse(&again.join("&")), Ok(query));
    }
});
