//! A shard's cache entries: opaque bytes with a content type and an optional TTL, bounded in
//! total charged bytes and in number by evicting the least recently used entries.
//!
//! Values live only in storage; memory holds an LRU index of charges and expiries, so a shard
//! can bound many megabytes of values while using little memory. Each entry is charged its
//! names, content type and value plus a fixed overhead, so an empty value with long names
//! costs as much as it takes; the entry bound caps the index whatever the entries weigh.
//! Recency is tracked in memory only (a read that wrote storage to record recency would cost a
//! write per read); after a restart the index is rebuilt from the most recently written
//! entries, as many as the bounds allow, less those that expired. The rebuild waits for the
//! first cache write or delete (a read reads its own row, an alarm leaves an unloaded index
//! alone, and the stats count storage once instead): a shard that restarts to serve counters
//! or cache reads reads none of its up to [`CacheBounds::entries`] entry rows, which the
//! platform bills and which would delay the op that woke it.

use lru::LruCache;

use crate::hashing::KeyHashing;
use crate::shard::protocol::OpResult;
use crate::{CoreError, Key, Namespace, StoreResult};

/// Largest cache value, in bytes.
pub const MAX_CACHE_VALUE_BYTES: usize = 1024 * 1024;

/// What an entry is charged beyond its names, content type and value: its share of the
/// in-memory index, rounded up. Natively (64-bit) the index holds per entry a boxed LRU node
/// of 88 bytes (the two name `String`s 48, [`EntryMeta`] 24, two links 16), a hash-table slot
/// of two pointers and a control byte (17 bytes, up to 39 while the table is just past a
/// doubling at 7/8 load), and three heap blocks (node and the two name buffers) of up to 16
/// bytes of allocator header and padding each: 88 + 39 + 48 = 175 (a counting allocator
/// measures 110 to 125 bytes requested per entry besides the names, before headers). In Wasm,
/// where shards run, pointers are 4 bytes and the same sum is about 100, so the charge
/// overstates memory there rather than under it.
pub const ENTRY_OVERHEAD_BYTES: u64 = 192;

/// The bytes an entry is charged against [`CacheBounds::bytes`]: its namespace, key, content
/// type and value, plus [`ENTRY_OVERHEAD_BYTES`].
#[must_use]
pub fn entry_charge(ns: &Namespace, key: &Key, content_type_bytes: u64, value_bytes: u64) -> u64 {
    let names = (ns.as_str().len() + key.as_str().len()) as u64;
    ENTRY_OVERHEAD_BYTES + names + content_type_bytes + value_bytes
}

/// How much one shard's cache may hold; past either bound the least recently used entries go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheBounds {
    /// Most bytes charged for all entries together (see [`entry_charge`]).
    pub bytes: u64,
    /// Most entries, which caps the index's memory however small each entry is.
    pub entries: usize,
}

/// Durable storage for cache entries; synchronous, like [`crate::CounterStore`].
pub trait CacheStore {
    /// The stored value, its content type and when it expires.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn load_entry(&self, ns: &Namespace, key: &Key) -> StoreResult<Option<EntryValue>>;
    /// Saves an entry in place of any stored one.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn save_entry(
        &self,
        ns: &Namespace,
        key: &Key,
        value: &[u8],
        content_type: &str,
        expires_at_ms: Option<u64>,
        now_ms: u64,
    ) -> StoreResult<()>;
    /// Removes a stored entry, if any.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn remove_entry(&self, ns: &Namespace, key: &Key) -> StoreResult<()>;
    /// Calls `each` with stored entries in start-up order (most recently written first, ties
    /// broken by name, descending), at most `most` of them, until it answers false.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn scan_newest_entries(&self, most: u64, each: &mut dyn FnMut(StoredEntry) -> bool) -> StoreResult<()>;
    /// Removes `entry` and every entry after it in start-up order; answers how many.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn remove_entries_from(&self, entry: &StoredEntry) -> StoreResult<u64>;
    /// The entries stored and the bytes they are charged ([`entry_charge`]), counted by
    /// storage itself: for figures when the index is not loaded, which building it only to
    /// count would cost memory, and then the time to free it when the shard is evicted.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn stored_entries(&self) -> StoreResult<(u64, u64)>;
}

/// An entry's value as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryValue {
    pub value: Vec<u8>,
    pub content_type: String,
    pub expires_at_ms: Option<u64>,
}

/// An entry as start-up finds it in storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    pub ns: Namespace,
    pub key: Key,
    pub meta: EntryMeta,
    pub written_at_ms: u64,
}

/// What the index knows of an entry without loading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryMeta {
    /// What the entry is charged against the byte bound (see [`entry_charge`]).
    pub charge: u64,
    pub expires_at_ms: Option<u64>,
}

impl EntryMeta {
    fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }
}

/// The LRU index of a shard's cache entries.
#[derive(Debug)]
pub struct CacheTable {
    index: LruCache<(Namespace, Key), EntryMeta, KeyHashing>,
    /// The sum of the charges of the entries in the index.
    charged: u64,
    bounds: CacheBounds,
    evictions: u64,
    /// Whether the index holds what storage holds: false until the first op that needs it
    /// rebuilds it (see [`CacheTable::load`]).
    loaded: bool,
    /// Expired entries removed by a read or by loading the index (those the alarm removes
    /// are counted by the engine).
    lapsed: u64,
    /// Storage's count of the entries and their charge, while the index is not loaded: taken
    /// once for the stats (see [`CacheTable::figures`]), and dropped whenever entries change
    /// without the index: when it is loaded or unloaded, or a read removes a lapsed entry.
    counted: Option<(u64, u64)>,
}

impl CacheTable {
    /// A table that holds at most `bounds` (and room for one entry at least), over whatever
    /// storage holds: its index is rebuilt when first needed.
    #[must_use]
    pub fn new(bounds: CacheBounds) -> Self {
        let bounds = CacheBounds { entries: bounds.entries.max(1), ..bounds };
        Self {
            index: LruCache::unbounded_with_hasher(KeyHashing::default()),
            charged: 0,
            bounds,
            evictions: 0,
            loaded: false,
            lapsed: 0,
            counted: None,
        }
    }

    #[must_use]
    pub fn bounds(&self) -> CacheBounds {
        self.bounds
    }

    /// Whether the index has been rebuilt from storage (the figures of [`Self::len`],
    /// [`Self::bytes`] and [`Self::next_expiry`] are those of the index).
    #[must_use]
    pub fn is_loaded(&self) -> bool {
        self.loaded
    }

    /// Rebuilds the index from storage unless it already was: every op but a read calls this
    /// first (see [`Self::get`]). The
    /// most recently written entries are taken, as many as the bounds hold, and the older ones
    /// deleted from storage: a shard never loads more than its bounds, however many rows an
    /// earlier version or a lowered bound left behind. A failure leaves it to the next op.
    ///
    /// Entries that expired by `now_ms` are removed as the index loads: an alarm that found it
    /// unloaded left them (see [`crate::shard::engine::ShardEngine::reclaim_expired`]), and a
    /// write must not evict a live entry while they hold room.
    ///
    /// # Errors
    /// [`CoreError::StorageUnavailable`] when storage fails.
    pub fn load(&mut self, store: &impl CacheStore, now_ms: u64) -> Result<(), CoreError> {
        if self.loaded {
            return Ok(());
        }
        self.index.clear();
        self.charged = 0;
        self.restore(store)?;
        self.loaded = true;
        self.counted = None;
        self.lapsed += self.remove_expired(store, now_ms);
        Ok(())
    }

    /// Removes the index's expired entries from storage and the index; answers how many.
    fn remove_expired(&mut self, store: &impl CacheStore, now_ms: u64) -> u64 {
        let expired: Vec<_> = self
            .index
            .iter()
            .filter(|(_, meta)| meta.is_expired(now_ms))
            .map(|(slot, _)| slot.clone())
            .collect();
        expired.iter().filter(|slot| self.remove_slot(store, slot).is_ok()).count() as u64
    }

    /// Expired entries removed by a read or as the index loaded.
    #[must_use]
    pub fn lapsed(&self) -> u64 {
        self.lapsed
    }

    /// Drops the index, so that the next op that needs it rebuilds it from storage: for
    /// entries stored or removed outside the table (see [`crate::shard::migration`]).
    pub fn unload(&mut self) {
        self.index.clear();
        self.charged = 0;
        self.loaded = false;
        self.counted = None;
    }

    fn restore(&mut self, store: &impl CacheStore) -> Result<(), CoreError> {
        let mut refused = None;
        // One entry past the entry bound is read so that it is refused when every one before
        // it was taken.
        store
            .scan_newest_entries(self.bounds.entries as u64 + 1, &mut |entry| {
                if self.restore_older(entry.ns.clone(), entry.key.clone(), entry.meta) {
                    true
                } else {
                    refused = Some(entry);
                    false
                }
            })
            .map_err(CoreError::storage)?;
        if let Some(entry) = refused {
            self.evictions += store.remove_entries_from(&entry).map_err(CoreError::storage)?;
        }
        Ok(())
    }

    /// Adds an entry found in storage at start-up, as the least recently used so far; false,
    /// adding nothing, when it would break either bound.
    fn restore_older(&mut self, ns: Namespace, key: Key, meta: EntryMeta) -> bool {
        let full = self.index.len() >= self.bounds.entries;
        if full || self.charged.saturating_add(meta.charge) > self.bounds.bytes {
            return false;
        }
        let slot = (ns, key);
        self.insert(slot.clone(), meta);
        self.index.demote(&slot);
        true
    }

    /// Entries in the index (expired ones count until reclaimed).
    #[must_use]
    pub fn len(&self) -> usize {
        self.index.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Bytes charged for the entries in the index.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.charged
    }

    /// The entries and the bytes charged for them: the index's figures when it is loaded, or
    /// storage's count without loading it, counted once while the index stays unloaded
    /// (see `counted`). Storage's count includes entries past the bounds, which the first load
    /// deletes.
    ///
    /// # Errors
    /// [`CoreError::StorageUnavailable`] when counting fails.
    pub fn figures(&mut self, store: &impl CacheStore) -> Result<(u64, u64), CoreError> {
        if self.loaded {
            return Ok((self.len() as u64, self.charged));
        }
        if let Some(counted) = self.counted {
            return Ok(counted);
        }
        let counted = store.stored_entries().map_err(CoreError::storage)?;
        self.counted = Some(counted);
        Ok(counted)
    }

    /// Entries evicted since the table was made.
    #[must_use]
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Reads an entry and, once the index is loaded, marks it most recently used. Until then a
    /// read needs only its own row: a shard woken to serve reads does not read every entry
    /// first (the platform bills each row read), and recency, which a restart forgets anyway,
    /// counts from the index's load, which the first write or delete makes.
    ///
    /// # Errors
    /// [`CoreError::NotFound`] when there is no live entry, [`CoreError::StorageUnavailable`]
    /// when storage fails.
    pub fn get(
        &mut self,
        store: &impl CacheStore,
        ns: &Namespace,
        key: &Key,
        now_ms: u64,
    ) -> Result<OpResult, CoreError> {
        if !self.loaded {
            return match store.load_entry(ns, key).map_err(CoreError::storage)? {
                None => Err(CoreError::NotFound),
                Some(entry) if entry.expires_at_ms.is_some_and(|at| at <= now_ms) => {
                    // Not found either way; a row that could not be removed goes when the index
                    // loads.
                    if store.remove_entry(ns, key).is_ok() {
                        // Storage changed outside the index: a count taken before is stale.
                        self.counted = None;
                        self.lapsed += 1;
                    }
                    Err(CoreError::NotFound)
                }
                Some(entry) => Ok(OpResult::Entry { value: entry.value, content_type: entry.content_type }),
            };
        }
        let slot = (ns.clone(), key.clone());
        match self.index.get(&slot).copied() {
            None => Err(CoreError::NotFound),
            Some(meta) if meta.is_expired(now_ms) => {
                self.remove_slot(store, &slot)?;
                self.lapsed += 1;
                Err(CoreError::NotFound)
            }
            Some(_) => match store.load_entry(ns, key).map_err(CoreError::storage)? {
                Some(entry) => Ok(OpResult::Entry { value: entry.value, content_type: entry.content_type }),
                None => {
                    // Storage lost the row behind our back; believe storage.
                    self.forget(&slot);
                    Err(CoreError::NotFound)
                }
            },
        }
    }

    /// Stores an entry, then evicts least recently used entries until both bounds hold.
    ///
    /// # Errors
    /// [`CoreError::EntryTooLarge`] for a value over [`MAX_CACHE_VALUE_BYTES`], or one whose
    /// entry would be charged more than the whole byte bound; [`CoreError::StorageUnavailable`]
    /// when storage fails. Nothing changes then.
    #[allow(clippy::too_many_arguments)]
    pub fn put(
        &mut self,
        store: &impl CacheStore,
        ns: &Namespace,
        key: &Key,
        value: &[u8],
        content_type: &str,
        ttl_seconds: Option<u32>,
        now_ms: u64,
    ) -> Result<OpResult, CoreError> {
        let value_bytes = value.len() as u64;
        let charge = entry_charge(ns, key, content_type.len() as u64, value_bytes);
        // The largest value these names and content type leave room for.
        let room = self.bounds.bytes.saturating_sub(charge - value_bytes);
        let limit = room.min(MAX_CACHE_VALUE_BYTES as u64);
        // The charge check also refuses an empty value when the names alone overflow the bound.
        if value_bytes > limit || charge > self.bounds.bytes {
            return Err(CoreError::EntryTooLarge { limit_bytes: limit });
        }
        self.load(store, now_ms)?;
        let expires_at_ms = ttl_seconds.map(|s| now_ms.saturating_add(u64::from(s) * 1000));
        store.save_entry(ns, key, value, content_type, expires_at_ms, now_ms).map_err(CoreError::storage)?;
        self.insert((ns.clone(), key.clone()), EntryMeta { charge, expires_at_ms });
        self.evict_to_bounds(store);
        Ok(OpResult::Stored)
    }

    /// Deletes an entry, reporting whether a live one existed.
    ///
    /// # Errors
    /// [`CoreError::StorageUnavailable`] when storage fails.
    pub fn delete(
        &mut self,
        store: &impl CacheStore,
        ns: &Namespace,
        key: &Key,
        now_ms: u64,
    ) -> Result<OpResult, CoreError> {
        self.load(store, now_ms)?;
        let slot = (ns.clone(), key.clone());
        let Some(meta) = self.index.peek(&slot).copied() else {
            return Ok(OpResult::Deleted { deleted: false });
        };
        self.remove_slot(store, &slot)?;
        Ok(OpResult::Deleted { deleted: !meta.is_expired(now_ms) })
    }

    /// Removes every expired entry from storage and the index; returns how many.
    ///
    /// # Errors
    /// [`CoreError::StorageUnavailable`] when the index cannot be rebuilt.
    pub fn reclaim_expired(&mut self, store: &impl CacheStore, now_ms: u64) -> Result<u64, CoreError> {
        self.load(store, now_ms)?;
        Ok(self.remove_expired(store, now_ms))
    }

    /// When the next entry of the index expires, if any has a TTL (none before [`Self::load`],
    /// which removes those already expired).
    #[must_use]
    pub fn next_expiry(&self) -> Option<u64> {
        self.index.iter().filter_map(|(_, meta)| meta.expires_at_ms).min()
    }

    /// Puts an entry in the index as the most recently used, in place of any older one.
    fn insert(&mut self, slot: (Namespace, Key), meta: EntryMeta) {
        if let Some(old) = self.index.put(slot, meta) {
            self.charged -= old.charge;
        }
        self.charged += meta.charge;
    }

    fn over_bounds(&self) -> bool {
        self.charged > self.bounds.bytes || self.index.len() > self.bounds.entries
    }

    fn evict_to_bounds(&mut self, store: &impl CacheStore) {
        while self.over_bounds() {
            let Some((slot, _)) = self.index.peek_lru().map(|(s, m)| (s.clone(), *m)) else {
                break;
            };
            // A failed removal leaves a bound exceeded until the next put retries. The entry
            // just stored is the most recently used, fits the byte bound alone, and the entry
            // bound is at least one, so it is never the one evicted.
            if self.remove_slot(store, &slot).is_err() {
                break;
            }
            self.evictions += 1;
        }
    }

    fn remove_slot(&mut self, store: &impl CacheStore, slot: &(Namespace, Key)) -> Result<(), CoreError> {
        store.remove_entry(&slot.0, &slot.1).map_err(CoreError::storage)?;
        self.forget(slot);
        Ok(())
    }

    /// Drops `ns`/`key` from the index, whose entry storage no longer holds (deleted outside
    /// the table, as when its key is handed over to another shard).
    pub fn forget_entry(&mut self, ns: &Namespace, key: &Key) {
        // Its row went outside the index: a count of storage taken before no longer holds.
        self.counted = None;
        self.forget(&(ns.clone(), key.clone()));
    }

    fn forget(&mut self, slot: &(Namespace, Key)) {
        if let Some(meta) = self.index.pop(slot) {
            self.charged -= meta.charge;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::memory_store::MemoryStore as MapStore;

    /// What a test entry named `name` with `len` bytes of `text/plain` is charged.
    fn charge(name: &str, len: usize) -> u64 {
        let (ns, key) = key(name);
        entry_charge(&ns, &key, "text/plain".len() as u64, len as u64)
    }

    fn bounded(bytes: u64, entries: usize) -> CacheTable {
        CacheTable::new(CacheBounds { bytes, entries })
    }

    fn key(name: &str) -> (Namespace, Key) {
        (Namespace::new("c").unwrap(), Key::new(name).unwrap())
    }

    fn put(
        table: &mut CacheTable,
        store: &MapStore,
        name: &str,
        len: usize,
        ttl: Option<u32>,
    ) -> Result<OpResult, CoreError> {
        let (ns, key) = key(name);
        table.put(store, &ns, &key, &vec![b'x'; len], "text/plain", ttl, 0)
    }

    fn get(table: &mut CacheTable, store: &MapStore, name: &str, now: u64) -> Result<OpResult, CoreError> {
        let (ns, key) = key(name);
        table.get(store, &ns, &key, now)
    }

    fn live(table: &mut CacheTable, store: &MapStore, names: &[&str]) -> Vec<bool> {
        names.iter().map(|name| get(table, store, name, 0).is_ok()).collect()
    }

    #[test]
    fn stores_and_reads_bytes_with_their_content_type() {
        let store = MapStore::default();
        let mut table = bounded(1_000, 10);
        let (ns, k) = key("a");
        table.put(&store, &ns, &k, b"\x00\xffhi", "application/x-thing", None, 0).unwrap();
        assert_eq!(
            table.get(&store, &ns, &k, 0),
            Ok(OpResult::Entry { value: b"\x00\xffhi".to_vec(), content_type: "application/x-thing".into() })
        );
        assert_eq!(table.bytes(), ENTRY_OVERHEAD_BYTES + 2 + "application/x-thing".len() as u64 + 4);
    }

    #[test]
    fn an_entry_is_charged_its_names_content_type_value_and_overhead() {
        let store = MapStore::default();
        let mut table = bounded(1_000_000, 10);
        let (ns, k) = (Namespace::new("c").unwrap(), Key::new(&"k".repeat(256)).unwrap());
        table.put(&store, &ns, &k, b"", &"t".repeat(60_000), None, 0).unwrap();
        assert_eq!(table.bytes(), ENTRY_OVERHEAD_BYTES + 1 + 256 + 60_000);
    }

    #[test]
    fn empty_values_with_long_names_stay_within_both_bounds() {
        let store = MapStore::default();
        let mut table = bounded(100_000, 50);
        let ns = Namespace::new("c").unwrap();
        for i in 0..1_000 {
            let key = Key::new(&format!("{i:0>256}")).unwrap();
            table.put(&store, &ns, &key, b"", &"t".repeat(1_000), None, 0).unwrap();
            assert!(table.bytes() <= 100_000 && table.len() <= 50, "after {i}: {table:?}");
        }
        // 100,000 bytes hold 69 entries of 1,449 bytes: the entry bound is the one that binds.
        assert_eq!((table.len(), table.evictions()), (50, 950));
        assert_eq!(store.entries.borrow().len(), 50);
    }

    #[test]
    fn evicts_the_least_recently_used_past_the_byte_bound() {
        let store = MapStore::default();
        let mut table = bounded(3 * charge("a", 100), 10);
        for name in ["a", "b", "c"] {
            put(&mut table, &store, name, 100, None).unwrap();
        }
        get(&mut table, &store, "a", 0).unwrap(); // b is now the least recently used
        put(&mut table, &store, "d", 100, None).unwrap();
        assert_eq!(live(&mut table, &store, &["a", "b", "c", "d"]), [true, false, true, true]);
        assert_eq!(
            (table.evictions(), table.bytes(), store.entries.borrow().len()),
            (1, 3 * charge("a", 100), 3)
        );
    }

    #[test]
    fn exactly_the_byte_bound_fits_and_one_byte_more_evicts() {
        let store = MapStore::default();
        let mut table = bounded(charge("a", 100) + charge("b", 100), 10);
        put(&mut table, &store, "a", 100, None).unwrap();
        put(&mut table, &store, "b", 100, None).unwrap();
        assert_eq!((table.bytes(), table.evictions()), (charge("a", 100) + charge("b", 100), 0));
        put(&mut table, &store, "b", 101, None).unwrap();
        assert_eq!(live(&mut table, &store, &["a", "b"]), [false, true]);
        assert_eq!((table.len(), table.evictions()), (1, 1));
    }

    #[test]
    fn exactly_the_entry_bound_fits_and_one_more_evicts() {
        let store = MapStore::default();
        let mut table = bounded(1_000_000, 3);
        for name in ["a", "b", "c"] {
            put(&mut table, &store, name, 0, None).unwrap();
        }
        assert_eq!((table.len(), table.evictions()), (3, 0));
        put(&mut table, &store, "a", 0, None).unwrap(); // a replaced: still 3, b now oldest
        put(&mut table, &store, "d", 0, None).unwrap();
        assert_eq!(live(&mut table, &store, &["a", "b", "c", "d"]), [true, false, true, true]);
        assert_eq!((table.len(), table.evictions(), store.entries.borrow().len()), (3, 1, 3));
    }

    #[test]
    fn replacing_an_entry_counts_its_bytes_once() {
        let store = MapStore::default();
        let mut table = bounded(1_000, 10);
        put(&mut table, &store, "a", 100, None).unwrap();
        put(&mut table, &store, "a", 40, None).unwrap();
        assert_eq!((table.len(), table.bytes()), (1, charge("a", 40)));
    }

    #[test]
    fn refuses_entries_over_the_limits_and_changes_nothing() {
        let store = MapStore::default();
        let mut table = bounded(charge("a", 50), 10);
        put(&mut table, &store, "a", 50, None).unwrap();
        assert_eq!(put(&mut table, &store, "b", 51, None), Err(CoreError::EntryTooLarge { limit_bytes: 50 }));
        let mut big = bounded(u64::MAX, 10);
        let over = put(&mut big, &store, "b", MAX_CACHE_VALUE_BYTES + 1, None);
        assert_eq!(over, Err(CoreError::EntryTooLarge { limit_bytes: MAX_CACHE_VALUE_BYTES as u64 }));
        let mut tiny = bounded(ENTRY_OVERHEAD_BYTES, 10);
        assert_eq!(put(&mut tiny, &store, "b", 0, None), Err(CoreError::EntryTooLarge { limit_bytes: 0 }));
        assert_eq!(store.entry_names(), ["c/a"]);
        assert_eq!((table.len(), table.evictions()), (1, 0));
    }

    #[test]
    fn restore_takes_the_newest_entries_within_the_bounds_in_recency_order() {
        let store = MapStore::default();
        let mut writer = bounded(1_000_000, 10);
        for (at, name) in [(1, "a"), (2, "b"), (3, "c"), (4, "d")] {
            put(&mut writer, &store, name, 0, None).unwrap();
            // Stored with the time of writing, which start-up orders by.
            let (ns, key) = key(name);
            let mut entries = store.entries.borrow_mut();
            let row = entries.values_mut().find(|(slot, _)| *slot == (ns.clone(), key.clone())).unwrap();
            row.1.written_at_ms = at;
        }
        let mut table = bounded(1_000_000, 3);
        table.restore(&store).unwrap();
        assert_eq!((table.len(), table.bytes(), table.evictions()), (3, 3 * charge("a", 0), 1));
        let mut names = store.entry_names();
        names.sort();
        assert_eq!(names, ["c/b", "c/c", "c/d"], "the oldest is deleted from storage");
        // b, written longest ago, is the least recently used and goes first.
        put(&mut table, &store, "e", 0, None).unwrap();
        assert_eq!(live(&mut table, &store, &["b", "c", "d", "e"]), [false, true, true, true]);
    }

    #[test]
    fn restore_stops_at_the_byte_bound_exactly() {
        let store = MapStore::default();
        let mut writer = bounded(1_000_000, 10);
        for name in ["a", "b", "c"] {
            put(&mut writer, &store, name, 10, None).unwrap();
        }
        let mut table = bounded(2 * charge("a", 10), 100);
        table.restore(&store).unwrap();
        assert_eq!((table.len(), table.bytes(), table.evictions()), (2, 2 * charge("a", 10), 1));
        // Equal times: the names break the tie, descending, so "a" is the one refused.
        let mut names = store.entry_names();
        names.sort();
        assert_eq!(names, ["c/b", "c/c"]);
    }

    #[test]
    fn expired_entries_vanish_and_are_reclaimed() {
        let store = MapStore::default();
        let mut table = bounded(10_000, 10);
        put(&mut table, &store, "short", 10, Some(1)).unwrap();
        put(&mut table, &store, "long", 10, Some(60)).unwrap();
        put(&mut table, &store, "forever", 10, None).unwrap();
        assert_eq!(table.next_expiry(), Some(1_000));
        assert!(get(&mut table, &store, "short", 999).is_ok());
        assert_eq!(table.reclaim_expired(&store, 1_000), Ok(1));
        assert_eq!(get(&mut table, &store, "short", 1_000), Err(CoreError::NotFound));
        assert_eq!(table.next_expiry(), Some(60_000));
        assert_eq!(store.entries.borrow().len(), 2);
    }

    #[test]
    fn delete_reports_live_entries_only() {
        let store = MapStore::default();
        let mut table = bounded(1_000, 10);
        let (ns, k) = key("a");
        assert_eq!(table.delete(&store, &ns, &k, 0), Ok(OpResult::Deleted { deleted: false }));
        put(&mut table, &store, "a", 1, Some(1)).unwrap();
        assert_eq!(table.delete(&store, &ns, &k, 5_000), Ok(OpResult::Deleted { deleted: false }));
        put(&mut table, &store, "a", 1, None).unwrap();
        assert_eq!(table.delete(&store, &ns, &k, 0), Ok(OpResult::Deleted { deleted: true }));
        assert!(store.entries.borrow().is_empty());
        assert_eq!(table.bytes(), 0);
    }

    #[test]
    fn figures_count_storage_once_without_loading_and_match_the_index() {
        let store = MapStore::default();
        let mut writer = bounded(10_000, 10);
        put(&mut writer, &store, "a", 3, None).unwrap();
        put(&mut writer, &store, "b", 0, None).unwrap();
        let expected = (2, charge("a", 3) + charge("b", 0));
        assert_eq!(writer.figures(&store), Ok(expected), "the index's figures");
        let mut restarted = bounded(10_000, 10);
        assert_eq!(restarted.figures(&store), Ok(expected), "storage's, the same charge");
        assert!(!restarted.is_loaded());
        // Counted once: a row deleted outside the index is not seen until the table is told.
        let (ns, k) = key("a");
        store.remove_entry(&ns, &k).unwrap();
        assert_eq!(restarted.figures(&store), Ok(expected));
        restarted.forget_entry(&ns, &k);
        assert_eq!(restarted.figures(&store), Ok((1, charge("b", 0))));
        restarted.load(&store, 0).unwrap();
        assert_eq!(restarted.figures(&store), Ok((1, charge("b", 0))));
    }

    #[test]
    fn a_read_before_the_index_is_loaded_reads_its_own_row_alone() {
        let store = MapStore::default();
        let mut writer = bounded(10_000, 10);
        put(&mut writer, &store, "a", 3, None).unwrap();
        put(&mut writer, &store, "short", 1, Some(1)).unwrap();
        let mut restarted = bounded(10_000, 10);
        let (ns, k) = key("a");
        assert_eq!(
            restarted.get(&store, &ns, &k, 0),
            Ok(OpResult::Entry { value: b"xxx".to_vec(), content_type: "text/plain".into() })
        );
        assert_eq!(get(&mut restarted, &store, "missing", 0), Err(CoreError::NotFound));
        assert!(!restarted.is_loaded(), "reads left the index unbuilt");
        assert_eq!(restarted.figures(&store), Ok((2, charge("a", 3) + charge("short", 1))));
        // An expired entry is not served, and goes from storage and from the count.
        assert_eq!(get(&mut restarted, &store, "short", 1_000), Err(CoreError::NotFound));
        assert_eq!(
            (store.entry_names(), restarted.figures(&store)),
            (vec!["c/a".to_owned()], Ok((1, charge("a", 3))))
        );
        // A write builds the index, and from then on reads count toward recency.
        put(&mut restarted, &store, "b", 0, None).unwrap();
        assert!(restarted.is_loaded());
        assert!(get(&mut restarted, &store, "a", 0).is_ok());
    }
}
