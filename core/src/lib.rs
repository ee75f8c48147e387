//! `edgecount-core`: the logic of edgecount, free of any Workers, JavaScript or clock types, so
//! it builds and is tested both natively and for `wasm32-unknown-unknown`.
//!
//! Layout, by role (the shared vocabulary at the root):
//! - [`error`]: [`CoreError`], every way an operation can be refused, with its stable code, and
//!   [`StorageError`], what a shard's stores answer when they fail.
//! - [`names`]: the rules for the names a client sends ([`Namespace`], [`Key`],
//!   [`IdempotencyKey`]).
//! - [`number`]: exact parsing of signed 64-bit numbers and TTLs from queries and JSON.
//! - [`partition`]: which shard owns a key ([`ShardId`], [`shard_for`]).
//! - [`hashing`]: the seeded hash of every table keyed by names that clients choose.
//! - [`http`], what crosses the wire to clients:
//!   [`http::body`] (the JSON bodies of the counter routes), [`http::query`] (their query
//!   parameters), [`http::batch`] (the `POST /v1/batch` codec), [`http::badge`] (the SVG
//!   badge), [`http::etag`] (entity tags), [`http::negotiate`] (`text/plain` or JSON).
//! - [`shard`], what a shard is:
//!   [`shard::protocol`] (the ops, their table [`OpKind`], and their results),
//!   [`shard::engine`] (the state machine, [`ShardEngine`]), [`shard::counter`] and
//!   [`shard::counter_table`] (counters), [`shard::cache_table`] and [`shard::content_type`]
//!   (cache entries), [`shard::idempotency`] (replaying keyed writes),
//!   [`shard::answer_budget`] (the bytes one answer may carry), [`shard::alarm_schedule`]
//!   (the reclaiming alarm), [`shard::visit_table`] (a counter's days and visitor sketches),
//!   [`shard::memory_store`] (the stores in memory, for tests and benchmarks).
//! - [`edge`], what a worker isolate decides on its own:
//!   [`edge::hot_keys`] (which keys are hot), [`edge::read_cache`] (kept reads and the max-age
//!   policy), [`edge::access`] (tokens and rights), [`edge::rate_limit`] (a token bucket per client).
//!
//! - [`visits`], what a page view counts beside the total: [`visits::day`] (days in a
//!   namespace's time zone, the periods a read asks), [`visits::sketch`] (distinct visitors,
//!   exact while few, a HyperLogLog past that), [`visits::visitor`] (who a visitor is, hashed
//!   with a salt of the day so that nobody is kept).
//!
//! - [`compat`], the CountAPI- and Abacus-compatible routes' names, parameters and answers
//!   (a counter's own rules for them are [`shard::settings`]).
//!
//! Time is always passed in as milliseconds since the Unix epoch: `std::time` panics on wasm32.

pub mod compat;
pub mod edge;
pub mod error;
pub mod hashing;
pub mod http;
pub mod names;
pub mod number;
pub mod partition;
pub mod relay;
pub mod shard;
pub mod visits;

pub use edge::access::AccessPolicy;
pub use edge::hot_keys::HotKeys;
pub use edge::read_cache::EdgeCache;
pub use error::{CoreError, StorageError, StoreResult};
pub use names::{IdempotencyKey, Key, Namespace};
pub use partition::{shard_for, ShardId};
pub use shard::cache_table::{CacheBounds, CacheStore, CacheTable};
pub use shard::content_type::ContentType;
pub use shard::counter::{Counter, CounterWrite};
pub use shard::counter_table::{CounterStore, CounterTable};
pub use shard::engine::{Grouped, Ran, ShardEngine, ShardStore};
pub use shard::protocol::{OpKind, OpResult, ShardCall, ShardOp, ShardRequest, ShardResponse};
