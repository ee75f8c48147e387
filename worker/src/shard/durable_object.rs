//! The `Shard` Durable Object: the authority for the keys that hash to it.
//!
//! Counters and cache entries live in the object's SQLite storage, with a [`ShardEngine`] in
//! memory in front. SQLite calls are synchronous and the runtime's output gate holds every
//! response until the writes made before it are durable, so an answered write is a kept
//! write; and since nothing awaits between reading and writing a key, ops from concurrent
//! requests never interleave. An alarm reclaims the storage of expired keys; when that fails
//! it tries again a minute later ([`AlarmSchedule`]).
//!
//! A call answers at once, without a promise, unless it has to read or set the alarm first:
//! the runtime takes either from an RPC method, and most calls find the alarm already due.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use edgecount_core::shard::alarm_schedule::{next_alarm_after, AlarmSchedule, AlarmStep};
use edgecount_core::shard::placement::{self, Placement};
use edgecount_core::shard::protocol::{OpResult, ShardOp, ShardRequest, ShardStats};
use edgecount_core::shard::watchers::{self, Watchers};
use edgecount_core::{Key, Namespace, ShardEngine};
use futures_util::StreamExt;
use worker::{
    console_error, durable_object, js_sys, DurableObject, Env, Request, Response, Result, State, Storage,
};

use wasm_bindgen::prelude::{wasm_bindgen, JsValue};

use crate::isolate::clock::now_ms;
use crate::isolate::config::Config;
use crate::isolate::request_task;
use crate::shard::sql_store::SqlShardStore;
use crate::shard::watch_stream::{watcher, WatchSender};

#[durable_object]
pub struct Shard {
    state: State,
    store: SqlShardStore,
    engine: RefCell<ShardEngine>,
    alarm: AlarmKeeper,
    /// The open `/stream`s of this shard's counters.
    watchers: RefCell<Watchers<WatchSender>>,
}

// The worker calls `runOps` over Durable Object RPC: a plain string each way, without the
// Request and Response objects (and their headers) that a `fetch` builds on both sides.
#[wasm_bindgen(
    wasm_bindgen = worker::wasm_bindgen,
    wasm_bindgen_futures = worker::wasm_bindgen_futures,
    js_sys = worker::js_sys
)]
impl Shard {
    /// Runs a JSON [`ShardRequest`] and answers the JSON
    /// [`ShardResponse`](edgecount_core::shard::protocol::ShardResponse), or a promise of it when
    /// the alarm has to be read or set first (a rejected one for a malformed request or a
    /// failure to schedule the reclaiming alarm). The output gate holds the answer until the
    /// writes it made are durable, as for `fetch`.
    #[wasm_bindgen(js_name = runOps)]
    pub fn run_ops_rpc(&self, body: &str) -> JsValue {
        let Ok(request) = serde_json::from_str::<ShardRequest>(body) else {
            return rejected("malformed shard request");
        };
        let now = now_ms();
        let ran = self.engine.borrow_mut().run(&self.store, &request, now);
        let mut watching = self.watchers.borrow_mut();
        if !watching.is_empty() {
            let changes = watchers::changes(&request.ops, &ran.response.results);
            watching.notify(&changes, WatchSender::send);
        }
        drop(watching);
        let answer = match serde_json::to_string(&ran.response) {
            Ok(answer) => JsValue::from(answer),
            Err(error) => return rejected(&error.to_string()),
        };
        match ran.reclaim_by {
            Some(at) if !self.alarm.is_due_by(at) => {
                let (alarm, storage) = (self.alarm.clone(), self.state.storage());
                request_task::run(async move {
                    alarm.ensure(&storage, at, now).await.map_err(JsValue::from)?;
                    Ok(answer)
                })
            }
            _ => answer,
        }
    }

    /// A stream of server-sent events of one counter's value (Abacus's `/stream`): the value
    /// now, then each new value a write stores, until the counter is deleted or the reader
    /// leaves. Rejected with `not_found` for a counter that does not exist, `too_many_streams`
    /// past [`watchers::MAX_WATCHERS_PER_SHARD`], `invalid_name` for a bad name.
    ///
    /// # Errors
    /// Those three refusals, as the rejection's message.
    #[wasm_bindgen(js_name = watch)]
    pub fn watch_rpc(&self, ns: &str, key: &str) -> std::result::Result<JsValue, JsValue> {
        let (Ok(ns), Ok(key)) = (Namespace::new(ns), Key::new(key)) else {
            return Err(JsValue::from_str("invalid_name"));
        };
        let mut watching = self.watchers.borrow_mut();
        watching.prune(WatchSender::is_read);
        let read = ShardRequest {
            ops: vec![ShardOp::Get { ns: ns.clone(), key: key.clone() }.into()],
            ..Default::default()
        };
        let ran = self.engine.borrow_mut().run(&self.store, &read, now_ms());
        let value = match ran.response.results.first() {
            Some(OpResult::Value { value, exists: true, .. }) => *value,
            Some(OpResult::Value { .. }) => return Err(JsValue::from_str("not_found")),
            _ => return Err(JsValue::from_str("storage_unavailable")),
        };
        let (sender, stream) = watcher(value);
        if watching.add(ns, key, sender).is_err() {
            return Err(JsValue::from_str("too_many_streams"));
        }
        let events =
            stream.map(|value| Ok(js_sys::Uint8Array::from(watchers::event(value).as_bytes()).into()));
        Ok(wasm_streams::ReadableStream::from_stream(events).into_raw().into())
    }

    /// Compares an isolate's shard count with the one the keys were placed under, keeping it if
    /// none is kept yet (only `shard-0` is asked; see
    /// [`edgecount_core::shard::placement`]).
    ///
    /// # Errors
    /// `placement_changed:<kept count>` when they differ, or a storage failure.
    #[wasm_bindgen(js_name = placement)]
    pub fn placement_rpc(&self, configured: u32) -> std::result::Result<(), JsValue> {
        let kept = self.store.kept_placement().map_err(|detail| JsValue::from_str(&detail))?;
        match placement::check(kept, configured) {
            Ok(Placement::Agrees) => Ok(()),
            Ok(Placement::Remember(shards)) => {
                self.store.keep_placement(shards).map_err(|detail| JsValue::from_str(&detail))
            }
            Err(_) => Err(JsValue::from_str(&format!("placement_changed:{}", kept.unwrap_or(0)))),
        }
    }

    /// Answers this shard's JSON [`ShardStats`] for `/v1/stats`, over RPC like ops.
    ///
    /// # Errors
    /// A failure to count the stored rows.
    #[wasm_bindgen(js_name = stats)]
    pub fn stats_rpc(&self) -> std::result::Result<String, JsValue> {
        let stats = self.stats().map_err(|detail| JsValue::from_str(&detail))?;
        serde_json::to_string(&stats).map_err(|e| JsValue::from_str(&e.to_string()))
    }
}

/// A call's answer when it fails: a rejected promise, as an `async` method's error would be.
fn rejected(message: &str) -> JsValue {
    js_sys::Promise::reject(&JsValue::from_str(message)).into()
}

/// What this object knows of its alarm, so most writes need no storage call to keep it; shared
/// with a call still setting it.
#[derive(Clone)]
struct AlarmKeeper {
    schedule: Rc<Cell<AlarmSchedule>>,
}

impl AlarmKeeper {
    fn new() -> Self {
        Self { schedule: Rc::new(Cell::new(AlarmSchedule::unknown())) }
    }

    /// Whether an alarm at or before `at` is known to be set.
    fn is_due_by(&self, at: u64) -> bool {
        self.schedule.get().step_for(at) == AlarmStep::AlreadyDue
    }

    /// Makes sure an alarm fires no later than `at`. A failure forgets what is known of the
    /// alarm, so the next call asks storage instead of trusting a schedule that may be wrong.
    async fn ensure(&self, storage: &Storage, at: u64, now: u64) -> Result<()> {
        let outcome = self.read_or_set(storage, at, now).await;
        if outcome.is_err() {
            self.update(AlarmSchedule::forget);
        }
        outcome
    }

    async fn read_or_set(&self, storage: &Storage, at: u64, now: u64) -> Result<()> {
        if self.schedule.get().step_for(at) == AlarmStep::ReadStored {
            let stored = storage.get_alarm().await?.map(|ms| ms.max(0).cast_unsigned());
            self.update(|alarm| alarm.learned(stored));
        }
        if let AlarmStep::Set { at } = self.schedule.get().step_for(at) {
            storage.set_alarm((at.saturating_sub(now)).cast_signed()).await?;
            self.update(|alarm| alarm.scheduled(at));
        }
        Ok(())
    }

    fn update(&self, change: impl FnOnce(&mut AlarmSchedule)) {
        let mut alarm = self.schedule.get();
        change(&mut alarm);
        self.schedule.set(alarm);
    }
}

impl Shard {
    fn stats(&self) -> std::result::Result<ShardStats, String> {
        let stats = self.store.uncounted(|| self.engine.borrow_mut().stats(&self.store, now_ms()));
        let (rows_read, rows_written) = self.store.rows_counted();
        Ok(ShardStats { rows_read, rows_written, ..stats.map_err(|error| error.detail())? })
    }
}

impl DurableObject for Shard {
    fn new(state: State, env: Env) -> Self {
        let cache_bounds = match Config::from_env(&env) {
            Ok(config) => config.shard_cache,
            Err(error) => {
                // The worker refuses every request in this case, so this object is not reached.
                console_error!("{}", error.message());
                crate::isolate::config::DEFAULT_SHARD_CACHE_BOUNDS
            }
        };
        // Nothing is read here: counters load when first used, the cache index when a cache
        // op, the alarm or the stats first need it.
        let store = SqlShardStore::open(state.storage().sql()).unwrap_or_else(|error| {
            // Later ops then fail with storage_unavailable (503) instead of the object crashing.
            console_error!("shard storage failed to open: {error}");
            SqlShardStore::unopened(state.storage().sql())
        });
        let engine = ShardEngine::new(cache_bounds);
        Self {
            state,
            store,
            engine: RefCell::new(engine),
            alarm: AlarmKeeper::new(),
            watchers: RefCell::new(Watchers::default()),
        }
    }

    /// The worker reaches shards over RPC only (`runOps`, `stats`); this door stays shut.
    async fn fetch(&self, _req: Request) -> Result<Response> {
        Response::error("shards answer over RPC only", 404)
    }

    async fn alarm(&self) -> Result<Response> {
        let now = now_ms();
        // The runtime deleted the alarm that fired: remember that before anything can fail.
        self.alarm.update(AlarmSchedule::fired);
        let reclaimed = self.engine.borrow_mut().reclaim_expired(&self.store, now);
        if let Err(error) = &reclaimed {
            console_error!("reclaiming expired keys failed; trying again in a minute: {}", error.detail());
        }
        if let Some(at) = next_alarm_after(now, &reclaimed) {
            self.alarm.ensure(&self.state.storage(), at, now).await?;
        }
        Response::ok("reclaimed")
    }
}
