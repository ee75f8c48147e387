//! Group commit inside a shard: the counter writes and idempotency records of one call are
//! kept in memory while its ops run and written once at the end, each key's final state in
//! one row.
//!
//! When many increments of one key travel in one call (the edge coalesces concurrent ops on a
//! shard into one call), every op still sees the value the ops before it left, and answers
//! its own value, but storage is written once for the key: one row written for the call
//! instead of one per op, which is what the platform bills. Records go in one statement too.
//!
//! Durability does not change: the shard answers only after [`PendingWrites::commit`] has
//! stored everything (and the runtime's output gate holds the answer until that is durable).
//! The engine runs a call and its commit in one transaction ([`crate::shard::Atomic`]), so a
//! commit that fails undoes the whole call: every op is answered as failed, which is true, and
//! a plain retry is safe.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use crate::shard::counter::DayCount;
use crate::shard::idempotency::{IdempotencyRecord, IdempotencyStore, RecordScope};
use crate::shard::visit_table::{count_visitors, EachSketch, VisitStore};
use crate::visits::day::Day;
use crate::visits::visitor::Salt;
use crate::{Counter, CounterStore, Key, Namespace, StoreResult};

/// A store as one call sees it: reads see the call's own writes, writes wait for
/// [`PendingWrites::commit`]. Cache entries are not buffered (a put carries its value once).
pub struct PendingWrites<'a, S> {
    store: &'a S,
    /// Each written counter's final state in this call; `None` is a removal.
    counters: RefCell<BTreeMap<(Namespace, Key), Option<Counter>>>,
    /// Counters read ahead for this call ([`PendingWrites::prefetch`]); `None`: none stored.
    /// Storage changes only at the commit, so they stay what storage holds until then.
    prefetched: RefCell<BTreeMap<(Namespace, Key), Option<Counter>>>,
    records: RefCell<Vec<(RecordScope, IdempotencyRecord)>>,
    /// The visitor hashes of this call's counts, by key and day: each sketch is read and
    /// written once at the commit.
    visitors: RefCell<BTreeMap<(Namespace, Key, Day), Vec<u64>>>,
    /// Days this call's writes finished (a write moved its counter on to a later day), with
    /// their counts: stored at the commit, added to what storage holds of them.
    finished: RefCell<BTreeMap<(Namespace, Key, Day), i64>>,
    /// Keys removed in this call (a delete, an expired counter found), whatever was written
    /// after: the commit removes their stored rows, and so their days and sketches, first.
    removed: RefCell<BTreeSet<(Namespace, Key)>>,
}

impl<'a, S: CounterStore + IdempotencyStore + VisitStore> PendingWrites<'a, S> {
    /// Nothing pending over `store`.
    pub fn over(store: &'a S) -> Self {
        Self {
            store,
            counters: RefCell::default(),
            prefetched: RefCell::default(),
            records: RefCell::default(),
            visitors: RefCell::default(),
            finished: RefCell::default(),
            removed: RefCell::default(),
        }
    }

    /// The store under the pending writes, for what is not buffered: cache entries.
    pub fn store(&self) -> &'a S {
        self.store
    }

    /// Before the call's ops run, reads the stored counters of `keys` at once (one statement for
    /// many rows, where the store has one), so that the ops find them here instead of reading
    /// storage one key at a time. Fewer than two keys to read change nothing. A failure changes
    /// nothing either: each op then reads its key itself and reports that read's failure.
    pub fn prefetch(&self, mut keys: Vec<(Namespace, Key)>) {
        keys.sort_unstable();
        keys.dedup();
        if keys.len() < 2 {
            return;
        }
        if let Ok(found) = self.store.load_many(&keys) {
            self.prefetched.borrow_mut().extend(keys.into_iter().zip(found));
        }
    }

    /// Stores every pending write: each written counter's final state, the visitors in their
    /// days' sketches, then the records.
    ///
    /// # Errors
    /// The first storage failure; what was stored before it is undone by the transaction the
    /// caller runs this in.
    pub fn commit(self) -> StoreResult<()> {
        let removed = self.removed.into_inner();
        let mut saves = Vec::new();
        for ((ns, key), counter) in self.counters.into_inner() {
            // A counter that ended in this call (and perhaps began again): the old one's row
            // goes first, its days and sketches with it.
            if counter.is_none() || removed.contains(&(ns.clone(), key.clone())) {
                self.store.remove(&ns, &key)?;
            }
            if let Some(counter) = counter {
                saves.push((ns, key, counter));
            }
        }
        // Finished days before the counters that moved on from them, whose save prunes the
        // days past those kept.
        for ((ns, key, day), count) in self.finished.into_inner() {
            self.store.finish_day(&ns, &key, DayCount { day, count })?;
        }
        self.store.save_all(&saves)?;
        for ((ns, key, day), hashes) in self.visitors.into_inner() {
            count_visitors(self.store, &ns, &key, day, &hashes)?;
        }
        self.store.save_records(&self.records.into_inner())
    }
}

impl<S: CounterStore> CounterStore for PendingWrites<'_, S> {
    fn load(&self, ns: &Namespace, key: &Key) -> StoreResult<Option<Counter>> {
        let slot = (ns.clone(), key.clone());
        if let Some(pending) = self.counters.borrow().get(&slot) {
            return Ok(*pending);
        }
        if let Some(stored) = self.prefetched.borrow().get(&slot) {
            return Ok(*stored);
        }
        self.store.load(ns, key)
    }

    fn save(&self, ns: &Namespace, key: &Key, counter: &Counter) -> StoreResult<()> {
        self.counters.borrow_mut().insert((ns.clone(), key.clone()), Some(*counter));
        Ok(())
    }

    fn remove(&self, ns: &Namespace, key: &Key) -> StoreResult<()> {
        let slot = (ns.clone(), key.clone());
        // What this call counted of the counter before goes with it.
        self.finished.borrow_mut().retain(|(n, k, _), _| (n, k) != (ns, key));
        self.visitors.borrow_mut().retain(|(n, k, _), _| (n, k) != (ns, key));
        self.removed.borrow_mut().insert(slot.clone());
        self.counters.borrow_mut().insert(slot, None);
        Ok(())
    }

    fn finish_day(&self, ns: &Namespace, key: &Key, day: DayCount) -> StoreResult<()> {
        let slot = (ns.clone(), key.clone(), day.day);
        let mut finished = self.finished.borrow_mut();
        let count = finished.entry(slot).or_default();
        *count = count.saturating_add(day.count);
        Ok(())
    }

    fn remove_expired_counters(&self, now_ms: u64, most: u64) -> StoreResult<u64> {
        self.store.remove_expired_counters(now_ms, most)
    }

    fn next_counter_expiry(&self) -> StoreResult<Option<u64>> {
        self.store.next_counter_expiry()
    }

    fn count_counters(&self, now_ms: u64) -> StoreResult<(u64, u64)> {
        self.store.count_counters(now_ms)
    }
}

impl<S: IdempotencyStore> IdempotencyStore for PendingWrites<'_, S> {
    fn load_record(&self, scope: &RecordScope) -> StoreResult<Option<IdempotencyRecord>> {
        let records = self.records.borrow();
        if let Some((_, record)) = records.iter().rev().find(|(pending, _)| pending == scope) {
            return Ok(Some(record.clone()));
        }
        self.store.load_record(scope)
    }

    fn save_record(&self, scope: &RecordScope, record: &IdempotencyRecord) -> StoreResult<()> {
        let mut records = self.records.borrow_mut();
        records.retain(|(pending, _)| pending != scope);
        records.push((scope.clone(), record.clone()));
        Ok(())
    }

    fn records_generation(&self) -> StoreResult<Option<u64>> {
        self.store.records_generation()
    }

    fn start_records_generation(&self, now_ms: u64) -> StoreResult<()> {
        self.store.start_records_generation(now_ms)
    }
}

/// Reads of days see the counts and the days this call finished; reads of sketches go to
/// storage, and visitors wait for the commit (each key's sketch is written once a call), so a
/// read of visitors sees those of earlier calls, not those counted before it in its own.
impl<S: VisitStore> VisitStore for PendingWrites<'_, S> {
    fn day_salt(&self, day: Day) -> StoreResult<Salt> {
        self.store.day_salt(day)
    }

    fn forget_salts_before(&self, day: Day) -> StoreResult<Option<Day>> {
        self.store.forget_salts_before(day)
    }

    fn load_sketch(&self, ns: &Namespace, key: &Key, day: Day) -> StoreResult<Option<Vec<u8>>> {
        self.store.load_sketch(ns, key, day)
    }

    fn save_sketch(&self, ns: &Namespace, key: &Key, day: Day, sketch: &[u8]) -> StoreResult<()> {
        self.store.save_sketch(ns, key, day, sketch)
    }

    /// What storage holds of the days, and the days this call finished.
    fn stored_days(&self, ns: &Namespace, key: &Key, from: Day, to: Day) -> StoreResult<Vec<DayCount>> {
        let mut days = if self.removed.borrow().contains(&(ns.clone(), key.clone())) {
            Vec::new()
        } else {
            self.store.stored_days(ns, key, from, to)?
        };
        let finished = self.finished.borrow();
        for ((_, _, day), count) in
            finished.range((ns.clone(), key.clone(), from)..=(ns.clone(), key.clone(), to))
        {
            match days.iter_mut().find(|d| d.day == *day) {
                Some(stored) => stored.count = stored.count.saturating_add(*count),
                None => days.push(DayCount { day: *day, count: *count }),
            }
        }
        days.sort_by_key(|d| d.day);
        Ok(days)
    }

    fn each_sketch(
        &self,
        ns: &Namespace,
        key: &Key,
        days: (Day, Day),
        each: &mut EachSketch<'_>,
    ) -> StoreResult<()> {
        if self.removed.borrow().contains(&(ns.clone(), key.clone())) {
            return Ok(());
        }
        self.store.each_sketch(ns, key, days, each)
    }

    /// None for a key removed in this call: what storage keeps of it goes at the commit.
    fn load_union(&self, ns: &Namespace, key: &Key, days: (Day, Day)) -> StoreResult<Option<Vec<u8>>> {
        if self.removed.borrow().contains(&(ns.clone(), key.clone())) {
            return Ok(None);
        }
        self.store.load_union(ns, key, days)
    }

    /// Kept at once, not at the commit: it is the union of what storage holds, and the
    /// commit's sketches drop it when they change one of its days.
    fn save_union(&self, ns: &Namespace, key: &Key, days: (Day, Day), kept: &[u8]) -> StoreResult<()> {
        if self.removed.borrow().contains(&(ns.clone(), key.clone())) {
            return Ok(());
        }
        self.store.save_union(ns, key, days, kept)
    }

    fn add_visitors(&self, ns: &Namespace, key: &Key, day: Day, hashes: &[u64]) -> StoreResult<()> {
        if !hashes.is_empty() {
            let slot = (ns.clone(), key.clone(), day);
            self.visitors.borrow_mut().entry(slot).or_default().extend_from_slice(hashes);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::shard::cache_table::CacheBounds;
    use crate::shard::memory_store::MemoryStore;
    use crate::shard::protocol::{OpResult, ShardCall, ShardOp, ShardRequest};
    use crate::{CoreError, IdempotencyKey, Key, Namespace, ShardEngine};

    fn incr(key: &str, by: i64) -> ShardOp {
        ShardOp::Incr { ns: Namespace::new("n").unwrap(), key: Key::new(key).unwrap(), by, ttl: None }
    }

    fn get(key: &str) -> ShardOp {
        ShardOp::Get { ns: Namespace::new("n").unwrap(), key: Key::new(key).unwrap() }
    }

    fn keyed(op: ShardOp, idempotency_key: &str) -> ShardCall {
        ShardCall {
            op,
            idempotency_key: Some(IdempotencyKey::new(idempotency_key).unwrap()),
            operator: false,
            visit: None,
            count_visitor: false,
        }
    }

    fn run(engine: &mut ShardEngine, store: &MemoryStore, ops: Vec<ShardCall>) -> Vec<OpResult> {
        engine
            .run(store, &ShardRequest { ops, answer_budget: None, receipt: None, placed: None }, 0)
            .response
            .results
    }

    fn engine() -> ShardEngine {
        ShardEngine::new(CacheBounds { bytes: 10_000, entries: 10 })
    }

    #[test]
    fn a_call_reads_the_counters_memory_lacks_in_one_go_and_answers_as_before() {
        let store = MemoryStore::default();
        run(&mut engine(), &store, vec![incr("a", 1).into(), incr("b", 2).into(), incr("c", 3).into()]);
        // A restarted shard: memory holds nothing, storage a, b and c.
        let mut restarted = engine();
        let (single, many) = (store.counter_loads.get(), store.counter_loads_many.get());
        let results = run(
            &mut restarted,
            &store,
            vec![
                incr("a", 10).into(),
                get("b").into(),
                incr("new", 5).into(),
                incr("a", 100).into(),
                get("c").into(),
                get("new").into(),
            ],
        );
        assert_eq!(
            results,
            vec![value(11, 2), value(2, 1), value(5, 1), value(111, 3), value(3, 1), value(5, 1)]
        );
        assert_eq!(store.counter_loads_many.get() - many, 1);
        assert_eq!(store.counter_loads.get() - single, 0, "no key read on its own");
        // Now in memory: the next call reads nothing, and a call of one op reads its key alone.
        run(&mut restarted, &store, vec![incr("a", 1).into(), incr("b", 1).into()]);
        assert_eq!(store.counter_loads_many.get() - many, 1);
        run(&mut engine(), &store, vec![incr("c", 1).into()]);
        assert_eq!((store.counter_loads.get() - single, store.counter_loads_many.get() - many), (1, 1));
    }

    #[test]
    fn a_failed_read_ahead_leaves_each_op_to_read_its_own_key() {
        let store = MemoryStore::default();
        run(&mut engine(), &store, vec![incr("a", 1).into(), incr("b", 2).into()]);
        store.loads_many_fail.set(true);
        let loads = store.counter_loads.get();
        let results = run(&mut engine(), &store, vec![incr("a", 1).into(), incr("b", 1).into()]);
        assert_eq!(results, vec![value(2, 2), value(3, 2)]);
        assert_eq!(store.counter_loads.get() - loads, 2);
    }

    fn value(value: i64, version: u64) -> OpResult {
        OpResult::Value { value, exists: true, version }
    }

    #[test]
    fn many_increments_of_one_key_in_one_call_each_answer_their_value_and_write_one_row() {
        let store = MemoryStore::default();
        let mut shard = engine();
        let results = run(&mut shard, &store, (0..100).map(|_| incr("k", 1).into()).collect());
        let expected: Vec<OpResult> = (1..=100).map(|n| value(n, n.cast_unsigned())).collect();
        assert_eq!(results, expected);
        assert_eq!(store.rows_written.get(), 1, "one row for the key, not one per op");
        // Storage holds the final state: a restarted shard reads it.
        assert_eq!(run(&mut engine(), &store, vec![get("k").into()]), [value(100, 100)]);
    }

    #[test]
    fn each_key_of_a_call_is_written_once() {
        let store = MemoryStore::default();
        let ops = ["a", "b", "a", "c", "b", "a"].into_iter().map(|k| incr(k, 2).into()).collect();
        let results = run(&mut engine(), &store, ops);
        assert_eq!(results[5], value(6, 3));
        assert_eq!(store.rows_written.get(), 3);
    }

    #[test]
    fn a_keyed_write_repeated_within_one_call_is_applied_once_and_recorded_once() {
        let store = MemoryStore::default();
        let mut shard = engine();
        let ops = vec![keyed(incr("k", 5), "once"), keyed(incr("k", 5), "once"), incr("k", 1).into()];
        let results = run(&mut shard, &store, ops);
        assert_eq!(results[0], value(5, 1));
        assert_eq!(results[1], OpResult::Replayed { first: Box::new(value(5, 1)) });
        assert_eq!(results[2], value(6, 2));
        assert_eq!(store.rows_written.get(), 2, "the counter's row and one record");
        // The record is stored: a retry in a later call replays.
        let retried = run(&mut shard, &store, vec![keyed(incr("k", 5), "once")]);
        assert_eq!(retried, [OpResult::Replayed { first: Box::new(value(5, 1)) }]);
    }

    fn failed(result: &OpResult) -> bool {
        matches!(result, OpResult::Failed { error: CoreError::StorageUnavailable { .. } })
    }

    #[test]
    fn a_write_whose_record_cannot_be_stored_is_undone_and_a_retry_applies_it_once() {
        let store = MemoryStore::default();
        let mut shard = engine();
        store.records_fail.set(true);
        let results = run(&mut shard, &store, vec![keyed(incr("k", 1), "once"), incr("j", 1).into()]);
        assert!(results.iter().all(failed), "{results:?}");
        store.records_fail.set(false);
        assert_eq!(
            run(&mut shard, &store, vec![get("k").into(), get("j").into()]),
            [
                OpResult::Value { value: 0, exists: false, version: 0 },
                OpResult::Value { value: 0, exists: false, version: 0 }
            ]
        );
        assert_eq!(run(&mut shard, &store, vec![keyed(incr("k", 1), "once")]), [value(1, 1)]);
        let retried = run(&mut shard, &store, vec![keyed(incr("k", 1), "once")]);
        assert_eq!(retried, [OpResult::Replayed { first: Box::new(value(1, 1)) }]);
    }

    #[test]
    fn a_commit_that_fails_part_way_applies_nothing_of_the_call() {
        let store = MemoryStore::default();
        store.counter_saves_left.set(Some(150));
        let keys: Vec<String> = (0..201).map(|n| format!("k{n:03}")).collect();
        let results = run(&mut engine(), &store, keys.iter().map(|key| incr(key, 1).into()).collect());
        assert!(results.iter().all(failed), "every op of the call fails");
        store.counter_saves_left.set(None);
        let stored = run(&mut engine(), &store, keys.iter().map(|key| get(key).into()).collect());
        assert!(stored.iter().all(|now| *now == OpResult::Value { value: 0, exists: false, version: 0 }));
    }

    #[test]
    fn a_cache_write_in_a_call_whose_counters_cannot_be_stored_is_undone_too() {
        let store = MemoryStore::default();
        let mut shard = engine();
        store.counter_saves_left.set(Some(0));
        let put = ShardOp::CachePut {
            ns: Namespace::new("n").unwrap(),
            key: Key::new("k").unwrap(),
            value: b"v".to_vec(),
            content_type: crate::ContentType::new("text/plain").unwrap(),
            ttl: None,
        };
        let results = run(&mut shard, &store, vec![incr("k", 1).into(), keyed(put.clone(), "x")]);
        assert!(results.iter().all(failed), "{results:?}");
        assert!(store.entry_names().is_empty(), "the entry was not kept");
        store.counter_saves_left.set(None);
        assert_eq!(
            run(&mut shard, &store, vec![keyed(put.clone(), "x")]),
            [OpResult::Stored],
            "no record was kept"
        );
        let retried = run(&mut shard, &store, vec![keyed(put, "x")]);
        assert_eq!(retried, [OpResult::Replayed { first: Box::new(OpResult::Stored) }]);
    }

    #[test]
    fn when_a_call_cannot_be_stored_every_op_fails_and_memory_forgets_what_it_held() {
        let store = MemoryStore::default();
        let mut shard = engine();
        assert_eq!(run(&mut shard, &store, vec![incr("k", 1).into()]), [value(1, 1)]);
        store.writes_fail.set(true);
        let ops =
            vec![incr("k", 1).into(), get("k").into(), keyed(incr("k", 1), "retry-me"), get("j").into()];
        let results = run(&mut shard, &store, ops);
        assert!(results.iter().all(failed), "{results:?}");
        store.writes_fail.set(false);
        // Nothing of the failed call is visible, and its keyed write was not recorded: a retry
        // applies it, once.
        assert_eq!(run(&mut shard, &store, vec![get("k").into()]), [value(1, 1)]);
        assert_eq!(run(&mut shard, &store, vec![keyed(incr("k", 1), "retry-me")]), [value(2, 2)]);
    }
}
