//! Idempotency keys: a write sent again with the same `Idempotency-Key` within 24 hours gets
//! the first answer back and is not applied again; the same key with a different request is
//! refused. This makes client retries safe (a retry after a lost answer cannot count twice).
//!
//! A record is scoped to the key it writes ([`RecordScope`]) and holds a fixed-size digest of
//! the request and the first answer (small: writes answer a value, a deletion or "stored"),
//! never the request itself, so a keyed 1 MiB cache write leaves a record of a few hundred
//! bytes. It is stored by the shard in the same turn as the write it describes, so both are
//! durable together or not at all. Only applied writes are recorded: a refused op changed
//! nothing, and sending it again simply runs it again.

use std::io;

use serde::Serialize;
use xxhash_rust::xxh3::Xxh3;

use crate::shard::protocol::{OpResult, ShardOp};
use crate::{CoreError, IdempotencyKey, Key, Namespace, StoreResult};

/// How long a key is remembered.
pub const IDEMPOTENCY_WINDOW_MS: u64 = 24 * 60 * 60 * 1000;
/// What a record is about: one Idempotency-Key on one written counter or cache entry. The same
/// Idempotency-Key on another key, namespace or kind is another record, so a key chosen by one
/// client cannot refuse another client's write to a different key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RecordScope {
    pub idempotency_key: IdempotencyKey,
    /// `counter` or `cache`: a counter and a cache entry may share a name and are still two keys.
    pub kind: &'static str,
    pub ns: Namespace,
    pub key: Key,
}

impl RecordScope {
    /// Whether the record is of a cache write (else of a counter write).
    #[must_use]
    pub fn is_cache(&self) -> bool {
        self.kind == "cache"
    }

    /// The scope of `idempotency_key` sent with `op`.
    #[must_use]
    pub fn new(idempotency_key: &IdempotencyKey, op: &ShardOp) -> Self {
        let (ns, key) = op.target();
        Self {
            idempotency_key: idempotency_key.clone(),
            kind: if op.is_cache() { "cache" } else { "counter" },
            ns: ns.clone(),
            key: key.clone(),
        }
    }
}

/// A remembered write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    /// [`request_digest`] of the first request: 16 bytes whatever the request carried.
    pub request_digest: u128,
    /// The first answer, encoded as the shard protocol encodes results.
    pub result: String,
    pub created_at_ms: u64,
}

/// Durable storage for records; synchronous, like the other shard stores.
pub trait IdempotencyStore {
    /// The record for `scope`, if one is stored.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn load_record(&self, scope: &RecordScope) -> StoreResult<Option<IdempotencyRecord>>;
    /// Stores a record in place of any older one with the same scope.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn save_record(&self, scope: &RecordScope, record: &IdempotencyRecord) -> StoreResult<()>;
    /// Stores several records (distinct scopes). A store that can write many rows in one
    /// statement does so here.
    ///
    /// # Errors
    /// A description of the storage failure; the caller's transaction undoes what was stored.
    fn save_records(&self, records: &[(RecordScope, IdempotencyRecord)]) -> StoreResult<()> {
        records.iter().try_for_each(|(scope, record)| self.save_record(scope, record))
    }
    /// When the records now being written began to be kept together (their generation's
    /// start), or `None` when no record is stored at all.
    ///
    /// Records are kept in two generations, the current and the one before it, so that lapsed
    /// records go a whole generation at a time instead of being looked for one by one (records
    /// are found by key; finding the lapsed ones would read them all).
    ///
    /// # Errors
    /// A description of the storage failure.
    fn records_generation(&self) -> StoreResult<Option<u64>>;
    /// Drops the generation before the current one, keeps the current one as the one before,
    /// and starts a new generation at `now_ms`. The caller does so only once the current
    /// generation began [`IDEMPOTENCY_WINDOW_MS`] or more ago, so that every record dropped was
    /// written before that: its window has passed.
    ///
    /// # Errors
    /// A description of the storage failure; the caller's transaction undoes what was done.
    fn start_records_generation(&self, now_ms: u64) -> StoreResult<()>;
}

/// What to do with a keyed write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recall {
    /// Not seen within the window: apply it, then [`remember`] the answer.
    Apply,
    /// Seen with the same request: answer this, apply nothing.
    Replay(OpResult),
}

/// The digest compared on a repeat: xxh3-128 of the op's canonical encoding (its shard
/// protocol JSON), streamed into the hash rather than built as a string. A non-cryptographic
/// hash is enough: records are per scope, so the only requests that could collide are writes
/// to the same key under the same Idempotency-Key, and a collision would replay the first
/// answer to its own sender instead of refusing the second request; it cannot apply or hide
/// anyone else's write.
#[must_use]
pub fn request_digest(op: &ShardOp) -> u128 {
    match op {
        // Each try of a create draws its admin key afresh: a retry is the same request, and is
        // answered the key of the first. The key's place is kept, so that a create without one
        // is another request.
        ShardOp::Create { admin_key: Some(_), .. } => {
            let mut tried = op.clone();
            if let ShardOp::Create { admin_key, .. } = &mut tried {
                *admin_key = Some(String::new());
            }
            json_digest(&tried)
        }
        ShardOp::Get { .. }
        | ShardOp::Incr { .. }
        | ShardOp::Decr { .. }
        | ShardOp::Set { .. }
        | ShardOp::Delete { .. }
        | ShardOp::CacheGet { .. }
        | ShardOp::CachePut { .. }
        | ShardOp::CacheDelete { .. }
        | ShardOp::Create { .. }
        | ShardOp::Guarded { .. }
        | ShardOp::Info { .. }
        | ShardOp::Days { .. } => json_digest(op),
    }
}

/// xxh3-128 of `value`'s JSON encoding, streamed into the hash rather than built as a string:
/// the digest of requests (here, and of a whole receipted call in
/// [`crate::shard::receipt::digest`]).
pub(crate) fn json_digest(value: &impl Serialize) -> u128 {
    struct Digest(Xxh3);
    impl io::Write for Digest {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            self.0.update(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut digest = Digest(Xxh3::new());
    // Serializing a shard op cannot fail: every field is a string, a number or bytes.
    let _ = serde_json::to_writer(&mut digest, value);
    digest.0.digest128()
}

/// Looks `key` up for `op` at `now_ms`.
///
/// # Errors
/// [`CoreError::IdempotencyMismatch`] when the key was used for a different request,
/// [`CoreError::StorageUnavailable`] when storage fails.
pub fn recall(
    store: &impl IdempotencyStore,
    key: &IdempotencyKey,
    op: &ShardOp,
    now_ms: u64,
) -> Result<Recall, CoreError> {
    let Some(record) = store.load_record(&RecordScope::new(key, op)).map_err(CoreError::storage)? else {
        return Ok(Recall::Apply);
    };
    if now_ms.saturating_sub(record.created_at_ms) >= IDEMPOTENCY_WINDOW_MS {
        return Ok(Recall::Apply);
    }
    if record.request_digest != request_digest(op) {
        return Err(CoreError::IdempotencyMismatch);
    }
    let first = serde_json::from_str(&record.result)
        .map_err(|e| CoreError::StorageUnavailable { detail: format!("stored idempotent answer: {e}") })?;
    Ok(Recall::Replay(first))
}

/// Records the answer of an applied keyed write.
///
/// # Errors
/// [`CoreError::StorageUnavailable`] when storage fails.
pub fn remember(
    store: &impl IdempotencyStore,
    key: &IdempotencyKey,
    op: &ShardOp,
    result: &OpResult,
    now_ms: u64,
) -> Result<(), CoreError> {
    let record = IdempotencyRecord {
        request_digest: request_digest(op),
        result: serde_json::to_string(result).unwrap_or_default(),
        created_at_ms: now_ms,
    };
    store.save_record(&RecordScope::new(key, op), &record).map_err(CoreError::storage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::memory_store::MemoryStore as MapStore;
    use crate::ContentType;

    fn incr(by: i64) -> ShardOp {
        ShardOp::Incr { ns: Namespace::new("n").unwrap(), key: Key::new("k").unwrap(), by, ttl: None }
    }

    fn put(value: Vec<u8>) -> ShardOp {
        ShardOp::CachePut {
            ns: Namespace::new("n").unwrap(),
            key: Key::new("k").unwrap(),
            value,
            content_type: ContentType::new("text/plain").unwrap(),
            ttl: None,
        }
    }

    #[test]
    fn keys_are_visible_ascii_up_to_128() {
        assert!(IdempotencyKey::new("order-42:retry").is_ok());
        assert!(IdempotencyKey::new(&"k".repeat(128)).is_ok());
        for bad in ["", "has space", "tab\t", "é", &"k".repeat(129)] {
            assert_eq!(IdempotencyKey::new(bad).unwrap_err().code(), "invalid_idempotency_key", "{bad:?}");
        }
    }

    #[test]
    fn a_repeat_replays_and_a_different_request_is_refused() {
        let store = MapStore::default();
        let key = IdempotencyKey::new("abc").unwrap();
        assert_eq!(recall(&store, &key, &incr(1), 0), Ok(Recall::Apply));
        let first = OpResult::Value { value: 1, exists: true, version: 1 };
        remember(&store, &key, &incr(1), &first, 0).unwrap();
        assert_eq!(recall(&store, &key, &incr(1), 1_000), Ok(Recall::Replay(first)));
        assert_eq!(recall(&store, &key, &incr(2), 1_000), Err(CoreError::IdempotencyMismatch));
    }

    #[test]
    fn one_idempotency_key_on_two_namespaces_is_two_records() {
        let store = MapStore::default();
        let key = IdempotencyKey::new("abc").unwrap();
        let elsewhere =
            ShardOp::Incr { ns: Namespace::new("m").unwrap(), key: Key::new("k").unwrap(), by: 2, ttl: None };
        let (first, second) = (
            OpResult::Value { value: 1, exists: true, version: 1 },
            OpResult::Value { value: 2, exists: true, version: 1 },
        );
        remember(&store, &key, &incr(1), &first, 0).unwrap();
        assert_eq!(recall(&store, &key, &elsewhere, 1), Ok(Recall::Apply));
        remember(&store, &key, &elsewhere, &second, 1).unwrap();
        assert_eq!(recall(&store, &key, &incr(1), 2), Ok(Recall::Replay(first)));
        assert_eq!(recall(&store, &key, &elsewhere, 2), Ok(Recall::Replay(second)));
    }

    #[test]
    fn a_counter_and_a_cache_entry_with_one_name_are_two_records() {
        let store = MapStore::default();
        let key = IdempotencyKey::new("abc").unwrap();
        let entry = put(b"v".to_vec());
        remember(&store, &key, &incr(1), &OpResult::Value { value: 1, exists: true, version: 1 }, 0).unwrap();
        assert_eq!(recall(&store, &key, &entry, 1), Ok(Recall::Apply));
        assert_ne!(RecordScope::new(&key, &incr(1)), RecordScope::new(&key, &entry));
    }

    #[test]
    fn a_keyed_one_mib_put_leaves_a_small_record() {
        let store = MapStore::default();
        let key = IdempotencyKey::new("big").unwrap();
        let value = vec![7_u8; 1024 * 1024];
        remember(&store, &key, &put(value.clone()), &OpResult::Stored, 0).unwrap();
        let records = store.records.borrow().clone();
        let record = &records[&RecordScope::new(&key, &put(value.clone()))];
        assert_eq!(record.result, r#""stored""#);
        assert_eq!(recall(&store, &key, &put(value.clone()), 1), Ok(Recall::Replay(OpResult::Stored)));
        let mut changed = value;
        changed[512 * 1024] = 8;
        assert_eq!(recall(&store, &key, &put(changed), 1), Err(CoreError::IdempotencyMismatch));
    }

    #[test]
    fn the_digest_tells_apart_requests_that_differ_in_any_field() {
        let base = request_digest(&put(b"v".to_vec()));
        assert_eq!(request_digest(&put(b"v".to_vec())), base);
        let (ns, key) = (Namespace::new("n").unwrap(), Key::new("k").unwrap());
        let variants = [
            put(b"w".to_vec()),
            ShardOp::CachePut {
                ns: ns.clone(),
                key: key.clone(),
                value: b"v".to_vec(),
                content_type: ContentType::new("text/html").unwrap(),
                ttl: None,
            },
            ShardOp::CachePut {
                ns: ns.clone(),
                key: key.clone(),
                value: b"v".to_vec(),
                content_type: ContentType::new("text/plain").unwrap(),
                ttl: Some(1),
            },
            ShardOp::CachePut {
                ns: ns.clone(),
                key: Key::new("j").unwrap(),
                value: b"v".to_vec(),
                content_type: ContentType::new("text/plain").unwrap(),
                ttl: None,
            },
            ShardOp::CacheDelete { ns, key },
        ];
        for op in variants {
            assert_ne!(request_digest(&op), base, "{op:?}");
        }
    }

    #[test]
    fn records_lapse_after_the_window() {
        let store = MapStore::default();
        let key = IdempotencyKey::new("abc").unwrap();
        remember(&store, &key, &incr(1), &OpResult::Stored, 0).unwrap();
        assert_eq!(recall(&store, &key, &incr(2), IDEMPOTENCY_WINDOW_MS), Ok(Recall::Apply));
    }
}
