//! Properties of hot-key detection and of the edge cache's staleness bound, on a fake clock.

use edgecount_core::edge::read_cache::CachedRead;
use edgecount_core::partition::key_hash;
use edgecount_core::{EdgeCache, HotKeys, Key, Namespace};
use proptest::prelude::*;

const WINDOW_MS: u64 = 1_000;

fn names(key: &str) -> (Namespace, Key, u64) {
    (Namespace::new("ns").unwrap(), Key::new(key).unwrap(), key_hash("ns", key))
}

proptest! {
    // The sliding estimate sees at least 3/4 of a steady rate after one window, whatever the
    // alignment, so a key 1.4x over the threshold is hot within one window of starting.
    #[test]
    fn a_key_over_the_threshold_is_hot_within_one_window(
        threshold in 5.0_f64..500.0,
        factor in 1.4_f64..10.0,
        start in 0_u64..10_000,
        others in 0_usize..50,
    ) {
        let mut hot = HotKeys::new(threshold, WINDOW_MS, 16);
        let (ns, key, hash) = names("target");
        let events = (threshold * factor).ceil() as u64;
        for i in 0..events {
            let now = start + i * WINDOW_MS / events;
            hot.record(&ns, &key, hash, now);
            if (i as usize) < others {
                let (ns, other, other_hash) = names(&format!("other-{i}"));
                hot.record(&ns, &other, other_hash, now);
            }
        }
        prop_assert!(hot.is_hot(hash, start + WINDOW_MS));
        prop_assert!(hot.hot_keys(start + WINDOW_MS).iter().any(|h| h.key == key));
    }

    #[test]
    fn a_key_that_stops_is_forgotten(threshold in 5.0_f64..200.0, start in 0_u64..10_000) {
        let mut hot = HotKeys::new(threshold, WINDOW_MS, 16);
        let (ns, key, hash) = names("burst");
        let events = (threshold * 3.0) as u64;
        for i in 0..events {
            hot.record(&ns, &key, hash, start + i * WINDOW_MS / events);
        }
        let stopped = start + WINDOW_MS;
        prop_assert!(!hot.is_hot(hash, stopped + 2 * WINDOW_MS));
        prop_assert!(hot.hot_keys(stopped + 2 * WINDOW_MS).is_empty());
    }

    // Whatever the interleaving of fills, refreshes and reads, no read comes back older than
    // the max age.
    #[test]
    fn cached_reads_are_never_older_than_the_max_age(
        max_age_ms in 1_u64..5_000,
        steps in prop::collection::vec((0_u64..3_000, 0_u64..2_000, 0_u8..4), 1..200),
    ) {
        let (ns, key, _) = names("hot");
        let mut cache = EdgeCache::new(8, max_age_ms);
        let mut now = 0_u64;
        for (advance, lag, action) in steps {
            now += advance;
            let read = CachedRead { value: now as i64, exists: true, version: now, read_at_ms: now.saturating_sub(lag) };
            match action {
                0 => cache.put(&ns, &key, read),
                1 => cache.refresh(&ns, &key, read, false, now),
                2 => cache.refresh(&ns, &key, read, true, now),
                _ => {
                    if let Some(hit) = cache.get(&ns, &key, now) {
                        prop_assert!(hit.age_ms(now) < max_age_ms);
                    }
                }
            }
        }
    }
}

proptest! {
    // Each case feeds up to 20,000 keys; fewer cases keep the suite quick.
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn memory_is_bounded_whatever_the_number_of_keys(keys in 1_usize..20_000, capacity in 1_usize..32) {
        let mut hot = HotKeys::new(0.5, WINDOW_MS, capacity);
        let before = hot.sketch_bytes();
        for i in 0..keys {
            let (ns, key, hash) = names(&format!("k{i}"));
            hot.record(&ns, &key, hash, (i as u64) % WINDOW_MS);
        }
        prop_assert_eq!(hot.sketch_bytes(), before);
        prop_assert!(hot.hot_keys(WINDOW_MS - 1).len() <= capacity);
    }
}
