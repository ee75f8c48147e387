//! A shard's counters: an in-memory map in front of durable storage.
//!
//! The map answers repeated reads without touching storage; storage is the authority. A write
//! is computed, saved to storage, and only then applied to the map, so a failed save leaves
//! both unchanged and the op reports an error instead of a value it did not keep.

use std::num::NonZeroUsize;

use lru::LruCache;

use crate::hashing::KeyHashing;
use crate::shard::counter::DayCount;
use crate::shard::protocol::{CounterInfo, GuardedChange, OpResult};
use crate::shard::settings::{AdminKeyHash, CounterSettings, Guard};
use crate::{CoreError, Counter, CounterWrite, Key, Namespace, StoreResult};

/// Durable storage for counters. Storage is synchronous (a Durable Object's SQLite is), so
/// one op runs start to end without yielding and ops never interleave.
pub trait CounterStore {
    /// The stored counter, expired or not.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn load(&self, ns: &Namespace, key: &Key) -> StoreResult<Option<Counter>>;
    /// The stored counters of several keys, one answer per key in order. A store that can read
    /// many rows in one statement does so here.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn load_many(&self, keys: &[(Namespace, Key)]) -> StoreResult<Vec<Option<Counter>>> {
        keys.iter().map(|(ns, key)| self.load(ns, key)).collect()
    }
    /// Saves `counter` in place of any stored one.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn save(&self, ns: &Namespace, key: &Key, counter: &Counter) -> StoreResult<()>;
    /// Saves several counters, each in place of any stored one. A store that can write many
    /// rows in one statement does so here.
    ///
    /// # Errors
    /// A description of the storage failure; the caller's transaction undoes what was saved.
    fn save_all(&self, counters: &[(Namespace, Key, Counter)]) -> StoreResult<()> {
        counters.iter().try_for_each(|(ns, key, counter)| self.save(ns, key, counter))
    }
    /// Removes the stored counter, if any.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn remove(&self, ns: &Namespace, key: &Key) -> StoreResult<()>;
    /// Adds `day`'s count to the finished days of `ns`/`key`: a write moved the counter on to
    /// a later day (see [`crate::shard::counter`]).
    ///
    /// # Errors
    /// A description of the storage failure.
    fn finish_day(&self, ns: &Namespace, key: &Key, day: DayCount) -> StoreResult<()>;
    /// Removes counters expired by `now_ms`, looking at most at `most` of them (the first
    /// due); answers how many it removed. A store may look only at what is due, and keep when a
    /// counter is due earlier than its expiry (so that sliding an expiry writes nothing more).
    ///
    /// # Errors
    /// A description of the storage failure.
    fn remove_expired_counters(&self, now_ms: u64, most: u64) -> StoreResult<u64>;
    /// When the next stored counter is due (at or before it expires), if any has a TTL.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn next_counter_expiry(&self) -> StoreResult<Option<u64>>;
    /// Stored counters: `(live at now_ms, all including expired ones not yet removed)`. A store
    /// that cannot tell the lapsed ones without reading every counter may count them as live.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn count_counters(&self, now_ms: u64) -> StoreResult<(u64, u64)>;
}

/// Counters a shard keeps in memory: about 1.8 MB in Wasm (4.8 MB with the longest names), far
/// more keys than are hot at once.
/// Storage holds every counter; memory holds the recently used ones, so a shard's memory does
/// not grow with the number of keys it owns.
///
/// Why not more: the shards of an isolate share its 128 MB, and what a shard holds is freed
/// when the runtime evicts it, at about 0.7 µs of CPU per counter, during whatever request runs
/// next. At 100,000 per shard, a million counters held by 16 idle shards cost the next reads
/// 0.74 s of CPU (see `docs/performance.md`, "Reads over a million keys"); at this cap, at most
/// 7 ms per shard. A counter memory does not hold costs one indexed `SELECT`.
pub const DEFAULT_CACHED_COUNTERS: usize = 10_000;

#[derive(Debug)]
pub struct CounterTable {
    /// Write-through: every counter here is also in storage, so evicting one loses nothing.
    cached: LruCache<(Namespace, Key), Counter, KeyHashing>,
}

impl Default for CounterTable {
    fn default() -> Self {
        Self::new()
    }
}

impl CounterTable {
    #[must_use]
    pub fn new() -> Self {
        Self::with_capacity(DEFAULT_CACHED_COUNTERS)
    }

    /// A table that keeps at most `max_cached` counters in memory (at least one).
    #[must_use]
    pub fn with_capacity(max_cached: usize) -> Self {
        Self {
            cached: LruCache::with_hasher(
                NonZeroUsize::new(max_cached).unwrap_or(NonZeroUsize::MIN),
                KeyHashing::default(),
            ),
        }
    }

    /// Counters held in memory now.
    #[must_use]
    pub fn cached_len(&self) -> usize {
        self.cached.len()
    }

    /// Of `keys`, those memory does not hold (whose first op will read storage).
    pub fn uncached<'a>(
        &self,
        keys: impl IntoIterator<Item = (&'a Namespace, &'a Key)>,
    ) -> Vec<(Namespace, Key)> {
        keys.into_iter()
            .map(|(ns, key)| (ns.clone(), key.clone()))
            .filter(|slot| !self.cached.contains(slot))
            .collect()
    }

    /// Reads a counter; one that does not exist reads 0.
    ///
    /// # Errors
    /// [`CoreError::StorageUnavailable`] when storage fails.
    pub fn get(
        &mut self,
        store: &impl CounterStore,
        ns: &Namespace,
        key: &Key,
        now_ms: u64,
    ) -> Result<OpResult, CoreError> {
        Ok(match self.live(store, ns, key, now_ms)? {
            Some(c) => OpResult::Value { value: c.value, exists: true, version: c.version },
            None => OpResult::Value { value: 0, exists: false, version: 0 },
        })
    }

    /// Applies `write`, saving the result before it becomes visible.
    ///
    /// # Errors
    /// [`CoreError::Overflow`] or [`CoreError::StorageUnavailable`]; nothing changes then.
    pub fn write(
        &mut self,
        store: &impl CounterStore,
        ns: &Namespace,
        key: &Key,
        write: CounterWrite,
        ttl_seconds: Option<u32>,
        now_ms: u64,
    ) -> Result<OpResult, CoreError> {
        let current = self.live(store, ns, key, now_ms)?;
        let next = Counter::apply(current.as_ref(), write, ttl_seconds, now_ms)?;
        if let Some(finished) =
            current.and_then(|c| c.today).filter(|t| next.today.is_some_and(|n| n.day != t.day))
        {
            store.finish_day(ns, key, finished).map_err(CoreError::storage)?;
        }
        self.keep(store, ns, key, next)?;
        Ok(OpResult::Value { value: next.value, exists: true, version: next.version })
    }

    /// Deletes a counter, reporting whether a live one existed.
    ///
    /// # Errors
    /// [`CoreError::StorageUnavailable`] when storage fails.
    pub fn delete(
        &mut self,
        store: &impl CounterStore,
        ns: &Namespace,
        key: &Key,
        now_ms: u64,
    ) -> Result<OpResult, CoreError> {
        let existed = self.live(store, ns, key, now_ms)?.is_some();
        if existed {
            store.remove(ns, key).map_err(CoreError::storage)?;
            self.cached.pop(&(ns.clone(), key.clone()));
        }
        Ok(OpResult::Deleted { deleted: existed })
    }

    /// Creates a counter holding `value` under `settings`.
    ///
    /// # Errors
    /// [`CoreError::AlreadyExists`] while a live counter has the name, or
    /// [`CoreError::StorageUnavailable`]; nothing changes then.
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        &mut self,
        store: &impl CounterStore,
        ns: &Namespace,
        key: &Key,
        value: i64,
        settings: CounterSettings,
        admin_key: Option<&str>,
        ttl_seconds: Option<u32>,
        now_ms: u64,
    ) -> Result<OpResult, CoreError> {
        if self.live(store, ns, key, now_ms)?.is_some() {
            return Err(CoreError::AlreadyExists);
        }
        let settings = match admin_key {
            Some(admin_key) => {
                CounterSettings { admin_key_hash: Some(AdminKeyHash::of(admin_key)), ..settings }
            }
            None => settings,
        };
        let created = Counter::create(value, ttl_seconds, settings, now_ms);
        self.keep(store, ns, key, created)?;
        Ok(match admin_key {
            Some(admin_key) => {
                OpResult::Created { value, version: created.version, admin_key: admin_key.to_owned() }
            }
            None => OpResult::Value { value, exists: true, version: created.version },
        })
    }

    /// Changes an existing counter if `guard` holds for its rules, in the same turn as the
    /// check: a set or add answers the value before and after, a delete whether it deleted.
    ///
    /// # Errors
    /// [`CoreError::NotFound`] when no live counter has the name, the guard's refusal,
    /// [`CoreError::Overflow`] or [`CoreError::StorageUnavailable`]; nothing changes then.
    #[allow(clippy::too_many_arguments)]
    pub fn guarded(
        &mut self,
        store: &impl CounterStore,
        ns: &Namespace,
        key: &Key,
        change: GuardedChange,
        guard: &Guard,
        ttl_seconds: Option<u32>,
        now_ms: u64,
    ) -> Result<OpResult, CoreError> {
        let current = self.live(store, ns, key, now_ms)?.ok_or(CoreError::NotFound)?;
        guard.check(&current.rules(), change.amount())?;
        let write = match change {
            GuardedChange::Add(by) => CounterWrite::Add(by, None),
            GuardedChange::Set(value) => CounterWrite::Set(value),
            GuardedChange::Delete => return self.delete(store, ns, key, now_ms),
        };
        let next = Counter::apply(Some(&current), write, ttl_seconds, now_ms)?;
        self.keep(store, ns, key, next)?;
        Ok(OpResult::Changed { old_value: current.value, value: next.value, version: next.version })
    }

    /// The live counter under the name, if any.
    ///
    /// # Errors
    /// [`CoreError::StorageUnavailable`].
    pub fn current(
        &mut self,
        store: &impl CounterStore,
        ns: &Namespace,
        key: &Key,
        now_ms: u64,
    ) -> Result<Option<Counter>, CoreError> {
        self.live(store, ns, key, now_ms)
    }

    /// A live counter with its creation time, expiry and rules.
    ///
    /// # Errors
    /// [`CoreError::NotFound`] when no live counter has the name, or
    /// [`CoreError::StorageUnavailable`].
    pub fn info(
        &mut self,
        store: &impl CounterStore,
        ns: &Namespace,
        key: &Key,
        now_ms: u64,
    ) -> Result<OpResult, CoreError> {
        let counter = self.live(store, ns, key, now_ms)?.ok_or(CoreError::NotFound)?;
        let rules = counter.rules();
        Ok(OpResult::Info(Box::new(CounterInfo {
            value: counter.value,
            version: counter.version,
            created_ms: counter.created_ms,
            expires_at_ms: counter.expires_at_ms,
            enable_reset: rules.enable_reset,
            update_lowerbound: rules.update_lowerbound,
            update_upperbound: rules.update_upperbound,
            has_admin_key: rules.admin_key_hash.is_some(),
        })))
    }

    /// Saves `counter`, and only then lets memory hold it (see the module docs).
    fn keep(
        &mut self,
        store: &impl CounterStore,
        ns: &Namespace,
        key: &Key,
        counter: Counter,
    ) -> Result<(), CoreError> {
        store.save(ns, key, &counter).map_err(CoreError::storage)?;
        self.cached.put((ns.clone(), key.clone()), counter);
        Ok(())
    }

    /// Drops a counter from memory, so that the next op reads it from storage: for a write
    /// whose save failed after memory had taken it.
    pub fn forget(&mut self, ns: &Namespace, key: &Key) {
        self.cached.pop(&(ns.clone(), key.clone()));
    }

    /// Drops expired counters from memory (storage is reclaimed by the shard's alarm).
    pub fn forget_expired(&mut self, now_ms: u64) {
        let expired: Vec<(Namespace, Key)> =
            self.cached.iter().filter(|(_, c)| c.is_expired(now_ms)).map(|(slot, _)| slot.clone()).collect();
        for slot in expired {
            self.cached.pop(&slot);
        }
    }

    /// The live counter, loading it from storage on a miss. An expired one is dropped from
    /// memory and storage here, so expiry takes effect at once.
    fn live(
        &mut self,
        store: &impl CounterStore,
        ns: &Namespace,
        key: &Key,
        now_ms: u64,
    ) -> Result<Option<Counter>, CoreError> {
        let slot = (ns.clone(), key.clone());
        let found = match self.cached.get(&slot) {
            Some(c) => Some(*c),
            None => store.load(ns, key).map_err(CoreError::storage)?,
        };
        match found {
            Some(c) if c.is_expired(now_ms) => {
                store.remove(ns, key).map_err(CoreError::storage)?;
                self.cached.pop(&slot);
                Ok(None)
            }
            Some(c) => {
                self.cached.put(slot, c);
                Ok(Some(c))
            }
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::memory_store::MemoryStore as MapStore;

    fn names() -> (Namespace, Key) {
        (Namespace::new("pages").unwrap(), Key::new("home").unwrap())
    }

    fn incr(table: &mut CounterTable, store: &MapStore, by: i64) -> OpResult {
        let (ns, key) = names();
        table
            .write(store, &ns, &key, CounterWrite::Add(by, None), None, 0)
            .unwrap_or_else(|error| OpResult::Failed { error })
    }

    fn get(table: &mut CounterTable, store: &MapStore, now: u64) -> OpResult {
        let (ns, key) = names();
        table.get(store, &ns, &key, now).unwrap()
    }

    #[test]
    fn a_fresh_table_reads_values_saved_by_an_earlier_one() {
        let store = MapStore::default();
        let mut first = CounterTable::new();
        incr(&mut first, &store, 41);
        incr(&mut first, &store, 1);
        let mut restarted = CounterTable::new();
        assert_eq!(get(&mut restarted, &store, 0), OpResult::Value { value: 42, exists: true, version: 2 });
    }

    #[test]
    fn memory_holds_only_the_most_recent_counters_and_storage_all_of_them() {
        let store = MapStore::default();
        let mut table = CounterTable::with_capacity(10);
        let ns = Namespace::new("pages").unwrap();
        for i in 0..100 {
            let key = Key::new(&format!("k{i}")).unwrap();
            table.write(&store, &ns, &key, CounterWrite::Add(i, None), None, 0).unwrap();
            assert!(table.cached_len() <= 10);
        }
        // An evicted counter is read back from storage.
        let first = Key::new("k1").unwrap();
        assert_eq!(
            table.get(&store, &ns, &first, 0),
            Ok(OpResult::Value { value: 1, exists: true, version: 1 })
        );
    }

    #[test]
    fn a_failed_save_changes_nothing() {
        let store = MapStore::default();
        let mut table = CounterTable::new();
        incr(&mut table, &store, 1);
        store.broken.set(true);
        let result = incr(&mut table, &store, 1);
        assert!(matches!(result, OpResult::Failed { error: CoreError::StorageUnavailable { .. } }));
        store.broken.set(false);
        assert_eq!(get(&mut table, &store, 0), OpResult::Value { value: 1, exists: true, version: 1 });
    }

    #[test]
    fn overflow_leaves_the_value_unchanged() {
        let store = MapStore::default();
        let mut table = CounterTable::new();
        incr(&mut table, &store, i64::MAX);
        assert_eq!(incr(&mut table, &store, 1), OpResult::Failed { error: CoreError::Overflow });
        assert_eq!(get(&mut table, &store, 0), OpResult::Value { value: i64::MAX, exists: true, version: 1 });
    }

    #[test]
    fn expired_counters_vanish_from_memory_and_storage() {
        let store = MapStore::default();
        let mut table = CounterTable::new();
        let (ns, key) = names();
        table.write(&store, &ns, &key, CounterWrite::Set(5), Some(1), 0).unwrap();
        assert_eq!(get(&mut table, &store, 999), OpResult::Value { value: 5, exists: true, version: 1 });
        assert_eq!(get(&mut table, &store, 1_000), OpResult::Value { value: 0, exists: false, version: 0 });
        assert!(store.counters.borrow().is_empty());
    }

    fn settings(enable_reset: bool, admin: Option<&str>) -> CounterSettings {
        CounterSettings {
            enable_reset,
            update_lowerbound: -2,
            update_upperbound: 10,
            admin_key_hash: admin.map(crate::shard::settings::AdminKeyHash::of),
        }
    }

    #[test]
    fn create_refuses_a_live_name_and_keeps_the_first() {
        let store = MapStore::default();
        let mut table = CounterTable::new();
        let (ns, key) = names();
        assert_eq!(
            table.create(&store, &ns, &key, 7, settings(false, None), None, None, 5),
            Ok(OpResult::Value { value: 7, exists: true, version: 1 })
        );
        assert_eq!(
            table.create(&store, &ns, &key, 9, settings(true, None), None, None, 6),
            Err(CoreError::AlreadyExists)
        );
        let Ok(OpResult::Info(info)) = CounterTable::new().info(&store, &ns, &key, 7) else { panic!() };
        assert_eq!((info.value, info.created_ms, info.enable_reset), (7, Some(5), false));
    }

    #[test]
    fn guarded_changes_follow_the_counters_rules_and_a_refusal_changes_nothing() {
        let store = MapStore::default();
        let mut table = CounterTable::new();
        let (ns, key) = names();
        let set = |table: &mut CounterTable, guard: &Guard| {
            table.guarded(&store, &ns, &key, GuardedChange::Set(3), guard, None, 0)
        };
        assert_eq!(set(&mut table, &Guard::Reset), Err(CoreError::NotFound));
        let created = table.create(&store, &ns, &key, 1, settings(false, None), Some("admin"), None, 0);
        assert_eq!(created, Ok(OpResult::Created { value: 1, version: 1, admin_key: "admin".to_owned() }));
        assert_eq!(set(&mut table, &Guard::Reset), Err(CoreError::ResetDisabled));
        let wrong = Guard::AdminKey { hash: crate::shard::settings::AdminKeyHash::of("guess") };
        assert_eq!(set(&mut table, &wrong), Err(CoreError::WrongAdminKey));
        let right = Guard::AdminKey { hash: crate::shard::settings::AdminKeyHash::of("admin") };
        assert_eq!(set(&mut table, &right), Ok(OpResult::Changed { old_value: 1, value: 3, version: 2 }));
        let add = |table: &mut CounterTable, by| {
            table.guarded(&store, &ns, &key, GuardedChange::Add(by), &Guard::Bounds, None, 0)
        };
        assert_eq!(add(&mut table, 11), Err(CoreError::OutOfBounds { lower: -2, upper: 10 }));
        assert_eq!(add(&mut table, 10), Ok(OpResult::Changed { old_value: 3, value: 13, version: 3 }));
        assert_eq!(
            get(&mut CounterTable::new(), &store, 0),
            OpResult::Value { value: 13, exists: true, version: 3 }
        );
        let delete = table.guarded(&store, &ns, &key, GuardedChange::Delete, &right, None, 0);
        assert_eq!(delete, Ok(OpResult::Deleted { deleted: true }));
        assert_eq!(table.info(&store, &ns, &key, 0), Err(CoreError::NotFound));
    }

    #[test]
    fn a_counter_made_by_a_plain_write_follows_the_default_rules() {
        let store = MapStore::default();
        let mut table = CounterTable::new();
        let (ns, key) = names();
        table.write(&store, &ns, &key, CounterWrite::Add(1, None), None, 42).unwrap();
        let Ok(OpResult::Info(info)) = table.info(&store, &ns, &key, 43) else { panic!() };
        assert_eq!(
            (
                info.created_ms,
                info.enable_reset,
                info.update_lowerbound,
                info.update_upperbound,
                info.has_admin_key
            ),
            (Some(42), false, -1, 1, false)
        );
    }

    #[test]
    fn delete_reports_whether_a_live_counter_existed() {
        let store = MapStore::default();
        let mut table = CounterTable::new();
        let (ns, key) = names();
        assert_eq!(table.delete(&store, &ns, &key, 0), Ok(OpResult::Deleted { deleted: false }));
        incr(&mut table, &store, 1);
        assert_eq!(table.delete(&store, &ns, &key, 0), Ok(OpResult::Deleted { deleted: true }));
        assert_eq!(get(&mut table, &store, 0), OpResult::Value { value: 0, exists: false, version: 0 });
    }
}
