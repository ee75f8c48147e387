//! The content type kept with a cache entry: checked as an HTTP header field value before it
//! is stored, because every later read of the entry sends it back as `Content-Type`.
//!
//! RFC 9110 (section 5.5) allows a field value visible ASCII, spaces and tabs (and obsolete
//! non-ASCII bytes, refused here, as Fetch does in practice). A CR, LF or NUL would split or
//! break the answer's headers, and the runtime refuses to build such a response at all, so an
//! entry stored with one could never be read again.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::CoreError;

/// Longest content type, in bytes: room for any real media type and its parameters.
pub const MAX_CONTENT_TYPE_LEN: usize = 256;
/// What a stored entry is served as when its stored content type is not a valid header value
/// (possible only for entries stored before content types were checked).
pub const FALLBACK_CONTENT_TYPE: &str = "application/octet-stream";

/// A content type that is safe to send back as a header value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ContentType(String);

impl ContentType {
    /// Checks `raw`; surrounding spaces and tabs are not part of a header value, so they are
    /// dropped rather than stored.
    ///
    /// # Errors
    /// [`CoreError::InvalidContentType`] for an empty or overlong value, or one with a control
    /// character or a byte outside visible ASCII.
    pub fn new(raw: &str) -> Result<Self, CoreError> {
        let invalid = |reason: &str| CoreError::InvalidContentType { reason: reason.to_owned() };
        let value = raw.trim_matches([' ', '\t']);
        if value.is_empty() {
            return Err(invalid("is empty"));
        }
        if value.len() > MAX_CONTENT_TYPE_LEN {
            return Err(invalid("is longer than 256 bytes"));
        }
        if !is_header_value(value) {
            return Err(invalid(
                "may only hold visible ASCII characters, spaces and tabs (no line breaks or control characters)",
            ));
        }
        Ok(Self(value.to_owned()))
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn is_header_value(value: &str) -> bool {
    value.bytes().all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
}

/// The content type to answer a stored entry with: as stored when it is a valid header value,
/// else [`FALLBACK_CONTENT_TYPE`], so an old entry stored with a broken one is still readable
/// (as opaque bytes) instead of failing every read.
#[must_use]
pub fn served(stored: &str) -> &str {
    let value = stored.trim_matches([' ', '\t']);
    if ContentType::new(value).is_ok() {
        value
    } else {
        FALLBACK_CONTENT_TYPE
    }
}

impl TryFrom<String> for ContentType {
    type Error = CoreError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(&value)
    }
}

impl From<ContentType> for String {
    fn from(value: ContentType) -> Self {
        value.0
    }
}

impl fmt::Display for ContentType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_media_types_with_parameters() {
        for good in ["text/html", "text/plain; charset=utf-8", "image/svg+xml", "a/b;\tq=\"x y\""] {
            assert_eq!(ContentType::new(good).unwrap().as_str(), good);
        }
        assert_eq!(ContentType::new(" text/plain\t").unwrap().as_str(), "text/plain");
        assert!(ContentType::new(&"a".repeat(MAX_CONTENT_TYPE_LEN)).is_ok());
    }

    #[test]
    fn refuses_header_injection_controls_and_overlong_values() {
        let long = "a".repeat(MAX_CONTENT_TYPE_LEN + 1);
        for bad in [
            "text/html\r\nSet-Cookie: x=1",
            "text/html\nx",
            "text/html\rx",
            "text/plain\u{0}",
            "text/plain\u{1}",
            "text/plain\u{7f}",
            "text/plain; name=café",
            "",
            " \t ",
            long.as_str(),
        ] {
            let err = ContentType::new(bad).unwrap_err();
            assert_eq!(err.code(), "invalid_content_type", "{bad:?}");
        }
    }

    #[test]
    fn a_stored_bad_content_type_is_served_as_opaque_bytes() {
        assert_eq!(served("text/html"), "text/html");
        assert_eq!(served("text/html\r\nSet-Cookie: x=1"), FALLBACK_CONTENT_TYPE);
        assert_eq!(served("text/plain\u{0}"), FALLBACK_CONTENT_TYPE);
        assert_eq!(served(""), FALLBACK_CONTENT_TYPE);
        assert_eq!(served(&"a".repeat(300)), FALLBACK_CONTENT_TYPE);
    }

    #[test]
    fn travels_as_a_plain_string_and_is_checked_on_arrival() {
        let json = serde_json::to_string(&ContentType::new("text/html").unwrap()).unwrap();
        assert_eq!(json, "\"text/html\"");
        assert!(serde_json::from_str::<ContentType>("\"text/html\\r\\nx: y\"").is_err());
    }
}
