//! A shard's cache entries: opaque bytes with a content type and an optional TTL, bounded in
//! total bytes by evicting the least recently used entries.
//!
//! Values live only in storage; memory holds an LRU index of sizes and expiries, so a shard
//! can bound many megabytes of values while using little memory. Recency is tracked in memory
//! only (a read that wrote storage to record recency would cost a write per read); after a
//! restart the index is rebuilt in the order entries were last written.

use lru::LruCache;

use crate::counter_table::storage_error;
use crate::protocol::OpResult;
use crate::{CoreError, Key, Namespace};

/// Largest cache value, in bytes.
pub const MAX_CACHE_VALUE_BYTES: usize = 1024 * 1024;

/// Durable storage for cache entries; synchronous, like [`crate::CounterStore`].
pub trait CacheStore {
    /// The stored value and content type.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn load_entry(&self, ns: &Namespace, key: &Key) -> Result<Option<(Vec<u8>, String)>, String>;
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
    ) -> Result<(), String>;
    /// Removes a stored entry, if any.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn remove_entry(&self, ns: &Namespace, key: &Key) -> Result<(), String>;
}

/// What the index knows of an entry without loading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryMeta {
    pub bytes: u64,
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
    index: LruCache<(Namespace, Key), EntryMeta>,
    bytes: u64,
    capacity_bytes: u64,
    evictions: u64,
}

impl CacheTable {
    /// An empty table that holds at most `capacity_bytes` of values.
    #[must_use]
    pub fn new(capacity_bytes: u64) -> Self {
        Self { index: LruCache::unbounded(), bytes: 0, capacity_bytes, evictions: 0 }
    }

    /// Adds an entry found in storage at start-up; call in the order entries were written.
    pub fn restore(&mut self, ns: Namespace, key: Key, meta: EntryMeta) {
        if let Some(old) = self.index.put((ns, key), meta) {
            self.bytes -= old.bytes;
        }
        self.bytes += meta.bytes;
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

    /// Bytes of values in the index.
    #[must_use]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Entries evicted since the table was made.
    #[must_use]
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Reads an entry and marks it most recently used.
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
        let slot = (ns.clone(), key.clone());
        match self.index.get(&slot).copied() {
            None => Err(CoreError::NotFound),
            Some(meta) if meta.is_expired(now_ms) => {
                self.remove_slot(store, &slot)?;
                Err(CoreError::NotFound)
            }
            Some(_) => match store.load_entry(ns, key).map_err(storage_error)? {
                Some((value, content_type)) => Ok(OpResult::Entry { value, content_type }),
                None => {
                    // Storage lost the row behind our back; believe storage.
                    self.forget(&slot);
                    Err(CoreError::NotFound)
                }
            },
        }
    }

    /// Stores an entry, then evicts least recently used entries until the bound holds.
    ///
    /// # Errors
    /// [`CoreError::EntryTooLarge`] for a value over [`MAX_CACHE_VALUE_BYTES`] or over the whole
    /// bound; [`CoreError::StorageUnavailable`] when storage fails. Nothing changes then.
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
        let limit = self.capacity_bytes.min(MAX_CACHE_VALUE_BYTES as u64);
        let bytes = value.len() as u64;
        if bytes > limit {
            return Err(CoreError::EntryTooLarge { limit_bytes: limit });
        }
        let expires_at_ms = ttl_seconds.map(|s| now_ms.saturating_add(u64::from(s) * 1000));
        store.save_entry(ns, key, value, content_type, expires_at_ms, now_ms).map_err(storage_error)?;
        self.restore(ns.clone(), key.clone(), EntryMeta { bytes, expires_at_ms });
        self.evict_to_bound(store);
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
        let slot = (ns.clone(), key.clone());
        let Some(meta) = self.index.peek(&slot).copied() else {
            return Ok(OpResult::Deleted { deleted: false });
        };
        self.remove_slot(store, &slot)?;
        Ok(OpResult::Deleted { deleted: !meta.is_expired(now_ms) })
    }

    /// Removes every expired entry from storage and the index; returns how many.
    pub fn reclaim_expired(&mut self, store: &impl CacheStore, now_ms: u64) -> u64 {
        let expired: Vec<_> = self
            .index
            .iter()
            .filter(|(_, meta)| meta.is_expired(now_ms))
            .map(|(slot, _)| slot.clone())
            .collect();
        expired.iter().filter(|slot| self.remove_slot(store, slot).is_ok()).count() as u64
    }

    /// When the next entry expires, if any has a TTL.
    #[must_use]
    pub fn next_expiry(&self) -> Option<u64> {
        self.index.iter().filter_map(|(_, meta)| meta.expires_at_ms).min()
    }

    fn evict_to_bound(&mut self, store: &impl CacheStore) {
        while self.bytes > self.capacity_bytes {
            let Some((slot, _)) = self.index.peek_lru().map(|(s, m)| (s.clone(), *m)) else {
                break;
            };
            // A failed removal leaves the bound exceeded until the next put retries; the
            // entry just stored is never the least recently used one, so it stays.
            if self.remove_slot(store, &slot).is_err() {
                break;
            }
            self.evictions += 1;
        }
    }

    fn remove_slot(&mut self, store: &impl CacheStore, slot: &(Namespace, Key)) -> Result<(), CoreError> {
        store.remove_entry(&slot.0, &slot.1).map_err(storage_error)?;
        self.forget(slot);
        Ok(())
    }

    fn forget(&mut self, slot: &(Namespace, Key)) {
        if let Some(meta) = self.index.pop(slot) {
            self.bytes -= meta.bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_store::MapStore;

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

    #[test]
    fn stores_and_reads_bytes_with_their_content_type() {
        let store = MapStore::default();
        let mut table = CacheTable::new(1_000);
        let (ns, k) = key("a");
        table.put(&store, &ns, &k, b"\x00\xffhi", "application/x-thing", None, 0).unwrap();
        assert_eq!(
            table.get(&store, &ns, &k, 0),
            Ok(OpResult::Entry { value: b"\x00\xffhi".to_vec(), content_type: "application/x-thing".into() })
        );
        assert_eq!(table.bytes(), 4);
    }

    #[test]
    fn evicts_the_least_recently_used_past_the_bound() {
        let store = MapStore::default();
        let mut table = CacheTable::new(300);
        for name in ["a", "b", "c"] {
            put(&mut table, &store, name, 100, None).unwrap();
        }
        get(&mut table, &store, "a", 0).unwrap(); // b is now the least recently used
        put(&mut table, &store, "d", 100, None).unwrap();
        assert_eq!(get(&mut table, &store, "b", 0), Err(CoreError::NotFound));
        for name in ["a", "c", "d"] {
            assert!(get(&mut table, &store, name, 0).is_ok(), "{name}");
        }
        assert_eq!((table.evictions(), table.bytes(), store.entries.borrow().len()), (1, 300, 3));
    }

    #[test]
    fn replacing_an_entry_counts_its_bytes_once() {
        let store = MapStore::default();
        let mut table = CacheTable::new(1_000);
        put(&mut table, &store, "a", 100, None).unwrap();
        put(&mut table, &store, "a", 40, None).unwrap();
        assert_eq!((table.len(), table.bytes()), (1, 40));
    }

    #[test]
    fn refuses_values_over_the_limits_and_changes_nothing() {
        let store = MapStore::default();
        let mut table = CacheTable::new(50);
        assert_eq!(put(&mut table, &store, "a", 51, None), Err(CoreError::EntryTooLarge { limit_bytes: 50 }));
        let mut big = CacheTable::new(u64::MAX);
        assert!(put(&mut big, &store, "a", MAX_CACHE_VALUE_BYTES + 1, None).is_err());
        assert!(store.entries.borrow().is_empty());
    }

    #[test]
    fn expired_entries_vanish_and_are_reclaimed() {
        let store = MapStore::default();
        let mut table = CacheTable::new(1_000);
        put(&mut table, &store, "short", 10, Some(1)).unwrap();
        put(&mut table, &store, "long", 10, Some(60)).unwrap();
        put(&mut table, &store, "forever", 10, None).unwrap();
        assert_eq!(table.next_expiry(), Some(1_000));
        assert!(get(&mut table, &store, "short", 999).is_ok());
        assert_eq!(table.reclaim_expired(&store, 1_000), 1);
        assert_eq!(get(&mut table, &store, "short", 1_000), Err(CoreError::NotFound));
        assert_eq!(table.next_expiry(), Some(60_000));
        assert_eq!(store.entries.borrow().len(), 2);
    }

    #[test]
    fn delete_reports_live_entries_only() {
        let store = MapStore::default();
        let mut table = CacheTable::new(1_000);
        let (ns, k) = key("a");
        assert_eq!(table.delete(&store, &ns, &k, 0), Ok(OpResult::Deleted { deleted: false }));
        put(&mut table, &store, "a", 1, Some(1)).unwrap();
        assert_eq!(table.delete(&store, &ns, &k, 5_000), Ok(OpResult::Deleted { deleted: false }));
        put(&mut table, &store, "a", 1, None).unwrap();
        assert_eq!(table.delete(&store, &ns, &k, 0), Ok(OpResult::Deleted { deleted: true }));
        assert!(store.entries.borrow().is_empty());
    }
}
