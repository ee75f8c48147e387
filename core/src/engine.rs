//! A shard's state machine: runs [`ShardOp`]s against its counters and cache entries.

use crate::cache_table::{CacheBounds, CacheStore, CacheTable};
use crate::counter_table::CounterTable;
use crate::idempotency::{self, IdempotencyStore, Recall};
use crate::protocol::{OpResult, ShardCall, ShardOp};
use crate::{CounterStore, CounterWrite};

/// Everything a shard stores.
pub trait ShardStore: CounterStore + CacheStore + IdempotencyStore {}
impl<T: CounterStore + CacheStore + IdempotencyStore> ShardStore for T {}

/// The in-memory side of one shard.
#[derive(Debug)]
pub struct ShardEngine {
    pub counters: CounterTable,
    pub cache: CacheTable,
    ops: u64,
}

impl ShardEngine {
    /// A shard whose cache holds at most `cache_bounds`.
    #[must_use]
    pub fn new(cache_bounds: CacheBounds) -> Self {
        Self { counters: CounterTable::new(), cache: CacheTable::new(cache_bounds), ops: 0 }
    }

    /// Ops executed since the shard started.
    #[must_use]
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// Runs one call at `now_ms`: a keyed write seen before is answered from its record.
    pub fn execute_call(&mut self, store: &impl ShardStore, call: &ShardCall, now_ms: u64) -> OpResult {
        let Some(key) = call.idempotency_key.as_ref().filter(|_| call.op.is_write()) else {
            return self.execute(store, &call.op, now_ms);
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
                let result = self.execute(store, &call.op, now_ms);
                if matches!(result, OpResult::Failed { .. }) {
                    return result;
                }
                // The write is applied; if its record cannot be stored the answer still stands,
                // but a retry could apply it again, so say so rather than hide it.
                match idempotency::remember(store, key, &call.op, &result, now_ms) {
                    Ok(()) => result,
                    Err(error) => OpResult::Failed { error },
                }
            }
        }
    }

    /// Runs one op at `now_ms`; a refused op reports its error and changes nothing.
    pub fn execute(&mut self, store: &impl ShardStore, op: &ShardOp, now_ms: u64) -> OpResult {
        self.ops += 1;
        let (ns, key) = op.target();
        let result = match op {
            ShardOp::Get { .. } => self.counters.get(store, ns, key, now_ms),
            ShardOp::Incr { by, ttl, .. } => {
                self.counters.write(store, ns, key, CounterWrite::Add(*by), *ttl, now_ms)
            }
            ShardOp::Decr { by, ttl, .. } => {
                self.counters.write(store, ns, key, CounterWrite::Subtract(*by), *ttl, now_ms)
            }
            ShardOp::Set { value, ttl, .. } => {
                self.counters.write(store, ns, key, CounterWrite::Set(*value), *ttl, now_ms)
            }
            ShardOp::Delete { .. } => self.counters.delete(store, ns, key, now_ms),
            ShardOp::CacheGet { .. } => self.cache.get(store, ns, key, now_ms),
            ShardOp::CachePut { value, content_type, ttl, .. } => {
                self.cache.put(store, ns, key, value, content_type.as_str(), *ttl, now_ms)
            }
            ShardOp::CacheDelete { .. } => self.cache.delete(store, ns, key, now_ms),
        };
        result.unwrap_or_else(|error| OpResult::Failed { error })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_store::MapStore;
    use crate::{CoreError, Key, Namespace};

    #[test]
    fn counters_and_cache_entries_with_one_name_are_separate() {
        let store = MapStore::default();
        let mut engine = ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 });
        let (ns, key) = (Namespace::new("n").unwrap(), Key::new("k").unwrap());
        let incr = ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: 3, ttl: None };
        let put = ShardOp::CachePut {
            ns: ns.clone(),
            key: key.clone(),
            value: b"v".to_vec(),
            content_type: crate::ContentType::new("text/plain").unwrap(),
            ttl: None,
        };
        assert_eq!(engine.execute(&store, &incr, 0), OpResult::Value { value: 3, exists: true, version: 1 });
        assert_eq!(engine.execute(&store, &put, 0), OpResult::Stored);
        assert_eq!(
            engine.execute(&store, &ShardOp::Delete { ns: ns.clone(), key: key.clone() }, 0),
            OpResult::Deleted { deleted: true }
        );
        assert_eq!(
            engine.execute(&store, &ShardOp::CacheGet { ns, key }, 0),
            OpResult::Entry { value: b"v".to_vec(), content_type: "text/plain".into() }
        );
        assert_eq!(engine.ops(), 4);
    }

    #[test]
    fn refused_ops_report_their_error() {
        let store = MapStore::default();
        let mut engine = ShardEngine::new(CacheBounds { bytes: 1_000, entries: 10 });
        let op = ShardOp::CacheGet { ns: Namespace::new("n").unwrap(), key: Key::new("k").unwrap() };
        assert_eq!(engine.execute(&store, &op, 0), OpResult::Failed { error: CoreError::NotFound });
    }
}
