//! A counter's days and distinct visitors, as its shard keeps them.
//!
//! - **Days.** A counter's latest day is in its own row ([`crate::shard::counter::Counter`]'s
//!   `today`); the storage moves a finished day to a row of its own when a later day's first
//!   count arrives, and keeps such rows [`VisitStore`]-defined days (400 by default). A
//!   counter that is deleted or expires takes its days with it.
//! - **Visitors.** One sketch per counter and day ([`crate::visits::sketch`]), of the ids the
//!   shard makes from the worker's visitor hashes with the day's salt
//!   ([`crate::visits::visitor`]). The salt is made the first time a day needs it and deleted
//!   by the alarm once [`SALT_DAYS`] UTC days have begun since; kept at most
//!   [`MAX_SKETCH_DAYS`] days.
//!
//! A read of them is [`crate::shard::days_read`]'s. Since each day has its own salt, a
//! visitor who came on two days is two visitors of a range of days: their ids differ, and the
//! service cannot tell that they were the same (as Plausible counts; docs/days.md says what
//! point-in-time recovery can restore).

use crate::shard::counter::DayCount;
use crate::visits::day::Day;
use crate::visits::sketch::Sketch;
use crate::visits::visitor::{visitor_id, Salt};
use crate::{Key, Namespace, StoreResult};

/// What [`VisitStore::each_sketch`] hands each stored sketch to: its day and bytes.
pub type EachSketch<'a> = dyn FnMut(Day, &[u8]) -> StoreResult<()> + 'a;

/// Where a shard keeps its finished days, visitor sketches and salts.
pub trait VisitStore {
    /// The salt of `day`, made from the platform's random source the first time it is asked
    /// for; the salts of days [`SALT_DAYS`] or more before `day` are deleted then.
    fn day_salt(&self, day: Day) -> StoreResult<Salt>;
    /// Deletes the salts of the days before `day`; answers the oldest day whose salt is left.
    fn forget_salts_before(&self, day: Day) -> StoreResult<Option<Day>>;
    /// The stored sketch of `ns`/`key` on `day`.
    fn load_sketch(&self, ns: &Namespace, key: &Key, day: Day) -> StoreResult<Option<Vec<u8>>>;
    /// Stores the sketch of `ns`/`key` on `day`.
    fn save_sketch(&self, ns: &Namespace, key: &Key, day: Day, sketch: &[u8]) -> StoreResult<()>;
    /// The finished days of `ns`/`key` from `from` to `to`, in order (its latest day is in its
    /// counter's row).
    fn stored_days(&self, ns: &Namespace, key: &Key, from: Day, to: Day) -> StoreResult<Vec<DayCount>>;
    /// Hands `each` the sketches of `ns`/`key` from `from` to `to`, in order, one at a time
    /// (a period's sketches are never all held at once).
    fn each_sketch(
        &self,
        ns: &Namespace,
        key: &Key,
        days: (Day, Day),
        each: &mut EachSketch<'_>,
    ) -> StoreResult<()>;
    /// The kept union of `ns`/`key`'s sketches from the first of `days` to the last, as
    /// [`crate::shard::visit_union::KeptUnion::to_bytes`] stored it.
    fn load_union(&self, ns: &Namespace, key: &Key, days: (Day, Day)) -> StoreResult<Option<Vec<u8>>>;
    /// Keeps `kept` as that union, and of the key's unions the
    /// [`crate::shard::visit_union::UNIONS_PER_KEY`] that
    /// [`crate::shard::visit_union::unions_past_bound`] keeps. The store drops every union
    /// whose days hold a sketch that is then saved or deleted, however it is.
    fn save_union(&self, ns: &Namespace, key: &Key, days: (Day, Day), kept: &[u8]) -> StoreResult<()>;
    /// Counts the visitors of `hashes` on `ns`/`key` and `day`: at once here, at the commit in
    /// a call's [`crate::shard::group_commit::PendingWrites`] (each key and day's sketch then
    /// written once a call).
    fn add_visitors(&self, ns: &Namespace, key: &Key, day: Day, hashes: &[u64]) -> StoreResult<()>
    where
        Self: Sized,
    {
        count_visitors(self, ns, key, day, hashes)
    }
}

/// Days a salt is kept: its own, and the two after it by the UTC clock. A day ends up to 12
/// hours after it ends in UTC (and begins up to 14 hours before), and a one-way count may be
/// sent again for up to 12 hours: a salt outlives every count of its day, and then goes, so
/// that the service can no longer tell a visitor of one day from the same person on another
/// (whoever can deploy code to the account can, for the 30 days of a Durable Object's
/// point-in-time recovery: docs/days.md).
pub const SALT_DAYS: i32 = 3;

/// Days a counter keeps its visitor sketches at most, whatever `EDGECOUNT_DAYS` says: a
/// sketch is up to 12 KB, so this bounds what a key holds and carries in a hand-over to about
/// 5 MB.
pub const MAX_SKETCH_DAYS: i32 = 400;

const DAY_MS: u64 = 86_400_000;

/// When the salt of `day` is to be deleted: once [`SALT_DAYS`] UTC days have begun since.
#[must_use]
pub fn salt_lapses_at(day: Day) -> u64 {
    u64::try_from(day.0.saturating_add(SALT_DAYS)).unwrap_or(0) * DAY_MS
}

/// The oldest day whose salt is kept at `now_ms`.
#[must_use]
pub fn oldest_salt_day(now_ms: u64) -> Day {
    Day(i32::try_from(now_ms / DAY_MS).unwrap_or(i32::MAX).saturating_sub(SALT_DAYS - 1))
}

/// Counts the visitors whose worker hashes are `hashes` in the sketch of `ns`/`key` on `day`:
/// one row read and at most one written, however many they are (none when the sketch is
/// unchanged).
///
/// # Errors
/// A storage failure, or a stored sketch that does not read back.
pub fn count_visitors(
    store: &impl VisitStore,
    ns: &Namespace,
    key: &Key,
    day: Day,
    hashes: &[u64],
) -> StoreResult<()> {
    if hashes.is_empty() {
        return Ok(());
    }
    let salt = store.day_salt(day)?;
    let mut sketch = match store.load_sketch(ns, key, day)? {
        Some(bytes) => {
            Sketch::from_bytes(&bytes).map_err(|_| format!("the sketch of {ns}/{key} is damaged"))?
        }
        None => Sketch::new(),
    };
    let before = sketch.clone();
    hashes.iter().for_each(|&hash| sketch.insert(visitor_id(&salt, hash)));
    // Visitors already counted change nothing, and past a few thousand a day most leave every
    // register as it was: no row is written then.
    if sketch == before {
        return Ok(());
    }
    store.save_sketch(ns, key, day, &sketch.to_bytes())
}

#[cfg(test)]
mod tests {
    use crate::shard::cache_table::CacheBounds;
    use crate::shard::memory_store::MemoryStore;
    use crate::shard::protocol::{DayTally, DaysAnswer, OpResult, ShardCall, ShardOp, ShardRequest, Visit};
    use crate::visits::day::Day;
    use crate::visits::sketch::STANDARD_ERROR;
    use crate::visits::visitor::visitor_hash;
    use crate::{Key, Namespace, ShardEngine};

    fn names() -> (Namespace, Key) {
        (Namespace::new("site").unwrap(), Key::new("home").unwrap())
    }

    /// A page view on `day` by the visitors at `addresses`.
    fn view(day: i32, addresses: &[&str]) -> ShardCall {
        let (ns, key) = names();
        let visitors = addresses.iter().map(|a| visitor_hash(&ns, &key, a, "Firefox")).collect();
        ShardCall {
            visit: Some(Visit { day: Day(day), visitors }),
            ..ShardOp::Incr { ns, key, by: 1, ttl: None }.into()
        }
    }

    fn run(engine: &mut ShardEngine, store: &MemoryStore, ops: Vec<ShardCall>) -> Vec<OpResult> {
        let request = ShardRequest { ops, ..ShardRequest::default() };
        engine.run(store, &request, 1_000).response.results
    }

    fn days(engine: &mut ShardEngine, store: &MemoryStore, from: i32, to: i32, unique: bool) -> DaysAnswer {
        let (ns, key) = names();
        let read = ShardOp::Days { ns, key, from: Day(from), to: Day(to), unique }.into();
        match run(engine, store, vec![read]).remove(0) {
            OpResult::Days(answer) => *answer,
            other => panic!("{other:?}"),
        }
    }

    fn tally(day: i32, count: i64, uniques: Option<u64>) -> DayTally {
        DayTally { day: Day(day), count, uniques }
    }

    #[test]
    fn counts_land_in_their_days_and_finished_days_move_to_their_own_rows() {
        let (mut engine, store) =
            (ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 }), MemoryStore::default());
        run(&mut engine, &store, vec![view(10, &[]), view(10, &[])]);
        run(&mut engine, &store, vec![view(11, &[])]);
        run(&mut engine, &store, vec![view(13, &[]), view(13, &[]), view(13, &[])]);
        assert_eq!(store.days.borrow().len(), 2, "days 10 and 11 moved out of the counter's row");
        let answer = days(&mut engine, &store, 10, 13, false);
        assert_eq!((answer.value, answer.uniques), (6, None));
        assert_eq!(answer.days, vec![tally(10, 2, None), tally(11, 1, None), tally(13, 3, None)]);
        assert_eq!(days(&mut engine, &store, 11, 12, false).days, vec![tally(11, 1, None)]);
        assert_eq!(days(&mut engine, &store, 13, 13, false).days, vec![tally(13, 3, None)]);
    }

    #[test]
    fn visitors_are_counted_once_a_day_and_once_over_the_range() {
        let (mut engine, store) =
            (ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 }), MemoryStore::default());
        run(&mut engine, &store, vec![view(20, &["a", "b"]), view(20, &["a"]), view(20, &["c"])]);
        assert_eq!(store.sketches.borrow().len(), 1, "one sketch for the key and day");
        run(&mut engine, &store, vec![view(21, &["a", "d"])]);
        let answer = days(&mut engine, &store, 20, 21, true);
        assert_eq!(answer.days, vec![tally(20, 3, Some(3)), tally(21, 1, Some(2))]);
        // Each day's salt makes "a" on day 21 a stranger to "a" on day 20: a range counts a
        // visitor once a day they came, and the sketches cannot tell the two apart.
        assert_eq!(answer.uniques, Some(5), "a, b and c, then a and d");
        assert_eq!(days(&mut engine, &store, 22, 22, true).days, vec![], "a day without counts");
    }

    #[test]
    fn a_read_of_400_days_visitors_merges_at_most_two_sketches_once_read() {
        let (mut engine, store) =
            (ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 }), MemoryStore::default());
        for day in 1..=400 {
            run(&mut engine, &store, vec![view(day, &[&format!("192.0.2.{}", day % 7)])]);
        }
        let first = days(&mut engine, &store, 1, 400, true);
        assert_eq!((first.days.len(), first.uniques), (400, Some(400)));
        store.sketches_read.set(0);
        let again = days(&mut engine, &store, 1, 400, true);
        assert_eq!(again, first);
        let merged = store.sketches_read.get() + store.unions_read.get();
        assert!(merged <= 2, "{merged} sketches and kept unions read and merged");
    }

    #[test]
    fn a_hundred_thousand_visitors_of_a_day_are_estimated_within_three_standard_errors() {
        let (mut engine, store) =
            (ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 }), MemoryStore::default());
        let (ns, key) = names();
        for call in 0..100 {
            let visitors: Vec<u64> = (0..1_000)
                .map(|i| visitor_hash(&ns, &key, &format!("10.{}.{}.{}", call, i / 256, i % 256), "Firefox"))
                .collect();
            let view = ShardCall {
                visit: Some(Visit { day: Day(60), visitors }),
                ..ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: 1_000, ttl: None }.into()
            };
            run(&mut engine, &store, vec![view]);
        }
        let answer = days(&mut engine, &store, 60, 60, true);
        let estimate = answer.uniques.unwrap() as f64;
        assert!((estimate - 100_000.0).abs() / 100_000.0 <= 3.0 * STANDARD_ERROR, "{estimate}");
        assert_eq!(answer.days, vec![tally(60, 100_000, answer.uniques)]);
        let stored = store.sketches.borrow().values().map(Vec::len).max();
        assert_eq!(stored, Some(12_288), "at most 12 KB a key and day");
    }

    #[test]
    fn a_day_s_salt_is_made_once_and_goes_with_the_alarm_two_utc_days_after() {
        let (mut engine, store) =
            (ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 }), MemoryStore::default());
        let salts = |store: &MemoryStore| store.salts.borrow().keys().map(|d| d.0).collect::<Vec<_>>();
        run(&mut engine, &store, vec![view(30, &["a"])]);
        run(&mut engine, &store, vec![view(30, &["b"])]);
        assert_eq!(store.salts_made.get(), 1);
        let call = view(31, &["a"]);
        let request = ShardRequest { ops: vec![call], ..ShardRequest::default() };
        let ran = engine.run(&store, &request, 31 * 86_400_000);
        assert_eq!(
            ran.reclaim_by,
            Some(34 * 86_400_000),
            "the alarm is asked for by when day 31's salt goes"
        );
        run(&mut engine, &store, vec![view(32, &["a"])]);
        assert_eq!(salts(&store), vec![30, 31, 32]);
        run(&mut engine, &store, vec![view(33, &["a"])]);
        assert_eq!(salts(&store), vec![30, 31, 32, 33]);
        run(&mut engine, &store, vec![view(34, &["a"])]);
        assert_eq!(salts(&store), vec![31, 32, 33, 34], "a new day drops salts four days before");
        // An idle shard's alarm drops them by the UTC clock: on UTC day 35, the salts of 33 and
        // on stay (33 goes once day 36 begins).
        let next = engine.reclaim_expired(&store, 35 * 86_400_000 + 1).unwrap();
        assert_eq!(salts(&store), vec![33, 34]);
        assert_eq!(next, Some(36 * 86_400_000));
        engine.reclaim_expired(&store, 37 * 86_400_000).unwrap();
        assert!(salts(&store).is_empty());
        // A count days late is counted, and its visitor not: that day's salt is gone.
        let late = ShardRequest { ops: vec![view(33, &["z"])], ..ShardRequest::default() };
        engine.run(&store, &late, 37 * 86_400_000);
        assert!(salts(&store).is_empty(), "no salt made again for day 33");
    }

    #[test]
    fn a_read_of_visitors_sees_those_of_earlier_calls_not_those_counted_before_it_in_its_own() {
        let (mut engine, store) =
            (ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 }), MemoryStore::default());
        run(&mut engine, &store, vec![view(30, &["a"])]);
        let (ns, key) = names();
        let read = ShardOp::Days { ns, key, from: Day(30), to: Day(30), unique: true }.into();
        let results = run(&mut engine, &store, vec![view(30, &["b"]), read]);
        let OpResult::Days(answer) = &results[1] else { panic!("{:?}", results[1]) };
        assert_eq!(answer.days, vec![tally(30, 2, Some(1))], "the count at once, b's visit at the commit");
        assert_eq!(days(&mut engine, &store, 30, 30, true).days, vec![tally(30, 2, Some(2))]);
    }

    #[test]
    fn a_day_that_ends_inside_a_call_keeps_its_counts_and_a_read_in_that_call_sees_them() {
        let (mut engine, store) =
            (ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 }), MemoryStore::default());
        run(&mut engine, &store, vec![view(39, &[])]);
        let (ns, key) = names();
        let read = ShardOp::Days { ns, key, from: Day(39), to: Day(41), unique: false }.into();
        let results = run(&mut engine, &store, vec![view(39, &[]), view(40, &["a"]), view(41, &[]), read]);
        let OpResult::Days(answer) = &results[3] else { panic!("{:?}", results[3]) };
        let expected = vec![tally(39, 2, None), tally(40, 1, None), tally(41, 1, None)];
        assert_eq!(answer.days, expected, "read in the call");
        assert_eq!(days(&mut engine, &store, 39, 41, false).days, expected, "read after it");
    }

    #[test]
    fn an_expired_counter_takes_its_days_and_visitors_with_it_when_written_again() {
        let (mut engine, store) =
            (ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 }), MemoryStore::default());
        let (ns, key) = names();
        let short = ShardCall {
            visit: Some(Visit { day: Day(50), visitors: vec![visitor_hash(&ns, &key, "a", "x")] }),
            ..ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: 1, ttl: Some(1) }.into()
        };
        let request = ShardRequest { ops: vec![short, view(51, &[])], ..ShardRequest::default() };
        engine.run(&store, &request, 1_000);
        assert_eq!(store.days.borrow().len(), 1, "day 50 finished");
        // Two seconds later the counter has expired; a write starts a new one, without them.
        let request = ShardRequest { ops: vec![view(52, &["b"])], ..ShardRequest::default() };
        engine.run(&store, &request, 3_000);
        let answer = days(&mut engine, &store, 40, 60, true);
        assert_eq!((answer.value, answer.uniques), (1, Some(1)));
        assert_eq!(answer.days, vec![tally(52, 1, Some(1))]);
    }

    #[test]
    fn visitors_counted_before_write_no_sketch_again() {
        let (mut engine, store) =
            (ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 }), MemoryStore::default());
        run(&mut engine, &store, vec![view(70, &["a", "b"])]);
        let written = store.rows_written.get();
        run(&mut engine, &store, vec![view(70, &["b", "a"])]);
        assert_eq!(store.rows_written.get() - written, 1, "the counter's row alone");
        run(&mut engine, &store, vec![view(70, &["c"])]);
        assert_eq!(store.rows_written.get() - written, 3, "a new visitor: the counter and the sketch");
    }

    #[test]
    fn a_deleted_counter_takes_its_days_and_visitors_with_it() {
        let (mut engine, store) =
            (ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 }), MemoryStore::default());
        run(&mut engine, &store, vec![view(40, &["a"]), view(41, &["b"])]);
        let (ns, key) = names();
        run(&mut engine, &store, vec![ShardOp::Delete { ns, key }.into()]);
        let answer = days(&mut engine, &store, 0, 100, true);
        assert_eq!((answer.value, answer.exists, answer.days, answer.uniques), (0, false, vec![], Some(0)));
    }

    #[test]
    fn a_call_whose_storage_fails_counts_no_visitor() {
        let (mut engine, store) =
            (ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 }), MemoryStore::default());
        store.writes_fail.set(true);
        let results = run(&mut engine, &store, vec![view(50, &["a"])]);
        assert!(matches!(results[0], OpResult::Failed { .. }));
        store.writes_fail.set(false);
        assert_eq!(store.sketches.borrow().len(), 0);
        assert_eq!(days(&mut engine, &store, 50, 50, true).uniques, Some(0));
    }
}
