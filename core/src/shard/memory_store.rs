//! A shard's storage held in memory, for unit tests and benchmarks: it implements every store
//! trait the engine needs, as the worker's SQLite store does, with a switch that makes every
//! call fail.
//!
//! Rows are keyed by the placement hash of their names, so that updating a row allocates
//! nothing and a benchmark measures the engine's own work; each row keeps its names, and a
//! lookup whose names differ from the row's (a hash collision) is a miss.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};

use crate::partition::key_hash;
use crate::shard::cache_table::{entry_charge, CacheStore, EntryMeta, EntryValue, StoredEntry};
use crate::shard::counter::DayCount;
use crate::shard::idempotency::{IdempotencyRecord, IdempotencyStore, RecordScope};
use crate::shard::visit_table::{EachSketch, VisitStore, SALT_DAYS};
use crate::shard::visit_union::unions_past_bound;
use crate::shard::Atomic;
use crate::visits::day::Day;
use crate::visits::visitor::Salt;
use crate::{Counter, CounterStore, Key, Namespace, StoreResult};

/// A stored row's names.
pub type Slot = (Namespace, Key);

/// A stored cache entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredValue {
    pub value: Vec<u8>,
    pub content_type: String,
    pub expires_at_ms: Option<u64>,
    pub written_at_ms: u64,
}

/// Counters, cache entries and idempotency records in hash maps.
#[derive(Debug, Default)]
pub struct MemoryStore {
    pub counters: RefCell<HashMap<u64, (Slot, Counter)>>,
    pub entries: RefCell<HashMap<u64, (Slot, StoredValue)>>,
    /// The current generation of records, the one before it, and when the current began (see
    /// [`IdempotencyStore::records_generation`]).
    pub records: RefCell<HashMap<RecordScope, IdempotencyRecord>>,
    pub earlier_records: RefCell<HashMap<RecordScope, IdempotencyRecord>>,
    pub records_since_ms: Cell<u64>,
    /// While set, every call fails as a storage failure does.
    pub broken: Cell<bool>,
    /// While set, every write fails and reads still work (a full disk, say).
    pub writes_fail: Cell<bool>,
    /// Counter and record rows written (saved or removed) so far.
    pub rows_written: Cell<u64>,
    /// Scans of the cache entries (index rebuilds) so far.
    pub entry_scans: Cell<u64>,
    /// Reads of one counter, and reads of several at once, so far.
    pub counter_loads: Cell<u64>,
    pub counter_loads_many: Cell<u64>,
    /// While set, reads of several counters at once fail and reads of one still work.
    pub loads_many_fail: Cell<bool>,
    /// While set, this many more counter rows can be saved; the saves after them fail (a disk
    /// filling up in the middle of a commit).
    pub counter_saves_left: Cell<Option<u64>>,
    /// While set, idempotency records cannot be saved and everything else works (a full disk:
    /// an existing counter row is updated in place, a new record row needs room).
    pub records_fail: Cell<bool>,
    /// Finished days and visitor sketches by names and day, and the days' salts (see
    /// [`VisitStore`]); salts are made from a count of salts made, not at random.
    pub days: RefCell<BTreeMap<(Slot, Day), i64>>,
    pub sketches: RefCell<BTreeMap<(Slot, Day), Vec<u8>>>,
    pub salts: RefCell<BTreeMap<Day, Salt>>,
    pub salts_made: Cell<u64>,
    /// Sketches read so far (each a row read and a merge for a read of visitors).
    pub sketches_read: Cell<u64>,
    /// Kept unions of sketches by names and days, last day first (see [`VisitStore::save_union`]),
    /// and how many were read so far.
    pub unions: RefCell<BTreeMap<(Slot, Day, Day), Vec<u8>>>,
    pub unions_read: Cell<u64>,
    /// While set, a transaction keeps no copy of the tables and so cannot undo its writes: for
    /// a benchmark of the engine's own work, where no write fails and a transaction is
    /// SQLite's cost, not the engine's.
    pub without_rollback: Cell<bool>,
}

fn row(ns: &Namespace, key: &Key) -> u64 {
    key_hash(ns.as_str(), key.as_str())
}

fn same(slot: &Slot, ns: &Namespace, key: &Key) -> bool {
    slot.0 == *ns && slot.1 == *key
}

impl MemoryStore {
    fn check(&self) -> StoreResult<()> {
        if self.broken.get() {
            Err("storage is broken".into())
        } else {
            Ok(())
        }
    }

    /// Checks a write of one row, and counts it.
    fn check_write(&self) -> StoreResult<()> {
        self.check()?;
        if self.writes_fail.get() {
            return Err("storage refuses writes".into());
        }
        self.rows_written.set(self.rows_written.get() + 1);
        Ok(())
    }

    /// The names of the stored cache entries, sorted.
    #[must_use]
    pub fn entry_names(&self) -> Vec<String> {
        let mut names: Vec<String> =
            self.entries.borrow().values().map(|((ns, key), _)| format!("{ns}/{key}")).collect();
        names.sort();
        names
    }

    /// A removed counter's days and sketches go with it.
    fn forget_days(&self, slot: &Slot) {
        self.days.borrow_mut().retain(|(named, _), _| named != slot);
        self.sketches.borrow_mut().retain(|(named, _), _| named != slot);
        self.unions.borrow_mut().retain(|(named, _, _), _| named != slot);
    }

    /// The stored counter of a key, read without counting a load.
    fn stored_counter(&self, ns: &Namespace, key: &Key) -> Option<Counter> {
        let counters = self.counters.borrow();
        counters.get(&row(ns, key)).filter(|(slot, _)| same(slot, ns, key)).map(|(_, c)| *c)
    }
}

/// A transaction as SQLite's: the tables as they were are kept, and put back when the writes
/// fail.
impl Atomic for MemoryStore {
    fn atomically<T>(&self, writes: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        if self.without_rollback.get() {
            return writes();
        }
        let before = (
            self.counters.borrow().clone(),
            self.entries.borrow().clone(),
            self.records.borrow().clone(),
            self.earlier_records.borrow().clone(),
            self.records_since_ms.get(),
            (
                self.days.borrow().clone(),
                self.sketches.borrow().clone(),
                self.salts.borrow().clone(),
                self.unions.borrow().clone(),
            ),
        );
        writes().inspect_err(|_| {
            let (
                counters,
                entries,
                records,
                earlier_records,
                records_since_ms,
                (days, sketches, salts, unions),
            ) = before;
            *self.unions.borrow_mut() = unions;
            *self.days.borrow_mut() = days;
            *self.sketches.borrow_mut() = sketches;
            *self.salts.borrow_mut() = salts;
            *self.counters.borrow_mut() = counters;
            *self.entries.borrow_mut() = entries;
            *self.records.borrow_mut() = records;
            *self.earlier_records.borrow_mut() = earlier_records;
            self.records_since_ms.set(records_since_ms);
        })
    }
}

impl CounterStore for MemoryStore {
    fn load(&self, ns: &Namespace, key: &Key) -> StoreResult<Option<Counter>> {
        self.check()?;
        self.counter_loads.set(self.counter_loads.get() + 1);
        Ok(self.stored_counter(ns, key))
    }
    fn load_many(&self, keys: &[(Namespace, Key)]) -> StoreResult<Vec<Option<Counter>>> {
        self.check()?;
        if self.loads_many_fail.get() {
            return Err("storage refuses reads of several rows".into());
        }
        self.counter_loads_many.set(self.counter_loads_many.get() + 1);
        Ok(keys.iter().map(|(ns, key)| self.stored_counter(ns, key)).collect())
    }
    fn save(&self, ns: &Namespace, key: &Key, counter: &Counter) -> StoreResult<()> {
        if let Some(left) = self.counter_saves_left.get() {
            if left == 0 {
                return Err("storage is full".into());
            }
            self.counter_saves_left.set(Some(left - 1));
        }
        self.check_write()?;
        self.counters
            .borrow_mut()
            .entry(row(ns, key))
            .and_modify(|(_, stored)| *stored = *counter)
            .or_insert_with(|| ((ns.clone(), key.clone()), *counter));
        Ok(())
    }
    fn remove(&self, ns: &Namespace, key: &Key) -> StoreResult<()> {
        self.check_write()?;
        self.counters.borrow_mut().remove(&row(ns, key));
        self.forget_days(&(ns.clone(), key.clone()));
        Ok(())
    }
    fn finish_day(&self, ns: &Namespace, key: &Key, day: DayCount) -> StoreResult<()> {
        self.check_write()?;
        let mut days = self.days.borrow_mut();
        let count = days.entry(((ns.clone(), key.clone()), day.day)).or_default();
        *count = count.saturating_add(day.count);
        Ok(())
    }
    fn remove_expired_counters(&self, now_ms: u64, most: u64) -> StoreResult<u64> {
        self.check()?;
        let mut counters = self.counters.borrow_mut();
        let mut expired: Vec<(u64, u64)> = counters
            .iter()
            .filter(|(_, (_, counter))| counter.is_expired(now_ms))
            .map(|(row, (_, counter))| (counter.expires_at_ms.unwrap_or(0), *row))
            .collect();
        expired.sort();
        expired.truncate(usize::try_from(most).unwrap_or(usize::MAX));
        for (_, row) in &expired {
            if let Some((slot, _)) = counters.remove(row) {
                self.forget_days(&slot);
            }
        }
        Ok(expired.len() as u64)
    }
    fn next_counter_expiry(&self) -> StoreResult<Option<u64>> {
        self.check()?;
        Ok(self.counters.borrow().values().filter_map(|(_, c)| c.expires_at_ms).min())
    }
    fn count_counters(&self, now_ms: u64) -> StoreResult<(u64, u64)> {
        self.check()?;
        let counters = self.counters.borrow();
        let live = counters.values().filter(|(_, c)| !c.is_expired(now_ms)).count();
        Ok((live as u64, counters.len() as u64))
    }
}

impl VisitStore for MemoryStore {
    fn day_salt(&self, day: Day) -> StoreResult<Salt> {
        self.check()?;
        if let Some(salt) = self.salts.borrow().get(&day) {
            return Ok(*salt);
        }
        self.check_write()?;
        self.salts_made.set(self.salts_made.get() + 1);
        let made = xxhash_rust::xxh3::xxh3_128(&self.salts_made.get().to_le_bytes()).to_le_bytes();
        let salt: Salt = [made, made].concat().try_into().expect("32 bytes");
        let mut salts = self.salts.borrow_mut();
        salts.retain(|kept, _| *kept >= day.before(SALT_DAYS));
        salts.insert(day, salt);
        Ok(salt)
    }
    fn forget_salts_before(&self, day: Day) -> StoreResult<Option<Day>> {
        self.check()?;
        let mut salts = self.salts.borrow_mut();
        salts.retain(|kept, _| *kept >= day);
        Ok(salts.keys().next().copied())
    }
    fn load_sketch(&self, ns: &Namespace, key: &Key, day: Day) -> StoreResult<Option<Vec<u8>>> {
        self.check()?;
        let found = self.sketches.borrow().get(&((ns.clone(), key.clone()), day)).cloned();
        self.sketches_read.set(self.sketches_read.get() + u64::from(found.is_some()));
        Ok(found)
    }
    fn save_sketch(&self, ns: &Namespace, key: &Key, day: Day, sketch: &[u8]) -> StoreResult<()> {
        self.check_write()?;
        let slot = (ns.clone(), key.clone());
        // As the worker's triggers do: the unions that hold the day no longer hold its sketch.
        self.unions
            .borrow_mut()
            .retain(|(named, to, from), _| *named != slot || !(*from..=*to).contains(&day));
        self.sketches.borrow_mut().insert((slot, day), sketch.to_vec());
        Ok(())
    }
    fn stored_days(&self, ns: &Namespace, key: &Key, from: Day, to: Day) -> StoreResult<Vec<DayCount>> {
        self.check()?;
        let slot = (ns.clone(), key.clone());
        let days = self.days.borrow();
        let range = days.range((slot.clone(), from)..=(slot, to));
        Ok(range.map(|((_, day), count)| DayCount { day: *day, count: *count }).collect())
    }
    fn each_sketch(
        &self,
        ns: &Namespace,
        key: &Key,
        (from, to): (Day, Day),
        each: &mut EachSketch<'_>,
    ) -> StoreResult<()> {
        self.check()?;
        let slot = (ns.clone(), key.clone());
        let sketches = self.sketches.borrow();
        sketches.range((slot.clone(), from)..=(slot, to)).try_for_each(|((_, day), bytes)| {
            self.sketches_read.set(self.sketches_read.get() + 1);
            each(*day, bytes)
        })
    }
    fn load_union(&self, ns: &Namespace, key: &Key, (from, to): (Day, Day)) -> StoreResult<Option<Vec<u8>>> {
        self.check()?;
        let found = self.unions.borrow().get(&((ns.clone(), key.clone()), to, from)).cloned();
        self.unions_read.set(self.unions_read.get() + u64::from(found.is_some()));
        Ok(found)
    }
    fn save_union(&self, ns: &Namespace, key: &Key, (from, to): (Day, Day), kept: &[u8]) -> StoreResult<()> {
        self.check_write()?;
        let slot = (ns.clone(), key.clone());
        let mut unions = self.unions.borrow_mut();
        unions.insert((slot.clone(), to, from), kept.to_vec());
        let held =
            unions.keys().filter(|(named, _, _)| *named == slot).map(|(_, to, from)| (*from, *to)).collect();
        for (from, to) in unions_past_bound(held) {
            unions.remove(&(slot.clone(), to, from));
        }
        Ok(())
    }
}

impl CacheStore for MemoryStore {
    fn load_entry(&self, ns: &Namespace, key: &Key) -> StoreResult<Option<EntryValue>> {
        self.check()?;
        let entries = self.entries.borrow();
        let found = entries.get(&row(ns, key)).filter(|(slot, _)| same(slot, ns, key));
        Ok(found.map(|(_, stored)| EntryValue {
            value: stored.value.clone(),
            content_type: stored.content_type.clone(),
            expires_at_ms: stored.expires_at_ms,
        }))
    }
    fn save_entry(
        &self,
        ns: &Namespace,
        key: &Key,
        value: &[u8],
        content_type: &str,
        expires_at_ms: Option<u64>,
        now_ms: u64,
    ) -> StoreResult<()> {
        self.check()?;
        let stored = StoredValue {
            value: value.to_vec(),
            content_type: content_type.to_owned(),
            expires_at_ms,
            written_at_ms: now_ms,
        };
        self.entries.borrow_mut().insert(row(ns, key), ((ns.clone(), key.clone()), stored));
        Ok(())
    }
    fn remove_entry(&self, ns: &Namespace, key: &Key) -> StoreResult<()> {
        self.check()?;
        self.entries.borrow_mut().remove(&row(ns, key));
        Ok(())
    }
    fn scan_newest_entries(&self, most: u64, each: &mut dyn FnMut(StoredEntry) -> bool) -> StoreResult<()> {
        self.check()?;
        self.entry_scans.set(self.entry_scans.get() + 1);
        let mut listed: Vec<StoredEntry> = self
            .entries
            .borrow()
            .values()
            .map(|((ns, key), stored)| StoredEntry {
                meta: EntryMeta {
                    charge: entry_charge(
                        ns,
                        key,
                        stored.content_type.len() as u64,
                        stored.value.len() as u64,
                    ),
                    expires_at_ms: stored.expires_at_ms,
                },
                ns: ns.clone(),
                key: key.clone(),
                written_at_ms: stored.written_at_ms,
            })
            .collect();
        listed.sort_by(|a, b| start_up_order(b).cmp(&start_up_order(a)));
        for entry in listed.into_iter().take(usize::try_from(most).unwrap_or(usize::MAX)) {
            if !each(entry) {
                break;
            }
        }
        Ok(())
    }
    fn remove_entries_from(&self, entry: &StoredEntry) -> StoreResult<u64> {
        self.check()?;
        let mut entries = self.entries.borrow_mut();
        let before = entries.len();
        let first = start_up_order(entry);
        entries.retain(|_, ((ns, key), stored)| (stored.written_at_ms, ns.as_str(), key.as_str()) > first);
        Ok((before - entries.len()) as u64)
    }
    fn stored_entries(&self) -> StoreResult<(u64, u64)> {
        self.check()?;
        let entries = self.entries.borrow();
        let charged = entries.values().map(|((ns, key), stored)| {
            entry_charge(ns, key, stored.content_type.len() as u64, stored.value.len() as u64)
        });
        Ok((entries.len() as u64, charged.sum()))
    }
}

/// What start-up sorts entries by, descending: when written, then the names.
fn start_up_order(entry: &StoredEntry) -> (u64, &str, &str) {
    (entry.written_at_ms, entry.ns.as_str(), entry.key.as_str())
}

impl IdempotencyStore for MemoryStore {
    fn load_record(&self, scope: &RecordScope) -> StoreResult<Option<IdempotencyRecord>> {
        self.check()?;
        let current = self.records.borrow().get(scope).cloned();
        Ok(current.or_else(|| self.earlier_records.borrow().get(scope).cloned()))
    }
    fn save_record(&self, scope: &RecordScope, record: &IdempotencyRecord) -> StoreResult<()> {
        if self.records_fail.get() {
            return Err("storage is full".into());
        }
        self.check_write()?;
        self.records.borrow_mut().insert(scope.clone(), record.clone());
        Ok(())
    }
    fn records_generation(&self) -> StoreResult<Option<u64>> {
        self.check()?;
        let stored = !self.records.borrow().is_empty() || !self.earlier_records.borrow().is_empty();
        Ok(stored.then(|| self.records_since_ms.get()))
    }
    fn start_records_generation(&self, now_ms: u64) -> StoreResult<()> {
        self.check_write()?;
        let current = self.records.take();
        let dropped = self.earlier_records.replace(current);
        self.rows_written.set(self.rows_written.get() + dropped.len() as u64);
        self.records_since_ms.set(now_ms);
        Ok(())
    }
}
