//! A counter's days and distinct visitors, as its shard keeps them.
//!
//! - **Days.** A counter's latest day is in its own row ([`crate::shard::counter::Counter`]'s
//!   `today`); the storage moves a finished day to a row of its own when a later day's first
//!   count arrives, and keeps such rows [`VisitStore`]-defined days (400 by default). A
//!   counter that is deleted or expires takes its days with it.
//! - **Visitors.** One sketch per counter and day ([`crate::visits::sketch`]), of the ids the
//!   shard makes from the worker's visitor hashes with the day's salt
//!   ([`crate::visits::visitor`]). The salt is made the first time a day needs it and deleted
//!   once the day after it is over.
//!
//! A read of days ([`tally`]) adds the counter's latest day to the stored ones, and merges
//! the days' sketches for the visitors of the whole range. Since each day has its own salt,
//! a visitor who came on two days is two visitors of the range: nobody, the operator
//! included, can tell that they were the same (as Plausible counts).

use crate::shard::counter::DayCount;
use crate::shard::protocol::{DayTally, DaysAnswer};
use crate::visits::day::Day;
use crate::visits::sketch::Sketch;
use crate::visits::visitor::{visitor_id, Salt};
use crate::{CoreError, Counter, Key, Namespace};

/// Where a shard keeps its finished days, visitor sketches and salts.
pub trait VisitStore {
    /// The salt of `day`, made from the platform's random source the first time it is asked
    /// for; the salts of days before the day before `day` are deleted then.
    fn day_salt(&self, day: Day) -> Result<Salt, String>;
    /// The stored sketch of `ns`/`key` on `day`.
    fn load_sketch(&self, ns: &Namespace, key: &Key, day: Day) -> Result<Option<Vec<u8>>, String>;
    /// Stores the sketch of `ns`/`key` on `day`.
    fn save_sketch(&self, ns: &Namespace, key: &Key, day: Day, sketch: &[u8]) -> Result<(), String>;
    /// The finished days of `ns`/`key` from `from` to `to`, in order (its latest day is in its
    /// counter's row).
    fn stored_days(&self, ns: &Namespace, key: &Key, from: Day, to: Day) -> Result<Vec<DayCount>, String>;
    /// The sketches of `ns`/`key` from `from` to `to`, in order.
    fn stored_sketches(
        &self,
        ns: &Namespace,
        key: &Key,
        from: Day,
        to: Day,
    ) -> Result<Vec<(Day, Vec<u8>)>, String>;
    /// Counts the visitors of `hashes` on `ns`/`key` and `day`: at once here, at the commit in
    /// a call's [`crate::shard::group_commit::PendingWrites`] (each key and day's sketch then
    /// written once a call).
    fn add_visitors(&self, ns: &Namespace, key: &Key, day: Day, hashes: &[u64]) -> Result<(), String>
    where
        Self: Sized,
    {
        count_visitors(self, ns, key, day, hashes)
    }
}

/// Counts the visitors whose worker hashes are `hashes` in the sketch of `ns`/`key` on `day`:
/// one row read and one written, however many they are.
///
/// # Errors
/// A storage failure, or a stored sketch that does not read back.
pub fn count_visitors(
    store: &impl VisitStore,
    ns: &Namespace,
    key: &Key,
    day: Day,
    hashes: &[u64],
) -> Result<(), String> {
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
    hashes.iter().for_each(|&hash| sketch.insert(visitor_id(&salt, hash)));
    store.save_sketch(ns, key, day, &sketch.to_bytes())
}

/// The counts of `counter` (`None`: it does not exist) in the days `from` to `to`, and with
/// `unique` the distinct visitors of each day and of the range.
///
/// # Errors
/// [`CoreError::StorageUnavailable`] when a read fails.
pub fn tally(
    store: &impl VisitStore,
    ns: &Namespace,
    key: &Key,
    counter: Option<&Counter>,
    (from, to): (Day, Day),
    unique: bool,
) -> Result<DaysAnswer, CoreError> {
    let mut days: Vec<DayTally> = store
        .stored_days(ns, key, from, to)
        .map_err(CoreError::storage)?
        .into_iter()
        .map(|d| DayTally { day: d.day, count: d.count, uniques: None })
        .collect();
    if let Some(today) = counter.and_then(|c| c.today).filter(|t| (from..=to).contains(&t.day)) {
        match days.iter_mut().find(|d| d.day == today.day) {
            // A day moved to its own row and written again later (a zone changed): both count.
            Some(day) => day.count = day.count.saturating_add(today.count),
            None => days.push(DayTally { day: today.day, count: today.count, uniques: None }),
        }
    }
    let mut uniques = None;
    if unique {
        let mut all = Sketch::new();
        for (day, bytes) in store.stored_sketches(ns, key, from, to).map_err(CoreError::storage)? {
            let sketch =
                Sketch::from_bytes(&bytes).map_err(|_| CoreError::storage("a damaged sketch".to_owned()))?;
            match days.iter_mut().find(|d| d.day == day) {
                Some(tally) => tally.uniques = Some(sketch.estimate()),
                None => days.push(DayTally { day, count: 0, uniques: Some(sketch.estimate()) }),
            }
            all.merge(&sketch);
        }
        days.iter_mut().for_each(|d| d.uniques = d.uniques.or(Some(0)));
        uniques = Some(all.estimate());
    }
    days.sort_by_key(|d| d.day);
    Ok(DaysAnswer { value: counter.map_or(0, |c| c.value), exists: counter.is_some(), days, uniques })
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
        // visitor once a day they came, and nobody can tell the two apart.
        assert_eq!(answer.uniques, Some(5), "a, b and c, then a and d");
        assert_eq!(days(&mut engine, &store, 22, 22, true).days, vec![], "a day without counts");
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
    fn a_day_s_salt_is_made_once_and_dropped_after_the_next_day() {
        let (mut engine, store) =
            (ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 }), MemoryStore::default());
        run(&mut engine, &store, vec![view(30, &["a"])]);
        run(&mut engine, &store, vec![view(30, &["b"])]);
        run(&mut engine, &store, vec![view(31, &["a"])]);
        assert_eq!(store.salts.borrow().keys().copied().collect::<Vec<_>>(), vec![Day(30), Day(31)]);
        run(&mut engine, &store, vec![view(32, &["a"])]);
        assert_eq!(store.salts.borrow().keys().copied().collect::<Vec<_>>(), vec![Day(31), Day(32)]);
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
