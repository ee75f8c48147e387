//! Hot-key detection: a count-min sketch over a sliding one-window estimate.
//!
//! The count-min sketch (Cormode and Muthukrishnan, "An Improved Data Stream Summary: The
//! Count-Min Sketch and its Applications", 2005) counts events per key in fixed memory; it can
//! only overestimate. Rates come from two sketches, the current window's and the previous
//! one's, weighted by how much of the previous window still overlaps the last `window_ms`
//! (the sliding-window estimate common in rate limiters), so a key's rate decays to zero two
//! windows after it stops. Each row's index is derived from one 64-bit key hash by double
//! hashing (Kirsch and Mitzenmacher, "Less Hashing, Same Performance", 2006). The caller
//! hashes with a seeded hash ([`crate::hashing`]), not the public placement hash: with that,
//! anyone could pick names that share a victim key's counters and make its reads cacheable.
//!
//! Keys found hot are also remembered in a small bounded list, so operators can see which.

use crate::hashing::{key_map, KeyMap};
use crate::{Key, Namespace};

/// Rows of the sketch: the chance of a large overestimate falls exponentially with depth.
const DEPTH: usize = 4;
/// Counters per row: error is about total events / width per window.
const WIDTH: usize = 4096;

/// A key currently judged hot.
#[derive(Debug, Clone, PartialEq)]
pub struct HotKey {
    pub ns: Namespace,
    pub key: Key,
    /// Estimated events per second when last seen.
    pub rate: f64,
    pub last_seen_ms: u64,
    hash: u64,
}

/// Per-key event rates in fixed memory.
#[derive(Debug, Clone)]
pub struct HotKeys {
    current: Vec<u32>,
    previous: Vec<u32>,
    window_start_ms: u64,
    window_ms: u64,
    threshold_per_s: f64,
    hot: KeyMap<(Namespace, Key), HotKey>,
    hot_capacity: usize,
}

impl HotKeys {
    /// A detector calling a key hot past `threshold_per_s` events per second over `window_ms`,
    /// remembering at most `hot_capacity` hot keys for reporting.
    #[must_use]
    pub fn new(threshold_per_s: f64, window_ms: u64, hot_capacity: usize) -> Self {
        Self {
            current: vec![0; DEPTH * WIDTH],
            previous: vec![0; DEPTH * WIDTH],
            window_start_ms: 0,
            window_ms: window_ms.max(1),
            threshold_per_s,
            hot: key_map(),
            hot_capacity,
        }
    }

    /// Bytes held by the sketch, which do not depend on how many keys were seen.
    #[must_use]
    pub fn sketch_bytes(&self) -> usize {
        (self.current.len() + self.previous.len()) * std::mem::size_of::<u32>()
    }

    fn slots(hash: u64) -> impl Iterator<Item = usize> {
        let (h1, h2) = (hash as u32, (hash >> 32) as u32 | 1);
        (0..DEPTH)
            .map(move |row| row * WIDTH + (h1.wrapping_add(h2.wrapping_mul(row as u32)) as usize % WIDTH))
    }

    fn roll(&mut self, now_ms: u64) {
        if now_ms < self.window_start_ms + self.window_ms {
            return;
        }
        let windows_passed = (now_ms - self.window_start_ms) / self.window_ms;
        if windows_passed == 1 {
            std::mem::swap(&mut self.current, &mut self.previous);
        } else {
            self.previous.fill(0);
        }
        self.current.fill(0);
        self.window_start_ms += windows_passed * self.window_ms;
    }

    /// Events per second over the last window, as if the windows had rolled to `now_ms`.
    fn estimate(&self, hash: u64, now_ms: u64) -> f64 {
        let min = |counts: &[u32]| f64::from(Self::slots(hash).map(|i| counts[i]).min().unwrap_or(0));
        let passed = now_ms.saturating_sub(self.window_start_ms) / self.window_ms;
        let (current, previous, start) = match passed {
            0 => (min(&self.current), min(&self.previous), self.window_start_ms),
            1 => (0.0, min(&self.current), self.window_start_ms + self.window_ms),
            _ => return 0.0,
        };
        let into_window = now_ms.saturating_sub(start) as f64 / self.window_ms as f64;
        let overlap = (1.0 - into_window).clamp(0.0, 1.0);
        (current + previous * overlap) * 1000.0 / self.window_ms as f64
    }

    /// Counts one event for the key with hash `hash` and returns whether the key is hot.
    pub fn record(&mut self, ns: &Namespace, key: &Key, hash: u64, now_ms: u64) -> bool {
        self.roll(now_ms);
        for slot in Self::slots(hash) {
            self.current[slot] = self.current[slot].saturating_add(1);
        }
        let rate = self.estimate(hash, now_ms);
        let hot = rate > self.threshold_per_s;
        if hot {
            self.remember(ns, key, hash, rate, now_ms);
        }
        hot
    }

    /// Whether the key with hash `hash` is hot, without counting an event.
    #[must_use]
    pub fn is_hot(&self, hash: u64, now_ms: u64) -> bool {
        self.estimate(hash, now_ms) > self.threshold_per_s
    }

    fn remember(&mut self, ns: &Namespace, key: &Key, hash: u64, rate: f64, now_ms: u64) {
        let slot = (ns.clone(), key.clone());
        if !self.hot.contains_key(&slot) && self.hot.len() >= self.hot_capacity {
            let oldest = self.hot.iter().min_by_key(|(_, h)| h.last_seen_ms).map(|(s, _)| s.clone());
            if let Some(oldest) = oldest {
                self.hot.remove(&oldest);
            }
        }
        self.hot.insert(slot, HotKey { ns: ns.clone(), key: key.clone(), rate, last_seen_ms: now_ms, hash });
    }

    /// The remembered keys that are still hot at `now_ms`, hottest first, with current rates.
    pub fn hot_keys(&mut self, now_ms: u64) -> Vec<HotKey> {
        let rates: Vec<_> =
            self.hot.iter().map(|(slot, h)| (slot.clone(), self.estimate(h.hash, now_ms))).collect();
        for (slot, rate) in rates {
            match self.hot.get_mut(&slot) {
                Some(h) if rate > self.threshold_per_s => h.rate = rate,
                _ => {
                    self.hot.remove(&slot);
                }
            }
        }
        let mut keys: Vec<HotKey> = self.hot.values().cloned().collect();
        keys.sort_by(|a, b| b.rate.total_cmp(&a.rate));
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partition::key_hash;

    fn names(key: &str) -> (Namespace, Key, u64) {
        (Namespace::new("n").unwrap(), Key::new(key).unwrap(), key_hash("n", key))
    }

    #[test]
    fn a_busy_key_turns_hot_and_a_quiet_one_does_not() {
        let mut hot = HotKeys::new(50.0, 1_000, 8);
        let (ns, busy, busy_hash) = names("busy");
        let (_, quiet, quiet_hash) = names("quiet");
        // 200 events/s for the busy key, 20/s for the quiet one, over one window.
        for i in 0..200 {
            hot.record(&ns, &busy, busy_hash, i * 5);
            if i % 10 == 0 {
                hot.record(&ns, &quiet, quiet_hash, i * 5);
            }
        }
        assert!(hot.is_hot(busy_hash, 999));
        assert!(!hot.is_hot(quiet_hash, 999));
        let listed = hot.hot_keys(999);
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].key, busy);
    }

    #[test]
    fn a_key_that_stops_is_forgotten_after_two_windows() {
        let mut hot = HotKeys::new(10.0, 1_000, 8);
        let (ns, key, hash) = names("k");
        for i in 0..50 {
            hot.record(&ns, &key, hash, i * 10);
        }
        assert!(hot.is_hot(hash, 600));
        assert!(!hot.is_hot(hash, 2_100));
        assert!(hot.hot_keys(2_100).is_empty());
    }
}
