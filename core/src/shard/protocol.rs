//! The operations a shard executes and their results.
//!
//! The worker sends a shard `{"ops": [...]}` and gets `{"results": [...]}` back, in order, one
//! result per op. Every single-key route is a one-op call and a batch is one call per shard, so
//! the worker and the shard speak one format whatever the route. Cache bytes travel as base64.

use serde::{Deserialize, Serialize};

use crate::names::IdempotencyKey;
use crate::shard::settings::{CounterSettings, Guard};
use crate::visits::day::Day;
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
    /// Creates a counter with its own rules; refused while a live one has the name. With an
    /// `admin_key`, the counter is owned by it: the shard keeps its hash in the rules, and the
    /// key itself only in the answer ([`OpResult::Created`]), so that a retry of the same
    /// keyed create is answered the same key.
    Create {
        ns: Namespace,
        key: Key,
        value: i64,
        settings: CounterSettings,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        admin_key: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl: Option<u32>,
    },
    /// A change to an existing counter, made only if `guard` holds for the counter's rules.
    Guarded {
        ns: Namespace,
        key: Key,
        change: GuardedChange,
        guard: Guard,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ttl: Option<u32>,
    },
    /// A counter with its creation time, expiry and rules.
    Info {
        ns: Namespace,
        key: Key,
    },
    /// A counter's counts in the days `from` to `to` (both included), and with `unique` its
    /// distinct visitors in each and in all of them (see [`crate::shard::visit_table`]).
    Days {
        ns: Namespace,
        key: Key,
        from: Day,
        to: Day,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        unique: bool,
    },
}

/// What a [`ShardOp::Guarded`] does to its counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardedChange {
    Add(i64),
    Set(i64),
    Delete,
}

impl GuardedChange {
    /// The amount a bounds guard checks: what the change adds.
    #[must_use]
    pub fn amount(self) -> i64 {
        match self {
            Self::Add(by) => by,
            Self::Set(_) | Self::Delete => 0,
        }
    }
}

/// The kinds of op: one row each in [`OP_TABLE`], one variant each in [`ShardOp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    Get,
    Incr,
    Decr,
    Set,
    Delete,
    CacheGet,
    CachePut,
    CacheDelete,
    Create,
    Guarded,
    Info,
    Days,
}

/// What an op reads or writes: counters and cache entries are separate even under one name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    Counter,
    CacheEntry,
}

/// One row of the op table: what the batch parser accepts, what the router authorizes and what
/// the shard's expiry reads for one kind of op.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpSpec {
    pub kind: OpKind,
    /// The op's name on the wire (`"op"` of a batch entry and of the shard protocol).
    pub name: &'static str,
    /// Fields the op takes besides `ns`, `key` and (on writes) `idempotency_key`.
    pub fields: &'static [&'static str],
    /// Whether the op changes state: it needs the write right and may carry an idempotency key.
    pub writes: bool,
    pub subject: Subject,
    /// Whether a `/v1/batch` may carry the op. The counter-rule ops serve the compatible
    /// routes only, whose answers a batch has no shape for.
    pub batched: bool,
}

impl OpSpec {
    /// Whether a `ttl` sets when what the op writes lapses (the shard schedules its alarm by it).
    #[must_use]
    pub fn takes_ttl(&self) -> bool {
        self.fields.contains(&"ttl")
    }
}

/// The op table, in [`OpKind`] order. Adding an op kind is a row here, a variant of [`OpKind`]
/// and [`ShardOp`], and the match arms the compiler then asks for.
pub const OP_TABLE: [OpSpec; 12] = [
    spec(OpKind::Get, "get", &[], false, Subject::Counter),
    spec(OpKind::Incr, "incr", &["by", "ttl"], true, Subject::Counter),
    spec(OpKind::Decr, "decr", &["by", "ttl"], true, Subject::Counter),
    spec(OpKind::Set, "set", &["value", "ttl"], true, Subject::Counter),
    spec(OpKind::Delete, "delete", &[], true, Subject::Counter),
    spec(OpKind::CacheGet, "cache_get", &[], false, Subject::CacheEntry),
    spec(OpKind::CachePut, "cache_put", &["value", "ttl", "content_type"], true, Subject::CacheEntry),
    spec(OpKind::CacheDelete, "cache_delete", &[], true, Subject::CacheEntry),
    unbatched(OpKind::Create, "create", &["value", "settings", "admin_key", "ttl"], true),
    unbatched(OpKind::Guarded, "guarded", &["change", "guard", "ttl"], true),
    unbatched(OpKind::Info, "info", &[], false),
    unbatched(OpKind::Days, "days", &["from", "to", "unique"], false),
];

const fn spec(
    kind: OpKind,
    name: &'static str,
    fields: &'static [&'static str],
    writes: bool,
    subject: Subject,
) -> OpSpec {
    OpSpec { kind, name, fields, writes, subject, batched: true }
}

/// A row for an op on counters that `/v1/batch` does not carry.
const fn unbatched(
    kind: OpKind,
    name: &'static str,
    fields: &'static [&'static str],
    writes: bool,
) -> OpSpec {
    OpSpec { kind, name, fields, writes, subject: Subject::Counter, batched: false }
}

impl OpKind {
    /// The op's row of [`OP_TABLE`].
    #[must_use]
    pub fn spec(self) -> &'static OpSpec {
        &OP_TABLE[self as usize]
    }

    /// The kind named `name` on the wire.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        OP_TABLE.iter().find(|spec| spec.name == name).map(|spec| spec.kind)
    }

    /// The batchable kind named `name`.
    #[must_use]
    pub fn batched_from_name(name: &str) -> Option<Self> {
        Self::from_name(name).filter(|kind| kind.spec().batched)
    }

    /// Every op name a batch takes, for error messages: "get, incr, ..., cache_delete".
    #[must_use]
    pub fn names() -> String {
        OP_TABLE.iter().filter(|spec| spec.batched).map(|spec| spec.name).collect::<Vec<_>>().join(", ")
    }
}

impl ShardOp {
    /// The op's kind, whose row of [`OP_TABLE`] says how it is handled.
    #[must_use]
    pub fn kind(&self) -> OpKind {
        match self {
            Self::Get { .. } => OpKind::Get,
            Self::Incr { .. } => OpKind::Incr,
            Self::Decr { .. } => OpKind::Decr,
            Self::Set { .. } => OpKind::Set,
            Self::Delete { .. } => OpKind::Delete,
            Self::CacheGet { .. } => OpKind::CacheGet,
            Self::CachePut { .. } => OpKind::CachePut,
            Self::CacheDelete { .. } => OpKind::CacheDelete,
            Self::Create { .. } => OpKind::Create,
            Self::Guarded { .. } => OpKind::Guarded,
            Self::Info { .. } => OpKind::Info,
            Self::Days { .. } => OpKind::Days,
        }
    }

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
            | Self::CacheDelete { ns, key }
            | Self::Create { ns, key, .. }
            | Self::Guarded { ns, key, .. }
            | Self::Info { ns, key }
            | Self::Days { ns, key, .. } => (ns, key),
        }
    }

    /// The TTL the op writes with, in seconds, if it takes one and was given one.
    #[must_use]
    pub fn ttl(&self) -> Option<u32> {
        match self {
            Self::Incr { ttl, .. }
            | Self::Decr { ttl, .. }
            | Self::Set { ttl, .. }
            | Self::CachePut { ttl, .. }
            | Self::Create { ttl, .. }
            | Self::Guarded { ttl, .. } => *ttl,
            Self::Get { .. }
            | Self::Delete { .. }
            | Self::CacheGet { .. }
            | Self::CacheDelete { .. }
            | Self::Info { .. }
            | Self::Days { .. } => None,
        }
    }

    /// Whether the op is on a cache entry rather than a counter.
    #[must_use]
    pub fn is_cache(&self) -> bool {
        self.kind().spec().subject == Subject::CacheEntry
    }

    /// Whether the op changes state.
    #[must_use]
    pub fn is_write(&self) -> bool {
        self.kind().spec().writes
    }
}

/// An op as sent to a shard, with the idempotency key of the write it belongs to, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardCall {
    #[serde(flatten)]
    pub op: ShardOp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<IdempotencyKey>,
    /// The worker found the caller holds an operator's token for the namespace: a counter's
    /// owner key does not bind it (see [`crate::shard::owner`]). Never taken from a client's
    /// body: the batch parser sets it false, and only the worker's token check sets it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operator: bool,
    /// For an increment or decrement: the day it counts in, and the visitors it counts (see
    /// [`Visit`]). Ignored on every other op.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub visit: Option<Visit>,
    /// A batch's increment asked to count its visitor (`"unique": true`): the worker, which
    /// knows the request, makes the visitor's hash into `visit`. Never sent to a shard.
    #[serde(skip)]
    pub count_visitor: bool,
}

/// What a count is part of beside the total: the day it lands in (in its namespace's zone, see
/// [`crate::visits::day`]) and, when unique visitors are counted, each visitor's
/// [`crate::visits::visitor::visitor_hash`]: a hash of the key, the client's address and user
/// agent that the shard hashes again with its salt of the day before it counts it (the hash
/// itself is never stored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Visit {
    pub day: Day,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub visitors: Vec<u64>,
}

impl From<ShardOp> for ShardCall {
    fn from(op: ShardOp) -> Self {
        Self { op, idempotency_key: None, operator: false, visit: None, count_visitor: false }
    }
}

/// The outcome of one op.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpResult {
    /// A counter's value after the op (reads and value-changing writes).
    Value { value: i64, exists: bool, version: u64 },
    /// A one-way op taken by a relay, which applies it at the key's shard within its window
    /// (see `crate::relay`).
    Relayed,
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
    /// A guarded change of a counter's value: the value before and after.
    Changed { old_value: i64, value: i64, version: u64 },
    /// A counter created with an owner's admin key, and that key: the one place it is kept
    /// (in the idempotency record of a keyed create, for its window).
    Created { value: i64, version: u64, admin_key: String },
    /// A live counter as [`ShardOp::Info`] sees it.
    Info(Box<CounterInfo>),
    /// A counter's days as [`ShardOp::Days`] asked them.
    Days(Box<DaysAnswer>),
}

/// A counter's total, and its counts on the days asked for that had any (in order), with the
/// distinct visitors of each and of all of them together when asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaysAnswer {
    pub value: i64,
    pub exists: bool,
    pub days: Vec<DayTally>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uniques: Option<u64>,
}

/// One day's count, and its distinct visitors when asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayTally {
    pub day: Day,
    pub count: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uniques: Option<u64>,
}

/// The shard count a caller placed a request's keys under, and the shard it sent it to (which
/// is how a shard learns its own index: its object is `shard-{shard}` under any count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placed {
    pub shards: u32,
    pub shard: u32,
}

/// Ops a shard executed by kind, for the figures Abacus reports per command (`get`, `hit`,
/// `create`): each counts ops as the shard ran them, so a one-way flush's summed increment is one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commands {
    pub reads: u64,
    pub increments: u64,
    pub creates: u64,
}

impl Commands {
    /// Counts `op` if it is of a kind counted.
    pub fn count(&mut self, op: &ShardOp) {
        match op.kind() {
            OpKind::Get => self.reads += 1,
            OpKind::Incr => self.increments += 1,
            OpKind::Create => self.creates += 1,
            OpKind::Decr
            | OpKind::Set
            | OpKind::Delete
            | OpKind::CacheGet
            | OpKind::CachePut
            | OpKind::CacheDelete
            | OpKind::Guarded
            | OpKind::Info
            | OpKind::Days => {}
        }
    }

    /// Both counts added together.
    #[must_use]
    pub fn plus(self, other: Commands) -> Commands {
        Commands {
            reads: self.reads + other.reads,
            increments: self.increments + other.increments,
            creates: self.creates + other.creates,
        }
    }
}

/// A live counter with its creation time, expiry and rules (the admin key's hash stays in the
/// shard: only whether there is one leaves it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterInfo {
    pub value: i64,
    pub version: u64,
    pub created_ms: Option<u64>,
    pub expires_at_ms: Option<u64>,
    pub enable_reset: bool,
    pub update_lowerbound: i64,
    pub update_upperbound: i64,
    pub has_admin_key: bool,
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
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardRequest {
    pub ops: Vec<ShardCall>,
    /// Bytes of cache values the answer may carry (see [`crate::shard::answer_budget`]); absent means
    /// the most any answer may.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_budget: Option<u64>,
    /// Applies the request's ops at most once as a whole, under one idempotency record (see
    /// [`crate::shard::receipt`]): what the one-way flusher sends, so that a flush of many keys
    /// costs one record row, not one per key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<IdempotencyKey>,
    /// The shard count the sender placed the ops' keys under, and the shard it sent them to:
    /// a shard forwards the ops of a sender still on another count to their homes (see
    /// [`crate::shard::migration`]). Absent means the shard's own count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed: Option<Placed>,
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
    /// The groups those calls' writes ran in, one transaction each (a call that only reads is
    /// in none): calls that write and arrive while the shard's previous group is being made
    /// durable run together (see [`crate::shard::engine::ShardEngine::run_group`]).
    #[serde(default)]
    pub groups: u64,
    /// Calls refused with nothing applied since the object started, because its next group
    /// held as many ops or bytes as it takes ([`crate::shard::refusal::Refusal::Overloaded`]).
    #[serde(default)]
    pub overloaded: u64,
    /// Ops executed since the shard's object last started.
    pub ops: u64,
    /// Live counters.
    pub keys: u64,
    /// Counter rows in storage, including expired ones not yet reclaimed.
    pub stored_counters: u64,
    /// Live cache entries.
    pub cache_entries: u64,
    /// Bytes charged for live cache entries (see [`crate::shard::cache_table::entry_charge`]).
    pub cache_bytes: u64,
    /// Cache entries evicted to stay within the bounds since the object started (at start-up
    /// included).
    pub evictions: u64,
    /// Expired counters and entries whose storage was reclaimed since the object started.
    pub reclaimed: u64,
    /// Of the ops executed since the object started, the counter reads, increments and creates.
    #[serde(default)]
    pub commands: Commands,
    /// Counters held in memory now; the others are read from storage when next used.
    #[serde(default)]
    pub counters_in_memory: u64,
    /// SQLite rows read by the object's statements since it started (the platform bills them).
    #[serde(default)]
    pub rows_read: u64,
    /// SQLite rows written by the object's statements since it started (the platform bills them).
    #[serde(default)]
    pub rows_written: u64,
    /// Keys this shard still holds that belong to another shard under the count being changed
    /// to (see [`crate::shard::migration`]); 0 when no change is under way.
    #[serde(default)]
    pub keys_to_move: u64,
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
    pub fn fields(&self) -> [(&'static str, u64); 14] {
        [
            ("calls", self.calls),
            ("groups", self.groups),
            ("overloaded", self.overloaded),
            ("ops", self.ops),
            ("keys", self.keys),
            ("stored_counters", self.stored_counters),
            ("cache_entries", self.cache_entries),
            ("cache_bytes", self.cache_bytes),
            ("evictions", self.evictions),
            ("reclaimed", self.reclaimed),
            ("counters_in_memory", self.counters_in_memory),
            ("rows_read", self.rows_read),
            ("rows_written", self.rows_written),
            ("keys_to_move", self.keys_to_move),
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

    fn one_of_each_kind() -> Vec<ShardOp> {
        let (ns, key) = (Namespace::new("n").unwrap(), Key::new("k").unwrap());
        let content_type = ContentType::new("text/plain").unwrap();
        vec![
            ShardOp::Get { ns: ns.clone(), key: key.clone() },
            ShardOp::Incr { ns: ns.clone(), key: key.clone(), by: 1, ttl: Some(5) },
            ShardOp::Decr { ns: ns.clone(), key: key.clone(), by: 1, ttl: Some(5) },
            ShardOp::Set { ns: ns.clone(), key: key.clone(), value: 1, ttl: Some(5) },
            ShardOp::Delete { ns: ns.clone(), key: key.clone() },
            ShardOp::CacheGet { ns: ns.clone(), key: key.clone() },
            ShardOp::CachePut {
                ns: ns.clone(),
                key: key.clone(),
                value: vec![1],
                content_type,
                ttl: Some(5),
            },
            ShardOp::CacheDelete { ns: ns.clone(), key: key.clone() },
            ShardOp::Create {
                ns: ns.clone(),
                key: key.clone(),
                value: 0,
                settings: CounterSettings::default(),
                admin_key: Some("k".into()),
                ttl: Some(5),
            },
            ShardOp::Guarded {
                ns: ns.clone(),
                key: key.clone(),
                change: GuardedChange::Add(1),
                guard: Guard::Bounds,
                ttl: Some(5),
            },
            ShardOp::Info { ns: ns.clone(), key: key.clone() },
            ShardOp::Days { ns, key, from: Day(1), to: Day(2), unique: true },
        ]
    }

    #[test]
    fn the_op_table_agrees_with_the_wire_format() {
        let ops = one_of_each_kind();
        assert_eq!(ops.len(), OP_TABLE.len());
        for (index, op) in ops.iter().enumerate() {
            let spec = op.kind().spec();
            assert_eq!(spec.kind as usize, index, "the table is in OpKind order");
            let wire = serde_json::to_value(op).unwrap();
            assert_eq!(wire["op"], spec.name, "the serde tag is the table's name");
            assert_eq!(OpKind::from_name(spec.name), Some(spec.kind));
            // Every field the table lists is one the op carries, and no other.
            let mut carried: Vec<&str> = wire
                .as_object()
                .unwrap()
                .keys()
                .map(String::as_str)
                .filter(|f| !["op", "ns", "key"].contains(f))
                .collect();
            let mut listed = spec.fields.to_vec();
            carried.sort_unstable();
            listed.sort_unstable();
            assert_eq!(carried, listed, "{}", spec.name);
            assert_eq!(spec.takes_ttl(), op.ttl().is_some(), "{}", spec.name);
            assert_eq!(
                spec.writes,
                !matches!(
                    op,
                    ShardOp::Get { .. }
                        | ShardOp::CacheGet { .. }
                        | ShardOp::Info { .. }
                        | ShardOp::Days { .. }
                )
            );
        }
        assert_eq!(OpKind::from_name("frobnicate"), None);
        assert_eq!(OpKind::batched_from_name("create"), None);
        assert!(!OpKind::names().contains("guarded"));
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
