//! The namespace and key rules of API v1.
//!
//! A namespace is `^[A-Za-z0-9_.-]{1,64}$`. A key is one URL path segment, percent-decoded to
//! 1..=256 bytes of UTF-8 without control characters. Neither may be `.` or `..`: URL parsers
//! remove such segments, so a name written through a batch could never be read by URL.

use std::fmt;

use percent_encoding::percent_decode_str;
use serde::{Deserialize, Serialize};

use crate::CoreError;

/// Longest namespace, in bytes.
pub const MAX_NAMESPACE_LEN: usize = 64;
/// Longest key after percent-decoding, in bytes.
pub const MAX_KEY_LEN: usize = 256;

/// A validated namespace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Namespace(String);

impl Namespace {
    /// Checks `raw` against the namespace rule.
    ///
    /// # Errors
    /// [`CoreError::InvalidNamespace`] when the rule is broken.
    pub fn new(raw: &str) -> Result<Self, CoreError> {
        let invalid = |reason: &str| CoreError::InvalidNamespace { reason: reason.to_owned() };
        if raw.is_empty() {
            return Err(invalid("is empty"));
        }
        if raw.len() > MAX_NAMESPACE_LEN {
            return Err(invalid("is longer than 64 characters"));
        }
        if !raw.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-')) {
            return Err(invalid("may only hold letters, digits, `_`, `.` and `-`"));
        }
        if raw == "." || raw == ".." {
            return Err(invalid("cannot be `.` or `..`"));
        }
        Ok(Self(raw.to_owned()))
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A validated key, held decoded.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Key(String);

impl Key {
    /// Checks an already decoded key (as sent inside a JSON body).
    ///
    /// # Errors
    /// [`CoreError::InvalidKey`] when the rule is broken.
    pub fn new(decoded: &str) -> Result<Self, CoreError> {
        let invalid = |reason: &str| CoreError::InvalidKey { reason: reason.to_owned() };
        if decoded.is_empty() {
            return Err(invalid("is empty"));
        }
        if decoded.len() > MAX_KEY_LEN {
            return Err(invalid("is longer than 256 bytes"));
        }
        if decoded.chars().any(char::is_control) {
            return Err(invalid("contains a control character"));
        }
        if decoded == "." || decoded == ".." {
            return Err(invalid("cannot be `.` or `..`"));
        }
        Ok(Self(decoded.to_owned()))
    }

    /// Decodes and checks one raw URL path segment.
    ///
    /// # Errors
    /// [`CoreError::InvalidKey`] for a malformed percent-encoding, bytes that are not UTF-8, or a
    /// decoded key that breaks the rule.
    pub fn from_segment(raw: &str) -> Result<Self, CoreError> {
        if !percent_escapes_are_well_formed(raw) {
            return Err(CoreError::InvalidKey {
                reason: "has a `%` that is not followed by two hex digits".to_owned(),
            });
        }
        let decoded = percent_decode_str(raw).decode_utf8().map_err(|_| CoreError::InvalidKey {
            reason: "is not valid UTF-8 once percent-decoded".to_owned(),
        })?;
        Self::new(&decoded)
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// `percent-encoding` passes a stray `%` through unchanged; the API refuses it instead, so that
/// `%zz` and `%` never silently name a different key than the client meant.
fn percent_escapes_are_well_formed(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3);
            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

macro_rules! string_newtype_conversions {
    ($name:ident) => {
        impl TryFrom<String> for $name {
            type Error = CoreError;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                Self::new(&value)
            }
        }
        impl From<$name> for String {
            fn from(value: $name) -> Self {
                value.0
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}
string_newtype_conversions!(Namespace);
string_newtype_conversions!(Key);

/// Longest key.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;

/// A validated idempotency key (the `Idempotency-Key` a client names a write with): 1 to 128
/// visible ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// # Errors
    /// [`CoreError::InvalidIdempotencyKey`] when `raw` breaks the rule.
    pub fn new(raw: &str) -> Result<Self, CoreError> {
        let ok = (1..=MAX_IDEMPOTENCY_KEY_LEN).contains(&raw.len())
            && raw.bytes().all(|b| (0x21..=0x7e).contains(&b));
        if ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(CoreError::InvalidIdempotencyKey { max: MAX_IDEMPOTENCY_KEY_LEN })
        }
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for IdempotencyKey {
    type Error = CoreError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(&value)
    }
}

impl From<IdempotencyKey> for String {
    fn from(value: IdempotencyKey) -> Self {
        value.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namespace_accepts_the_allowed_alphabet() {
        assert!(Namespace::new("site-1.pages_v2").is_ok());
        assert!(Namespace::new(&"a".repeat(64)).is_ok());
    }

    #[test]
    fn namespace_refuses_empty_long_and_foreign_characters() {
        for bad in ["", &"a".repeat(65), "a b", "a/b", "é", "a%20"] {
            let err = Namespace::new(bad).unwrap_err();
            assert_eq!(err.code(), "invalid_namespace", "{bad:?}");
        }
    }

    #[test]
    fn namespace_refuses_dot_and_dot_dot_which_no_url_can_address() {
        for bad in [".", ".."] {
            let err = Namespace::new(bad).unwrap_err();
            assert_eq!(err.code(), "invalid_namespace", "{bad:?}");
        }
        assert!(Namespace::new("...").is_ok());
        assert!(Namespace::new(".well-known").is_ok());
    }

    #[test]
    fn key_decodes_percent_escapes_including_slash() {
        assert_eq!(Key::from_segment("a%2Fb").unwrap().as_str(), "a/b");
        assert_eq!(Key::from_segment("caf%C3%A9").unwrap().as_str(), "café");
        assert_eq!(Key::from_segment("%2E%2E%2E").unwrap().as_str(), "...");
    }

    #[test]
    fn key_length_is_counted_in_decoded_bytes() {
        assert!(Key::from_segment(&"%41".repeat(256)).is_ok());
        assert!(Key::from_segment(&"%41".repeat(257)).is_err());
        assert!(Key::new(&"é".repeat(128)).is_ok());
        assert!(Key::new(&"é".repeat(129)).is_err());
    }

    #[test]
    fn key_refuses_malformed_escapes_bad_utf8_controls_and_dots() {
        for bad in ["", "%", "%2", "%zz", "a%g1", "%FF", "%C3", "a%00b", "%7F", "%C2%85", ".", "..", "%2E"] {
            let err = Key::from_segment(bad).unwrap_err();
            assert_eq!(err.code(), "invalid_key", "{bad:?}");
        }
    }
}
