//! Which shard owns a key: `jump_consistent_hash(xxh3_64(ns ++ 0x00 ++ key), N)`.
//!
//! xxh3 spreads keys evenly and is fast on short inputs; jump consistent hash (Lamping and Veach,
//! "A Fast, Minimal Memory, Consistent Hash Algorithm", 2014) moves only about 1/N of the keys
//! when N grows by one. The 0x00 separator keeps `("ab", "c")` and `("a", "bc")` apart, since
//! neither a namespace nor a key may hold a NUL.

use std::fmt;

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::Xxh3;

use crate::{Key, Namespace};

/// The most shards a deployment may configure.
pub const MAX_SHARDS: u32 = 1024;

/// The index of a shard, `0..N`. Its Durable Object is named `shard-{index}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ShardId(pub u32);

impl ShardId {
    /// The Durable Object name for this shard.
    #[must_use]
    pub fn object_name(self) -> String {
        format!("shard-{}", self.0)
    }
}

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The 64-bit hash that places `(ns, key)`.
#[must_use]
pub fn key_hash(ns: &str, key: &str) -> u64 {
    let mut hasher = Xxh3::new();
    hasher.update(ns.as_bytes());
    hasher.update(&[0]);
    hasher.update(key.as_bytes());
    hasher.digest()
}

/// The shard that owns `(ns, key)` among `shards` shards (`shards` is at least 1).
#[must_use]
pub fn shard_for(ns: &Namespace, key: &Key, shards: u32) -> ShardId {
    shard_for_hash(key_hash(ns.as_str(), key.as_str()), shards)
}

/// The shard for an already computed [`key_hash`].
#[must_use]
pub fn shard_for_hash(hash: u64, shards: u32) -> ShardId {
    ShardId(jump_consistent_hash::hash(hash, shards.max(1) as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separator_distinguishes_split_points() {
        assert_ne!(key_hash("ab", "c"), key_hash("a", "bc"));
    }

    #[test]
    fn one_shard_owns_everything() {
        for i in 0..100 {
            assert_eq!(shard_for_hash(key_hash("ns", &i.to_string()), 1), ShardId(0));
        }
    }

    #[test]
    fn object_names_follow_the_design() {
        assert_eq!(ShardId(7).object_name(), "shard-7");
    }
}
