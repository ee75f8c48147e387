//! Names on the compatible routes: CountAPI's rule `^[A-Za-z0-9_\-.]{3,64}$`, the default
//! namespace, and the reserved words a page uses to count itself without spelling out its name.
//!
//! Every name that passes this rule is also a valid API v1 namespace and key, so a counter
//! reached as `/hit/blog/home` is the one `/v1/counters/blog/home` reads.

use percent_encoding::percent_decode_str;

use crate::{Key, Namespace};

/// The namespace of a path that names only a key (`/hit/:key`).
pub const DEFAULT_NAMESPACE: &str = "default";
/// Shortest and longest name.
pub const MIN_NAME_LEN: usize = 3;
pub const MAX_NAME_LEN: usize = 64;

/// Where a request came from, for the reserved words: the `Origin` and `Referer` headers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Page<'a> {
    pub origin: Option<&'a str>,
    pub referer: Option<&'a str>,
}

impl Page<'_> {
    /// The calling page's host name: from `Origin`, else from `Referer`.
    fn host(&self) -> &str {
        [self.origin, self.referer]
            .into_iter()
            .flatten()
            .find_map(|url| split_url(url).map(|(host, _)| host))
            .unwrap_or("")
    }

    /// The calling page's path: from `Referer` (an `Origin` has none), without its query.
    fn path(&self) -> &str {
        self.referer.and_then(split_url).map_or("", |(_, path)| path)
    }
}

/// The host name and path of an absolute `http(s)` URL.
fn split_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.split_once("://")?.1;
    let (authority, path) = rest.find(['/', '?', '#']).map_or((rest, ""), |at| rest.split_at(at));
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = if host_port.starts_with('[') {
        host_port.split_once(']').map_or(host_port, |(host, _)| &host[1..])
    } else {
        host_port.split_once(':').map_or(host_port, |(host, _)| host)
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    Some((host, path))
}

/// Whether `name` follows CountAPI's rule.
#[must_use]
pub fn is_valid(name: &str) -> bool {
    (MIN_NAME_LEN..=MAX_NAME_LEN).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// A name with its reserved words replaced: `:HOST:` by the calling page's host name,
/// `:PATHNAME:` and `:PATH:` by its path. What they yield is made a valid name: its leading `/`
/// dropped, every other character outside the rule turned into `.`, cut to 64 characters and
/// padded in front with `.` to 3 (as Abacus pads), so a call with neither header still names a
/// counter (`...`).
#[must_use]
pub fn expand(raw: &str, page: &Page<'_>) -> String {
    let derived = match raw {
        ":HOST:" => page.host(),
        ":PATHNAME:" | ":PATH:" => page.path().trim_start_matches('/'),
        other => return other.to_owned(),
    };
    let mut name: String = derived
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '.' })
        .take(MAX_NAME_LEN)
        .collect();
    while name.len() < MIN_NAME_LEN {
        name.insert(0, '.');
    }
    name
}

/// A counter's names from the raw (percent-encoded) path segments of a compatible route:
/// `ns` is `None` for a path that names only a key. `None` when a name breaks the rule.
#[must_use]
pub fn resolve(ns: Option<&str>, key: &str, page: &Page<'_>) -> Option<(Namespace, Key)> {
    let name = |raw: &str| -> Option<String> {
        let decoded = percent_decode_str(raw).decode_utf8().ok()?;
        let expanded = expand(&decoded, page);
        is_valid(&expanded).then_some(expanded)
    };
    let ns = ns.map_or(Some(DEFAULT_NAMESPACE.to_owned()), name)?;
    let key = name(key)?;
    Some((Namespace::new(&ns).ok()?, Key::new(&key).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const NONE: Page<'static> = Page { origin: None, referer: None };

    fn resolved(ns: Option<&str>, key: &str, page: &Page<'_>) -> Option<(String, String)> {
        resolve(ns, key, page).map(|(ns, key)| (ns.as_str().to_owned(), key.as_str().to_owned()))
    }

    #[test]
    fn the_rule_is_countapis() {
        for good in ["abc", "a.b-c_d", &"x".repeat(64), "...", "UPPER09"] {
            assert!(is_valid(good), "{good}");
        }
        for bad in ["ab", "", &"x".repeat(65), "a b", "a/b", "caf\u{e9}", "a:b"] {
            assert!(!is_valid(bad), "{bad}");
        }
    }

    #[test]
    fn a_key_alone_lives_in_the_default_namespace() {
        assert_eq!(resolved(None, "home", &NONE), Some(("default".into(), "home".into())));
        assert_eq!(resolved(Some("blog"), "home", &NONE), Some(("blog".into(), "home".into())));
        assert_eq!(resolved(Some("bl"), "home", &NONE), None);
        assert_eq!(resolved(Some("blog"), "a%2Fb", &NONE), None);
    }

    #[test]
    fn reserved_words_come_from_the_calling_page() {
        let page = Page {
            origin: Some("https://example.com"),
            referer: Some("https://example.com:8080/blog/post-1?x=1"),
        };
        assert_eq!(
            resolved(Some(":HOST:"), ":PATHNAME:", &page),
            Some(("example.com".into(), "blog.post-1".into()))
        );
        assert_eq!(
            resolved(Some("%3AHOST%3A"), ":PATH:", &page),
            Some(("example.com".into(), "blog.post-1".into()))
        );
        let referer_only = Page { origin: None, referer: Some("http://a.io/") };
        assert_eq!(
            resolved(Some(":HOST:"), ":PATHNAME:", &referer_only),
            Some(("a.io".into(), "...".into()))
        );
        assert_eq!(resolved(Some(":HOST:"), ":PATHNAME:", &NONE), Some(("...".into(), "...".into())));
        let long = format!("https://h.example/{}", "p".repeat(100));
        let page = Page { origin: None, referer: Some(&long) };
        assert_eq!(resolved(None, ":PATH:", &page).unwrap().1.len(), 64);
        let ipv6 = Page { origin: Some("http://[::1]:8787"), referer: None };
        assert_eq!(resolved(Some(":HOST:"), "k-1", &ipv6), Some(("..1".into(), "k-1".into())));
    }

    #[test]
    fn short_derived_names_are_padded_in_front() {
        let page = Page { origin: Some("http://ab"), referer: Some("http://ab/x") };
        assert_eq!(expand(":HOST:", &page), ".ab");
        assert_eq!(expand(":PATH:", &page), "..x");
    }

    proptest! {
        /// Whatever the headers say, a reserved word yields a valid name that is also a valid
        /// API v1 namespace and key.
        #[test]
        fn reserved_words_always_yield_valid_names(origin in ".{0,80}", referer in ".{0,120}") {
            let page = Page { origin: Some(&origin), referer: Some(&referer) };
            for word in [":HOST:", ":PATHNAME:", ":PATH:"] {
                let name = expand(word, &page);
                prop_assert!(is_valid(&name), "{word} -> {name:?}");
                prop_assert!(resolve(Some(word), word, &page).is_some());
            }
        }
    }
}
