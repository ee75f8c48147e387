//! This isolate's view of hot keys: the frequency sketch and the cache of hot reads, kept in
//! the isolate's state ([`HotReads`]).
//!
//! Each Workers isolate keeps its own; with many isolates each caches what it sees hot.

use std::hash::BuildHasher;

use edgecount_core::edge::hot_keys::HotKey;
use edgecount_core::edge::read_cache::{self, AfterOp, CachedRead, Lookup};
use edgecount_core::hashing::KeyHashing;
use edgecount_core::{EdgeCache, HotKeys, Key, Namespace, OpResult, ShardOp};

use crate::shared::clock::now_ms;
use crate::shared::config::Config;
use crate::shared::state::{self, HotReads};

/// Hot reads kept per isolate at most.
const EDGE_CACHE_ENTRIES: usize = 10_000;
/// Hot keys remembered for `/v1/stats`.
const HOT_KEYS_LISTED: usize = 32;
/// The window over which key rates are measured.
const RATE_WINDOW_MS: u64 = 1_000;

impl HotReads {
    /// The key's hash in the frequency sketch.
    fn sketch_hash(&self, ns: &Namespace, key: &Key) -> u64 {
        self.sketch_hashing.hash_one((ns.as_str(), key.as_str()))
    }
}

fn with_edge<T>(config: &Config, f: impl FnOnce(&mut HotReads) -> T) -> T {
    state::with(|s| {
        let mut slot = s.hot_reads.borrow_mut();
        let settings = (config.hot_threshold_per_s.to_bits(), config.hot_max_age_ms);
        if slot.as_ref().is_some_and(|e| e.settings != settings) {
            *slot = None;
        }
        let edge = slot.get_or_insert_with(|| HotReads {
            hot: HotKeys::new(config.hot_threshold_per_s, RATE_WINDOW_MS, HOT_KEYS_LISTED),
            sketch_hashing: KeyHashing::default(),
            cache: EdgeCache::new(EDGE_CACHE_ENTRIES, config.hot_max_age_ms),
            hits: 0,
            misses: 0,
            settings,
        });
        f(edge)
    })
}

/// Counts a read or write of a key; returns whether the key is hot.
pub fn record(config: &Config, ns: &Namespace, key: &Key, now_ms: u64) -> bool {
    with_edge(config, |edge| {
        let hash = edge.sketch_hash(ns, key);
        edge.hot.record(ns, key, hash, now_ms)
    })
}

/// A kept read of a hot key younger than the max age, or this request's turn to refresh it
/// (see `edgecount_core::edge::read_cache`), counting a hit or a miss.
pub fn lookup(config: &Config, ns: &Namespace, key: &Key, now_ms: u64) -> Lookup {
    with_edge(config, |edge| {
        let found = edge.cache.lookup(ns, key, now_ms);
        if matches!(found, Lookup::Hit(_)) {
            edge.hits += 1;
        } else {
            edge.misses += 1;
        }
        found
    })
}

/// Counts a read answered by the shard without consulting the cache (cold or strong reads).
pub fn count_miss(config: &Config) {
    with_edge(config, |edge| edge.misses += 1);
}

/// Keeps a fresh read of a hot key.
pub fn fill(config: &Config, ns: &Namespace, key: &Key, read: CachedRead) {
    with_edge(config, |edge| edge.cache.put(ns, key, read));
}

/// Updates a kept read after a write through this isolate (read your own writes).
pub fn refresh(config: &Config, ns: &Namespace, key: &Key, read: CachedRead) {
    with_edge(config, |edge| {
        let hot = edge.hot.is_hot(edge.sketch_hash(ns, key), read.read_at_ms);
        edge.cache.refresh(ns, key, read, hot, now_ms());
    });
}

/// Drops a kept read (after a delete or a write whose outcome is unknown), and keeps none sent
/// before now.
pub fn forget(config: &Config, ns: &Namespace, key: &Key) {
    with_edge(config, |edge| edge.cache.forget(ns, key, now_ms()));
}

/// Applies what an op's outcome does to this isolate's kept read of its key (the rule is
/// `edgecount_core::edge::read_cache::after_op`); `outcome` is `None` when the op's call failed.
pub fn after_op(config: &Config, op: &ShardOp, outcome: Option<&OpResult>, sent_at_ms: u64) {
    let (ns, key) = op.target();
    match read_cache::after_op(op, outcome, sent_at_ms) {
        AfterOp::Keep => {}
        AfterOp::Refresh(read) => refresh(config, ns, key, read),
        AfterOp::Forget => forget(config, ns, key),
    }
}

/// Edge-cache hits, misses, and the keys hot now.
pub fn snapshot(config: &Config, now_ms: u64) -> (u64, u64, Vec<HotKey>) {
    with_edge(config, |edge| (edge.hits, edge.misses, edge.hot.hot_keys(now_ms)))
}
