use proptest::prelude::*;

use super::*;
use crate::shard::cache_table::CacheBounds;
use crate::shard::memory_store::MemoryStore;
use crate::shard::protocol::{DaysAnswer, OpResult, ShardCall, ShardOp, ShardRequest, Visit};
use crate::visits::visitor::visitor_hash;
use crate::ShardEngine;

fn names() -> (Namespace, Key) {
    (Namespace::new("site").unwrap(), Key::new("home").unwrap())
}

fn engine() -> ShardEngine {
    ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 })
}

/// A page view on `day` by the visitors at `addresses`, at `now_ms`.
fn view(engine: &mut ShardEngine, store: &MemoryStore, day: i32, addresses: &[String], now_ms: u64) {
    let (ns, key) = names();
    let visitors = addresses.iter().map(|a| visitor_hash(&ns, &key, a, "Firefox")).collect();
    let call = ShardCall {
        visit: Some(Visit { day: Day(day), visitors }),
        ..ShardOp::Incr { ns, key, by: 1, ttl: None }.into()
    };
    engine.run(store, &ShardRequest { ops: vec![call], ..ShardRequest::default() }, now_ms);
}

fn read(engine: &mut ShardEngine, store: &MemoryStore, (from, to): (i32, i32)) -> DaysAnswer {
    let (ns, key) = names();
    let op = ShardOp::Days { ns, key, from: Day(from), to: Day(to), unique: true };
    let request = ShardRequest { ops: vec![op.into()], ..ShardRequest::default() };
    match engine.run(store, &request, 1_000).response.results.remove(0) {
        OpResult::Days(answer) => *answer,
        other => panic!("{other:?}"),
    }
}

/// What a read of `from..=to` must answer of visitors: each stored sketch's, and their union,
/// merged here from every sketch the store holds.
fn merged_from_scratch(store: &MemoryStore, (from, to): (i32, i32)) -> (Vec<(Day, u64)>, u64) {
    let slot = names();
    let sketches = store.sketches.borrow();
    let mut union = Sketch::new();
    let mut days = Vec::new();
    for ((_, day), bytes) in sketches.range((slot.clone(), Day(from))..=(slot, Day(to))) {
        let sketch = Sketch::from_bytes(bytes).unwrap();
        days.push((*day, sketch.estimate()));
        union.merge(&sketch);
    }
    (days, union.estimate())
}

fn answered(answer: &DaysAnswer) -> (Vec<(Day, u64)>, u64) {
    let days = answer.days.iter().filter(|d| d.uniques != Some(0)).map(|d| (d.day, d.uniques.unwrap()));
    (days.collect(), answer.uniques.unwrap())
}

/// A sketch of `n` visitors of stream `seed`: a list up to 1,535, dense past that.
fn sketch_of(seed: u64, n: u64) -> Sketch {
    let mut sketch = Sketch::new();
    (0..n).for_each(|i| sketch.insert(xxhash_rust::xxh3::xxh3_64_with_seed(&i.to_le_bytes(), seed)));
    sketch
}

#[test]
fn a_kept_union_reads_back_as_kept_and_bytes_of_none_are_refused() {
    for sketch in [Sketch::new(), sketch_of(1, 20), sketch_of(2, 5_000)] {
        let union = KeptUnion { days: vec![(Day(-3), 7), (Day(10), u64::MAX)], sketch };
        assert_eq!(KeptUnion::from_bytes(&union.to_bytes()), Ok(union));
    }
    let bytes = KeptUnion { days: vec![(Day(1), 1), (Day(2), 1)], sketch: sketch_of(3, 2) }.to_bytes();
    assert_eq!(KeptUnion::from_bytes(&bytes[..3]), Err(NotAUnion), "no count");
    assert_eq!(KeptUnion::from_bytes(&bytes[..20]), Err(NotAUnion), "days cut short");
    assert_eq!(KeptUnion::from_bytes(&bytes[..bytes.len() - 1]), Err(NotAUnion), "no sketch");
    let mut swapped = bytes.clone();
    swapped[4..8].copy_from_slice(&5_i32.to_le_bytes());
    assert_eq!(KeptUnion::from_bytes(&swapped), Err(NotAUnion), "days out of order");
    let mut too_many = bytes;
    too_many[..4].copy_from_slice(&(MAX_UNION_DAYS as u32 + 1).to_le_bytes());
    assert_eq!(KeptUnion::from_bytes(&too_many), Err(NotAUnion));
}

#[test]
fn a_read_of_400_days_keeps_their_union_and_the_next_reads_it_and_today_alone() {
    let (mut engine, store) = (engine(), MemoryStore::default());
    for day in 1..=400 {
        view(&mut engine, &store, day, &[format!("192.0.2.{}", day % 7)], 1_000);
    }
    let first = read(&mut engine, &store, (1, 400));
    assert_eq!(store.sketches_read.get(), 400, "the first read merges every day");
    assert_eq!(store.unions.borrow().len(), 1, "and keeps days 1 to 399");
    store.sketches_read.set(0);
    let again = read(&mut engine, &store, (1, 400));
    assert_eq!(again, first);
    assert_eq!((store.unions_read.get(), store.sketches_read.get()), (1, 1), "the kept union and day 400");
    // A visitor of day 400 (today) leaves the union of 1 to 399 as it was.
    view(&mut engine, &store, 400, &["198.51.100.1".to_owned()], 1_000);
    store.sketches_read.set(0);
    assert_eq!(read(&mut engine, &store, (1, 400)).uniques, Some(401));
    assert_eq!(store.sketches_read.get(), 1);
}

#[test]
fn a_period_that_ends_in_the_future_keeps_its_finished_days_through_today_s_views() {
    let (mut engine, store) = (engine(), MemoryStore::default());
    for day in 1..=30 {
        view(&mut engine, &store, day, &[format!("192.0.2.{day}")], 1_000);
    }
    // Day 30 is the counter's latest; the month runs to day 60.
    let first = read(&mut engine, &store, (1, 60));
    assert_eq!(store.unions.borrow().len(), 1, "days 1 to 29 kept");
    view(&mut engine, &store, 30, &["198.51.100.1".to_owned()], 1_000);
    assert_eq!(store.unions.borrow().len(), 1, "a view of the day still counting drops nothing");
    store.sketches_read.set(0);
    let again = read(&mut engine, &store, (1, 60));
    assert_eq!(again.uniques, first.uniques.map(|n| n + 1));
    assert_eq!((store.unions_read.get(), store.sketches_read.get()), (1, 1), "the kept union and day 30");
}

#[test]
fn a_visitor_counted_late_in_a_kept_day_drops_the_union_and_the_next_read_sees_it() {
    let (mut engine, store) = (engine(), MemoryStore::default());
    for day in 10..=14 {
        view(&mut engine, &store, day, &[format!("192.0.2.{day}")], 1_000);
    }
    assert_eq!(read(&mut engine, &store, (10, 14)).uniques, Some(5));
    assert_eq!(store.unions.borrow().len(), 1);
    // A one-way count of day 12 sent again after midnight: counted in day 14, its visitor in 12.
    view(&mut engine, &store, 12, &["203.0.113.7".to_owned()], 1_000);
    assert!(store.unions.borrow().is_empty(), "day 12's sketch changed");
    let answer = read(&mut engine, &store, (10, 14));
    assert_eq!(answer.uniques, Some(6));
    assert_eq!(answered(&answer), merged_from_scratch(&store, (10, 14)));
}

#[test]
fn a_deleted_or_expired_counter_takes_its_kept_unions_with_it() {
    let (ns, key) = names();
    let (mut engine, store) = (engine(), MemoryStore::default());
    for day in 1..=3 {
        view(&mut engine, &store, day, &[format!("192.0.2.{day}")], 1_000);
    }
    read(&mut engine, &store, (1, 3));
    assert_eq!(store.unions.borrow().len(), 1);
    let delete = ShardOp::Delete { ns: ns.clone(), key: key.clone() }.into();
    engine.run(&store, &ShardRequest { ops: vec![delete], ..ShardRequest::default() }, 1_000);
    assert!(store.unions.borrow().is_empty());
    assert_eq!(read(&mut engine, &store, (1, 3)).uniques, Some(0));

    // A counter with a TTL of a second, read (and its union kept) before it lapses.
    for day in 1..=3 {
        let visitors = vec![visitor_hash(&ns, &key, &format!("192.0.2.{day}"), "Firefox")];
        let call = ShardCall {
            visit: Some(Visit { day: Day(day), visitors }),
            ..ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: 1, ttl: Some(1) }.into()
        };
        engine.run(&store, &ShardRequest { ops: vec![call], ..ShardRequest::default() }, 1_000);
    }
    read(&mut engine, &store, (1, 3));
    assert_eq!(store.unions.borrow().len(), 1);
    engine.reclaim_expired(&store, 10_000).unwrap();
    assert!(store.unions.borrow().is_empty(), "the alarm reclaimed the counter, and its unions");
}

#[test]
fn a_key_keeps_at_most_four_unions_those_ending_latest_then_the_longest() {
    let (mut engine, store) = (engine(), MemoryStore::default());
    for day in 1..=30 {
        view(&mut engine, &store, day, &[format!("192.0.2.{day}")], 1_000);
    }
    // Each read keeps the days before its last, or before day 30, the counter's latest: 1 to
    // 19, then four ranges ending on day 29, then 1 to 28 (a day older than those), then 5 to
    // 29 (from a period that runs past day 30).
    let ranges = [(1, 20), (25, 30), (20, 30), (10, 30), (1, 30), (1, 29), (5, 31)];
    let mut kept_after = Vec::new();
    for range in ranges {
        let answer = read(&mut engine, &store, range);
        assert_eq!(answered(&answer), merged_from_scratch(&store, range));
        let kept: Vec<(i32, i32)> =
            store.unions.borrow().keys().map(|(_, to, from)| (from.0, to.0)).collect();
        assert!(kept.len() <= UNIONS_PER_KEY);
        kept_after.push(kept);
    }
    assert_eq!(kept_after[4], vec![(1, 29), (10, 29), (20, 29), (25, 29)], "1 to 19 ended earliest");
    assert_eq!(kept_after[5], kept_after[4], "1 to 28 ends earlier than all four: not kept");
    assert_eq!(kept_after[6], vec![(1, 29), (5, 29), (10, 29), (20, 29)], "the shortest ending on 29 went");
    assert_eq!(unions_past_bound(vec![(Day(5), Day(9)), (Day(1), Day(9))]), vec![], "within the bound");
}

#[test]
fn a_range_of_fewer_than_two_sketches_is_read_as_it_is() {
    let (mut engine, store) = (engine(), MemoryStore::default());
    view(&mut engine, &store, 5, &["192.0.2.1".to_owned()], 1_000);
    view(&mut engine, &store, 9, &["192.0.2.2".to_owned()], 1_000);
    assert_eq!(read(&mut engine, &store, (1, 9)).uniques, Some(2));
    assert_eq!(read(&mut engine, &store, (5, 5)).uniques, Some(1));
    assert!(store.unions.borrow().is_empty(), "days 1 to 8 hold one sketch");
}

#[test]
fn a_range_of_more_sketches_than_a_key_keeps_is_merged_each_time_and_not_kept() {
    let (ns, key) = names();
    let (mut engine, store) = (engine(), MemoryStore::default());
    // Imported days not yet pruned can hold more than 400 sketches.
    for day in 1..=402 {
        store.save_sketch(&ns, &key, Day(day), &sketch_of(day as u64, 1).to_bytes()).unwrap();
    }
    assert_eq!(read(&mut engine, &store, (1, 402)).uniques, Some(402));
    assert!(store.unions.borrow().is_empty(), "days 1 to 401 hold 401 sketches");
    assert_eq!(read(&mut engine, &store, (2, 402)).uniques, Some(401));
    let kept: Vec<(i32, i32)> = store.unions.borrow().keys().map(|(_, to, from)| (from.0, to.0)).collect();
    assert_eq!(kept, vec![(2, 401)], "400 sketches: kept");
}

#[test]
fn a_damaged_kept_union_is_merged_again_and_replaced() {
    let (mut engine, store) = (engine(), MemoryStore::default());
    for day in 1..=3 {
        view(&mut engine, &store, day, &[format!("192.0.2.{day}")], 1_000);
    }
    let first = read(&mut engine, &store, (1, 3));
    store.unions.borrow_mut().values_mut().for_each(|bytes| bytes.truncate(5));
    assert_eq!(read(&mut engine, &store, (1, 3)), first);
    let kept =
        store.unions.borrow().values().map(|bytes| KeptUnion::from_bytes(bytes).is_ok()).collect::<Vec<_>>();
    assert_eq!(kept, vec![true]);
}

/// What a property run does to the key, in order.
#[derive(Debug, Clone)]
enum Step {
    /// Views on a day by some of 40 visitors (a day before the counter's latest: late ones).
    View { day: i32, visitors: Vec<u8> },
    /// A day's sketch replaced, as an import does: `n` visitors, dense past 1,535.
    Import { day: i32, n: u64 },
    /// The counter deleted.
    Delete,
    /// A read of a range.
    Read { from: i32, days: i32 },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..40_i32, prop::collection::vec(0..40_u8, 0..4)).prop_map(|(day, visitors)| Step::View { day, visitors }),
        1 => (0..40_i32, prop_oneof![1..50_u64, 1_500..3_000_u64]).prop_map(|(day, n)| Step::Import { day, n }),
        1 => Just(Step::Delete),
        4 => (0..40_i32, 1..40_i32).prop_map(|(from, days)| Step::Read { from, days }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever was counted, imported, deleted and read before, a read answers each day's
    /// visitors and the period's as a merge of every stored sketch from scratch does.
    #[test]
    fn a_read_answers_what_merging_every_stored_sketch_answers(steps in prop::collection::vec(step(), 1..60)) {
        let (ns, key) = names();
        let (mut engine, store) = (engine(), MemoryStore::default());
        for (n, step) in steps.into_iter().enumerate() {
            match step {
                Step::View { day, visitors } => {
                    let addresses: Vec<String> = visitors.iter().map(|v| format!("192.0.2.{v}")).collect();
                    view(&mut engine, &store, day, &addresses, 1_000);
                }
                Step::Import { day, n: visitors } => {
                    let sketch = sketch_of(n as u64, visitors).to_bytes();
                    store.save_sketch(&ns, &key, Day(day), &sketch).unwrap();
                }
                Step::Delete => {
                    let delete = ShardOp::Delete { ns: ns.clone(), key: key.clone() }.into();
                    engine.run(&store, &ShardRequest { ops: vec![delete], ..ShardRequest::default() }, 1_000);
                }
                Step::Read { from, days } => {
                    let range = (from, from + days - 1);
                    prop_assert_eq!(answered(&read(&mut engine, &store, range)), merged_from_scratch(&store, range));
                    prop_assert!(store.unions.borrow().len() <= UNIONS_PER_KEY);
                }
            }
        }
    }
}
