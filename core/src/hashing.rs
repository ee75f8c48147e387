//! The hash behind every table keyed by names that clients choose: counters, cache entries,
//! hot keys, one-way sums, client addresses, idempotency records.
//!
//! A hash table is only as fast as its hash is unpredictable. Whoever can compute the hash can
//! pick thousands of names that land in one bucket and turn each lookup into a scan. The
//! standard library's `RandomState` and foldhash's own random state draw their seeds from the
//! operating system, the clock or memory addresses; on `wasm32-unknown-unknown` there is no
//! operating system or clock for them, and the addresses are the same in every instance of the
//! module, so every isolate everywhere would hash with the same keys, which anyone holding the
//! published Wasm can compute.
//!
//! So the seed is handed in by the runtime from its random source ([`seed`], called before
//! the first table is made), and each table mixes in a number of its own. The hash is foldhash
//! rather than SipHash: several times faster on short names, and with an unknown seed it gives
//! what this needs (foldhash calls itself "minimally DoS-resistant"), where SipHash with a
//! known seed gave nothing.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hash, RandomState};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::OnceLock;

use foldhash::fast::{FoldHasher, SeedableRandomState};
use foldhash::SharedSeed;

static SHARED_SEED: OnceLock<SharedSeed> = OnceLock::new();
static TABLES_MADE: AtomicU64 = AtomicU64::new(0);
static SEEDED: AtomicBool = AtomicBool::new(false);

/// Seeds every table made from now on with `random` (64 bits from the platform's random
/// source). Only the first seed counts: it answers `false`, changing nothing, once a seed is
/// set or a table has been made without one.
pub fn seed(random: u64) -> bool {
    let taken = SHARED_SEED.set(SharedSeed::from_u64(random)).is_ok();
    if taken {
        SEEDED.store(true, Ordering::Relaxed);
    }
    taken
}

/// Whether the tables hash under a seed handed in by [`seed`] (not the fallback).
#[must_use]
pub fn seeded() -> bool {
    SEEDED.load(Ordering::Relaxed)
}

/// The seed of the tables: the runtime's, or where none was handed in before the first table,
/// one from the standard library (random on an operating system; not in Wasm, which is why
/// the worker seeds before anything else).
fn shared_seed() -> &'static SharedSeed {
    SHARED_SEED.get_or_init(|| SharedSeed::from_u64(RandomState::new().hash_one(0_u8)))
}

/// How a table keyed by client-chosen names hashes: foldhash under this process's seed.
#[derive(Clone, Debug)]
pub struct KeyHashing(SeedableRandomState);

impl Default for KeyHashing {
    fn default() -> Self {
        let table = TABLES_MADE.fetch_add(1, Ordering::Relaxed);
        Self(SeedableRandomState::with_seed(table, shared_seed()))
    }
}

impl BuildHasher for KeyHashing {
    type Hasher = FoldHasher<'static>;

    fn build_hasher(&self) -> Self::Hasher {
        self.0.build_hasher()
    }
}

/// A map keyed by client-chosen names.
pub type KeyMap<K, V> = HashMap<K, V, KeyHashing>;
/// A set of client-chosen names.
pub type KeySet<K> = HashSet<K, KeyHashing>;

/// An empty [`KeyMap`].
#[must_use]
pub fn key_map<K: Hash + Eq, V>() -> KeyMap<K, V> {
    HashMap::with_hasher(KeyHashing::default())
}

/// An empty [`KeySet`].
#[must_use]
pub fn key_set<K: Hash + Eq>() -> KeySet<K> {
    HashSet::with_hasher(KeyHashing::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_hash_alike_within_one_but_not_across_tables() {
        let (a, b) = (KeyHashing::default(), KeyHashing::default());
        assert_eq!(a.hash_one("views"), a.hash_one("views"));
        assert_ne!(a.hash_one("views"), b.hash_one("views"));
    }

    #[test]
    fn the_shared_seed_changes_every_hash() {
        // Two seeds as `seed` would make them, side by side (the process's is set once).
        let (one, other) = (SharedSeed::from_u64(1), SharedSeed::from_u64(2));
        let (one, other) = (Box::leak(Box::new(one)), Box::leak(Box::new(other)));
        let hashes = |shared: &'static SharedSeed| {
            (0..64).map(|n| SeedableRandomState::with_seed(7, shared).hash_one(n)).collect::<Vec<_>>()
        };
        let (left, right) = (hashes(one), hashes(other));
        assert!(left.iter().zip(&right).all(|(l, r)| l != r));
    }

    #[test]
    fn a_seed_after_the_first_table_is_refused() {
        let _ = KeyHashing::default();
        assert!(!seed(42), "the tables made so far would hash under another seed");
        assert!(!seeded(), "the fallback seed is not the runtime's");
    }

    #[test]
    fn maps_and_sets_work_as_usual() {
        let mut map = key_map();
        map.insert(("ns".to_owned(), "k".to_owned()), 3);
        assert_eq!(map.get(&("ns".to_owned(), "k".to_owned())), Some(&3));
        let mut set = key_set();
        assert!(set.insert("k"));
        assert!(!set.insert("k"));
    }
}
