//! Fuzzes the token lists of [`AccessPolicy::parse`] and the checks made with the parsed
//! policy. The lists come from deployment configuration, and the token checked against them
//! comes from any client's `Authorization` header.
//!
//! Input: lines of text, `admin list`, `write list`, `read list`, `presented token`,
//! `namespace`, and `private` to make reads private. Beyond "never panics" it checks that an
//! error is one of the fixed messages (so it can never echo a token), that the policy is open
//! exactly when every list is blank, that an open policy and public reads let everyone in,
//! that a closed policy never lets a request without a token do what needs one, and that
//! [`AccessPolicy::recognizes`] (which picks a client's rate limit bucket) agrees with the
//! checks on which tokens are known.
#![no_main]

use edgecount_core::edge::access::{Denial, Right};
use edgecount_core::{AccessPolicy, Namespace};
use libfuzzer_sys::fuzz_target;

const RIGHTS: [Right; 3] = [Right::Read, Right::Write, Right::Admin];

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut lines = text.split('\n');
    let lists = [lines.next(), lines.next(), lines.next()];
    let token = lines.next();
    let ns = lines.next().and_then(|n| Namespace::new(n).ok());
    let private_reads = lines.next() == Some("private");

    let policy = match AccessPolicy::parse(lists[0], lists[1], lists[2], private_reads) {
        Ok(policy) => policy,
        Err(message) => {
            let known = RIGHTS.iter().any(|right| {
                message == format!("a {right:?} token is shorter than 8 characters")
                    || message == format!("a {right:?} token is limited to an invalid namespace")
            });
            assert!(known, "unexpected message {message:?}");
            return;
        }
    };

    let blank = lists.iter().all(|list| list.unwrap_or("").split(',').all(|e| e.trim().is_empty()));
    assert_eq!(policy.is_open(), blank);

    for need in RIGHTS {
        for ns in [ns.as_ref(), None] {
            let presented = policy.check(token, need, ns);
            let anonymous = policy.check(None, need, ns);
            if policy.is_open() || (need == Right::Read && !private_reads) {
                assert_eq!(presented, Ok(()));
                assert_eq!(anonymous, Ok(()));
            } else {
                assert_eq!(anonymous, Err(Denial::Unauthenticated));
                if let Some(token) = token {
                    assert_eq!(policy.recognizes(token), presented != Err(Denial::Unauthenticated));
                }
            }
        }
    }
});
