//! Properties of the name rules: any input is either accepted or refused, never a panic, and
//! every valid key survives a percent-encoding round trip.

use edgecount_core::{Key, Namespace};
use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use proptest::prelude::*;

proptest! {
    #[test]
    fn any_segment_is_accepted_or_refused_with_invalid_key(raw in "\\PC{0,300}") {
        if let Err(e) = Key::from_segment(&raw) {
            prop_assert_eq!(e.code(), "invalid_key");
        }
    }

    #[test]
    fn any_namespace_is_accepted_or_refused_with_invalid_namespace(raw in "\\PC{0,80}") {
        if let Err(e) = Namespace::new(&raw) {
            prop_assert_eq!(e.code(), "invalid_namespace");
        }
    }

    #[test]
    fn namespaces_of_the_alphabet_are_accepted_unless_dot_or_dot_dot(raw in "[A-Za-z0-9_.-]{1,64}") {
        let url_would_remove_it = raw == "." || raw == "..";
        prop_assert_eq!(Namespace::new(&raw).is_ok(), !url_would_remove_it);
    }

    #[test]
    fn valid_keys_round_trip_through_percent_encoding(raw in "[^\\p{Cc}]{1,80}") {
        if let Ok(key) = Key::new(&raw) {
            let segment = utf8_percent_encode(key.as_str(), NON_ALPHANUMERIC).to_string();
            prop_assert_eq!(Key::from_segment(&segment).unwrap(), key);
        }
    }
}
