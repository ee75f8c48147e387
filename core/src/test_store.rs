//! Storage in memory for unit tests, with a switch that makes every call fail.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use crate::cache_table::CacheStore;
use crate::idempotency::{IdempotencyRecord, IdempotencyStore, RecordScope};
use crate::{Counter, CounterStore, Key, Namespace};

type Slot = (Namespace, Key);

#[derive(Default)]
pub struct MapStore {
    pub counters: RefCell<HashMap<Slot, Counter>>,
    pub entries: RefCell<HashMap<Slot, (Vec<u8>, String)>>,
    pub records: RefCell<HashMap<RecordScope, IdempotencyRecord>>,
    pub broken: Cell<bool>,
}

impl MapStore {
    fn check(&self) -> Result<(), String> {
        if self.broken.get() {
            Err("disk on fire".into())
        } else {
            Ok(())
        }
    }
}

fn slot(ns: &Namespace, key: &Key) -> Slot {
    (ns.clone(), key.clone())
}

impl CounterStore for MapStore {
    fn load(&self, ns: &Namespace, key: &Key) -> Result<Option<Counter>, String> {
        self.check()?;
        Ok(self.counters.borrow().get(&slot(ns, key)).copied())
    }
    fn save(&self, ns: &Namespace, key: &Key, counter: &Counter) -> Result<(), String> {
        self.check()?;
        self.counters.borrow_mut().insert(slot(ns, key), *counter);
        Ok(())
    }
    fn remove(&self, ns: &Namespace, key: &Key) -> Result<(), String> {
        self.check()?;
        self.counters.borrow_mut().remove(&slot(ns, key));
        Ok(())
    }
}

impl CacheStore for MapStore {
    fn load_entry(&self, ns: &Namespace, key: &Key) -> Result<Option<(Vec<u8>, String)>, String> {
        self.check()?;
        Ok(self.entries.borrow().get(&slot(ns, key)).cloned())
    }
    fn save_entry(
        &self,
        ns: &Namespace,
        key: &Key,
        value: &[u8],
        content_type: &str,
        _expires_at_ms: Option<u64>,
        _now_ms: u64,
    ) -> Result<(), String> {
        self.check()?;
        self.entries.borrow_mut().insert(slot(ns, key), (value.to_vec(), content_type.to_owned()));
        Ok(())
    }
    fn remove_entry(&self, ns: &Namespace, key: &Key) -> Result<(), String> {
        self.check()?;
        self.entries.borrow_mut().remove(&slot(ns, key));
        Ok(())
    }
}

impl IdempotencyStore for MapStore {
    fn load_record(&self, scope: &RecordScope) -> Result<Option<IdempotencyRecord>, String> {
        self.check()?;
        Ok(self.records.borrow().get(scope).cloned())
    }
    fn save_record(&self, scope: &RecordScope, record: &IdempotencyRecord) -> Result<(), String> {
        self.check()?;
        self.records.borrow_mut().insert(scope.clone(), record.clone());
        Ok(())
    }
}
