//! Fuzzes the badge route's query, [`BadgeQuery::parse`], and [`render`], which writes the
//! client's `label` and `color` into an SVG that browsers display inline on other sites.
//!
//! Beyond "never panics" it checks the limits the query promises (a label of 1 to 64
//! characters without controls, a colour of `#` and 3 or 6 hex digits), that a parsed query
//! written out again parses to the same thing, and that no label can add markup: the SVG holds
//! as many `<`, `>` and `"` as it does with a plain label.
#![no_main]

use edgecount_core::http::badge::{render, BadgeQuery, MAX_LABEL_CHARS};
use libfuzzer_sys::fuzz_target;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(query) = BadgeQuery::parse(text) else { return };

    assert!((1..=MAX_LABEL_CHARS).contains(&query.label.chars().count()));
    assert!(!query.label.chars().any(char::is_control));
    let digits = query.color.strip_prefix('#').expect("colour starts with #");
    assert!(matches!(digits.len(), 3 | 6) && digits.bytes().all(|b| b.is_ascii_hexdigit()));

    let again = format!(
        "incr={}&label={}&color={}",
        u8::from(query.incr),
        utf8_percent_encode(&query.label, NON_ALPHANUMERIC),
        utf8_percent_encode(&query.color, NON_ALPHANUMERIC),
    );
    assert_eq!(BadgeQuery::parse(&again).as_ref(), Ok(&query), "{again}");

    for value in [0, i64::MIN, i64::MAX] {
        let svg = render(&query.label, value, &query.color);
        let plain = render("views", value, &query.color);
        for markup in ['<', '>', '"'] {
            assert_eq!(svg.matches(markup).count(), plain.matches(markup).count(), "{svg}");
        }
    }
});
