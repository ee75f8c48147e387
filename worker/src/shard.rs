//! The `Shard` Durable Object: the authority for the keys that hash to it.
//!
//! Counters and cache entries live in the object's SQLite storage, with a [`ShardEngine`] in
//! memory in front. SQLite calls are synchronous and the runtime's output gate holds every
//! response until the writes made before it are durable, so an answered write is a kept
//! write; and since nothing awaits between reading and writing a key, ops from concurrent
//! requests never interleave. An alarm reclaims the storage of expired keys; when that fails
//! it tries again a minute later ([`AlarmSchedule`]).

use std::cell::{Cell, RefCell};

use edgecount_core::alarm_schedule::{next_alarm_after, AlarmSchedule, AlarmStep};
use edgecount_core::answer_budget::AnswerBudget;
use edgecount_core::idempotency::IDEMPOTENCY_WINDOW_MS;
use edgecount_core::protocol::{ShardRequest, ShardResponse, ShardStats};
use edgecount_core::{ShardCall, ShardEngine, ShardOp};
use worker::{console_error, durable_object, DurableObject, Env, Request, Response, Result, State};

use wasm_bindgen::prelude::{wasm_bindgen, JsValue};

use crate::clock::now_ms;
use crate::config::Config;
use crate::shard_store::SqlShardStore;

#[durable_object]
pub struct Shard {
    state: State,
    store: SqlShardStore,
    engine: RefCell<ShardEngine>,
    /// What this object knows of its alarm, so most writes need no storage call to keep it.
    alarm: Cell<AlarmSchedule>,
    /// Expired counters and entries reclaimed since the object started.
    reclaimed: Cell<u64>,
    /// Op calls served since the object started.
    calls: Cell<u64>,
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

    /// Answers this shard's JSON [`ShardStats`] for `/v1/stats`, over RPC like ops.
    ///
    /// # Errors
    /// A failure to count the stored rows.
    #[wasm_bindgen(js_name = stats)]
    pub fn stats_rpc(&self) -> std::result::Result<String, JsValue> {
        let stats = self.stats().map_err(JsValue::from)?;
        serde_json::to_string(&stats).map_err(|e| JsValue::from_str(&e.to_string()))
    }
}

impl Shard {
    async fn execute(&self, request: ShardRequest) -> Result<ShardResponse> {
        self.calls.set(self.calls.get() + 1);
        let now = now_ms();
        let mut budget = request.answer_budget.map_or_else(AnswerBudget::default, AnswerBudget::new);
        let results = {
            let mut engine = self.engine.borrow_mut();
            request.ops.iter().map(|call| budget.admit(engine.execute_call(&self.store, call, now))).collect()
        };
        if let Some(expiry) = earliest_expiry(&request.ops, now) {
            self.schedule_reclaim(expiry, now).await?;
        }
        Ok(ShardResponse { results })
    }

    /// Makes sure an alarm fires no later than `at`. A failure forgets what is known of the
    /// alarm, so the next call asks storage instead of trusting a schedule that may be wrong.
    async fn schedule_reclaim(&self, at: u64, now: u64) -> Result<()> {
        let outcome = self.ensure_alarm(at, now).await;
        if outcome.is_err() {
            self.update_alarm(AlarmSchedule::forget);
        }
        outcome
    }

    async fn ensure_alarm(&self, at: u64, now: u64) -> Result<()> {
        let storage = self.state.storage();
        if self.alarm.get().step_for(at) == AlarmStep::ReadStored {
            let stored = storage.get_alarm().await?.map(|ms| ms.max(0).cast_unsigned());
            self.update_alarm(|alarm| alarm.learned(stored));
        }
        if let AlarmStep::Set { at } = self.alarm.get().step_for(at) {
            storage.set_alarm((at.saturating_sub(now)).cast_signed()).await?;
            self.update_alarm(|alarm| alarm.scheduled(at));
        }
        Ok(())
    }

    fn update_alarm(&self, change: impl FnOnce(&mut AlarmSchedule)) {
        let mut alarm = self.alarm.get();
        change(&mut alarm);
        self.alarm.set(alarm);
    }

    /// Reclaims the storage of what expired by `now`; answers the next expiry, if any.
    fn reclaim_expired(&self, now: u64) -> Result<Option<u64>> {
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
        Ok([next_counter, next_entry, next_record].into_iter().flatten().min())
    }

    fn stats(&self) -> Result<ShardStats> {
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
        Ok(stats)
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
            alarm: Cell::new(AlarmSchedule::unknown()),
            reclaimed: Cell::new(0),
            calls: Cell::new(0),
        }
    }

    /// The worker reaches shards over RPC only (`runOps`, `stats`); this door stays shut.
    async fn fetch(&self, _req: Request) -> Result<Response> {
        Response::error("shards answer over RPC only", 404)
    }

    async fn alarm(&self) -> Result<Response> {
        let now = now_ms();
        // The runtime deleted the alarm that fired: remember that before anything can fail.
        self.update_alarm(AlarmSchedule::fired);
        let reclaimed = self.reclaim_expired(now);
        if let Err(error) = &reclaimed {
            console_error!("reclaiming expired keys failed; trying again in a minute: {error}");
        }
        if let Some(at) = next_alarm_after(now, &reclaimed) {
            self.schedule_reclaim(at, now).await?;
        }
        Response::ok("reclaimed")
    }
}
