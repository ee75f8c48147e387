//! Entity tags: how a counter read and a fixed document are named for conditional requests
//! (RFC 9110 8.8.3), and how `If-None-Match` is matched.

/// The `ETag` of a counter read: changes whenever the value or its version does.
#[must_use]
pub fn etag(value: i64, version: u64) -> String {
    format!("\"{version}.{value}\"")
}

/// The `ETag` of a fixed document (the client module, the spec, the demo page): a hash of its
/// bytes, so it changes exactly when a new build changes the document.
#[must_use]
pub fn content_etag(bytes: &[u8]) -> String {
    format!("\"{:016x}\"", xxhash_rust::xxh3::xxh3_64(bytes))
}

/// Whether an `If-None-Match` header matches `etag` (weak comparison, as RFC 9110 asks for
/// `If-None-Match`).
#[must_use]
pub fn if_none_match(header: &str, etag: &str) -> bool {
    let bare = |tag: &str| tag.trim().trim_start_matches("W/").to_owned();
    header.trim() == "*" || header.split(',').any(|candidate| bare(candidate) == bare(etag))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_match_weakly() {
        let tag = etag(-5, 3);
        assert_eq!(tag, "\"3.-5\"");
        assert!(if_none_match("\"3.-5\"", &tag));
        assert!(if_none_match("W/\"3.-5\", \"x\"", &tag));
        assert!(if_none_match("*", &tag));
        assert!(!if_none_match("\"4.-5\"", &tag));
    }
}
