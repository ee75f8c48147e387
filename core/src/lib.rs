//! `edgecount-core`: the logic of edgecount, free of any Workers, JavaScript or clock types, so
//! it builds and is tested both natively and for `wasm32-unknown-unknown`.
//!
//! Layout:
//! - [`error`]: [`CoreError`], every way an operation can be refused, with its stable code.
//! - [`names`]: the rules for the names a client sends ([`Namespace`], [`Key`],
//!   [`IdempotencyKey`]).
//! - [`partition`]: which shard owns a key ([`ShardId`], [`shard_for`]).
//! - [`number`]: exact parsing of signed 64-bit numbers and TTLs from queries and JSON.
//! - [`body`]: the JSON request bodies of the counter routes.
//! - [`counter`]: the counter state machine ([`Counter`], [`CounterWrite`]).
//! - [`protocol`]: the operations a shard executes and their results ([`ShardOp`],
//!   [`OpResult`]), shared by the worker and the shard so both speak one format.
//! - [`counter_table`]: a shard's counters in memory in front of its storage.
//! - [`cache_table`]: a shard's cache entries, bounded in bytes and number by LRU eviction.
//! - [`content_type`]: the content type kept with a cache entry, checked as a header value.
//! - [`engine`]: a shard's state machine, running ops on both ([`ShardEngine`]).
//! - [`answer_budget`]: the bytes of cache values one answer may carry.
//! - [`alarm_schedule`]: what a shard remembers of its reclaiming alarm, and retries.
//! - [`access`]: bearer tokens and the rights they grant ([`AccessPolicy`]).
//! - [`hot_keys`]: which keys are hot, in fixed memory ([`HotKeys`]).
//! - [`edge_cache`]: the worker's cache of hot reads and the max-age policy ([`EdgeCache`]).
//! - [`coalesce`]: merging concurrent single-key ops into one shard call ([`Coalescer`]).
//! - [`idempotency`]: replaying the first answer to a repeated keyed write.
//! - [`badge`]: the SVG counter badge and its query.
//! - [`batch`]: the `POST /v1/batch` codec: ops in, per-op results out.
//! - [`query`]: the query parameters of the counter routes.
//! - [`negotiate`]: whether a client asked for `text/plain` instead of JSON.
//! - [`rate_limit`]: a token bucket per client ([`rate_limit::ClientLimiter`]).
//!
//! Time is always passed in as milliseconds since the Unix epoch: `std::time` panics on wasm32.

pub mod access;
pub mod alarm_schedule;
pub mod answer_budget;
pub mod badge;
pub mod batch;
pub mod body;
pub mod cache_table;
pub mod coalesce;
pub mod content_type;
pub mod counter;
pub mod counter_table;
pub mod edge_cache;
pub mod engine;
pub mod error;
pub mod hot_keys;
pub mod idempotency;
pub mod names;
pub mod negotiate;
pub mod number;
pub mod partition;
pub mod protocol;
pub mod query;
pub mod rate_limit;
#[cfg(test)]
mod test_store;

pub use access::AccessPolicy;
pub use cache_table::{CacheBounds, CacheStore, CacheTable};
pub use coalesce::Coalescer;
pub use content_type::ContentType;
pub use counter::{Counter, CounterWrite};
pub use counter_table::{CounterStore, CounterTable};
pub use edge_cache::EdgeCache;
pub use engine::{ShardEngine, ShardStore};
pub use error::CoreError;
pub use hot_keys::HotKeys;
pub use names::{IdempotencyKey, Key, Namespace};
pub use partition::{shard_for, ShardId};
pub use protocol::{OpResult, ShardCall, ShardOp, ShardRequest, ShardResponse};
