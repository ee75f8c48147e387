//! Fuzzes the helpers that read request headers: `Accept` ([`prefers_text_plain`]),
//! `Content-Type` ([`is_json_content_type`]), `If-None-Match` ([`if_none_match`]),
//! `Idempotency-Key` ([`IdempotencyKey::new`]), and the bearer token or `CF-Connecting-IP`
//! that name a rate-limited client ([`ClientId`]). Any client sets these to anything.
//!
//! Input: lines of text, one per header in that order. Beyond "never panics" it checks what
//! RFC 9110 and the helpers' docs promise: media types compare without regard to ASCII case,
//! `*` and a list holding the current `ETag` (weak or strong) always match, and an accepted
//! idempotency key is 1 to 128 visible ASCII characters.
#![no_main]

use edgecount_core::edge::rate_limit::ClientId;
use edgecount_core::http::body::is_json_content_type;
use edgecount_core::http::etag::{etag, if_none_match};
use edgecount_core::http::negotiate::prefers_text_plain;
use edgecount_core::names::{IdempotencyKey, MAX_IDEMPOTENCY_KEY_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.split('\n');
    let (accept, content_type, none_match, idempotency) =
        (lines.next(), lines.next(), lines.next().unwrap_or(""), lines.next().unwrap_or(""));
    let client = lines.next().unwrap_or("");

    let _ = prefers_text_plain(accept);
    assert!(!prefers_text_plain(None));

    assert!(is_json_content_type(None));
    if let Some(content_type) = content_type {
        let upper = content_type.to_ascii_uppercase();
        assert_eq!(is_json_content_type(Some(content_type)), is_json_content_type(Some(&upper)));
    }

    // The tags the service makes: the extremes of the value and version ranges, and a plain one.
    for tag in [etag(0, 0), etag(-5, 3), etag(i64::MIN, u64::MAX), etag(i64::MAX, 1)] {
        let _ = if_none_match(none_match, &tag);
        assert!(if_none_match(&tag, &tag));
        assert!(if_none_match(&format!("W/{tag}"), &tag));
        assert!(if_none_match(&format!("{none_match},{tag}"), &tag));
        assert!(if_none_match(" * ", &tag));
    }
    let _ = if_none_match(none_match, idempotency);

    if let Ok(key) = IdempotencyKey::new(idempotency) {
        assert_eq!(key.as_str(), idempotency);
        assert!((1..=MAX_IDEMPOTENCY_KEY_LEN).contains(&idempotency.len()));
        assert!(idempotency.bytes().all(|b| b.is_ascii_graphic()));
    }

    let _ = (ClientId::token(client), ClientId::address(client));
});
