//! Who may do what: bearer tokens with a right (read, count, write, admin), optionally limited
//! to some namespaces, and public namespaces where everyone has the count right.
//!
//! Configured as comma-separated entries, each `token` or `token@ns1|ns2`. With no token and no
//! public namespace configured the service is open only if that was asked for by name
//! (`EDGECOUNT_OPEN=1`, as `make dev` does); otherwise it only answers reads, so that a deployment
//! nobody configured is not one anybody can reset. With tokens or public namespaces, writes need a write or admin
//! token, operations data (`/v1/stats`, `/metrics`) an admin token, and reads are public unless
//! reads are made private. The count right is what a public page may hold: add exactly 1 to a
//! counter and read it, nothing that could lower, reset or shorten the life of a count. Tokens are kept and compared as SHA-256 digests: every comparison is of 32 bytes
//! in constant time, so its timing tells neither a token's bytes nor its length, and the
//! configured tokens are not held in the clear. They never appear in errors.

use std::fmt;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::shard::protocol::ShardOp;
use crate::Namespace;

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Right {
    Read,
    /// Read, and add exactly 1 to a counter without a TTL: what a page that counts its views
    /// needs, and all that anyone who reads the page's source can then do.
    Count,
    Write,
    Admin,
}

impl Right {
    /// The right `op` needs. An increment by 1 without a TTL is a count; a TTL could cut a
    /// counter's life short (a reset by another name), so it needs the write right.
    #[must_use]
    pub fn for_op(op: &ShardOp) -> Self {
        // Whether an op writes is its kind's, in the table of ops (`OpKind::spec`).
        if let ShardOp::Incr { by, ttl, .. } = op {
            Self::for_increment(*by, *ttl)
        } else if op.is_write() {
            Self::Write
        } else {
            Self::Read
        }
    }

    /// The right an increment by `by` with `ttl` needs.
    #[must_use]
    pub fn for_increment(by: i64, ttl: Option<u32>) -> Self {
        if by == 1 && ttl.is_none() {
            Self::Count
        } else {
            Self::Write
        }
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Denial {
    /// No token, or one that is not configured (HTTP 401).
    Unauthenticated,
    /// A known token without the right, or not for this namespace (HTTP 403).
    Forbidden,
    /// Nothing is configured that could allow it, and open writes were not asked for (HTTP 403).
    NotOpen,
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
    /// Namespaces where everyone, without a token, has the count right.
    public_namespaces: Vec<String>,
    private_reads: bool,
    /// Open writes asked for by name: with nothing else configured, everyone may do everything.
    open_asked: bool,
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
        Ok(Self { grants, public_namespaces: Vec::new(), private_reads, open_asked: false })
    }

    /// Asks for open writes when nothing else is configured (`EDGECOUNT_OPEN`).
    #[must_use]
    pub fn with_open_asked(self, open_asked: bool) -> Self {
        Self { open_asked, ..self }
    }

    /// Adds count tokens (`EDGECOUNT_COUNT_TOKENS`, entries as for the other lists).
    ///
    /// # Errors
    /// As [`AccessPolicy::parse`].
    pub fn with_count_tokens(mut self, list: Option<&str>) -> Result<Self, String> {
        let counted = Self::parse(None, None, list, false)?;
        self.grants.extend(counted.grants.into_iter().map(|grant| Grant { right: Right::Count, ..grant }));
        Ok(self)
    }

    /// Gives everyone the count right in `list` (`EDGECOUNT_PUBLIC_NAMESPACES`, comma-separated).
    ///
    /// # Errors
    /// A description of an invalid namespace.
    pub fn with_public_namespaces(mut self, list: Option<&str>) -> Result<Self, String> {
        for name in list.unwrap_or("").split(',').map(str::trim).filter(|n| !n.is_empty()) {
            Namespace::new(name).map_err(|_| format!("the public namespace {name:?} is not a valid name"))?;
            self.public_namespaces.push(name.to_owned());
        }
        Ok(self)
    }

    /// Whether open writes were asked for and no token and no public namespace is configured:
    /// everyone may do everything.
    #[must_use]
    pub fn is_open(&self) -> bool {
        self.open_asked && self.nothing_configured()
    }

    /// Whether neither a token nor a public namespace is configured.
    fn nothing_configured(&self) -> bool {
        self.grants.is_empty() && self.public_namespaces.is_empty()
    }

    /// Whether nothing is configured and open writes were not asked for: only reads are
    /// answered (the safe default of a deployment nobody configured).
    #[must_use]
    pub fn answers_reads_only(&self) -> bool {
        !self.open_asked && self.nothing_configured()
    }

    /// The namespaces where everyone may count.
    #[must_use]
    pub fn public_namespaces(&self) -> &[String] {
        &self.public_namespaces
    }

    /// Whether `ns` is one where everyone may count.
    #[must_use]
    pub fn is_public(&self, ns: &Namespace) -> bool {
        self.public_namespaces.iter().any(|n| n == ns.as_str())
    }

    /// Whether reads need a token: private reads were asked for and tokens are configured.
    /// Their answers must then never be kept by a shared cache.
    #[must_use]
    pub fn reads_need_a_token(&self) -> bool {
        self.private_reads && !self.is_open()
    }

    /// Whether `token` is a configured token with more than the count right: one held by a
    /// person or a server, not one shipped in a page's source for anyone to use. Such a token
    /// has a rate-limit bucket of its own and its counts are never taken for a bot's.
    #[must_use]
    pub fn is_private_token(&self, token: &str) -> bool {
        self.any_grant(token, |grant| grant.right != Right::Count)
    }

    /// Whether `token` is one of the configured tokens, whatever its right.
    #[must_use]
    pub fn recognizes(&self, token: &str) -> bool {
        self.any_grant(token, |_| true)
    }

    /// Whether `token` is configured with a grant that `wanted` accepts. Every grant's digest is
    /// compared, so timing does not tell which one (if any) matched.
    fn any_grant(&self, token: &str, wanted: impl Fn(&Grant) -> bool) -> bool {
        let presented = token_digest(token.as_bytes());
        let mut found = false;
        for grant in &self.grants {
            found |= grant.matches(&presented) && wanted(grant);
        }
        found
    }

    /// Whether `token` is an operator's for `ns`: a write or admin token the operator configured,
    /// which a counter's owner key does not bind (see [`crate::shard::owner`]). In an open
    /// service nobody is: an owned counter there answers to its key alone.
    #[must_use]
    pub fn is_operator(&self, token: Option<&str>, ns: &Namespace) -> bool {
        !self.is_open() && token.is_some() && self.check(token, Right::Write, Some(ns)).is_ok()
    }

    /// Whether `token` may exercise `need` on `ns` (`None` for routes without a namespace).
    ///
    /// # Errors
    /// The [`Denial`].
    pub fn check(&self, token: Option<&str>, need: Right, ns: Option<&Namespace>) -> Result<(), Denial> {
        if self.is_open() || (need == Right::Read && !self.private_reads) {
            return Ok(());
        }
        if self.nothing_configured() {
            return Err(Denial::NotOpen);
        }
        // A public namespace's counts and reads are everyone's, whatever token comes with them.
        if need <= Right::Count && ns.is_some_and(|ns| self.is_public(ns)) {
            return Ok(());
        }
        self.check_grant(token, need, ns)
    }

    /// Whether `token` may read the whole of `ns` (its counts by day and the names of its top
    /// keys), which names keys nobody asked for by name: everyone may in an open service and in
    /// a public namespace; elsewhere it takes a read token, even where reads of a named key are
    /// public.
    ///
    /// # Errors
    /// The [`Denial`].
    pub fn check_listing(&self, token: Option<&str>, ns: &Namespace) -> Result<(), Denial> {
        if self.is_open() || self.is_public(ns) {
            return Ok(());
        }
        if self.nothing_configured() {
            return Err(Denial::NotOpen);
        }
        self.check_grant(token, Right::Read, Some(ns))
    }

    /// Whether `token` is configured with `need` on `ns`.
    fn check_grant(&self, token: Option<&str>, need: Right, ns: Option<&Namespace>) -> Result<(), Denial> {
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
    fn no_tokens_means_open_only_when_asked_for() {
        let open = AccessPolicy::parse(None, Some(" "), None, true).unwrap().with_open_asked(true);
        assert!(open.is_open());
        assert_eq!(open.check(None, Right::Admin, None), Ok(()));
        let unasked = AccessPolicy::parse(None, Some(" "), None, false).unwrap();
        assert!(!unasked.is_open());
        assert_eq!(unasked.check(None, Right::Read, Some(&ns("pages"))), Ok(()));
        for need in [Right::Count, Right::Write, Right::Admin] {
            assert_eq!(unasked.check(None, need, Some(&ns("pages"))), Err(Denial::NotOpen), "{need:?}");
            assert_eq!(unasked.check(Some("any-token-1"), need, None), Err(Denial::NotOpen), "{need:?}");
        }
        // With tokens configured, asking for open writes changes nothing.
        let configured = policy(false).with_open_asked(true);
        assert!(!configured.is_open());
        assert_eq!(configured.check(None, Right::Write, Some(&ns("pages"))), Err(Denial::Unauthenticated));
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
    fn listing_a_namespace_takes_a_read_token_unless_it_is_public_or_the_service_open() {
        let tokens = policy(false).with_public_namespaces(Some("pages")).unwrap();
        assert_eq!(tokens.check_listing(None, &ns("pages")), Ok(()), "a public namespace");
        assert_eq!(tokens.check_listing(None, &ns("shop")), Err(Denial::Unauthenticated));
        assert_eq!(
            tokens.check(None, Right::Read, Some(&ns("shop"))),
            Ok(()),
            "a named key's read stays public"
        );
        assert_eq!(tokens.check_listing(Some("read-token-1"), &ns("shop")), Ok(()));
        assert_eq!(
            tokens.check_listing(Some("pages-writer"), &ns("shop")),
            Err(Denial::Forbidden),
            "another namespace's"
        );
        assert_eq!(tokens.check_listing(Some("wrong"), &ns("shop")), Err(Denial::Unauthenticated));
        let open = AccessPolicy::parse(None, None, None, false).unwrap().with_open_asked(true);
        assert_eq!(open.check_listing(None, &ns("shop")), Ok(()));
        let bare = AccessPolicy::parse(None, None, None, false).unwrap();
        assert_eq!(bare.check_listing(None, &ns("shop")), Err(Denial::NotOpen));
    }

    #[test]
    fn reads_are_public_unless_private() {
        assert!(!policy(false).reads_need_a_token());
        assert!(policy(true).reads_need_a_token());
        let open = AccessPolicy::parse(None, None, None, true).unwrap().with_open_asked(true);
        assert!(!open.reads_need_a_token());
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
    fn the_count_right_counts_and_reads_and_no_more() {
        let p = policy(false).with_count_tokens(Some("page-counter@pages")).unwrap();
        let pages = ns("pages");
        assert_eq!(p.check(Some("page-counter"), Right::Count, Some(&pages)), Ok(()));
        assert_eq!(p.check(Some("page-counter"), Right::Read, Some(&pages)), Ok(()));
        assert_eq!(p.check(Some("page-counter"), Right::Write, Some(&pages)), Err(Denial::Forbidden));
        assert_eq!(p.check(Some("page-counter"), Right::Count, Some(&ns("likes"))), Err(Denial::Forbidden));
        assert_eq!(p.check(Some("write-token-1"), Right::Count, Some(&pages)), Ok(()));
        assert_eq!(p.check(None, Right::Count, Some(&pages)), Err(Denial::Unauthenticated));
        assert!(p.recognizes("page-counter"));
        assert!(!p.is_private_token("page-counter"));
        assert!(p.is_private_token("read-token-1"));
    }

    #[test]
    fn public_namespaces_give_everyone_the_count_right_there_only() {
        let p = AccessPolicy::parse(None, None, None, false)
            .unwrap()
            .with_public_namespaces(Some("pages, likes"))
            .unwrap();
        assert!(!p.is_open());
        for name in ["pages", "likes"] {
            assert_eq!(p.check(None, Right::Count, Some(&ns(name))), Ok(()));
            assert_eq!(p.check(None, Right::Write, Some(&ns(name))), Err(Denial::Unauthenticated));
        }
        assert_eq!(p.check(None, Right::Count, Some(&ns("votes"))), Err(Denial::Unauthenticated));
        assert_eq!(p.check(None, Right::Admin, None), Err(Denial::Unauthenticated));
        assert!(AccessPolicy::default().with_public_namespaces(Some("bad name")).is_err());
    }

    #[test]
    fn only_a_plain_increment_by_one_is_a_count() {
        let (n, k) = (ns("pages"), crate::Key::from_segment("home").unwrap());
        let incr = |by, ttl| ShardOp::Incr { ns: n.clone(), key: k.clone(), by, ttl };
        assert_eq!(Right::for_op(&incr(1, None)), Right::Count);
        assert_eq!(Right::for_op(&incr(2, None)), Right::Write);
        assert_eq!(Right::for_op(&incr(-1, None)), Right::Write);
        assert_eq!(Right::for_op(&incr(1, Some(1))), Right::Write);
        assert_eq!(
            Right::for_op(&ShardOp::Decr { ns: n.clone(), key: k.clone(), by: 1, ttl: None }),
            Right::Write
        );
        assert_eq!(Right::for_op(&ShardOp::Delete { ns: n.clone(), key: k.clone() }), Right::Write);
        assert_eq!(Right::for_op(&ShardOp::Get { ns: n, key: k }), Right::Read);
    }

    #[test]
    fn malformed_entries_are_refused_without_echoing_tokens() {
        let short = AccessPolicy::parse(Some("abc"), None, None, false).unwrap_err();
        assert!(!short.contains("abc"));
        let bad_ns = AccessPolicy::parse(None, Some("secret-token@no spaces"), None, false).unwrap_err();
        assert!(!bad_ns.contains("secret-token"));
    }
}
