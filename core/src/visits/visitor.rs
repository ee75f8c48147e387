//! Who a visitor is, without keeping who they are.
//!
//! As Plausible does, a visitor is the client's address and user agent, on one key, on one
//! day. The worker hashes the namespace, the key, the address and the user agent into a
//! [`visitor_hash`] and sends only that to the key's shard; the shard hashes it again, keyed
//! with a random salt of the day that it keeps two days and then deletes ([`visitor_id`]), and
//! counts the result in the day's sketch ([`crate::visits::sketch`]). Neither the address, the
//! user agent nor the worker's hash is stored: once a day's salt is deleted, the service can no
//! longer tell whether two days' visitors were the same person, or test a guessed address
//! against a stored id. Whoever can deploy code to the account can for a while: Cloudflare
//! keeps 30 days of point-in-time recovery for SQLite-backed Durable Objects, from which a
//! deleted salt can be restored (see docs/days.md).

use sha2::{Digest, Sha256};
use xxhash_rust::xxh3::Xxh3;

use crate::{Key, Namespace};

/// A day's salt: 32 random bytes.
pub type Salt = [u8; 32];

/// The worker's hash of one visitor of `ns`/`key`: what travels to the shard.
#[must_use]
pub fn visitor_hash(ns: &Namespace, key: &Key, address: &str, user_agent: &str) -> u64 {
    let mut hasher = Xxh3::new();
    // Each field with its length first, so that no two different tuples run together alike.
    for field in [ns.as_str(), key.as_str(), address, user_agent] {
        hasher.update(&(field.len() as u64).to_le_bytes());
        hasher.update(field.as_bytes());
    }
    hasher.digest()
}

/// The id the shard counts for `hash` on the day whose salt is `salt`: the first 8 bytes of
/// SHA-256 over the salt and the hash, uniform over 64 bits as the sketch needs.
#[must_use]
pub fn visitor_id(salt: &Salt, hash: u64) -> u64 {
    let digest = Sha256::new().chain_update(salt).chain_update(hash.to_le_bytes()).finalize();
    u64::from_le_bytes(digest[..8].try_into().expect("a SHA-256 digest has 32 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> (Namespace, Key) {
        (Namespace::new("blog").unwrap(), Key::new("home").unwrap())
    }

    #[test]
    fn a_visitor_is_the_address_and_user_agent_on_one_key() {
        let (ns, key) = names();
        let other = Key::new("about").unwrap();
        let visitor = visitor_hash(&ns, &key, "192.0.2.1", "Firefox");
        assert_eq!(visitor, visitor_hash(&ns, &key, "192.0.2.1", "Firefox"));
        assert_ne!(visitor, visitor_hash(&ns, &key, "192.0.2.2", "Firefox"));
        assert_ne!(visitor, visitor_hash(&ns, &key, "192.0.2.1", "Chrome"));
        assert_ne!(visitor, visitor_hash(&ns, &other, "192.0.2.1", "Firefox"));
        // Fields do not run into each other.
        assert_ne!(visitor_hash(&ns, &key, "1", "23"), visitor_hash(&ns, &key, "12", "3"));
    }

    #[test]
    fn the_same_visitor_has_another_id_under_another_day_s_salt() {
        let (ns, key) = names();
        let visitor = visitor_hash(&ns, &key, "192.0.2.1", "Firefox");
        let (monday, tuesday) = ([1u8; 32], [2u8; 32]);
        assert_eq!(visitor_id(&monday, visitor), visitor_id(&monday, visitor));
        assert_ne!(visitor_id(&monday, visitor), visitor_id(&tuesday, visitor));
    }
}
