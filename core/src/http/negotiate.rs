//! Content negotiation for counter values: JSON by default, bare digits for `text/plain`.

/// Whether the `Accept` header prefers `text/plain` over JSON.
///
/// Follows RFC 9110's weights: the highest `q` wins, JSON wins ties, and `*/*` or `application/*`
/// count for JSON while `text/*` counts for plain text.
#[must_use]
pub fn prefers_text_plain(accept: Option<&str>) -> bool {
    let Some(accept) = accept else { return false };
    let (mut text, mut json) = (0.0_f32, 0.0_f32);
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.trim().strip_prefix("q=").and_then(|v| v.trim().parse::<f32>().ok()))
            .next()
            .unwrap_or(1.0);
        match media.as_str() {
            "text/plain" | "text/*" => text = text.max(q),
            "application/json" | "application/*" | "*/*" => json = json.max(q),
            _ => {}
        }
    }
    text > 0.0 && text > json
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_the_default() {
        assert!(!prefers_text_plain(None));
        assert!(!prefers_text_plain(Some("*/*")));
        assert!(!prefers_text_plain(Some("application/json")));
    }

    #[test]
    fn plain_text_when_asked_for() {
        assert!(prefers_text_plain(Some("text/plain")));
        assert!(prefers_text_plain(Some("text/plain, */*;q=0.1")));
        assert!(prefers_text_plain(Some("TEXT/PLAIN; charset=utf-8")));
    }

    #[test]
    fn weights_decide() {
        assert!(!prefers_text_plain(Some("text/plain;q=0.5, application/json")));
        assert!(!prefers_text_plain(Some("text/plain;q=0")));
        assert!(!prefers_text_plain(Some("text/plain, application/json")));
    }
}
