//! Fuzzes the badge route's query, [`BadgeQuery::parse`], and [`render`], which writes the
//! client's `label` and colours into an SVG, in the query's style, that browsers display inline
//! on other sites.
//!
//! Beyond "never panics" it checks the limits the query promises (a label of 1 to 64
//! characters without controls, colours of `#` and 3 or 6 hex digits), that a parsed query
//! written out again parses to the same thing, and that no label can add markup: the SVG holds
//! as many `<`, `>` and `"` as it does with a plain label.
#![no_main]

use edgecount_core::http::badge::{BadgeQuery, MAX_LABEL_CHARS};
use edgecount_core::http::badge_svg::render;
use libfuzzer_sys::fuzz_target;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(query) = BadgeQuery::parse(text) else { return };

    assert!((1..=MAX_LABEL_CHARS).contains(&query.label.chars().count()));
    assert!(!query.label.chars().any(char::is_control));
    for colour in [&query.color, &query.label_color] {
        let digits = colour.strip_prefix('#').expect("colour starts with #");
        assert!(matches!(digits.len(), 3 | 6) && digits.bytes().all(|b| b.is_ascii_hexdigit()));
    }

    let again = format!(
        "incr={}&unique={}&label={}&color={}&label_color={}&style={}&abbreviated={}",
        u8::from(query.incr),
        u8::from(query.unique),
        utf8_percent_encode(&query.label, NON_ALPHANUMERIC),
        utf8_percent_encode(&query.color, NON_ALPHANUMERIC),
        utf8_percent_encode(&query.label_color, NON_ALPHANUMERIC),
        query.style.name(),
        u8::from(query.abbreviated),
    );
    assert_eq!(BadgeQuery::parse(&again).as_ref(), Ok(&query), "{again}");

    for value in [0, i64::MIN, i64::MAX] {
        let (look, shown) = (query.look("#fff"), query.shown(value));
        let svg = render(&query.label, &shown, &look);
        let plain = render("views", &shown, &look);
        for markup in ['<', '>', '"'] {
            assert_eq!(svg.matches(markup).count(), plain.matches(markup).count(), "{svg}");
        }
    }
});
