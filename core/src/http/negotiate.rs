//! Content negotiation for counter values (JSON by default, bare digits for `text/plain`), and
//! the client's preferences (RFC 7240 `Prefer`).

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

/// Whether a `Prefer` header asks for `respond-async` (RFC 7240): preferences are separated by
/// commas, their parameters by semicolons, and their names are case-insensitive.
#[must_use]
pub fn prefers_respond_async(prefer: Option<&str>) -> bool {
    prefer.is_some_and(|prefer| {
        prefer.split(',').any(|preference| {
            let name = preference.split(';').next().unwrap_or("").split('=').next().unwrap_or("");
            name.trim().eq_ignore_ascii_case("respond-async")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn respond_async_is_found_among_other_preferences() {
        assert!(prefers_respond_async(Some("respond-async")));
        assert!(prefers_respond_async(Some("return=minimal, Respond-Async ; x=1, wait=5")));
        assert!(!prefers_respond_async(None));
        assert!(!prefers_respond_async(Some("")));
        assert!(!prefers_respond_async(Some("wait=10")));
        assert!(!prefers_respond_async(Some("respond-asynchronously")));
        assert!(!prefers_respond_async(Some("handling=respond-async")));
    }

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
