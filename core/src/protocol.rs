//! The operations a shard executes and their results.
//!
//! The worker sends a shard `{"ops": [...]}` and gets `{"results": [...]}` back, in order, one
//! result per op. Every single-key route is a one-op call and a batch is one call per shard, so
//! the worker and the shard speak one format whatever the route. Cache bytes travel as base64.

use serde::{Deserialize, Serialize};

use crate::names::IdempotencyKey;
use crate::{ContentType, CoreError, Key, Namespace};

/// One operation on one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum ShardOp {
    Get {
        ns: Namespace,
        key: Key,
    },
    Incr {
        ns: Namespace,
        key: Key,
        by: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl: Option<u32>,
    },
    Decr {
        ns: Namespace,
        key: Key,
        by: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl: Option<u32>,
    },
    Set {
        ns: Namespace,
        key: Key,
        value: i64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl: Option<u32>,
    },
    Delete {
        ns: Namespace,
        key: Key,
    },
    CacheGet {
        ns: Namespace,
        key: Key,
    },
    CachePut {
        ns: Namespace,
        key: Key,
        #[serde(with = "base64_bytes")]
        value: Vec<u8>,
        content_type: ContentType,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl: Option<u32>,
    },
    CacheDelete {
        ns: Namespace,
        key: Key,
    },
}

impl ShardOp {
    /// The namespace and key the op touches.
    #[must_use]
    pub fn target(&self) -> (&Namespace, &Key) {
        match self {
            Self::Get { ns, key }
            | Self::Incr { ns, key, .. }
            | Self::Decr { ns, key, .. }
            | Self::Set { ns, key, .. }
            | Self::Delete { ns, key }
            | Self::CacheGet { ns, key }
            | Self::CachePut { ns, key, .. }
            | Self::CacheDelete { ns, key } => (ns, key),
        }
    }

    /// Whether the op is on a cache entry rather than a counter (the two are separate even
    /// under one name).
    #[must_use]
    pub fn is_cache(&self) -> bool {
        matches!(self, Self::CacheGet { .. } | Self::CachePut { .. } | Self::CacheDelete { .. })
    }

    /// Whether the op changes state.
    #[must_use]
    pub fn is_write(&self) -> bool {
        !matches!(self, Self::Get { .. } | Self::CacheGet { .. })
    }
}

/// An op as sent to a shard, with the idempotency key of the write it belongs to, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardCall {
    #[serde(flatten)]
    pub op: ShardOp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<IdempotencyKey>,
}

impl From<ShardOp> for ShardCall {
    fn from(op: ShardOp) -> Self {
        Self { op, idempotency_key: None }
    }
}

/// The outcome of one op.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpResult {
    /// A counter's value after the op (reads and value-changing writes).
    Value { value: i64, exists: bool, version: u64 },
    /// The outcome of a delete, of a counter or of a cache entry.
    Deleted { deleted: bool },
    /// A cache entry that was found.
    Entry {
        #[serde(with = "base64_bytes")]
        value: Vec<u8>,
        content_type: String,
    },
    /// A cache entry was stored.
    Stored,
    /// The op was refused and changed nothing.
    Failed { error: CoreError },
    /// A repeat of a keyed write: the first answer, and nothing was applied this time.
    Replayed { first: Box<OpResult> },
}

impl OpResult {
    /// The answer itself, and whether it is a replay of an earlier one.
    #[must_use]
    pub fn unwrap_replay(self) -> (OpResult, bool) {
        match self {
            Self::Replayed { first } => (*first, true),
            other => (other, false),
        }
    }
}

/// What the worker sends a shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRequest {
    pub ops: Vec<ShardCall>,
    /// Bytes of cache values the answer may carry (see [`crate::answer_budget`]); absent means
    /// the most any answer may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_budget: Option<u64>,
}

/// What a shard answers: one result per op, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardResponse {
    pub results: Vec<OpResult>,
}

/// What a shard reports about itself for `/v1/stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ShardStats {
    /// Calls from the worker (each carrying one or more ops) since the object last started.
    pub calls: u64,
    /// Ops executed since the shard's object last started.
    pub ops: u64,
    /// Live counters.
    pub keys: u64,
    /// Counter rows in storage, including expired ones not yet reclaimed.
    pub stored_counters: u64,
    /// Live cache entries.
    pub cache_entries: u64,
    /// Bytes charged for live cache entries (see [`crate::cache_table::entry_charge`]).
    pub cache_bytes: u64,
    /// Cache entries evicted to stay within the bounds since the object started (at start-up
    /// included).
    pub evictions: u64,
    /// Expired counters and entries whose storage was reclaimed since the object started.
    pub reclaimed: u64,
}

/// Serde helper: bytes as a standard base64 string.
pub mod base64_bytes {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    /// # Errors
    /// Never; the signature is serde's.
    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&STANDARD.encode(bytes))
    }

    /// # Errors
    /// When the string is not valid base64.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(deserializer)?;
        STANDARD.decode(text).map_err(serde::de::Error::custom)
    }
}

impl ShardStats {
    /// The statistics as `(name, value)` pairs, in declaration order, for totals and metrics.
    #[must_use]
    pub fn fields(&self) -> [(&'static str, u64); 8] {
        [
            ("calls", self.calls),
            ("ops", self.ops),
            ("keys", self.keys),
            ("stored_counters", self.stored_counters),
            ("cache_entries", self.cache_entries),
            ("cache_bytes", self.cache_bytes),
            ("evictions", self.evictions),
            ("reclaimed", self.reclaimed),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ops_use_the_batch_field_names() {
        let op: ShardOp =
            serde_json::from_value(json!({"op": "incr", "ns": "pages", "key": "a/b", "by": 2})).unwrap();
        assert_eq!(op.target().1.as_str(), "a/b");
        assert!(op.is_write());
        let back = serde_json::to_value(&op).unwrap();
        assert_eq!(back, json!({"op": "incr", "ns": "pages", "key": "a/b", "by": 2}));
    }

    #[test]
    fn ops_with_bad_names_do_not_parse() {
        let bad = json!({"op": "get", "ns": "no spaces", "key": "k"});
        assert!(serde_json::from_value::<ShardOp>(bad).is_err());
    }

    #[test]
    fn cache_bytes_travel_as_base64() {
        let op = ShardOp::CachePut {
            ns: Namespace::new("c").unwrap(),
            key: Key::new("k").unwrap(),
            value: vec![0, 255, 10],
            content_type: ContentType::new("application/octet-stream").unwrap(),
            ttl: None,
        };
        let text = serde_json::to_string(&op).unwrap();
        assert!(text.contains("\"AP8K\""), "{text}");
        assert_eq!(serde_json::from_str::<ShardOp>(&text).unwrap(), op);
    }

    #[test]
    fn results_round_trip_exactly() {
        let results = vec![
            OpResult::Value { value: i64::MIN, exists: true, version: 3 },
            OpResult::Deleted { deleted: false },
            OpResult::Entry { value: b"hi".to_vec(), content_type: "text/plain".into() },
            OpResult::Stored,
            OpResult::Failed { error: CoreError::Overflow },
        ];
        let text = serde_json::to_string(&ShardResponse { results: results.clone() }).unwrap();
        assert!(text.contains("-9223372036854775808"));
        let back: ShardResponse = serde_json::from_str(&text).unwrap();
        assert_eq!(back.results, results);
    }
}
