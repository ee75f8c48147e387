//! Changing the shard count online: what moves, and what travels when it does.
//!
//! A key's home is `shard_for(key, N)`. The operator declares a change with `EDGECOUNT_SHARDS`
//! (the count being reached) and `EDGECOUNT_SHARDS_FROM` (the count being left): a
//! [`Migration`]. From then on every op goes to the key's new home. Two Durable Objects share no
//! transaction, so a key moves in steps that can each be repeated:
//!
//! 1. The new home asks the old one for the key's [`Parcel`] (its counter, cache entry and
//!    per-key idempotency records), or the old home offers it unasked from its alarm. Reading
//!    a parcel changes nothing.
//! 2. The new home stores the parcel and an *arrival* mark for the key in one turn, so both are
//!    durable together. A parcel for a key already marked is ignored: the key has been live
//!    here since, and the copy is older.
//! 3. Only once the new home has answered that it holds the key does the old home delete its
//!    copy.
//!
//! Between step 1 and step 3 the old copy cannot change: the old home applies no op to a key
//! that is not its own under the new count, and forwards such ops (from isolates still on the
//! previous deployment) to the key's new home instead. So a step cut short by a crash is
//! simply repeated, and the copy offered again is the one offered before: nothing is lost, and
//! the arrival mark keeps anything from being applied twice. At rest a key lives in one shard.
//!
//! Jump consistent hashing moves keys only to the added shards when growing, and only from the
//! removed ones when shrinking; both are the same steps.

use serde::{Deserialize, Serialize};

use crate::partition::{shard_for, ShardId};
use crate::shard::counter::DayCount;
use crate::shard::idempotency::IDEMPOTENCY_WINDOW_MS;
use crate::shard::protocol::{base64_bytes, ShardCall};
use crate::visits::day::Day;
use crate::{Counter, Key, Namespace};

/// A declared change of the shard count, from `from` shards to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Migration {
    pub from: u32,
    pub to: u32,
}

impl Migration {
    /// The shard that held `(ns, key)` before the change.
    #[must_use]
    pub fn old_home(&self, ns: &Namespace, key: &Key) -> ShardId {
        shard_for(ns, key, self.from)
    }

    /// Whether `(ns, key)` has to move to reach its home under the new count.
    #[must_use]
    pub fn moves(&self, ns: &Namespace, key: &Key) -> bool {
        self.old_home(ns, key) != shard_for(ns, key, self.to)
    }

    /// Whether `shard` holds `(ns, key)` only until it has handed it over.
    #[must_use]
    pub fn leaves(&self, shard: ShardId, ns: &Namespace, key: &Key) -> bool {
        shard_for(ns, key, self.to) != shard
    }
}

/// A request's ops grouped by the shard that owns each under `shards`: each group's places in
/// the request, in order, the groups in the order their first op comes.
#[must_use]
pub fn homes(calls: &[ShardCall], shards: u32) -> Vec<(ShardId, Vec<usize>)> {
    grouped(0..calls.len(), |&place| {
        let (ns, key) = calls[place].op.target();
        shard_for(ns, key, shards)
    })
}

/// `items` grouped by `shard_of` each, keeping their order within a group; the groups in the
/// order their first item comes.
pub fn grouped<T>(
    items: impl IntoIterator<Item = T>,
    shard_of: impl Fn(&T) -> ShardId,
) -> Vec<(ShardId, Vec<T>)> {
    let mut groups: Vec<(ShardId, Vec<T>)> = Vec::new();
    for item in items {
        let shard = shard_of(&item);
        match groups.iter_mut().find(|(group, _)| *group == shard) {
            Some((_, members)) => members.push(item),
            None => groups.push((shard, vec![item])),
        }
    }
    groups
}

/// Everything a shard stores of one key, as it travels to the key's new home.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parcel {
    pub ns: Namespace,
    pub key: Key,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter: Option<Counter>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<ParcelEntry>,
    /// The key's per-op idempotency records (a request-wide receipt's record stays where the
    /// request was applied; see [`crate::shard::receipt`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<ParcelRecord>,
    /// The counter's finished days (its latest is in `counter`), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<DayCount>,
    /// The counter's visitor sketches by day (see [`crate::visits::sketch`]), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sketches: Vec<ParcelSketch>,
}

/// A day's visitor sketch as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParcelSketch {
    pub day: Day,
    #[serde(with = "base64_bytes")]
    pub sketch: Vec<u8>,
}

/// A cache entry as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParcelEntry {
    #[serde(with = "base64_bytes")]
    pub value: Vec<u8>,
    pub content_type: String,
    pub expires_at_ms: Option<u64>,
    pub written_at_ms: u64,
}

/// An idempotency record as stored (see [`crate::shard::idempotency`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParcelRecord {
    pub kind: String,
    pub idempotency_key: String,
    pub request_digest: String,
    pub result: String,
    pub created_at_ms: u64,
}

/// Bytes of parcels one hand-over call carries at most (a single parcel larger than this still
/// travels, alone): well within what one Durable Object call may carry, whatever the cache
/// values.
pub const MAX_PARCEL_BYTES_PER_CALL: usize = 4 * 1024 * 1024;

/// Keys one hand-over call carries at most.
pub const MAX_PARCELS_PER_CALL: usize = 200;

impl Parcel {
    /// When the first thing the parcel holds lapses: its counter's or cache entry's expiry, or
    /// the end of a record's window. Its new home's alarm must fire by then to reclaim it.
    #[must_use]
    pub fn lapses_at(&self) -> Option<u64> {
        let counter = self.counter.and_then(|c| c.expires_at_ms);
        let entry = self.cache.as_ref().and_then(|e| e.expires_at_ms);
        let records = self.records.iter().map(|r| r.created_at_ms.saturating_add(IDEMPOTENCY_WINDOW_MS));
        counter.into_iter().chain(entry).chain(records).min()
    }

    /// Whether the parcel carries nothing: its old home holds nothing under the name.
    #[must_use]
    pub fn holds_nothing(&self) -> bool {
        self.counter.is_none()
            && self.cache.is_none()
            && self.records.is_empty()
            && self.days.is_empty()
            && self.sketches.is_empty()
    }

    /// A key with nothing stored: what the old home answers for a key it never held.
    #[must_use]
    pub fn empty(ns: Namespace, key: Key) -> Self {
        Self {
            ns,
            key,
            counter: None,
            cache: None,
            records: Vec::new(),
            days: Vec::new(),
            sketches: Vec::new(),
        }
    }

    /// About how many bytes the parcel takes as JSON: names, a counter's fields, the cache
    /// value in base64 and the records, plus a fixed overhead.
    #[must_use]
    pub fn weight(&self) -> usize {
        let entry =
            self.cache.as_ref().map_or(0, |e| e.value.len().div_ceil(3) * 4 + e.content_type.len() + 64);
        let records: usize = self
            .records
            .iter()
            .map(|r| r.kind.len() + r.idempotency_key.len() + r.request_digest.len() + r.result.len() + 96)
            .sum();
        let sketches: usize = self.sketches.iter().map(|s| s.sketch.len().div_ceil(3) * 4 + 32).sum();
        self.ns.as_str().len()
            + self.key.as_str().len()
            + 256
            + entry
            + records
            + self.days.len() * 40
            + sketches
    }
}

/// Splits `parcels` into runs that each fit one hand-over call
/// ([`MAX_PARCELS_PER_CALL`], [`MAX_PARCEL_BYTES_PER_CALL`]).
#[must_use]
pub fn loads(parcels: Vec<Parcel>) -> Vec<Vec<Parcel>> {
    let mut loads: Vec<Vec<Parcel>> = Vec::new();
    let mut weight = 0;
    for parcel in parcels {
        let parcel_weight = parcel.weight();
        match loads.last_mut() {
            Some(load)
                if load.len() < MAX_PARCELS_PER_CALL
                    && weight + parcel_weight <= MAX_PARCEL_BYTES_PER_CALL =>
            {
                load.push(parcel);
                weight += parcel_weight;
            }
            _ => {
                loads.push(vec![parcel]);
                weight = parcel_weight;
            }
        }
    }
    loads
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::protocol::ShardOp;
    use proptest::prelude::*;

    fn names(i: usize) -> (Namespace, Key) {
        (Namespace::new("migrating").unwrap(), Key::new(&format!("key-{i}")).unwrap())
    }

    #[test]
    fn growing_moves_keys_only_to_the_added_shards() {
        let growing = Migration { from: 4, to: 7 };
        let mut moved = 0;
        for i in 0..5000 {
            let (ns, key) = names(i);
            if growing.moves(&ns, &key) {
                moved += 1;
                assert!(shard_for(&ns, &key, 7).0 >= 4, "a moved key lands on an added shard");
                assert!(growing.leaves(growing.old_home(&ns, &key), &ns, &key));
            } else {
                assert!(!growing.leaves(growing.old_home(&ns, &key), &ns, &key));
            }
        }
        // About 3/7 of the keys move.
        assert!((1900..2400).contains(&moved), "{moved}");
    }

    #[test]
    fn shrinking_moves_keys_only_from_the_removed_shards() {
        let shrinking = Migration { from: 7, to: 4 };
        for i in 0..5000 {
            let (ns, key) = names(i);
            assert_eq!(shrinking.moves(&ns, &key), shrinking.old_home(&ns, &key).0 >= 4);
        }
    }

    #[test]
    fn homes_keep_request_order_within_each_shard() {
        let calls: Vec<ShardCall> = (0..40)
            .map(|i| {
                let (ns, key) = names(i);
                ShardOp::Incr { ns, key, by: 1, ttl: None }.into()
            })
            .collect();
        let groups = homes(&calls, 7);
        let mut seen: Vec<usize> = groups.iter().flat_map(|(_, places)| places.clone()).collect();
        for (shard, places) in &groups {
            assert!(places.windows(2).all(|w| w[0] < w[1]));
            for &place in places {
                let (ns, key) = calls[place].op.target();
                assert_eq!(shard_for(ns, key, 7), *shard);
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..40).collect::<Vec<_>>());
    }

    fn parcel(i: usize, value_bytes: usize) -> Parcel {
        let (ns, key) = names(i);
        Parcel {
            cache: Some(ParcelEntry {
                value: vec![7; value_bytes],
                content_type: "application/octet-stream".into(),
                expires_at_ms: None,
                written_at_ms: 1,
            }),
            ..Parcel::empty(ns, key)
        }
    }

    #[test]
    fn the_weight_bounds_the_json() {
        for bytes in [0, 1, 2, 3, 1000, 1 << 20] {
            let p = parcel(1, bytes);
            assert!(serde_json::to_string(&p).unwrap().len() <= p.weight(), "{bytes}");
        }
    }

    proptest! {
        #[test]
        fn loads_keep_every_parcel_in_order_within_the_bounds(sizes in prop::collection::vec(0usize..3_000_000, 0..40)) {
            let parcels: Vec<Parcel> = sizes.iter().enumerate().map(|(i, &s)| parcel(i, s)).collect();
            let loads = loads(parcels.clone());
            let flat: Vec<Parcel> = loads.iter().flatten().cloned().collect();
            prop_assert_eq!(flat, parcels);
            for load in &loads {
                prop_assert!(!load.is_empty() && load.len() <= MAX_PARCELS_PER_CALL);
                let weight: usize = load.iter().map(Parcel::weight).sum();
                prop_assert!(load.len() == 1 || weight <= MAX_PARCEL_BYTES_PER_CALL);
            }
        }
    }

    #[test]
    fn a_parcel_lapses_with_the_first_thing_it_holds() {
        let (ns, key) = (Namespace::new("n").unwrap(), Key::new("k").unwrap());
        let mut parcel = Parcel::empty(ns, key);
        assert_eq!(parcel.lapses_at(), None, "nothing stored, nothing to reclaim");
        parcel.records.push(ParcelRecord {
            kind: "counter".into(),
            idempotency_key: "i".into(),
            request_digest: "0".repeat(32),
            result: "{}".into(),
            created_at_ms: 1_000,
        });
        assert_eq!(parcel.lapses_at(), Some(1_000 + IDEMPOTENCY_WINDOW_MS));
        parcel.cache = Some(ParcelEntry {
            value: b"v".to_vec(),
            content_type: "text/plain".into(),
            expires_at_ms: Some(5_000),
            written_at_ms: 0,
        });
        assert_eq!(parcel.lapses_at(), Some(5_000));
    }
}
