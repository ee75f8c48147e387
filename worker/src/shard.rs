//! The `Shard` Durable Object: the authority for the keys that hash to it.
//!
//! Counters and cache entries live in the object's SQLite storage, with a [`ShardEngine`] in
//! memory in front. SQLite calls are synchronous and the runtime's output gate holds every
//! response until the writes made before it are durable, so an answered write is a kept
//! write; and since nothing awaits between reading and writing a key, ops from concurrent
//! requests never interleave. An alarm reclaims the storage of expired keys.

use std::cell::{Cell, RefCell};

use edgecount_core::idempotency::IDEMPOTENCY_WINDOW_MS;
use edgecount_core::protocol::{ShardRequest, ShardResponse, ShardStats};
use edgecount_core::{ShardCall, ShardEngine, ShardOp};
use worker::{
    console_error, durable_object, Date, DurableObject, Env, Method, Request, Response, Result, State,
};

use wasm_bindgen::prelude::{wasm_bindgen, JsValue};

use crate::config::Config;
use crate::shard_store::SqlShardStore;

#[durable_object]
pub struct Shard {
    state: State,
    store: SqlShardStore,
    engine: RefCell<ShardEngine>,
    /// The alarm this object has scheduled: `None` until read from storage, then the time in
    /// ms, or `Some(None)` for no alarm.
    alarm_at: Cell<Option<Option<u64>>>,
    /// Expired counters and entries reclaimed since the object started.
    reclaimed: Cell<u64>,
    /// Op calls served since the object started.
    calls: Cell<u64>,
}

fn now_ms() -> u64 {
    Date::now().as_millis()
}

/// When the earliest thing written by `calls` lapses: a TTL, or an idempotency record's window.
fn earliest_expiry(calls: &[ShardCall], now: u64) -> Option<u64> {
    calls
        .iter()
        .filter_map(|call| {
            let ttl = match &call.op {
                ShardOp::Incr { ttl, .. }
                | ShardOp::Decr { ttl, .. }
                | ShardOp::Set { ttl, .. }
                | ShardOp::CachePut { ttl, .. } => ttl.map(|s| now + u64::from(s) * 1000),
                _ => None,
            };
            let record = call.idempotency_key.as_ref().map(|_| now + IDEMPOTENCY_WINDOW_MS);
            [ttl, record].into_iter().flatten().min()
        })
        .min()
}

// The worker calls `runOps` over Durable Object RPC: a plain string each way, without the
// Request and Response objects (and their headers) that a `fetch` builds on both sides.
#[wasm_bindgen(
    wasm_bindgen = worker::wasm_bindgen,
    wasm_bindgen_futures = worker::wasm_bindgen_futures,
    js_sys = worker::js_sys
)]
impl Shard {
    /// Runs a JSON [`ShardRequest`] and answers the JSON [`ShardResponse`]. The output gate holds
    /// the answer until the writes it made are durable, as for `fetch`.
    ///
    /// # Errors
    /// A malformed request, or a failure to schedule the reclaiming alarm.
    #[wasm_bindgen(js_name = runOps)]
    pub async fn run_ops_rpc(&self, body: String) -> std::result::Result<String, JsValue> {
        let Ok(request) = serde_json::from_str::<ShardRequest>(&body) else {
            return Err(JsValue::from_str("malformed shard request"));
        };
        let response = self.execute(request).await.map_err(JsValue::from)?;
        serde_json::to_string(&response).map_err(|e| JsValue::from_str(&e.to_string()))
    }
}

impl Shard {
    async fn execute(&self, request: ShardRequest) -> Result<ShardResponse> {
        self.calls.set(self.calls.get() + 1);
        let now = now_ms();
        let results = {
            let mut engine = self.engine.borrow_mut();
            request.ops.iter().map(|call| engine.execute_call(&self.store, call, now)).collect()
        };
        if let Some(expiry) = earliest_expiry(&request.ops, now) {
            self.schedule_reclaim(expiry, now).await?;
        }
        Ok(ShardResponse { results })
    }

    /// Makes sure an alarm fires no later than `at`.
    async fn schedule_reclaim(&self, at: u64, now: u64) -> Result<()> {
        let storage = self.state.storage();
        let scheduled = match self.alarm_at.get() {
            Some(known) => known,
            None => storage.get_alarm().await?.map(|ms| ms.max(0).cast_unsigned()),
        };
        if scheduled.is_some_and(|s| s <= at) {
            self.alarm_at.set(Some(scheduled));
            return Ok(());
        }
        storage.set_alarm((at.saturating_sub(now)).cast_signed()).await?;
        self.alarm_at.set(Some(Some(at)));
        Ok(())
    }

    fn stats(&self) -> Result<Response> {
        let now = now_ms();
        let engine = self.engine.borrow();
        let stats = ShardStats {
            calls: self.calls.get(),
            ops: engine.ops(),
            keys: self.store.live_counters(now)?,
            stored_counters: self.store.stored_counters()?,
            cache_entries: engine.cache.len() as u64,
            cache_bytes: engine.cache.bytes(),
            evictions: engine.cache.evictions(),
            reclaimed: self.reclaimed.get(),
        };
        Response::from_json(&stats)
    }
}

impl DurableObject for Shard {
    fn new(state: State, env: Env) -> Self {
        let cache_bounds = match Config::from_env(&env) {
            Ok(config) => config.shard_cache,
            Err(error) => {
                // The worker refuses every request in this case, so this object is not reached.
                console_error!("{}", error.message());
                crate::config::DEFAULT_SHARD_CACHE_BOUNDS
            }
        };
        let mut engine = ShardEngine::new(cache_bounds);
        let store = SqlShardStore::open(state.storage().sql()).and_then(|store| {
            store.restore_cache_index(&mut engine.cache)?;
            Ok(store)
        });
        let store = store.unwrap_or_else(|error| {
            // Later ops then fail with storage_unavailable (503) instead of the object crashing.
            console_error!("shard storage failed to open: {error}");
            SqlShardStore::unopened(state.storage().sql())
        });
        Self {
            state,
            store,
            engine: RefCell::new(engine),
            alarm_at: Cell::new(None),
            reclaimed: Cell::new(0),
            calls: Cell::new(0),
        }
    }

    async fn fetch(&self, req: Request) -> Result<Response> {
        match (req.method(), req.path().as_str()) {
            (Method::Get, "/stats") => self.stats(),
            _ => Response::error("no such shard route", 404),
        }
    }

    async fn alarm(&self) -> Result<Response> {
        let now = now_ms();
        let counters = self.store.reclaim_expired_counters(now)?;
        let next_counter = self.store.next_counter_expiry()?;
        // Lapsed idempotency records are reclaimed too, but are not keys: not counted.
        self.store.reclaim_expired_records(now)?;
        let next_record = self.store.next_record_expiry()?;
        let (entries, next_entry) = {
            let mut engine = self.engine.borrow_mut();
            engine.counters.forget_expired(now);
            (engine.cache.reclaim_expired(&self.store, now), engine.cache.next_expiry())
        };
        self.reclaimed.set(self.reclaimed.get() + counters + entries);
        let next = [next_counter, next_entry, next_record].into_iter().flatten().min();
        self.alarm_at.set(Some(None));
        if let Some(at) = next {
            self.schedule_reclaim(at, now).await?;
        }
        Response::ok("reclaimed")
    }
}
