//! Idempotency keys: a write sent again with the same `Idempotency-Key` within 24 hours gets
//! the first answer back and is not applied again; the same key with a different request is
//! refused. This makes client retries safe (a retry after a lost answer cannot count twice).
//!
//! A record holds the request's fingerprint (its op, canonically encoded) and the first
//! answer, and is stored by the shard in the same turn as the write it describes, so both are
//! durable together or not at all. Only applied writes are recorded: a refused op changed
//! nothing, and sending it again simply runs it again.

use serde::{Deserialize, Serialize};

use crate::counter_table::storage_error;
use crate::protocol::{OpResult, ShardOp};
use crate::CoreError;

/// How long a key is remembered.
pub const IDEMPOTENCY_WINDOW_MS: u64 = 24 * 60 * 60 * 1000;
/// Longest key.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;

/// A validated idempotency key: 1 to 128 visible ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// # Errors
    /// [`CoreError::InvalidIdempotencyKey`] when `raw` breaks the rule.
    pub fn new(raw: &str) -> Result<Self, CoreError> {
        let ok = (1..=MAX_IDEMPOTENCY_KEY_LEN).contains(&raw.len())
            && raw.bytes().all(|b| (0x21..=0x7e).contains(&b));
        if ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(CoreError::InvalidIdempotencyKey { max: MAX_IDEMPOTENCY_KEY_LEN })
        }
    }

    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for IdempotencyKey {
    type Error = CoreError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(&value)
    }
}

impl From<IdempotencyKey> for String {
    fn from(value: IdempotencyKey) -> Self {
        value.0
    }
}

/// A remembered write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyRecord {
    pub fingerprint: String,
    /// The first answer, encoded as the shard protocol encodes results.
    pub result: String,
    pub created_at_ms: u64,
}

/// Durable storage for records; synchronous, like the other shard stores.
pub trait IdempotencyStore {
    /// The record for `key`, if one is stored.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn load_record(&self, key: &IdempotencyKey) -> Result<Option<IdempotencyRecord>, String>;
    /// Stores a record in place of any older one.
    ///
    /// # Errors
    /// A description of the storage failure.
    fn save_record(&self, key: &IdempotencyKey, record: &IdempotencyRecord) -> Result<(), String>;
}

/// What to do with a keyed write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recall {
    /// Not seen within the window: apply it, then [`remember`] the answer.
    Apply,
    /// Seen with the same request: answer this, apply nothing.
    Replay(OpResult),
}

/// The canonical encoding of a request, compared on a repeat.
#[must_use]
pub fn fingerprint(op: &ShardOp) -> String {
    serde_json::to_string(op).unwrap_or_default()
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
    let Some(record) = store.load_record(key).map_err(storage_error)? else {
        return Ok(Recall::Apply);
    };
    if now_ms.saturating_sub(record.created_at_ms) >= IDEMPOTENCY_WINDOW_MS {
        return Ok(Recall::Apply);
    }
    if record.fingerprint != fingerprint(op) {
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
        fingerprint: fingerprint(op),
        result: serde_json::to_string(result).unwrap_or_default(),
        created_at_ms: now_ms,
    };
    store.save_record(key, &record).map_err(storage_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_store::MapStore;
    use crate::{Key, Namespace};

    fn incr(by: i64) -> ShardOp {
        ShardOp::Incr { ns: Namespace::new("n").unwrap(), key: Key::new("k").unwrap(), by, ttl: None }
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
    fn records_lapse_after_the_window() {
        let store = MapStore::default();
        let key = IdempotencyKey::new("abc").unwrap();
        remember(&store, &key, &incr(1), &OpResult::Stored, 0).unwrap();
        assert_eq!(recall(&store, &key, &incr(2), IDEMPOTENCY_WINDOW_MS), Ok(Recall::Apply));
    }
}
