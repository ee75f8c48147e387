//! Who may do what: bearer tokens with a right (read, write, admin), optionally limited to
//! some namespaces.
//!
//! Configured as comma-separated entries, each `token` or `token@ns1|ns2`. With no token
//! configured the service is open. With tokens, writes need a write or admin token, operations
//! data (`/v1/stats`, `/metrics`) an admin token, and reads are public unless reads are made
//! private. Tokens are kept and compared as SHA-256 digests: every comparison is of 32 bytes
//! in constant time, so its timing tells neither a token's bytes nor its length, and the
//! configured tokens are not held in the clear. They never appear in errors.

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::Namespace;

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Right {
    Read,
    Write,
    Admin,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// No token, or one that is not configured (HTTP 401).
    Unauthenticated,
    /// A known token without the right, or not for this namespace (HTTP 403).
    Forbidden,
}

/// A token as kept and compared: its SHA-256, the same length whatever the token's.
type TokenDigest = [u8; 32];

fn token_digest(token: &[u8]) -> TokenDigest {
    Sha256::digest(token).into()
}

#[derive(Clone)]
struct Grant {
    token: TokenDigest,
    right: Right,
    /// `None`: every namespace.
    namespaces: Option<Vec<String>>,
}

impl Grant {
    fn matches(&self, presented: &TokenDigest) -> bool {
        bool::from(self.token.ct_eq(presented))
    }
}

// By hand, so a logged configuration shows no digest a weak token could be guessed from.
impl fmt::Debug for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Grant")
            .field("right", &self.right)
            .field("namespaces", &self.namespaces)
            .finish_non_exhaustive()
    }
}

/// The configured tokens.
#[derive(Debug, Clone, Default)]
pub struct AccessPolicy {
    grants: Vec<Grant>,
    private_reads: bool,
}

impl AccessPolicy {
    /// Reads the three token lists and the private-reads switch.
    ///
    /// # Errors
    /// A description (never containing a token) of a malformed entry.
    pub fn parse(
        admin: Option<&str>,
        write: Option<&str>,
        read: Option<&str>,
        private_reads: bool,
    ) -> Result<Self, String> {
        let mut grants = Vec::new();
        for (list, right) in [(admin, Right::Admin), (write, Right::Write), (read, Right::Read)] {
            for entry in list.unwrap_or("").split(',').map(str::trim).filter(|e| !e.is_empty()) {
                let (token, namespaces) = match entry.split_once('@') {
                    None => (entry, None),
                    Some((token, list)) => {
                        let names: Vec<String> = list.split('|').map(str::to_owned).collect();
                        if names.iter().any(|n| Namespace::new(n).is_err()) {
                            return Err(format!("a {right:?} token is limited to an invalid namespace"));
                        }
                        (token, Some(names))
                    }
                };
                if token.len() < 8 {
                    return Err(format!("a {right:?} token is shorter than 8 characters"));
                }
                grants.push(Grant { token: token_digest(token.as_bytes()), right, namespaces });
            }
        }
        Ok(Self { grants, private_reads })
    }

    /// Whether no token is configured: everyone may do everything.
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.grants.is_empty()
    }

    /// Whether reads need a token: private reads were asked for and tokens are configured.
    /// Their answers must then never be kept by a shared cache.
    #[must_use]
    pub fn reads_need_a_token(&self) -> bool {
        self.private_reads && !self.is_open()
    }

    /// Whether `token` is one of the configured tokens, whatever its right.
    #[must_use]
    pub fn recognizes(&self, token: &str) -> bool {
        let presented = token_digest(token.as_bytes());
        let mut found = false;
        for grant in &self.grants {
            found |= grant.matches(&presented);
        }
        found
    }

    /// Whether `token` may exercise `need` on `ns` (`None` for routes without a namespace).
    ///
    /// # Errors
    /// The [`Denial`].
    pub fn check(&self, token: Option<&str>, need: Right, ns: Option<&Namespace>) -> Result<(), Denial> {
        if self.is_open() || (need == Right::Read && !self.private_reads) {
            return Ok(());
        }
        let presented = token_digest(token.ok_or(Denial::Unauthenticated)?.as_bytes());
        // Compare against every grant, so timing does not tell which one (if any) matched.
        let mut found: Option<&Grant> = None;
        for grant in &self.grants {
            if grant.matches(&presented) {
                found = Some(grant);
            }
        }
        let grant = found.ok_or(Denial::Unauthenticated)?;
        let namespace_ok = match (&grant.namespaces, ns) {
            (None, _) => true,
            (Some(list), Some(ns)) => list.iter().any(|n| n == ns.as_str()),
            (Some(_), None) => false,
        };
        if grant.right >= need && namespace_ok {
            Ok(())
        } else {
            Err(Denial::Forbidden)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(private_reads: bool) -> AccessPolicy {
        AccessPolicy::parse(
            Some("admin-token-1"),
            Some("write-token-1, pages-writer@pages|likes"),
            Some("read-token-1"),
            private_reads,
        )
        .unwrap()
    }

    fn ns(name: &str) -> Namespace {
        Namespace::new(name).unwrap()
    }

    #[test]
    fn no_tokens_means_open() {
        let open = AccessPolicy::parse(None, Some(" "), None, true).unwrap();
        assert!(open.is_open());
        assert_eq!(open.check(None, Right::Admin, None), Ok(()));
    }

    #[test]
    fn writes_need_a_write_token() {
        let p = policy(false);
        let pages = ns("pages");
        assert_eq!(p.check(None, Right::Write, Some(&pages)), Err(Denial::Unauthenticated));
        assert_eq!(p.check(Some("nope-nope"), Right::Write, Some(&pages)), Err(Denial::Unauthenticated));
        assert_eq!(p.check(Some("read-token-1"), Right::Write, Some(&pages)), Err(Denial::Forbidden));
        assert_eq!(p.check(Some("write-token-1"), Right::Write, Some(&pages)), Ok(()));
        assert_eq!(p.check(Some("admin-token-1"), Right::Write, Some(&pages)), Ok(()));
    }

    #[test]
    fn namespace_limits_hold() {
        let p = policy(false);
        assert_eq!(p.check(Some("pages-writer"), Right::Write, Some(&ns("likes"))), Ok(()));
        assert_eq!(p.check(Some("pages-writer"), Right::Write, Some(&ns("votes"))), Err(Denial::Forbidden));
        assert_eq!(p.check(Some("pages-writer"), Right::Admin, None), Err(Denial::Forbidden));
    }

    #[test]
    fn reads_are_public_unless_private() {
        assert!(!policy(false).reads_need_a_token());
        assert!(policy(true).reads_need_a_token());
        assert!(!AccessPolicy::parse(None, None, None, true).unwrap().reads_need_a_token());
        assert_eq!(policy(false).check(None, Right::Read, Some(&ns("pages"))), Ok(()));
        let private = policy(true);
        assert_eq!(private.check(None, Right::Read, Some(&ns("pages"))), Err(Denial::Unauthenticated));
        assert_eq!(private.check(Some("read-token-1"), Right::Read, Some(&ns("pages"))), Ok(()));
    }

    #[test]
    fn admin_routes_need_admin() {
        let p = policy(false);
        assert_eq!(p.check(Some("write-token-1"), Right::Admin, None), Err(Denial::Forbidden));
        assert_eq!(p.check(Some("admin-token-1"), Right::Admin, None), Ok(()));
    }

    #[test]
    fn configured_tokens_are_not_held_in_the_clear() {
        let shown = format!("{:?}", policy(true));
        for token in ["admin-token-1", "write-token-1", "pages-writer", "read-token-1"] {
            assert!(!shown.contains(token), "{shown}");
            assert!(!shown.contains(&format!("{:?}", token.as_bytes())), "{shown}");
        }
    }

    #[test]
    fn tokens_of_any_length_compare_by_whole_digest() {
        let p = policy(true);
        let pages = ns("pages");
        assert_eq!(p.check(Some("read-token-1"), Right::Read, Some(&pages)), Ok(()));
        for near in ["", "r", "read-token-", "read-token-12", "Read-token-1", &"read-token-1".repeat(500)] {
            assert_eq!(
                p.check(Some(near), Right::Read, Some(&pages)),
                Err(Denial::Unauthenticated),
                "{near:?}"
            );
            assert!(!p.recognizes(near), "{near:?}");
        }
        assert_eq!(token_digest(b"").len(), token_digest(&[b'x'; 10_000]).len());
    }

    #[test]
    fn malformed_entries_are_refused_without_echoing_tokens() {
        let short = AccessPolicy::parse(Some("abc"), None, None, false).unwrap_err();
        assert!(!short.contains("abc"));
        let bad_ns = AccessPolicy::parse(None, Some("secret-token@no spaces"), None, false).unwrap_err();
        assert!(!bad_ns.contains("secret-token"));
    }
}
