//! The operations a shard executes and their results.
//!
//! The worker sends a shard `{"ops": [...]}` and gets `{"results": [...]}` back, in order, one
//! result per op. Every single-key route is a one-op call, so the worker and the shard speak
//! one format whatever the route.

use serde::{Deserialize, Serialize};

use crate::{CoreError, Key, Namespace};

/// One operation on one counter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum CounterOp {
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
}

impl CounterOp {
    /// The namespace and key the op touches.
    #[must_use]
    pub fn target(&self) -> (&Namespace, &Key) {
        match self {
            Self::Get { ns, key }
            | Self::Incr { ns, key, .. }
            | Self::Decr { ns, key, .. }
            | Self::Set { ns, key, .. }
            | Self::Delete { ns, key } => (ns, key),
        }
    }

    /// Whether the op changes state.
    #[must_use]
    pub fn is_write(&self) -> bool {
        !matches!(self, Self::Get { .. })
    }
}

/// The outcome of one op.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OpResult {
    /// A counter's value after the op (reads and value-changing writes).
    Value {
        value: i64,
        exists: bool,
        version: u64,
    },
    /// The outcome of a delete.
    Deleted { deleted: bool },
    /// The op was refused and changed nothing.
    Failed { error: CoreError },
}

/// What the worker sends a shard.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRequest {
    pub ops: Vec<CounterOp>,
}

/// What a shard answers: one result per op, in request order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardResponse {
    pub results: Vec<OpResult>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ops_use_the_batch_field_names() {
        let op: CounterOp =
            serde_json::from_value(json!({"op": "incr", "ns": "pages", "key": "a/b", "by": 2}))
                .unwrap();
        assert_eq!(op.target().1.as_str(), "a/b");
        assert!(op.is_write());
        let back = serde_json::to_value(&op).unwrap();
        assert_eq!(
            back,
            json!({"op": "incr", "ns": "pages", "key": "a/b", "by": 2})
        );
    }

    #[test]
    fn ops_with_bad_names_do_not_parse() {
        let bad = json!({"op": "get", "ns": "no spaces", "key": "k"});
        assert!(serde_json::from_value::<CounterOp>(bad).is_err());
    }

    #[test]
    fn results_round_trip_exactly() {
        let results = vec![
            OpResult::Value {
                value: i64::MIN,
                exists: true,
                version: 3,
            },
            OpResult::Deleted { deleted: false },
            OpResult::Failed {
                error: CoreError::Overflow,
            },
        ];
        let text = serde_json::to_string(&ShardResponse {
            results: results.clone(),
        })
        .unwrap();
        assert!(text.contains("-9223372036854775808"));
        let back: ShardResponse = serde_json::from_str(&text).unwrap();
        assert_eq!(back.results, results);
    }
}

/// What a shard reports about itself for `/v1/stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ShardStats {
    /// Ops executed since the shard's object last started.
    pub ops: u64,
    /// Live counters stored.
    pub keys: u64,
}
