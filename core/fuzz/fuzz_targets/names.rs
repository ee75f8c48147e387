//! Fuzzes the namespace and key rules: [`Namespace::new`], [`Key::new`] and
//! [`Key::from_segment`]. Every counter and cache route names its target with a URL path
//! segment or a JSON string, so these read untrusted text before anything else does.
//!
//! Besides "never panics" it checks what the rules promise: an accepted name keeps to its
//! alphabet and length, a segment decodes to a key that the decoded-key rule accepts as is,
//! percent-encoding an accepted key again decodes back to the same key, and names survive the
//! JSON they travel in to a shard.
#![no_main]

use edgecount_core::names::{MAX_KEY_LEN, MAX_NAMESPACE_LEN};
use edgecount_core::{Key, Namespace};
use libfuzzer_sys::fuzz_target;
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};

fuzz_target!(|data: &[u8]| {
    // Both the URL and JSON bodies hand the core a `&str`; other bytes never reach it.
    let Ok(text) = std::str::from_utf8(data) else { return };

    if let Ok(ns) = Namespace::new(text) {
        assert_eq!(ns.as_str(), text);
        assert!((1..=MAX_NAMESPACE_LEN).contains(&text.len()));
        assert!(text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')));
        assert!(text != "." && text != "..");
        let json = serde_json::to_string(&ns).unwrap();
        assert_eq!(serde_json::from_str::<Namespace>(&json).ok(), Some(ns));
    }

    if let Ok(key) = Key::new(text) {
        assert_eq!(key.as_str(), text);
        assert!((1..=MAX_KEY_LEN).contains(&text.len()));
        assert!(!text.chars().any(char::is_control));
        let json = serde_json::to_string(&key).unwrap();
        assert_eq!(serde_json::from_str::<Key>(&json).ok(), Some(key));
    }

    let from_segment = Key::from_segment(text);
    // Without a `%` there is nothing to decode, so both rules must give the same answer.
    if !text.contains('%') {
        assert_eq!(from_segment, Key::new(text));
    }
    if let Ok(key) = from_segment {
        assert_eq!(Key::new(key.as_str()).as_ref(), Ok(&key));
        // A client that percent-encodes a key it read back must address the same key.
        let encoded = utf8_percent_encode(key.as_str(), NON_ALPHANUMERIC).to_string();
        assert_eq!(Key::from_segment(&encoded).as_ref(), Ok(&key), "{encoded:?}");
    }
});
