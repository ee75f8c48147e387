//! A shard's counters: an in-memory map in front of durable storage.
//!
//! The map answers repeated reads without touching storage; storage is the authority. A write
//! is computed, saved to storage, and only then applied to the map, so a failed save leaves
//! both unchanged and the op reports an error instead of a value it did not keep.

use std::collections::HashMap;

use crate::protocol::{CounterOp, OpResult};
use crate::{CoreError, Counter, CounterWrite, Key, Namespace};

/// Durable storage for counters. Storage is synchronous (a Durable Object's SQLite is), so
/// one op runs start to end without yielding and ops never interleave.
pub trait CounterStore {
    /// The stored counter, expired or not.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn load(&self, ns: &Namespace, key: &Key) -> Result<Option<Counter>, String>;
    /// Saves `counter` in place of any stored one.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn save(&self, ns: &Namespace, key: &Key, counter: &Counter) -> Result<(), String>;
    /// Removes the stored counter, if any.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn remove(&self, ns: &Namespace, key: &Key) -> Result<(), String>;
}

/// The live counters of one shard and its op count.
#[derive(Debug, Default)]
pub struct CounterTable {
    cached: HashMap<(Namespace, Key), Counter>,
    ops: u64,
}

impl CounterTable {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Ops executed since the shard started.
    #[must_use]
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// Runs one op at `now_ms`.
    pub fn execute(&mut self, store: &impl CounterStore, op: &CounterOp, now_ms: u64) -> OpResult {
        self.ops += 1;
        self.try_execute(store, op, now_ms)
            .unwrap_or_else(|error| OpResult::Failed { error })
    }

    fn try_execute(
        &mut self,
        store: &impl CounterStore,
        op: &CounterOp,
        now_ms: u64,
    ) -> Result<OpResult, CoreError> {
        let (ns, key) = op.target();
        let current = self.live(store, ns, key, now_ms)?;
        let (write, ttl) = match *op {
            CounterOp::Get { .. } => {
                return Ok(match current {
                    Some(c) => OpResult::Value {
                        value: c.value,
                        exists: true,
                        version: c.version,
                    },
                    None => OpResult::Value {
                        value: 0,
                        exists: false,
                        version: 0,
                    },
                });
            }
            CounterOp::Delete { .. } => {
                if current.is_some() {
                    store.remove(ns, key).map_err(storage_error)?;
                    self.cached.remove(&(ns.clone(), key.clone()));
                }
                return Ok(OpResult::Deleted {
                    deleted: current.is_some(),
                });
            }
            CounterOp::Incr { by, ttl, .. } => (CounterWrite::Add(by), ttl),
            CounterOp::Decr { by, ttl, .. } => (CounterWrite::Subtract(by), ttl),
            CounterOp::Set { value, ttl, .. } => (CounterWrite::Set(value), ttl),
        };
        let next = Counter::apply(current.as_ref(), write, ttl, now_ms)?;
        store.save(ns, key, &next).map_err(storage_error)?;
        self.cached.insert((ns.clone(), key.clone()), next);
        Ok(OpResult::Value {
            value: next.value,
            exists: true,
            version: next.version,
        })
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
            None => store.load(ns, key).map_err(storage_error)?,
        };
        match found {
            Some(c) if c.is_expired(now_ms) => {
                store.remove(ns, key).map_err(storage_error)?;
                self.cached.remove(&slot);
                Ok(None)
            }
            Some(c) => {
                self.cached.insert(slot, c);
                Ok(Some(c))
            }
            None => Ok(None),
        }
    }
}

fn storage_error(detail: String) -> CoreError {
    CoreError::StorageUnavailable { detail }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// Storage in a map, with a switch that makes every call fail.
    #[derive(Default)]
    struct MapStore {
        rows: RefCell<HashMap<(Namespace, Key), Counter>>,
        broken: Cell<bool>,
    }

    impl CounterStore for MapStore {
        fn load(&self, ns: &Namespace, key: &Key) -> Result<Option<Counter>, String> {
            if self.broken.get() {
                return Err("disk on fire".into());
            }
            Ok(self.rows.borrow().get(&(ns.clone(), key.clone())).copied())
        }
        fn save(&self, ns: &Namespace, key: &Key, counter: &Counter) -> Result<(), String> {
            if self.broken.get() {
                return Err("disk on fire".into());
            }
            self.rows
                .borrow_mut()
                .insert((ns.clone(), key.clone()), *counter);
            Ok(())
        }
        fn remove(&self, ns: &Namespace, key: &Key) -> Result<(), String> {
            if self.broken.get() {
                return Err("disk on fire".into());
            }
            self.rows.borrow_mut().remove(&(ns.clone(), key.clone()));
            Ok(())
        }
    }

    fn names() -> (Namespace, Key) {
        (Namespace::new("pages").unwrap(), Key::new("home").unwrap())
    }

    fn incr(by: i64) -> CounterOp {
        let (ns, key) = names();
        CounterOp::Incr {
            ns,
            key,
            by,
            ttl: None,
        }
    }

    fn get() -> CounterOp {
        let (ns, key) = names();
        CounterOp::Get { ns, key }
    }

    #[test]
    fn a_fresh_table_reads_values_saved_by_an_earlier_one() {
        let store = MapStore::default();
        let mut first = CounterTable::new();
        first.execute(&store, &incr(41), 0);
        first.execute(&store, &incr(1), 0);
        let mut restarted = CounterTable::new();
        assert_eq!(
            restarted.execute(&store, &get(), 0),
            OpResult::Value {
                value: 42,
                exists: true,
                version: 2
            }
        );
    }

    #[test]
    fn a_failed_save_changes_nothing() {
        let store = MapStore::default();
        let mut table = CounterTable::new();
        table.execute(&store, &incr(1), 0);
        store.broken.set(true);
        let result = table.execute(&store, &incr(1), 0);
        assert!(matches!(
            result,
            OpResult::Failed {
                error: CoreError::StorageUnavailable { .. }
            }
        ));
        store.broken.set(false);
        assert_eq!(
            table.execute(&store, &get(), 0),
            OpResult::Value {
                value: 1,
                exists: true,
                version: 1
            }
        );
    }

    #[test]
    fn overflow_leaves_the_value_unchanged() {
        let store = MapStore::default();
        let mut table = CounterTable::new();
        table.execute(&store, &incr(i64::MAX), 0);
        assert_eq!(
            table.execute(&store, &incr(1), 0),
            OpResult::Failed {
                error: CoreError::Overflow
            }
        );
        assert_eq!(
            table.execute(&store, &get(), 0),
            OpResult::Value {
                value: i64::MAX,
                exists: true,
                version: 1
            }
        );
    }

    #[test]
    fn expired_counters_vanish_from_memory_and_storage() {
        let store = MapStore::default();
        let mut table = CounterTable::new();
        let (ns, key) = names();
        table.execute(
            &store,
            &CounterOp::Set {
                ns,
                key,
                value: 5,
                ttl: Some(1),
            },
            0,
        );
        assert_eq!(
            table.execute(&store, &get(), 999),
            OpResult::Value {
                value: 5,
                exists: true,
                version: 1
            }
        );
        assert_eq!(
            table.execute(&store, &get(), 1_000),
            OpResult::Value {
                value: 0,
                exists: false,
                version: 0
            }
        );
        assert!(store.rows.borrow().is_empty());
    }

    #[test]
    fn delete_reports_whether_a_live_counter_existed() {
        let store = MapStore::default();
        let mut table = CounterTable::new();
        let (ns, key) = names();
        let delete = CounterOp::Delete { ns, key };
        assert_eq!(
            table.execute(&store, &delete, 0),
            OpResult::Deleted { deleted: false }
        );
        table.execute(&store, &incr(1), 0);
        assert_eq!(
            table.execute(&store, &delete, 0),
            OpResult::Deleted { deleted: true }
        );
        assert_eq!(
            table.execute(&store, &get(), 0),
            OpResult::Value {
                value: 0,
                exists: false,
                version: 0
            }
        );
        assert_eq!(table.ops(), 4);
    }
}
