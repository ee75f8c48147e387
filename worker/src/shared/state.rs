//! What one isolate keeps between requests, in one place: [`IsolateState`], a field per module
//! that keeps something, each saying what it holds and why it outlives a request. It lives as
//! long as the isolate's Wasm instance (until a new deployment, an eviction, or a trap's
//! restart, which makes a new instance), and is made at its first use, which every entry point
//! makes after [`shared::hash_seed`](crate::shared::hash_seed) has seeded the tables it holds.
//!
//! The modules reach it through [`with`] and each borrows only its own field, briefly, and
//! never across an `.await`: the fields are cells of their own, so one module's borrow does not
//! lock another's, and code that runs inside a borrow (a drop, say) finds the other fields free.
//!
//! It names only core and runtime types and those of files that use nothing of what uses it
//! (`shared::api_error`, `shared::config::vars`), so no module is used back by one it uses; a
//! module's own record is defined here when it is plain data.
//!
//! What does not live here, and why:
//! - what is made once and never changes, each beside the only code that reads it: the routers
//!   of `http::routes` and `http::compat::call`, the JavaScript list of header names of
//!   `http::message`, and the one abort listener of `http::cancellation`;
//! - [`shared::hash_seed`](crate::shared::hash_seed)'s flag, set before this state is made,
//!   as its tables hash with the seed;
//! - what only tests use: the counts of `shared::drills`, built only with the `drills`
//!   feature.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use edgecount_core::edge::one_way::OneWayBuffer;
use edgecount_core::edge::rate_limit::{ClientId, ClientLimiter};
use edgecount_core::edge::single_flight::SingleFlight;
use edgecount_core::hashing::{KeyHashing, KeyMap};
use edgecount_core::shard::protocol::ShardStats;
use edgecount_core::visits::namespace::NamespaceReads;
use edgecount_core::{EdgeCache, HotKeys, ShardId};
use worker::worker_sys::{DurableObjectId, DurableObjectNamespace};

use crate::shared::api_error::ApiError;
use crate::shared::config::vars::Config;

/// Everything an isolate keeps between requests. Each field is `None`, empty or zero until
/// its module first needs it.
#[derive(Default)]
pub struct IsolateState {
    /// The configuration (`shared::config`), read from the vars on the first request. Vars
    /// and secrets cannot change under a running isolate (a new deployment or `wrangler dev`
    /// reload starts new isolates), and reading them costs several calls into JavaScript per
    /// var, twelve vars per request: a large share of a request's own CPU time before it was
    /// kept. A malformed configuration is not kept, so every request reports it.
    pub config: RefCell<Option<Rc<Config>>>,
    /// When this isolate served its first request (0 before), for Abacus's `uptime`
    /// (`shared::clock`): the isolate's age, so its own.
    pub first_request_ms: Cell<u64>,
    /// Whether this isolate's shard count was found to be the placement's
    /// (`isolate::placement`): checked once, as the count cannot change under a running
    /// isolate. A refusal is not kept, so the next request asks again.
    pub placement_checked: Cell<bool>,
    /// Counts from known bots answered and not counted (`isolate::visitors`), for `/v1/stats`,
    /// which reports each isolate's.
    pub bots_not_counted: Cell<u64>,
    /// Each client's rate-limit bucket (`isolate::meter`), made at the first charge: a bucket
    /// limits a client's later requests, so it outlives the one that filled it.
    pub rate_limits: RefCell<Option<ClientLimiter>>,
    /// Each client's bucket for reads of visitors over many days (`isolate::meter`).
    pub visitor_rate_limits: RefCell<Option<ClientLimiter>>,
    /// Kept reads of hot keys and the sketch that finds them (`isolate::hot_reads`): they
    /// answer later requests without a shard call, which is what they are for.
    pub hot_reads: RefCell<Option<HotReads>>,
    /// The shards' namespace and the object ids looked up so far (`shared::shard_client`).
    /// Bindings cannot change under a running isolate, and an object id is a plain value, so
    /// both serve every request of the isolate; looking them up again would take several calls
    /// into JavaScript per shard call.
    pub shard_ids: RefCell<Option<ShardIds>>,
    /// How many single-key calls this isolate has under way to each shard
    /// (`shared::shard_client`), against `EDGECOUNT_SHARD_QUEUE_LIMIT`: the bound is over
    /// every request's calls. A shard leaves the map with its last call, so it holds at most
    /// one entry a shard.
    pub calls_under_way: RefCell<HashMap<ShardId, usize>>,
    /// Single-key calls made, and refused at that bound or by an overloaded shard, for
    /// `/v1/stats`.
    pub single_key_calls: Cell<u64>,
    pub single_key_calls_refused: Cell<u64>,
    /// The shards' statistics being asked for or kept (`isolate::shard_stats`): one asking
    /// answers every request of the isolate for `EDGECOUNT_STATS_MAX_AGE_MS`.
    pub shard_stats: RefCell<Option<SingleFlight<Rc<Vec<ShardStats>>, ApiError>>>,
    /// How many times this isolate asked every shard for its statistics, for `/v1/stats`.
    pub shard_stats_asks: Cell<u64>,
    /// Requests being served and the flushers they started (`shared::tasks::in_flight`): a
    /// flusher runs on after its request's answer (`waitUntil`).
    pub tasks_in_flight: Cell<usize>,
    /// One-way writes accepted and not yet applied (`isolate::one_way`): flushers apply them
    /// after the requests that sent them have answered 202.
    pub one_way: RefCell<Option<OneWayWrites>>,
    /// Streams open through this isolate (`http::compat::stream`), against its bound: a stream
    /// lasts as long as its reader, and the bound is over all of them.
    pub open_streams: Cell<usize>,
    /// Open streams by client, against each client's bound; a client leaves the map with its
    /// last stream, so it holds at most as many entries as there are streams.
    pub streams_by_client: RefCell<KeyMap<ClientId, usize>>,
    /// What an abort does to each waiting request, by the request's number
    /// (`http::cancellation`): the isolate's one abort listener finds the request here by the
    /// number it was given. A request leaves the list when it ends, either way.
    pub waiting_requests: RefCell<HashMap<u64, Box<dyn FnOnce()>>>,
    /// The number the next waiting request is given.
    pub next_request_number: Cell<u64>,
    /// Namespace reads merged from every shard (`http::namespaces`), kept a few seconds so that
    /// a dashboard open in many tabs asks the shards once in that time.
    pub namespace_reads: RefCell<Option<NamespaceReads>>,
}

/// The kept reads of hot keys (`isolate::hot_reads`), made from the configuration's
/// thresholds.
pub struct HotReads {
    pub(crate) hot: HotKeys,
    /// The hash the frequency sketch counts keys by: seeded, so that nobody can pick names
    /// that share a victim's counters and make its reads cacheable.
    pub(crate) sketch_hashing: KeyHashing,
    pub(crate) cache: EdgeCache,
    pub(crate) hits: u64,
    pub(crate) misses: u64,
    /// The settings these were built with, to rebuild if the configuration changes.
    pub(crate) settings: (u64, u64),
}

/// The shards' namespace and the ids of the shards called so far (`shared::shard_client`).
pub struct ShardIds {
    pub(crate) namespace: DurableObjectNamespace,
    pub(crate) ids: Vec<Option<DurableObjectId>>,
}

/// The one-way writes waiting to be applied (`isolate::one_way`).
pub struct OneWayWrites {
    pub(crate) buffer: OneWayBuffer,
    /// Names this isolate's flushes: random, so that no two isolates share idempotency keys.
    pub(crate) name: String,
}

thread_local! {
    static STATE: IsolateState = IsolateState::default();
}

/// Runs `f` on this isolate's state.
pub fn with<T>(f: impl FnOnce(&IsolateState) -> T) -> T {
    STATE.with(f)
}

/// [`with`], or `None` once the state is gone: only for a drop that may run as a native test's
/// thread ends (the runtime never drops an isolate's state).
pub fn try_with<T>(f: impl FnOnce(&IsolateState) -> T) -> Option<T> {
    STATE.try_with(f).ok()
}
