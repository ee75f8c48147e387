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
//! 2. The new home stores the parcel and an *arrival* mark for the key in one transaction, so
//!    both are durable together. A parcel for a key already marked is ignored: the key has been
//!    live here since, and the copy is older.
//! 3. Only once the new home has answered that it holds the key does the old home delete its
//!    copy.
//!
//! A key's records travel in pages of at most [`MAX_RECORDS_PER_CALL`]: a key written with a
//! fresh Idempotency-Key ten times a second holds some 864,000 in their day. Every page but the
//! last is a parcel of records alone ([`Parcel::records_follow`]), which the new home stores
//! without marking the key; the last page carries the rest of the key with it, and the key
//! arrives with that one. Records stored before the key arrives are never read (its ops wait
//! for its arrival), and storing a page again stores the same records, so a move cut short
//! between pages is simply started again.
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
use crate::shard::protocol::base64_bytes;
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
    /// The key's per-op idempotency records, or a page of them (a request-wide receipt's record
    /// stays where the request was applied; see [`crate::shard::receipt`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<ParcelRecord>,
    /// Whether more of the key's records follow in the next call: the parcel is a page of
    /// records and nothing else, and the key has not arrived with it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub records_follow: bool,
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

/// Bytes of parcels one hand-over call carries at most, their records aside (a single parcel
/// larger than this still travels, alone): well within what one Durable Object call may carry,
/// whatever the cache values.
pub const MAX_PARCEL_BYTES_PER_CALL: usize = 4 * 1024 * 1024;

/// Keys one hand-over call carries at most.
pub const MAX_PARCELS_PER_CALL: usize = 200;

/// Idempotency records one hand-over call carries at most, of all its keys: at most 128 bytes
/// of Idempotency-Key, a digest and a small answer each, so a page stays under about 0.5 MB.
pub const MAX_RECORDS_PER_CALL: usize = 1_000;

/// Where a key's records continue: after this kind and Idempotency-Key, in that order (the
/// order of the records tables' primary key). Ordered as those tables order them: by kind,
/// then Idempotency-Key, byte by byte (SQLite's `BINARY` order is how Rust compares strings;
/// the derive compares the fields in their order here).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct RecordsAfter {
    pub kind: String,
    pub idempotency_key: String,
}

impl RecordsAfter {
    /// Before a key's first record.
    #[must_use]
    pub fn start() -> Self {
        Self { kind: String::new(), idempotency_key: String::new() }
    }

    /// Where records continue after `record`.
    #[must_use]
    pub fn past(record: &ParcelRecord) -> Self {
        Self { kind: record.kind.clone(), idempotency_key: record.idempotency_key.clone() }
    }
}

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
            records_follow: false,
            days: Vec::new(),
            sketches: Vec::new(),
        }
    }
}

/// Why the parcels of a hand-over call are out of its protocol.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutOfProtocol {
    #[error("{parcels} parcels and {records} records in one call, past {MAX_PARCELS_PER_CALL} and {MAX_RECORDS_PER_CALL}")]
    TooMany { parcels: usize, records: usize },
    #[error("the old shard answered parcels for other keys")]
    OtherKeys,
    #[error("a page of records that is not the last parcel of its call, or holds none")]
    MisplacedPage,
    #[error("a page of records that does not end past the one before")]
    PageBehind,
}

/// Refuses parcels that one hand-over call may not carry: more than [`MAX_PARCELS_PER_CALL`]
/// keys or [`MAX_RECORDS_PER_CALL`] records.
///
/// # Errors
/// [`OutOfProtocol::TooMany`].
pub fn within_one_call(parcels: &[Parcel]) -> Result<(), OutOfProtocol> {
    let records: usize = parcels.iter().map(|p| p.records.len()).sum();
    if parcels.len() > MAX_PARCELS_PER_CALL || records > MAX_RECORDS_PER_CALL {
        return Err(OutOfProtocol::TooMany { parcels: parcels.len(), records });
    }
    Ok(())
}

/// What one hand-over call moved of `asked`, the keys it was given in order (see the module
/// documentation), the first one's records continuing `after`: how many of them, from the
/// first, arrived with it, and where the next call picks up the records of the one after them
/// when a page of its records came.
///
/// # Errors
/// Parcels out of protocol: past [`within_one_call`], none, more than asked, other keys or in
/// another order, or a page of records that is not the call's last parcel, holds none, or
/// ends at or before `after` (the move would not advance).
pub fn progress(
    asked: &[(Namespace, Key)],
    after: Option<&RecordsAfter>,
    parcels: &[Parcel],
) -> Result<(usize, Option<RecordsAfter>), OutOfProtocol> {
    within_one_call(parcels)?;
    let named_in_order =
        parcels.iter().zip(asked).all(|(parcel, (ns, key))| parcel.ns == *ns && parcel.key == *key);
    let Some(last) = parcels.last().filter(|_| named_in_order && parcels.len() <= asked.len()) else {
        return Err(OutOfProtocol::OtherKeys);
    };
    let paged = parcels.iter().filter(|p| p.records_follow).count();
    if paged == 0 {
        return Ok((parcels.len(), None));
    }
    let next = last
        .records
        .last()
        .filter(|_| paged == 1 && last.records_follow)
        .map(RecordsAfter::past)
        .ok_or(OutOfProtocol::MisplacedPage)?;
    // A page of the first key asked for continues its records after `after`, and must end past
    // it; a page of a later key starts them.
    if parcels.len() == 1 && after.is_some_and(|after| next <= *after) {
        return Err(OutOfProtocol::PageBehind);
    }
    Ok((parcels.len() - 1, Some(next)))
}

/// How many of a call's keys travel whole, records and all, given how many records each holds
/// (counted up to one past [`MAX_RECORDS_PER_CALL`]), from the first: as many as one call's
/// records take. None when the first key alone holds more: its records then go in pages.
#[must_use]
pub fn whole_keys(record_counts: impl IntoIterator<Item = usize>) -> usize {
    let mut carried = 0_usize;
    record_counts
        .into_iter()
        .take_while(|&records| {
            carried = carried.saturating_add(records);
            carried <= MAX_RECORDS_PER_CALL
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::protocol::{ShardCall, ShardOp};
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
    fn grouping_by_home_keeps_request_order_within_each_shard() {
        let calls: Vec<ShardCall> = (0..40)
            .map(|i| {
                let (ns, key) = names(i);
                ShardOp::Incr { ns, key, by: 1, ttl: None }.into()
            })
            .collect();
        let groups = grouped(0..calls.len(), |&place| {
            let (ns, key) = calls[place].op.target();
            shard_for(ns, key, 7)
        });
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

    fn record(i: usize) -> ParcelRecord {
        ParcelRecord {
            kind: "counter".into(),
            idempotency_key: format!("{i:08}"),
            request_digest: "0".repeat(32),
            result: "{}".into(),
            created_at_ms: 1,
        }
    }

    /// What an old home holding `records[i]` records of key `i` answers a call for `asked`
    /// (indexes of keys) with its first key's records continuing `after`, as
    /// `migration_store` pages them.
    fn answer(records: &[usize], asked: &[usize], after: Option<&RecordsAfter>) -> Vec<Parcel> {
        let parcel = |i: usize, from: usize| {
            let (ns, key) = names(i);
            let page: Vec<ParcelRecord> = (from..records[i]).take(MAX_RECORDS_PER_CALL).map(record).collect();
            let records_follow = from + page.len() < records[i];
            Parcel { records: page, records_follow, ..Parcel::empty(ns, key) }
        };
        let from = after.map_or(0, |after| after.idempotency_key.parse::<usize>().unwrap() + 1);
        let counts = asked.iter().map(|&i| records[i].min(MAX_RECORDS_PER_CALL + 1));
        match whole_keys(counts) {
            _ if from > 0 => vec![parcel(asked[0], from)],
            0 => vec![parcel(asked[0], 0)],
            whole => asked[..whole].iter().map(|&i| parcel(i, 0)).collect(),
        }
    }

    proptest! {
        #[test]
        fn every_key_arrives_once_with_all_its_records_in_calls_within_the_page(
            records in prop::collection::vec(prop_oneof![0usize..3, 0usize..3_500], 1..12),
        ) {
            let keys: Vec<(Namespace, Key)> = (0..records.len()).map(names).collect();
            let (mut rest, mut after) = (0, None);
            let mut delivered = vec![0; records.len()];
            let mut arrived = Vec::new();
            while rest < keys.len() {
                let asked: Vec<usize> = (rest..keys.len()).collect();
                let parcels = answer(&records, &asked, after.as_ref());
                let carried: usize = parcels.iter().map(|p| p.records.len()).sum();
                prop_assert!(carried <= MAX_RECORDS_PER_CALL);
                for (parcel, &i) in parcels.iter().zip(&asked) {
                    delivered[i] += parcel.records.len();
                }
                let (came, next) = progress(&keys[rest..], after.as_ref(), &parcels).unwrap();
                arrived.extend(rest..rest + came);
                rest += came;
                after = next;
            }
            prop_assert_eq!(arrived, (0..keys.len()).collect::<Vec<_>>());
            prop_assert_eq!(delivered, records);
        }
    }

    #[test]
    fn keys_travel_whole_while_their_records_fit_one_call() {
        assert_eq!(whole_keys([0, 0, 0]), 3);
        assert_eq!(whole_keys([400, 600, 1]), 2);
        assert_eq!(whole_keys([MAX_RECORDS_PER_CALL + 1, 0]), 0, "the first key's records go in pages");
        assert_eq!(whole_keys([]), 0);
    }

    #[test]
    fn progress_refuses_answers_that_would_not_advance_or_name_other_keys() {
        let keys: Vec<(Namespace, Key)> = (0..3).map(names).collect();
        let empty = |i: usize| Parcel::empty(names(i).0, names(i).1);
        let page = |i: usize| Parcel { records: vec![record(7)], records_follow: true, ..empty(i) };
        assert_eq!(progress(&keys, None, &[empty(0), empty(1)]), Ok((2, None)));
        let after = RecordsAfter { kind: "counter".into(), idempotency_key: format!("{:08}", 7) };
        assert_eq!(progress(&keys, None, &[empty(0), page(1)]), Ok((1, Some(after))));
        assert!(progress(&keys, None, &[]).is_err(), "nothing moved");
        assert!(progress(&keys, None, &[empty(1)]).is_err(), "another key");
        assert!(progress(&keys[..1], None, &[empty(0), empty(1)]).is_err(), "more than asked");
        assert!(progress(&keys, None, &[page(0), empty(1)]).is_err(), "a page before the last parcel");
        let empty_page = Parcel { records_follow: true, ..empty(0) };
        assert!(progress(&keys, None, &[empty_page]).is_err(), "an empty page");
        let too_many = Parcel { records: vec![record(1); MAX_RECORDS_PER_CALL + 1], ..empty(0) };
        assert!(progress(&keys, None, &[too_many]).is_err(), "past the page");
    }

    #[test]
    fn progress_refuses_a_page_that_does_not_end_past_the_cursor() {
        let keys: Vec<(Namespace, Key)> = (0..2).map(names).collect();
        let page = |ends_at: usize| Parcel {
            records: vec![record(ends_at)],
            records_follow: true,
            ..Parcel::empty(names(0).0, names(0).1)
        };
        let at = |i: usize| RecordsAfter { kind: "counter".into(), idempotency_key: format!("{i:08}") };
        assert_eq!(progress(&keys, Some(&at(7)), &[page(8)]), Ok((0, Some(at(8)))));
        // Answered again and again, the same page would have the call asked for ever.
        assert!(progress(&keys, Some(&at(7)), &[page(7)]).is_err(), "the same page again");
        assert!(progress(&keys, Some(&at(7)), &[page(3)]).is_err(), "an earlier page");
        // The last page of a key, then a page of the next: the cursor starts again.
        let whole = Parcel::empty(names(0).0, names(0).1);
        let next = Parcel {
            records: vec![record(2)],
            records_follow: true,
            ..Parcel::empty(names(1).0, names(1).1)
        };
        assert_eq!(progress(&keys, Some(&at(7)), &[whole, next]), Ok((1, Some(at(2)))));
    }

    #[test]
    fn a_page_of_the_longest_records_stays_under_half_a_megabyte() {
        let longest = ParcelRecord {
            kind: "counter".into(),
            idempotency_key: "k".repeat(128),
            request_digest: "f".repeat(32),
            // A counter write's answer with every field at its widest.
            result: format!(
                r#"{{"value":{},"version":{},"ttl":{},"expires_at_ms":{},"exists":true}}"#,
                i64::MIN,
                u64::MAX,
                u64::MAX,
                u64::MAX
            ),
            created_at_ms: u64::MAX,
        };
        let (ns, key) = names(1);
        let page = Parcel {
            records: vec![longest; MAX_RECORDS_PER_CALL],
            records_follow: true,
            ..Parcel::empty(ns, key)
        };
        assert!(serde_json::to_string(&page).unwrap().len() < 512 * 1024);
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
