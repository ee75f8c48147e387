//! Properties of key placement, and the committed known-answer vectors.

use edgecount_core::partition::{key_hash, shard_for_hash};
use edgecount_core::{shard_for, Key, Namespace};
use proptest::prelude::*;
use serde::Deserialize;

#[derive(Deserialize)]
struct Vectors {
    vectors: Vec<Vector>,
}

#[derive(Deserialize)]
struct Vector {
    ns: String,
    key: String,
    hash: String,
    shards: u32,
    shard: u32,
}

#[test]
fn known_answer_vectors_match() {
    let vectors: Vectors = serde_json::from_str(include_str!("vectors/partition.json")).unwrap();
    assert!(vectors.vectors.len() >= 50);
    for v in &vectors.vectors {
        let ns = Namespace::new(&v.ns).unwrap();
        let key = Key::new(&v.key).unwrap();
        assert_eq!(format!("{:016x}", key_hash(&v.ns, &v.key)), v.hash, "{}/{}", v.ns, v.key);
        assert_eq!(shard_for(&ns, &key, v.shards).0, v.shard, "{}/{} over {}", v.ns, v.key, v.shards);
    }
}

#[test]
fn a_million_keys_spread_within_five_percent_of_the_mean() {
    const KEYS: u32 = 1_000_000;
    for shards in [16_u32, 64] {
        let mut load = vec![0_u32; shards as usize];
        for i in 0..KEYS {
            let shard = shard_for_hash(key_hash("bench", &format!("key-{i}")), shards);
            load[shard.0 as usize] += 1;
        }
        let mean = f64::from(KEYS) / f64::from(shards);
        let largest = f64::from(*load.iter().max().unwrap());
        assert!(largest <= mean * 1.05, "{shards} shards: largest {largest}, mean {mean}");
    }
}

fn namespace() -> impl Strategy<Value = Namespace> {
    "[A-Za-z0-9_.-]{1,64}".prop_filter_map("`.` or `..`", |s| Namespace::new(&s).ok())
}

fn key() -> impl Strategy<Value = Key> {
    "[^\\p{Cc}]{1,64}".prop_filter_map("not a valid key", |s| Key::new(&s).ok())
}

proptest! {
    #[test]
    fn same_key_same_shard(ns in namespace(), key in key(), shards in 1_u32..=1024) {
        prop_assert_eq!(shard_for(&ns, &key, shards), shard_for(&ns.clone(), &key.clone(), shards));
    }

    #[test]
    fn shard_is_below_the_shard_count(ns in namespace(), key in key(), shards in 1_u32..=1024) {
        prop_assert!(shard_for(&ns, &key, shards).0 < shards);
    }

    #[test]
    fn growing_by_one_shard_moves_a_key_only_to_the_new_shard(
        ns in namespace(), key in key(), shards in 1_u32..1024
    ) {
        let before = shard_for(&ns, &key, shards);
        let after = shard_for(&ns, &key, shards + 1);
        prop_assert!(after == before || after.0 == shards);
    }
}
