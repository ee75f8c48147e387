//! A shard's state machine: runs [`ShardOp`]s against its counters and cache entries, and
//! reclaims what has lapsed.
//!
//! The Durable Object around it is a shell: it hands each request to [`ShardEngine::run`],
//! sets its alarm to the time `run` or [`ShardEngine::reclaim_expired`] answers, and reports
//! [`ShardEngine::stats`]. Storage is behind the store traits, so all of this is tested natively
//! with [`crate::shard::memory_store::MemoryStore`].

use crate::shard::answer_budget::AnswerBudget;
use crate::shard::cache_table::{CacheBounds, CacheStore, CacheTable};
use crate::shard::counter_table::CounterTable;
use crate::shard::days_read;
use crate::shard::group_commit::PendingWrites;
use crate::shard::idempotency::{self, IdempotencyStore, Recall, IDEMPOTENCY_WINDOW_MS};
use crate::shard::owner;
use crate::shard::protocol::{
    Commands, OpResult, ShardCall, ShardOp, ShardRequest, ShardResponse, ShardStats,
};
use crate::shard::receipt;
use crate::shard::visit_table::{self, VisitStore};
use crate::shard::Atomic;
use crate::{
    CoreError, CounterStore, CounterWrite, IdempotencyKey, Key, Namespace, StorageError, StoreResult,
};

/// Everything a shard stores.
pub trait ShardTables: CounterStore + CacheStore + IdempotencyStore + VisitStore {}
impl<T: CounterStore + CacheStore + IdempotencyStore + VisitStore> ShardTables for T {}

/// A shard's tables, and the transactions its calls run in.
pub trait ShardStore: ShardTables + Atomic {}
impl<T: ShardTables + Atomic> ShardStore for T {}

/// Most counters one alarm looks at (those due, expired or not): the alarm's work stays
/// bounded however many lapsed at once, and the rest wait for the next alarm.
pub const RECLAIM_PAGE: u64 = 5_000;

/// The in-memory side of one shard.
#[derive(Debug)]
pub struct ShardEngine {
    counters: CounterTable,
    cache: CacheTable,
    /// Requests run since the shard started.
    calls: u64,
    /// Transactions those requests' writes ran in (see [`ShardEngine::run_group`]); a
    /// receipted request is one of its own, a request that only reads none.
    groups: u64,
    /// Ops executed since the shard started.
    ops: u64,
    /// Expired counters and cache entries reclaimed by the alarm since the shard started.
    reclaimed: u64,
    /// When the cache index's first entry lapses, from when a call loaded the index until an
    /// alarm runs with it loaded: every call's `reclaim_by` includes it, so that an alarm
    /// that could not be set is asked for again (see [`Self::reclaim_expired`]).
    cache_lapse_owed: Option<u64>,
    /// Of the ops executed, the counter reads, increments and creates: Abacus's command counts.
    commands: Commands,
}

/// What [`ShardEngine::run_group`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grouped {
    /// Each request's response, in the group's order.
    pub responses: Vec<ShardResponse>,
    /// When the first thing the group wrote lapses: the shard's alarm must fire by then.
    pub reclaim_by: Option<u64>,
}

/// What [`ShardEngine::run`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    pub response: ShardResponse,
    /// When the first thing this request wrote lapses (a TTL or an idempotency record's
    /// window): the shard's alarm must fire by then.
    pub reclaim_by: Option<u64>,
}

impl ShardEngine {
    /// A shard whose cache holds at most `cache_bounds`, with nothing loaded: counters are read
    /// from storage when first used, the cache index when a cache write or delete first needs it
    /// (see [`CacheTable::load`]), so a restart reads nothing up front.
    #[must_use]
    pub fn new(cache_bounds: CacheBounds) -> Self {
        Self {
            counters: CounterTable::new(),
            cache: CacheTable::new(cache_bounds),
            calls: 0,
            groups: 0,
            ops: 0,
            reclaimed: 0,
            cache_lapse_owed: None,
            commands: Commands::default(),
        }
    }

    /// Runs one request at `now_ms`: one result per op, in order, within the request's answer
    /// budget. Its ops and their writes run in one transaction, the counter writes and records
    /// stored together at the end (see [`crate::shard::group_commit`]): each key written once,
    /// whatever number of ops wrote it. A call whose writes cannot be stored applies nothing,
    /// and every op is answered as failed.
    pub fn run(&mut self, store: &impl ShardStore, request: &ShardRequest, now_ms: u64) -> Ran {
        if let Some(receipt) = &request.receipt {
            return self.run_receipted(store, receipt, &request.ops, now_ms);
        }
        let Grouped { mut responses, reclaim_by } = self.run_group(store, &[request], now_ms);
        let response = responses.pop().unwrap_or(ShardResponse { results: Vec::new() });
        Ran { response, reclaim_by }
    }

    /// Runs requests that arrived together as one group, in order, each op seeing what the ops
    /// before it left: one transaction for them all and one commit, so the writes of one key
    /// in the group are stored as one row. Each request keeps its own answer budget and gets
    /// its own response. A group whose writes cannot be stored applies nothing, and every op
    /// of every request is answered as failed. Requests under a receipt are not grouped: they
    /// go to [`Self::run`] one by one.
    pub fn run_group(&mut self, store: &impl ShardStore, requests: &[&ShardRequest], now_ms: u64) -> Grouped {
        self.calls += requests.len() as u64;
        let index_was_loaded = self.cache.is_loaded();
        let ops: Vec<ShardCall> = requests.iter().flat_map(|request| request.ops.iter().cloned()).collect();
        // A group that only reads opens no transaction, and is not counted as one.
        if ops.iter().any(|call| call.op.is_write()) {
            self.groups += 1;
        }
        let ran = in_transaction(store, &ops, || {
            let pending = self.read_ahead(store, &ops);
            let mut results = Vec::with_capacity(ops.len());
            for request in requests {
                let mut budget = request.answer_budget.map_or_else(AnswerBudget::default, AnswerBudget::new);
                for call in &request.ops {
                    results.push(budget.admit(self.execute_call(&pending, call, now_ms)));
                }
            }
            pending.commit()?;
            Ok(results)
        });
        let mut results = ran.unwrap_or_else(|detail| self.undone(&ops, detail, |_| true)).into_iter();
        let responses = requests
            .iter()
            .map(|request| ShardResponse { results: results.by_ref().take(request.ops.len()).collect() })
            .collect();
        let ops_lapse = ops.iter().filter_map(|call| lapses_at(call, now_ms)).min();
        let reclaim_by = ops_lapse.into_iter().chain(self.cache_lapse(index_was_loaded)).min();
        Grouped { responses, reclaim_by }
    }

    /// When the cache index's first entry lapses, once a call has loaded the index and until
    /// an alarm runs with it loaded: an alarm that found it unloaded did not look at its
    /// entries (see [`Self::reclaim_expired`]).
    fn cache_lapse(&mut self, index_was_loaded: bool) -> Option<u64> {
        if !index_was_loaded && self.cache.is_loaded() {
            self.cache_lapse_owed = self.cache.next_expiry();
        }
        self.cache_lapse_owed
    }

    /// Runs a request under `receipt` (see [`crate::shard::receipt`]): the ops an earlier send
    /// applied are answered as replayed, the rest run, and one record, stored in the same
    /// transaction, says which of them are still unapplied.
    fn run_receipted(
        &mut self,
        store: &impl ShardStore,
        receipt: &IdempotencyKey,
        calls: &[ShardCall],
        now_ms: u64,
    ) -> Ran {
        self.calls += 1;
        self.groups += 1;
        let index_was_loaded = self.cache.is_loaded();
        let answer_all =
            |results: Vec<OpResult>| Ran { response: ShardResponse { results }, reclaim_by: None };
        let Some(first) = calls.first() else { return answer_all(Vec::new()) };
        if let Some(error) = receipt::refusal(calls) {
            return answer_all(vec![OpResult::Failed { error }; calls.len()]);
        }
        let scope = receipt::scope(receipt, &first.op);
        let digest = receipt::digest(calls);
        let earlier = store
            .load_record(&scope)
            .map_err(CoreError::storage)
            .and_then(|record| receipt::Earlier::from_record(record, digest, now_ms));
        let earlier = match earlier {
            Ok(earlier) => earlier,
            Err(error) => return answer_all(vec![OpResult::Failed { error }; calls.len()]),
        };
        let ran = store.atomically(|| {
            let pending = self.read_ahead(store, calls);
            let results: Vec<OpResult> = calls
                .iter()
                .enumerate()
                .map(|(place, call)| {
                    if earlier.runs(place) {
                        if let Err(error) = self.owner_permits(&pending, call, now_ms) {
                            self.ops += 1;
                            return OpResult::Failed { error };
                        }
                        return self.execute(&pending, call, now_ms);
                    }
                    self.ops += 1;
                    let (ns, key) = call.op.target();
                    let now = self.counters.get(&pending, ns, key, now_ms);
                    OpResult::Replayed {
                        first: Box::new(now.unwrap_or_else(|error| OpResult::Failed { error })),
                    }
                })
                .collect();
            pending.commit()?;
            let unapplied: Vec<usize> = results
                .iter()
                .enumerate()
                .filter(|(place, result)| earlier.runs(*place) && matches!(result, OpResult::Failed { .. }))
                .map(|(place, _)| place)
                .collect();
            let record = earlier.record_after(&unapplied, digest, now_ms);
            if let Some(record) = &record {
                store.save_record(&scope, record)?;
            }
            Ok((results, record.map(|record| record.created_at_ms + IDEMPOTENCY_WINDOW_MS)))
        });
        let ops_lapse = calls.iter().filter_map(|call| lapses_at(call, now_ms)).min();
        match ran {
            Ok((results, record_lapses)) => Ran {
                response: ShardResponse { results },
                reclaim_by: ops_lapse
                    .into_iter()
                    .chain(record_lapses)
                    .chain(self.cache_lapse(index_was_loaded))
                    .min(),
            },
            // An op an earlier send applied stays answered as replayed: it was applied, and its
            // sender must not count it otherwise.
            Err(detail) => answer_all(self.undone(calls, detail, |place| earlier.runs(place))),
        }
    }

    /// The answers of a call whose transaction was undone: memory forgets what the call named,
    /// so the next op reads storage, and every op that `ran` is answered as failed; the others
    /// (applied by an earlier send of the same receipt) as replayed.
    fn undone(
        &mut self,
        calls: &[ShardCall],
        detail: StorageError,
        ran: impl Fn(usize) -> bool,
    ) -> Vec<OpResult> {
        for call in calls {
            let (ns, key) = call.op.target();
            self.counters.forget(ns, key);
        }
        if calls.iter().any(|call| call.op.is_cache()) {
            self.cache.unload();
        }
        let failed = OpResult::Failed { error: CoreError::storage(detail) };
        (0..calls.len())
            .map(|place| {
                if ran(place) {
                    failed.clone()
                } else {
                    OpResult::Replayed { first: Box::new(failed.clone()) }
                }
            })
            .collect()
    }

    /// Reclaims what lapsed by `now_ms` (expired counters and cache entries, idempotency
    /// records past their window), at most [`RECLAIM_PAGE`] counters, and
    /// answers when the next thing lapses (by `now_ms` again when a page was full): the one
    /// expiry function of a shard, which its alarm calls.
    ///
    /// # Errors
    /// [`CoreError::StorageUnavailable`] when storage fails; what was reclaimed before stays
    /// reclaimed.
    pub fn reclaim_expired(
        &mut self,
        store: &impl ShardStore,
        now_ms: u64,
    ) -> Result<Option<u64>, CoreError> {
        let counters = store.remove_expired_counters(now_ms, RECLAIM_PAGE).map_err(CoreError::storage)?;
        self.counters.forget_expired(now_ms);
        self.reclaimed += counters;
        // Expired entries of a loaded index are found in memory. An unloaded one is left so:
        // loading it reads every entry, which an alarm for a counter or the records must not
        // cost. No read serves an expired entry, the bounds cap what waits, and the first
        // write or delete loads the index, whose next alarm reclaims them.
        if self.cache.is_loaded() {
            self.reclaimed += self.cache.reclaim_expired(store, now_ms)?;
            // This alarm's answer includes the index's next expiry.
            self.cache_lapse_owed = None;
        }
        let next_record = self.reclaim_records(store, now_ms)?;
        let next_counter = store.next_counter_expiry().map_err(CoreError::storage)?;
        let oldest_salt =
            store.forget_salts_before(visit_table::oldest_salt_day(now_ms)).map_err(CoreError::storage)?;
        let next_salt = oldest_salt.map(visit_table::salt_lapses_at);
        Ok([next_counter, self.cache.next_expiry(), next_record, next_salt].into_iter().flatten().min())
    }

    /// Reclaims lapsed idempotency records (not keys: not counted) a generation at a time: once
    /// the current generation began a window ago, the one before it (all of whose records were
    /// written before that) is dropped whole, and a new one starts. Records are found by key,
    /// so this is what keeps their reclaiming from reading them: a record lives one to two
    /// windows, and the alarm does this at most once a window. Answers when the next
    /// generation is due, if any record is stored.
    fn reclaim_records(&mut self, store: &impl ShardStore, now_ms: u64) -> Result<Option<u64>, CoreError> {
        let Some(started) = store.records_generation().map_err(CoreError::storage)? else {
            return Ok(None);
        };
        if now_ms < started.saturating_add(IDEMPOTENCY_WINDOW_MS) {
            return Ok(Some(started + IDEMPOTENCY_WINDOW_MS));
        }
        store.atomically(|| store.start_records_generation(now_ms)).map_err(CoreError::storage)?;
        let next = store.records_generation().map_err(CoreError::storage)?;
        Ok(next.map(|started| started + IDEMPOTENCY_WINDOW_MS))
    }

    /// Counters held in memory now (the rest are only in storage).
    #[must_use]
    pub fn cached_counters(&self) -> usize {
        self.counters.cached_len()
    }

    /// What the shard reports about itself for `/v1/stats`. The cache's figures are the
    /// index's when it is loaded, and storage's count otherwise: loading the index here would
    /// have a shard that serves no cache op (or one just restarted) hold it, and free it, for
    /// every poll of the statistics.
    ///
    /// # Errors
    /// [`CoreError::StorageUnavailable`] when counting the stored counters or the cache
    /// entries fails.
    pub fn stats(&mut self, store: &impl ShardStore, now_ms: u64) -> Result<ShardStats, CoreError> {
        let (cache_entries, cache_bytes) = self.cache.figures(store)?;
        let (keys, stored_counters) = store.count_counters(now_ms).map_err(CoreError::storage)?;
        Ok(ShardStats {
            calls: self.calls,
            groups: self.groups,
            // Counted by the Durable Object, which keeps the groups; it fills it in.
            overloaded: 0,
            ops: self.ops,
            keys,
            stored_counters,
            cache_entries,
            cache_bytes,
            evictions: self.cache.evictions(),
            reclaimed: self.reclaimed + self.cache.lapsed(),
            commands: self.commands,
            counters_in_memory: self.cached_counters() as u64,
            // Counted by the store, which the engine does not see into; the caller fills them.
            rows_read: 0,
            rows_written: 0,
            keys_to_move: 0,
        })
    }

    /// Forgets what memory holds of `keys`, whose rows changed outside the engine (taken over
    /// from another shard, imported), so that the next op reads storage: their counters and,
    /// when `entries_stored` says cache entries were among the rows, the cache index as a
    /// whole, which does not know their sizes.
    pub fn forget_keys<'a>(
        &mut self,
        keys: impl IntoIterator<Item = (&'a Namespace, &'a Key)>,
        entries_stored: bool,
    ) {
        for (ns, key) in keys {
            self.counters.forget(ns, key);
        }
        if entries_stored {
            self.cache.unload();
        }
    }

    /// Forgets `keys`, whose rows storage has just deleted (handed over to another shard):
    /// their counters and their places in the cache index, which keeps the rest, so that a
    /// shard handing keys away never rescans its entries.
    pub fn forget_released<'a>(&mut self, keys: impl IntoIterator<Item = (&'a Namespace, &'a Key)>) {
        for (ns, key) in keys {
            self.counters.forget(ns, key);
            self.cache.forget_entry(ns, key);
        }
    }

    /// A call's view of `store`, with the counters its ops name that memory does not hold read
    /// in one go: a flush or batch over many keys reads storage once instead of once per key.
    fn read_ahead<'s, S: ShardStore>(&self, store: &'s S, calls: &[ShardCall]) -> PendingWrites<'s, S> {
        let pending = PendingWrites::over(store);
        if calls.len() > 1 {
            let counters = calls.iter().filter(|call| !call.op.is_cache()).map(|call| call.op.target());
            pending.prefetch(self.counters.uncached(counters));
        }
        pending
    }

    /// Runs one call at `now_ms`: a keyed write seen before is answered from its record.
    fn execute_call<S: ShardTables>(
        &mut self,
        store: &PendingWrites<S>,
        call: &ShardCall,
        now_ms: u64,
    ) -> OpResult {
        if let Err(error) = self.owner_permits(store, call, now_ms) {
            self.ops += 1;
            return OpResult::Failed { error };
        }
        let Some(key) = call.idempotency_key.as_ref().filter(|_| call.op.is_write()) else {
            return self.execute(store, call, now_ms);
        };
        match idempotency::recall(store, key, &call.op, now_ms) {
            Err(error) => {
                self.ops += 1;
                OpResult::Failed { error }
            }
            Ok(Recall::Replay(first)) => {
                self.ops += 1;
                OpResult::Replayed { first: Box::new(first) }
            }
            Ok(Recall::Apply) => {
                let result = self.execute(store, call, now_ms);
                if matches!(result, OpResult::Failed { .. }) {
                    return result;
                }
                // The write is applied, and answered so whatever becomes of its record: a failed
                // answer would invite a plain retry, which would apply it again. In a call the
                // record only joins the pending writes; the commit stores it, and reports one it
                // cannot store (see `group_commit`).
                let _ = idempotency::remember(store, key, &call.op, &result, now_ms);
                result
            }
        }
    }

    /// Whether a counter's owner key lets `call` through (see [`owner`]); checked before a
    /// replay too, so a refused caller learns nothing from another's record.
    fn owner_permits<S: ShardTables>(
        &mut self,
        store: &PendingWrites<S>,
        call: &ShardCall,
        now_ms: u64,
    ) -> Result<(), CoreError> {
        if call.operator || !owner::may_bind(&call.op) {
            return Ok(());
        }
        let (ns, key) = call.op.target();
        owner::permits(self.counters.current(store, ns, key, now_ms)?.as_ref(), &call.op)
    }

    /// Runs one op at `now_ms`; a refused op reports its error and changes nothing.
    fn execute<S: ShardTables>(
        &mut self,
        store: &PendingWrites<S>,
        call: &ShardCall,
        now_ms: u64,
    ) -> OpResult {
        // Cache entries are not buffered in a call (a put carries its value once): their ops
        // go to the store itself.
        let entries = store.store();
        let op = &call.op;
        self.ops += 1;
        self.commands.count(op);
        let (ns, key) = op.target();
        let day = call.visit.as_ref().map(|visit| visit.day);
        let result = match op {
            ShardOp::Get { .. } => self.counters.get(store, ns, key, now_ms),
            ShardOp::Incr { by, ttl, .. } => self
                .counters
                .write(store, ns, key, CounterWrite::Add(*by, day), *ttl, now_ms)
                .and_then(|result| count_visitors(store, call, result, now_ms)),
            ShardOp::Decr { by, ttl, .. } => self
                .counters
                .write(store, ns, key, CounterWrite::Subtract(*by, day), *ttl, now_ms)
                .and_then(|result| count_visitors(store, call, result, now_ms)),
            ShardOp::Set { value, ttl, .. } => {
                self.counters.write(store, ns, key, CounterWrite::Set(*value), *ttl, now_ms)
            }
            ShardOp::Delete { .. } => self.counters.delete(store, ns, key, now_ms),
            ShardOp::CacheGet { .. } => self.cache.get(entries, ns, key, now_ms),
            ShardOp::CachePut { value, content_type, ttl, .. } => {
                self.cache.put(entries, ns, key, value, content_type.as_str(), *ttl, now_ms)
            }
            ShardOp::CacheDelete { .. } => self.cache.delete(entries, ns, key, now_ms),
            ShardOp::Create { value, settings, admin_key, ttl, .. } => {
                self.counters.create(store, ns, key, *value, *settings, admin_key.as_deref(), *ttl, now_ms)
            }
            ShardOp::Guarded { change, guard, ttl, .. } => {
                self.counters.guarded(store, ns, key, *change, guard, *ttl, now_ms)
            }
            ShardOp::Info { .. } => self.counters.info(store, ns, key, now_ms),
            ShardOp::Days { from, to, unique, .. } => self
                .counters
                .current(store, ns, key, now_ms)
                .and_then(|counter| days_read::tally(store, ns, key, counter.as_ref(), (*from, *to), *unique))
                .map(|answer| OpResult::Days(Box::new(answer))),
        };
        result.unwrap_or_else(|error| OpResult::Failed { error })
    }
}

/// After a counted write that applied (`result`), counts the call's visitors in its day; not
/// when that day's salt is already gone (a count sent days late): a new salt would count them
/// again.
fn count_visitors(
    store: &impl VisitStore,
    call: &ShardCall,
    result: OpResult,
    now_ms: u64,
) -> Result<OpResult, CoreError> {
    let visit = call.visit.as_ref().filter(|visit| visit.day >= visit_table::oldest_salt_day(now_ms));
    if let (OpResult::Value { .. }, Some(visit)) = (&result, visit) {
        let (ns, key) = call.op.target();
        store.add_visitors(ns, key, visit.day, &visit.visitors).map_err(CoreError::storage)?;
    }
    Ok(result)
}

/// Runs `writes` in one transaction of `store` when any of `calls` writes; a call of reads only
/// needs none, and skips its cost.
fn in_transaction<S: ShardStore>(
    store: &S,
    calls: &[ShardCall],
    writes: impl FnOnce() -> StoreResult<Vec<OpResult>>,
) -> StoreResult<Vec<OpResult>> {
    if calls.iter().any(|call| call.op.is_write()) {
        store.atomically(writes)
    } else {
        writes()
    }
}

/// When what `call` writes lapses: its TTL, its idempotency record's window, or the salt of
/// the day its visitors were counted in.
fn lapses_at(call: &ShardCall, now_ms: u64) -> Option<u64> {
    let ttl = call.op.ttl().map(|seconds| now_ms + u64::from(seconds) * 1000);
    let record =
        call.idempotency_key.as_ref().filter(|_| call.op.is_write()).map(|_| now_ms + IDEMPOTENCY_WINDOW_MS);
    let salt =
        call.visit.as_ref().filter(|v| !v.visitors.is_empty()).map(|v| visit_table::salt_lapses_at(v.day));
    [ttl, record, salt].into_iter().flatten().min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::memory_store::MemoryStore as MapStore;
    use crate::{CoreError, Key, Namespace};

    #[test]
    fn counters_and_cache_entries_with_one_name_are_separate() {
        let store = MapStore::default();
        let mut engine = ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 });
        // One call's view of the store: its counter writes are seen by its later ops.
        let call = PendingWrites::over(&store);
        let (ns, key) = (Namespace::new("n").unwrap(), Key::new("k").unwrap());
        let incr = ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: 3, ttl: None };
        let put = ShardOp::CachePut {
            ns: ns.clone(),
            key: key.clone(),
            value: b"v".to_vec(),
            content_type: crate::ContentType::new("text/plain").unwrap(),
            ttl: None,
        };
        assert_eq!(
            engine.execute(&call, &ShardCall::from(incr.clone()), 0),
            OpResult::Value { value: 3, exists: true, version: 1 }
        );
        assert_eq!(engine.execute(&call, &ShardCall::from(put.clone()), 0), OpResult::Stored);
        assert_eq!(
            engine.execute(&call, &ShardOp::Delete { ns: ns.clone(), key: key.clone() }.into(), 0),
            OpResult::Deleted { deleted: true }
        );
        assert_eq!(
            engine.execute(&call, &ShardOp::CacheGet { ns, key }.into(), 0),
            OpResult::Entry { value: b"v".to_vec(), content_type: "text/plain".into() }
        );
        assert_eq!(engine.stats(&store, 0).unwrap().ops, 4);
    }

    #[test]
    fn refused_ops_report_their_error() {
        let store = MapStore::default();
        let mut engine = ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 });
        let op = ShardOp::CacheGet { ns: Namespace::new("n").unwrap(), key: Key::new("k").unwrap() };
        assert_eq!(
            engine.execute(&PendingWrites::over(&store), &ShardCall::from(op.clone()), 0),
            OpResult::Failed { error: CoreError::NotFound }
        );
    }

    fn names(key: &str) -> (Namespace, Key) {
        (Namespace::new("n").unwrap(), Key::new(key).unwrap())
    }

    fn request(ops: Vec<ShardCall>) -> ShardRequest {
        ShardRequest { ops, answer_budget: None, receipt: None, placed: None }
    }

    #[test]
    fn a_keyed_create_retried_with_a_fresh_admin_key_is_answered_the_first() {
        let store = MapStore::default();
        let mut engine = ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 });
        let (ns, key) = names("owned");
        let create = |admin_key: &str, value| ShardCall {
            op: ShardOp::Create {
                ns: ns.clone(),
                key: key.clone(),
                value,
                settings: crate::shard::settings::CounterSettings::default(),
                admin_key: Some(admin_key.to_owned()),
                ttl: None,
            },
            idempotency_key: Some(crate::IdempotencyKey::new("create-once-0123456789").unwrap()),
            operator: false,
            visit: None,
            count_visitor: false,
        };
        let first = engine.run(&store, &request(vec![create("first-key", 5)]), 0).response.results;
        assert_eq!(first, vec![OpResult::Created { value: 5, version: 1, admin_key: "first-key".into() }]);
        let retry = engine.run(&store, &request(vec![create("second-key", 5)]), 10).response.results;
        assert_eq!(retry, vec![OpResult::Replayed { first: Box::new(first[0].clone()) }]);
        // Another request under the same idempotency key is still refused.
        let other = engine.run(&store, &request(vec![create("third-key", 6)]), 20).response.results;
        assert_eq!(other, vec![OpResult::Failed { error: CoreError::IdempotencyMismatch }]);
    }

    #[test]
    fn a_request_answers_when_the_first_thing_it_wrote_lapses() {
        let store = MapStore::default();
        let mut engine = ShardEngine::new(CacheBounds { bytes: 10_000, entries: 10 });
        let (ns, key) = names("a");
        let with_ttl = ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: 1, ttl: Some(60) };
        let keyed = ShardCall {
            op: ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: 1, ttl: None },
            idempotency_key: Some(crate::IdempotencyKey::new("once").unwrap()),
            operator: false,
            visit: None,
            count_visitor: false,
        };
        let read = ShardOp::Get { ns, key };
        let ran = engine.run(&store, &request(vec![read.clone().into()]), 1_000);
        assert_eq!(ran.reclaim_by, None, "a read writes nothing that lapses");
        let ran = engine.run(&store, &request(vec![keyed.clone()]), 1_000);
        assert_eq!(ran.reclaim_by, Some(1_000 + IDEMPOTENCY_WINDOW_MS));
        let ran = engine.run(&store, &request(vec![keyed, with_ttl.into(), read.into()]), 2_000);
        assert_eq!(ran.reclaim_by, Some(62_000), "the earliest of the TTL and the record");
        assert_eq!(ran.response.results.len(), 3);
        assert_eq!(engine.stats(&store, 2_000).unwrap().calls, 3);
    }

    #[test]
    fn one_expiry_function_reclaims_counters_entries_and_records_and_names_the_next() {
        let store = MapStore::default();
        let mut engine = ShardEngine::new(CacheBounds { bytes: 10_000, entries: 10 });
        let (ns, key) = names("short");
        let put = ShardOp::CachePut {
            ns: ns.clone(),
            key: key.clone(),
            value: b"v".to_vec(),
            content_type: crate::ContentType::new("text/plain").unwrap(),
            ttl: Some(10),
        };
        let keyed = ShardCall {
            op: ShardOp::Incr { ns: ns.clone(), key: Key::new("long").unwrap(), by: 1, ttl: Some(120) },
            idempotency_key: Some(crate::IdempotencyKey::new("k1").unwrap()),
            operator: false,
            visit: None,
            count_visitor: false,
        };
        let short = ShardOp::Incr { ns, key, by: 1, ttl: Some(5) };
        engine.run(&store, &request(vec![short.into(), put.into(), keyed]), 0);
        assert_eq!(engine.reclaim_expired(&store, 1_000), Ok(Some(5_000)));
        assert_eq!(engine.reclaim_expired(&store, 5_000), Ok(Some(10_000)));
        assert_eq!(engine.reclaim_expired(&store, 10_000), Ok(Some(120_000)));
        assert_eq!(engine.reclaim_expired(&store, 120_000), Ok(Some(IDEMPOTENCY_WINDOW_MS)));
        // The record's generation is set aside a window after it began, and dropped a window
        // after that.
        let window = IDEMPOTENCY_WINDOW_MS;
        assert_eq!(engine.reclaim_expired(&store, window), Ok(Some(2 * window)));
        assert_eq!(store.earlier_records.borrow().len(), 1);
        assert_eq!(engine.reclaim_expired(&store, 2 * window), Ok(None));
        let stats = engine.stats(&store, 2 * window).unwrap();
        assert_eq!((stats.reclaimed, stats.keys, stats.stored_counters, stats.cache_entries), (3, 0, 0, 0));
        assert!(store.records.borrow().is_empty() && store.earlier_records.borrow().is_empty());
    }

    #[test]
    fn a_record_is_kept_its_whole_window_whichever_generation_it_falls_in() {
        let store = MapStore::default();
        let mut engine = ShardEngine::new(CacheBounds { bytes: 10_000, entries: 10 });
        let window = IDEMPOTENCY_WINDOW_MS;
        let keyed = |name: &str| ShardCall {
            op: ShardOp::Incr { ns: names("n").0, key: Key::new(name).unwrap(), by: 1, ttl: None },
            idempotency_key: Some(crate::IdempotencyKey::new(name).unwrap()),
            operator: false,
            visit: None,
            count_visitor: false,
        };
        // A generation that began long ago while nothing was stored: the first record written
        // since is set aside at the next alarm, still replays until its window ends, and is
        // dropped at the alarm after, a window on.
        store.records_since_ms.set(1);
        let written_at = 5 * window;
        engine.run(&store, &request(vec![keyed("late")]), written_at);
        assert_eq!(engine.reclaim_expired(&store, written_at + 1), Ok(Some(written_at + 1 + window)));
        assert_eq!((store.records.borrow().len(), store.earlier_records.borrow().len()), (0, 1));
        let resent = engine.run(&store, &request(vec![keyed("late")]), written_at + window - 1);
        assert!(matches!(resent.response.results[0], OpResult::Replayed { .. }), "{resent:?}");
        assert_eq!(engine.reclaim_expired(&store, written_at + window), Ok(Some(written_at + 1 + window)));
        assert_eq!(store.earlier_records.borrow().len(), 1, "not before the generation's turn");
        assert_eq!(engine.reclaim_expired(&store, written_at + 1 + window), Ok(None));
        assert!(store.earlier_records.borrow().is_empty());
    }

    #[test]
    fn an_alarm_reclaims_a_page_and_says_more_has_lapsed() {
        let store = MapStore::default();
        let mut engine = ShardEngine::new(CacheBounds { bytes: 10_000, entries: 10 });
        let lapsing = RECLAIM_PAGE + 10;
        let ops = (0..lapsing)
            .map(|i| ShardOp::Incr {
                ns: names("n").0,
                key: Key::new(&format!("k{i}")).unwrap(),
                by: 1,
                ttl: Some(1),
            })
            .map(ShardCall::from)
            .collect();
        engine.run(&store, &request(ops), 0);
        // A full page: what is left lapsed already, so the next alarm is due at once (and the
        // schedule keeps it its gap away).
        assert_eq!(engine.reclaim_expired(&store, 5_000), Ok(Some(1_000)));
        assert_eq!(engine.stats(&store, 5_000).unwrap().stored_counters, 10);
        assert_eq!(engine.reclaim_expired(&store, 5_000), Ok(None));
        assert_eq!(engine.stats(&store, 5_000).unwrap().reclaimed, lapsing);
    }

    #[test]
    fn a_storage_failure_while_reclaiming_is_an_error_not_a_schedule() {
        let store = MapStore::default();
        let mut engine = ShardEngine::new(CacheBounds { bytes: 10_000, entries: 10 });
        store.broken.set(true);
        assert!(matches!(engine.reclaim_expired(&store, 0), Err(CoreError::StorageUnavailable { .. })));
        assert!(engine.stats(&store, 0).is_err());
    }

    fn put(at: u64, name: &str, engine: &mut ShardEngine, store: &MapStore) {
        let (ns, key) = names(name);
        let content_type = crate::ContentType::new("text/plain").unwrap();
        let put = ShardOp::CachePut { ns, key, value: b"v".to_vec(), content_type, ttl: None };
        engine.run(store, &request(vec![put.into()]), at);
    }

    #[test]
    fn a_restarted_shard_rebuilds_its_cache_index_only_when_first_needed() {
        let store = MapStore::default();
        let bounds = CacheBounds { bytes: 10_000, entries: 2 };
        let mut first = ShardEngine::new(bounds);
        for (at, name) in [(1, "a"), (2, "b"), (3, "c")] {
            put(at, name, &mut first, &store);
        }
        // Two entries fit, and the third evicted the oldest, "a".
        assert_eq!(store.entry_names(), ["n/b", "n/c"]);

        let scans = store.entry_scans.get();

        // A restart that serves counters reads no entry.
        let mut second = ShardEngine::new(bounds);
        let (ns, key) = names("k");
        let incr = ShardOp::Incr { ns, key, by: 1, ttl: None };
        let ran = second.run(&store, &request(vec![incr.into()]), 4);
        assert_eq!(ran.response.results[0], OpResult::Value { value: 1, exists: true, version: 1 });
        assert_eq!(store.entry_scans.get(), scans);
        // A cache read needs its own row alone: it fails while storage does, then answers,
        // and neither reads every entry.
        let read = || {
            let (ns, key) = names("c");
            ShardOp::CacheGet { ns, key }
        };
        store.broken.set(true);
        let ran = second.run(&store, &request(vec![read().into()]), 5);
        assert!(matches!(
            ran.response.results[0],
            OpResult::Failed { error: CoreError::StorageUnavailable { .. } }
        ));
        store.broken.set(false);
        for at in [6, 7] {
            let ran = second.run(&store, &request(vec![read().into()]), at);
            assert!(matches!(ran.response.results[0], OpResult::Entry { .. }));
        }
        assert_eq!(store.entry_scans.get(), scans);
        let stats = second.stats(&store, 7).unwrap();
        assert_eq!((stats.cache_entries, stats.evictions), (2, 0));
        // The first write rebuilds the index, once, which keeps the bounds: one more entry
        // evicts the least recently used.
        put(8, "d", &mut second, &store);
        assert_eq!(store.entry_scans.get(), scans + 1);
        assert_eq!(store.entry_names(), ["n/c", "n/d"]);

        // The stats count storage without loading the index.
        let mut third = ShardEngine::new(CacheBounds { bytes: 10_000, entries: 1 });
        assert_eq!(third.stats(&store, 9).unwrap().cache_entries, 2);
        assert_eq!(store.entry_scans.get(), scans + 1, "the stats scanned no entry");
        // A lowered bound keeps the newest and deletes the rest from storage, when an op that
        // changes entries first looks.
        let (ns, key) = names("absent");
        third.run(&store, &request(vec![ShardOp::CacheDelete { ns, key }.into()]), 9);
        assert_eq!(third.stats(&store, 9).unwrap().evictions, 1);
        assert_eq!(store.entry_names(), ["n/d"]);
    }

    #[test]
    fn keys_handed_away_leave_the_cache_index_without_a_rescan_and_arrived_keys_rebuild_it() {
        let store = MapStore::default();
        let mut engine = ShardEngine::new(CacheBounds { bytes: 10_000, entries: 10 });
        for (at, name) in [(1, "a"), (2, "b"), (3, "c")] {
            put(at, name, &mut engine, &store);
        }
        let charged = engine.stats(&store, 3).unwrap().cache_bytes;
        let scans = store.entry_scans.get();
        // "a" and "b" are handed over: their rows are deleted outside the engine.
        let (gone_a, gone_b) = (names("a"), names("b"));
        for (ns, key) in [&gone_a, &gone_b] {
            store.remove_entry(ns, key).unwrap();
        }
        engine.forget_released([(&gone_a.0, &gone_a.1), (&gone_b.0, &gone_b.1)]);
        let stats = engine.stats(&store, 4).unwrap();
        assert_eq!(stats.cache_entries, 1, "the index holds what storage holds");
        assert_eq!(stats.cache_bytes, charged / 3, "and charges what it holds");
        assert_eq!(store.entry_scans.get(), scans, "and read no entry to learn it");
        // A key taken over (its entry stored outside the engine, or left as it was): the index
        // is rebuilt, once, when next needed, and still finds the entry it held.
        let content_type = crate::ContentType::new("text/plain").unwrap();
        let arrived = names("d");
        store.save_entry(&arrived.0, &arrived.1, b"v", content_type.as_str(), None, 5).unwrap();
        let kept = names("c");
        engine.forget_keys([(&arrived.0, &arrived.1), (&kept.0, &kept.1)], true);
        assert_eq!(engine.stats(&store, 6).unwrap().cache_entries, 2, "counted by storage");
        assert_eq!(store.entry_scans.get(), scans);
        let (ns, key) = names("absent");
        engine.execute(&PendingWrites::over(&store), &ShardOp::CacheDelete { ns, key }.into(), 7);
        assert_eq!(store.entry_scans.get(), scans + 1);
        let read = ShardOp::CacheGet { ns: kept.0, key: kept.1 };
        assert!(matches!(
            engine.execute(&PendingWrites::over(&store), &ShardCall::from(read.clone()), 7),
            OpResult::Entry { .. }
        ));
        assert_eq!(engine.stats(&store, 8).unwrap().cache_entries, 2, "and by the index");
    }

    #[test]
    fn the_alarm_leaves_an_unloaded_cache_index_alone_and_reclaims_once_a_write_loads_it() {
        let store = MapStore::default();
        let bounds = CacheBounds { bytes: 10_000, entries: 10 };
        let mut first = ShardEngine::new(bounds);
        let cache_put = |name: &str, ttl: Option<u32>| {
            let (ns, key) = names(name);
            let content_type = crate::ContentType::new("text/plain").unwrap();
            ShardCall::from(ShardOp::CachePut { ns, key, value: b"v".to_vec(), content_type, ttl })
        };
        first.run(&store, &request(vec![cache_put("short", Some(1)), cache_put("later", Some(60))]), 0);
        let mut restarted = ShardEngine::new(bounds);
        let scans = store.entry_scans.get();
        assert_eq!(restarted.reclaim_expired(&store, 1_000), Ok(None));
        assert_eq!(store.entry_scans.get(), scans, "the alarm read no entry");
        assert_eq!(store.entry_names().len(), 2);
        // The first write loads the index, which drops what expired meanwhile, and asks for
        // the alarm by the next expiry; so does every call until that alarm runs, in case
        // setting it failed.
        let ran = restarted.run(&store, &request(vec![cache_put("other", None)]), 1_001);
        assert_eq!(ran.reclaim_by, Some(60_000));
        assert_eq!(store.entry_names(), ["n/later", "n/other"]);
        assert_eq!(restarted.stats(&store, 1_001).unwrap().reclaimed, 1);
        let (ns, key) = names("later");
        let read = request(vec![ShardOp::CacheGet { ns, key }.into()]);
        assert_eq!(restarted.run(&store, &read, 1_002).reclaim_by, Some(60_000));
        assert_eq!(restarted.reclaim_expired(&store, 60_000), Ok(None));
        assert_eq!(store.entry_names(), ["n/other"]);
        assert_eq!(restarted.stats(&store, 60_000).unwrap().reclaimed, 2);
        assert_eq!(restarted.run(&store, &read, 60_001).reclaim_by, None);
    }
}

#[cfg(test)]
mod receipt_tests {
    use super::*;
    use crate::shard::memory_store::MemoryStore as MapStore;
    use crate::{Key, Namespace};

    fn engine() -> ShardEngine {
        ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 })
    }

    fn incr(key: &str, by: i64) -> ShardCall {
        ShardOp::Incr { ns: Namespace::new("n").unwrap(), key: Key::new(key).unwrap(), by, ttl: None }.into()
    }

    fn receipted(ops: Vec<ShardCall>, receipt: &str) -> ShardRequest {
        ShardRequest {
            ops,
            answer_budget: None,
            receipt: Some(IdempotencyKey::new(receipt).unwrap()),
            placed: None,
        }
    }

    fn value(engine: &mut ShardEngine, store: &MapStore, key: &str) -> i64 {
        let read = ShardOp::Get { ns: Namespace::new("n").unwrap(), key: Key::new(key).unwrap() };
        let request =
            ShardRequest { ops: vec![read.into()], answer_budget: None, receipt: None, placed: None };
        match &engine.run(store, &request, 0).response.results[0] {
            OpResult::Value { value, .. } => *value,
            other => panic!("{other:?}"),
        }
    }

    fn applied(result: &OpResult) -> bool {
        matches!(result.clone().unwrap_replay().0, OpResult::Value { .. })
    }

    fn plain(ops: Vec<ShardCall>) -> ShardRequest {
        ShardRequest { ops, answer_budget: None, receipt: None, placed: None }
    }

    fn values(response: &ShardResponse) -> Vec<i64> {
        response
            .results
            .iter()
            .map(|result| match result {
                OpResult::Value { value, .. } => *value,
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn a_group_answers_each_request_its_own_values_and_writes_a_key_once() {
        let store = MapStore::default();
        let mut shard = engine();
        let requests =
            [plain(vec![incr("a", 1)]), plain(vec![incr("a", 2), incr("b", 1)]), plain(vec![incr("a", 3)])];
        let grouped = shard.run_group(&store, &requests.iter().collect::<Vec<_>>(), 1_000);
        let answers: Vec<Vec<i64>> = grouped.responses.iter().map(values).collect();
        assert_eq!(answers, [vec![1], vec![3, 1], vec![6]], "each op sees the ops before it, in order");
        assert_eq!(store.rows_written.get(), 2, "one row for `a`, one for `b`");
        let stats = shard.stats(&store, 1_000).unwrap();
        assert_eq!((stats.calls, stats.groups, stats.ops), (3, 1, 4));
    }

    #[test]
    fn a_group_whose_writes_fail_fails_every_request_and_applies_nothing() {
        let store = MapStore::default();
        let mut shard = engine();
        store.counter_saves_left.set(Some(0));
        let requests = [plain(vec![incr("a", 1)]), plain(vec![incr("b", 1)])];
        let grouped = shard.run_group(&store, &requests.iter().collect::<Vec<_>>(), 1_000);
        for response in &grouped.responses {
            assert!(matches!(response.results[..], [OpResult::Failed { .. }]), "{response:?}");
        }
        store.counter_saves_left.set(None);
        assert_eq!([value(&mut shard, &store, "a"), value(&mut shard, &store, "b")], [0, 0]);
    }

    #[test]
    fn a_receipted_request_writes_one_record_and_applies_once_however_often_it_is_sent() {
        let store = MapStore::default();
        let mut shard = engine();
        let request = receipted(vec![incr("a", 5), incr("b", 2), incr("c", -1)], "flush-1");
        let first = shard.run(&store, &request, 1_000);
        assert!(first.response.results.iter().all(|r| matches!(r, OpResult::Value { .. })), "{first:?}");
        assert_eq!(store.rows_written.get(), 4, "three counters and one record");
        assert_eq!(store.records.borrow().len(), 1);
        assert_eq!(first.reclaim_by, Some(1_000 + IDEMPOTENCY_WINDOW_MS));
        for at in [2_000, 3_000] {
            let again = shard.run(&store, &request, at);
            let replayed = again.response.results.iter().all(|r| matches!(r, OpResult::Replayed { .. }));
            assert!(replayed, "{again:?}");
            assert!(again.response.results.iter().all(applied));
        }
        assert_eq!(store.rows_written.get(), 4, "a resend that applies nothing writes nothing");
        assert_eq!([value(&mut shard, &store, "a"), value(&mut shard, &store, "b")], [5, 2]);
        assert_eq!(value(&mut shard, &store, "c"), -1);
        // A restarted shard remembers it too: the record is in storage, not in memory.
        let mut restarted = engine();
        let again = restarted.run(&store, &request, 4_000);
        assert!(again.response.results.iter().all(|r| matches!(r, OpResult::Replayed { .. })));
        assert_eq!(value(&mut restarted, &store, "a"), 5);
        // Past the window the receipt is forgotten, as per-op keys are.
        let late = restarted.run(&store, &request, 1_000 + IDEMPOTENCY_WINDOW_MS);
        assert!(late.response.results.iter().all(|r| matches!(r, OpResult::Value { .. })));
    }

    #[test]
    fn an_op_left_unapplied_runs_again_on_the_resend_and_only_it() {
        let store = MapStore::default();
        let mut shard = engine();
        let set = ShardOp::Set {
            ns: Namespace::new("n").unwrap(),
            key: Key::new("x").unwrap(),
            value: i64::MAX,
            ttl: None,
        };
        shard.run(
            &store,
            &ShardRequest { ops: vec![set.into()], answer_budget: None, receipt: None, placed: None },
            0,
        );
        let request = receipted(vec![incr("a", 1), incr("x", 1)], "flush-2");
        let first = shard.run(&store, &request, 1_000).response.results;
        assert!(matches!(first[0], OpResult::Value { value: 1, .. }));
        assert_eq!(first[1], OpResult::Failed { error: CoreError::Overflow });
        let decr = ShardOp::Decr {
            ns: Namespace::new("n").unwrap(),
            key: Key::new("x").unwrap(),
            by: 10,
            ttl: None,
        };
        shard.run(
            &store,
            &ShardRequest { ops: vec![decr.into()], answer_budget: None, receipt: None, placed: None },
            1_500,
        );
        let second = shard.run(&store, &request, 2_000).response.results;
        assert!(
            matches!(&second[0], OpResult::Replayed { first } if matches!(**first, OpResult::Value { value: 1, .. }))
        );
        assert!(matches!(second[1], OpResult::Value { value, .. } if value == i64::MAX - 9));
        let third = shard.run(&store, &request, 3_000).response.results;
        assert!(third.iter().all(|r| matches!(r, OpResult::Replayed { .. })), "{third:?}");
        assert_eq!([value(&mut shard, &store, "a"), value(&mut shard, &store, "x")], [1, i64::MAX - 9]);
    }

    #[test]
    fn a_send_whose_writes_fail_applies_nothing_and_the_resend_applies_it_once() {
        let store = MapStore::default();
        let mut shard = engine();
        let request = receipted(vec![incr("a", 3), incr("b", 4)], "flush-3");
        store.writes_fail.set(true);
        let failed = shard.run(&store, &request, 1_000).response.results;
        let unavailable = failed
            .iter()
            .all(|r| matches!(r, OpResult::Failed { error: CoreError::StorageUnavailable { .. } }));
        assert!(unavailable, "{failed:?}");
        store.writes_fail.set(false);
        assert!(shard
            .run(&store, &request, 2_000)
            .response
            .results
            .iter()
            .all(|r| matches!(r, OpResult::Value { .. })));
        assert!(shard
            .run(&store, &request, 3_000)
            .response
            .results
            .iter()
            .all(|r| matches!(r, OpResult::Replayed { .. })));
        assert_eq!([value(&mut shard, &store, "a"), value(&mut shard, &store, "b")], [3, 4]);
    }

    #[test]
    fn a_receipt_reused_for_other_ops_or_on_ops_it_cannot_carry_changes_nothing() {
        let store = MapStore::default();
        let mut shard = engine();
        shard.run(&store, &receipted(vec![incr("a", 1)], "flush-4"), 1_000);
        let other = shard.run(&store, &receipted(vec![incr("a", 2)], "flush-4"), 2_000).response.results;
        assert_eq!(other, [OpResult::Failed { error: CoreError::IdempotencyMismatch }]);
        let read = ShardOp::Get { ns: Namespace::new("n").unwrap(), key: Key::new("a").unwrap() };
        let mixed =
            shard.run(&store, &receipted(vec![incr("a", 1), read.into()], "flush-5"), 2_000).response.results;
        assert!(mixed.iter().all(|r| matches!(r, OpResult::Failed { error: CoreError::InvalidOp { .. } })));
        let past = vec![incr("a", 1); receipt::MAX_RECEIPT_OPS + 1];
        let refused = shard.run(&store, &receipted(past, "flush-6"), 2_000).response.results;
        assert!(refused.iter().all(
            |r| *r == OpResult::Failed { error: CoreError::TooManyOps { max: receipt::MAX_RECEIPT_OPS } }
        ));
        assert_eq!(value(&mut shard, &store, "a"), 1);
        assert_eq!(store.records.borrow().len(), 1, "only the first request left a record");
    }

    #[test]
    fn an_op_applied_before_stays_replayed_when_this_send_fails_to_store_its_key() {
        let store = MapStore::default();
        let mut shard = engine();
        let (ns, key) = (Namespace::new("n").unwrap(), Key::new("a").unwrap());
        let plain = |ops: Vec<ShardOp>| ShardRequest {
            ops: ops.into_iter().map(Into::into).collect(),
            answer_budget: None,
            receipt: None,
            placed: None,
        };
        let set = ShardOp::Set { ns: ns.clone(), key: key.clone(), value: i64::MAX - 1, ttl: None };
        shard.run(&store, &plain(vec![set]), 0);
        // The same key twice (two TTLs): the first applies, the second would overflow.
        let request = ShardRequest {
            ops: vec![
                ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: 1, ttl: None }.into(),
                ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: 1, ttl: Some(60) }.into(),
            ],
            answer_budget: None,
            receipt: Some(IdempotencyKey::new("flush-7").unwrap()),
            placed: None,
        };
        let first = shard.run(&store, &request, 1_000).response.results;
        assert!(matches!(first[0], OpResult::Value { .. }));
        assert_eq!(first[1], OpResult::Failed { error: CoreError::Overflow });
        let decr = ShardOp::Decr { ns: ns.clone(), key: key.clone(), by: 10, ttl: None };
        shard.run(&store, &plain(vec![decr]), 1_500);
        // This send runs only the second op, and storing the key fails: the first op is still
        // answered as applied by the earlier send, the second as not applied.
        store.writes_fail.set(true);
        let second = shard.run(&store, &request, 2_000).response.results;
        assert!(matches!(second[0], OpResult::Replayed { .. }), "{second:?}");
        assert!(matches!(second[1], OpResult::Failed { error: CoreError::StorageUnavailable { .. } }));
        store.writes_fail.set(false);
        let third = shard.run(&store, &request, 3_000).response.results;
        assert!(matches!(third[0], OpResult::Replayed { .. }), "{third:?}");
        assert!(matches!(third[1], OpResult::Value { value, .. } if value == i64::MAX - 9));
        assert_eq!(value(&mut shard, &store, "a"), i64::MAX - 9);
    }
}
