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
use edgecount_core::shard::migration::Migration;
use edgecount_core::shard::placement::{self, Kept, Placement};
use edgecount_core::shard::protocol::{OpResult, ShardOp, ShardRequest, ShardResponse, ShardStats};
use edgecount_core::shard::watchers::{self, Watchers};
use edgecount_core::{Key, Namespace, ShardEngine};
use futures_util::StreamExt;
use worker::{
    console_error, durable_object, js_sys, DurableObject, Env, Request, Response, Result, State, Storage,
};

use wasm_bindgen::prelude::{wasm_bindgen, JsValue};

use crate::isolate::clock::now_ms;
use crate::isolate::config::{Config, DEFAULT_HAND_OVER_KEYS, DEFAULT_SHARDS, DEFAULT_SHARD_CACHE_BOUNDS};
use crate::isolate::request_task;
use crate::shard::hand_over::{self, HandOverState, Route};
use crate::shard::sql_store::SqlShardStore;
use crate::shard::watch_stream::{watcher, WatchSender};

#[durable_object]
pub struct Shard {
    object: Rc<ShardObject>,
}

/// The shard's state, shared with the calls still running on it (a hand-over awaits other
/// shards in the middle of one).
pub struct ShardObject {
    state: State,
    pub(crate) env: Env,
    pub(crate) store: SqlShardStore,
    pub(crate) engine: RefCell<ShardEngine>,
    alarm: AlarmKeeper,
    /// The open `/stream`s of this shard's counters.
    watchers: RefCell<Watchers<WatchSender>>,
    /// This deployment's shard count, and the change of count under way (see
    /// [`crate::shard::hand_over`]).
    pub(crate) shards: u32,
    pub(crate) hand_overs: HandOverState,
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
        match hand_over::route(&self.object, &request) {
            Ok(Route::Here) => self.object.answer(&request),
            Ok(Route::Refused(error)) => {
                let results = vec![OpResult::Failed { error }; request.ops.len()];
                serde_json::to_string(&ShardResponse { results })
                    .map_or_else(|e| rejected(&e.to_string()), JsValue::from)
            }
            Ok(Route::AfterHandOvers) => {
                let object = Rc::clone(&self.object);
                request_task::run(
                    async move { hand_over::run_placed(&object, request).await.map(JsValue::from) },
                )
            }
            Err(detail) => rejected(&detail),
        }
    }

    /// The parcels of the keys named in the JSON `[[ns, key], ...]`, as JSON, as many as one
    /// answer carries (see [`hand_over`]); reading them changes nothing.
    ///
    /// # Errors
    /// A malformed list, or a storage failure.
    #[wasm_bindgen(js_name = handOver)]
    pub fn hand_over_rpc(&self, keys: &str, from: u32, to: u32) -> std::result::Result<String, JsValue> {
        hand_over::hand_over(&self.object, keys, Migration { from, to })
            .map_err(|detail| JsValue::from_str(&detail))
    }

    /// Stores the JSON parcels handed over by their old home, each unless its key has arrived
    /// already, and sees the alarm set to reclaim what they hold when it lapses; the answer,
    /// held until they are durable, lets the old home delete its copies. A promise when the
    /// alarm has to be set first; rejected for malformed parcels, no change under way, or a
    /// storage failure.
    #[wasm_bindgen(js_name = adopt)]
    pub fn adopt_rpc(&self, parcels: &str, from: u32, to: u32) -> JsValue {
        match hand_over::adopt(&self.object, parcels, Migration { from, to }) {
            Err(detail) => rejected(&detail),
            Ok(lapses_at) if !self.object.alarm_due_by(lapses_at) => {
                let object = Rc::clone(&self.object);
                request_task::run(async move {
                    object.reclaim_by(lapses_at).await?;
                    Ok(JsValue::UNDEFINED)
                })
            }
            Ok(_) => JsValue::UNDEFINED,
        }
    }

    /// Forgets the change from `from` to `to` shards, declared over: its arrival marks, and
    /// that this shard ran under it (which refuses every op while undeclared).
    ///
    /// # Errors
    /// A storage failure.
    #[wasm_bindgen(js_name = settleChange)]
    pub fn settle_change_rpc(&self, from: u32, to: u32) -> std::result::Result<(), JsValue> {
        let object = &self.object;
        object
            .hand_overs
            .settle(&object.store, Migration { from, to })
            .map_err(|detail| JsValue::from_str(&detail))
    }

    /// Tells this shard its index and, while a change of count is under way, starts its alarm
    /// handing over the keys that leave it.
    ///
    /// # Errors
    /// A failure to store the index or to set the alarm.
    #[wasm_bindgen(js_name = migrate)]
    pub fn migrate_rpc(&self, shard: u32) -> JsValue {
        if let Err(detail) = self.object.hand_overs.learn_shard(&self.object.store, shard) {
            return rejected(&detail);
        }
        if !self.object.hand_overs.pending() {
            return JsValue::UNDEFINED;
        }
        let object = Rc::clone(&self.object);
        request_task::run(async move {
            let now = now_ms();
            object.alarm.ensure(&object.state.storage(), now, now).await?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// A stream of server-sent events of one counter's value (Abacus's `/stream`): the value
    /// now, then each new value a write stores, until the counter is deleted or the reader
    /// leaves. `client` names who reads it ([`edgecount_core::edge::rate_limit::ClientId::label`]).
    /// Rejected with `not_found` for a counter that does not exist, `too_many_streams` past
    /// [`watchers::MAX_WATCHERS_PER_SHARD`] or [`watchers::MAX_WATCHERS_PER_CLIENT`] for the
    /// client, `invalid_name` for a bad name.
    ///
    /// # Errors
    /// Those three refusals, as the rejection's message.
    #[wasm_bindgen(js_name = watch)]
    pub fn watch_rpc(&self, ns: &str, key: &str, client: &str) -> std::result::Result<JsValue, JsValue> {
        let (Ok(ns), Ok(key)) = (Namespace::new(ns), Key::new(key)) else {
            return Err(JsValue::from_str("invalid_name"));
        };
        let read = ShardRequest {
            ops: vec![ShardOp::Get { ns: ns.clone(), key: key.clone() }.into()],
            ..Default::default()
        };
        match hand_over::route(&self.object, &read) {
            Ok(Route::Here) => self.object.open_stream(ns, key, client, &read),
            Ok(Route::Refused(_)) => Err(JsValue::from_str("misconfigured")),
            // A counter moving here during a change of count is taken over first.
            Ok(Route::AfterHandOvers) => {
                let object = Rc::clone(&self.object);
                let client = client.to_owned();
                Ok(request_task::run(async move {
                    hand_over::take_over_keys_of(&object, &read).await?;
                    object.open_stream(ns, key, &client, &read)
                }))
            }
            Err(_) => Err(JsValue::from_str("storage_unavailable")),
        }
    }

    /// Compares an isolate's placement (its JSON [`Kept`]) with the one the keys were placed
    /// under, keeping it when [`placement::check`] says so (only `shard-0` is asked). A change
    /// declared over is kept only once every shard of either count has handed over its keys.
    ///
    /// # Errors
    /// Rejected with `placement_changed:<kept count>` when they differ,
    /// `change_unfinished:<shards not done>:<count being left>` when keys are still to move, or a storage failure.
    #[wasm_bindgen(js_name = placement)]
    pub fn placement_rpc(&self, configured: &str) -> JsValue {
        let configured: Kept = match serde_json::from_str(configured) {
            Ok(configured) => configured,
            Err(e) => return rejected(&format!("malformed placement: {e}")),
        };
        let store = &self.object.store;
        let kept = match store.kept_placement() {
            Ok(kept) => kept,
            Err(detail) => return rejected(&detail),
        };
        let keep = |kept: Kept| match store.keep_placement(kept) {
            Ok(()) => JsValue::UNDEFINED,
            Err(detail) => rejected(&detail),
        };
        match placement::check(kept, configured) {
            Ok(Placement::Agrees) => JsValue::UNDEFINED,
            Ok(Placement::Remember(kept)) => keep(kept),
            Ok(Placement::Finish { change, settled }) => {
                let object = Rc::clone(&self.object);
                request_task::run(async move {
                    let mut unfinished = hand_over::shards_unfinished(&object, change).await;
                    if unfinished == 0 {
                        unfinished = hand_over::settle_everywhere(&object, change).await;
                    }
                    if unfinished > 0 {
                        let rejection = format!("change_unfinished:{unfinished}:{}", change.from);
                        return Err(JsValue::from_str(&rejection));
                    }
                    object.store.keep_placement(settled).map_err(|detail| JsValue::from_str(&detail))?;
                    Ok(JsValue::UNDEFINED)
                })
            }
            Err(_) => rejected(&format!("placement_changed:{}", kept.map_or(0, |k| k.shards))),
        }
    }

    /// Whether this shard has handed over every key that left it in the change from `from` to
    /// `to` shards.
    ///
    /// # Errors
    /// A storage failure.
    #[wasm_bindgen(js_name = handedOver)]
    pub fn handed_over_rpc(&self, from: u32, to: u32) -> std::result::Result<bool, JsValue> {
        hand_over::handed_over(&self.object, Migration { from, to })
            .map_err(|detail| JsValue::from_str(&detail))
    }

    /// Answers this shard's JSON [`ShardStats`] for `/v1/stats`, over RPC like ops; `shard` is
    /// its index, which the keys it has still to hand over are counted by.
    ///
    /// # Errors
    /// A failure to count the stored rows.
    #[wasm_bindgen(js_name = stats)]
    pub fn stats_rpc(&self, shard: u32) -> std::result::Result<String, JsValue> {
        let stats = self.object.stats(shard).map_err(|detail| JsValue::from_str(&detail))?;
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

impl ShardObject {
    /// Runs `request` now and answers its JSON response, or a promise of it when the alarm has
    /// to be read or set first (a rejected one for a failure to schedule the reclaiming alarm).
    /// The output gate holds the answer until the writes it made are durable, as for `fetch`.
    fn answer(self: &Rc<Self>, request: &ShardRequest) -> JsValue {
        let now = now_ms();
        let (answer, reclaim_by) = match self.run_now(request, now) {
            Ok(ran) => ran,
            Err(detail) => return rejected(&detail),
        };
        if self.alarm_due_by(reclaim_by) {
            return JsValue::from(answer);
        }
        let object = Rc::clone(self);
        request_task::run(async move {
            object.reclaim_by(reclaim_by).await?;
            Ok(JsValue::from(answer))
        })
    }

    /// Whether the alarm is known to fire by `at` (or nothing lapses).
    pub(crate) fn alarm_due_by(&self, at: Option<u64>) -> bool {
        at.is_none_or(|at| self.alarm.is_due_by(at))
    }

    /// Makes sure the alarm fires by `at`, when something stored here lapses then.
    ///
    /// # Errors
    /// A failure to read or set the alarm.
    pub(crate) async fn reclaim_by(&self, at: Option<u64>) -> std::result::Result<(), JsValue> {
        if let Some(at) = at.filter(|&at| !self.alarm.is_due_by(at)) {
            self.alarm.ensure(&self.state.storage(), at, now_ms()).await.map_err(JsValue::from)?;
        }
        Ok(())
    }

    /// Runs `request` (every key of which is here) and answers its JSON response once the
    /// alarm is set for what it wrote.
    ///
    /// # Errors
    /// A failure to encode the answer or to set the alarm.
    pub(crate) async fn run_here(&self, request: &ShardRequest) -> std::result::Result<String, JsValue> {
        let now = now_ms();
        let (answer, reclaim_by) = self.run_now(request, now).map_err(|detail| JsValue::from_str(&detail))?;
        self.reclaim_by(reclaim_by).await?;
        Ok(answer)
    }

    /// Runs `request` in this turn: its JSON answer, and when the alarm must fire for what it
    /// wrote.
    fn run_now(
        &self,
        request: &ShardRequest,
        now: u64,
    ) -> std::result::Result<(String, Option<u64>), String> {
        let ran = self.engine.borrow_mut().run(&self.store, request, now);
        if let Some((records, detail)) = &ran.unrecorded {
            // The writes stand and were answered as applied; only a retry of one after a lost
            // answer would apply it again.
            console_error!("{records} idempotency records of applied writes could not be stored: {detail}");
        }
        let mut watching = self.watchers.borrow_mut();
        if !watching.is_empty() {
            let changes = watchers::changes(&request.ops, &ran.response.results);
            watching.notify(&changes, WatchSender::send);
        }
        drop(watching);
        let answer = serde_json::to_string(&ran.response).map_err(|error| error.to_string())?;
        Ok((answer, ran.reclaim_by))
    }

    /// A stream of `ns`/`key`'s value, read by `read` (see [`Shard::watch_rpc`]).
    fn open_stream(
        &self,
        ns: Namespace,
        key: Key,
        client: &str,
        read: &ShardRequest,
    ) -> std::result::Result<JsValue, JsValue> {
        let mut watching = self.watchers.borrow_mut();
        watching.prune(WatchSender::is_read);
        let ran = self.engine.borrow_mut().run(&self.store, read, now_ms());
        let value = match ran.response.results.first() {
            Some(OpResult::Value { value, exists: true, .. }) => *value,
            Some(OpResult::Value { .. }) => return Err(JsValue::from_str("not_found")),
            _ => return Err(JsValue::from_str("storage_unavailable")),
        };
        let (sender, stream) = watcher(value);
        if watching.add(ns, key, client, sender).is_err() {
            return Err(JsValue::from_str("too_many_streams"));
        }
        let events =
            stream.map(|value| Ok(js_sys::Uint8Array::from(watchers::event(value).as_bytes()).into()));
        Ok(wasm_streams::ReadableStream::from_stream(events).into_raw().into())
    }

    /// Ends the streams of `keys`, which have left this shard: their readers reconnect to the
    /// keys' new home.
    pub(crate) fn end_streams(&self, keys: &[(Namespace, Key)]) {
        let mut watching = self.watchers.borrow_mut();
        if !watching.is_empty() {
            let ended: Vec<watchers::Change> =
                keys.iter().map(|(ns, key)| (ns.clone(), key.clone(), None)).collect();
            watching.notify(&ended, WatchSender::send);
        }
    }

    fn stats(&self, shard: u32) -> std::result::Result<ShardStats, String> {
        let stats = self.store.uncounted(|| self.engine.borrow_mut().stats(&self.store, now_ms()));
        let keys_to_move = self.store.uncounted(|| self.hand_overs.keys_to_move(&self.store, shard))?;
        let (rows_read, rows_written) = self.store.rows_counted();
        Ok(ShardStats { rows_read, rows_written, keys_to_move, ..stats.map_err(|error| error.detail())? })
    }
}

impl DurableObject for Shard {
    fn new(state: State, env: Env) -> Self {
        crate::isolate::hash_seed::seed_once();
        let (cache_bounds, shards, migration, keys_per_alarm) = match Config::from_env(&env) {
            Ok(config) => (config.shard_cache, config.shards, config.migration(), config.hand_over_keys),
            Err(error) => {
                // The worker refuses every request in this case, so this object is not reached.
                console_error!("{}", error.message());
                (DEFAULT_SHARD_CACHE_BOUNDS, DEFAULT_SHARDS, None, DEFAULT_HAND_OVER_KEYS)
            }
        };
        // Nothing else is read here: counters load when first used, the cache index when a
        // cache op, the alarm or the stats first need it.
        let store = SqlShardStore::open(state.storage().sql()).unwrap_or_else(|error| {
            // Later ops then fail with storage_unavailable (503) instead of the object crashing.
            console_error!("shard storage failed to open: {error}");
            SqlShardStore::unopened(state.storage().sql())
        });
        let hand_overs = HandOverState::open(&store, migration, keys_per_alarm);
        let engine = ShardEngine::new(cache_bounds);
        let object = ShardObject {
            state,
            env,
            store,
            engine: RefCell::new(engine),
            alarm: AlarmKeeper::new(),
            watchers: RefCell::new(Watchers::default()),
            shards,
            hand_overs,
        };
        Self { object: Rc::new(object) }
    }

    /// The worker reaches shards over RPC only (`runOps`, `stats`); this door stays shut.
    async fn fetch(&self, _req: Request) -> Result<Response> {
        Response::error("shards answer over RPC only", 404)
    }

    async fn alarm(&self) -> Result<Response> {
        let object = &self.object;
        let now = now_ms();
        // The runtime deleted the alarm that fired: remember that before anything can fail.
        object.alarm.update(AlarmSchedule::fired);
        let reclaimed = object.engine.borrow_mut().reclaim_expired(&object.store, now);
        if let Err(error) = &reclaimed {
            console_error!("reclaiming expired keys failed; trying again in a minute: {}", error.detail());
        }
        if let Some(at) = next_alarm_after(now, &reclaimed) {
            object.alarm.ensure(&object.state.storage(), at, now).await?;
        }
        if let Some(at) = hand_over::push(object).await {
            object.alarm.ensure(&object.state.storage(), at, now_ms()).await?;
        }
        Response::ok("reclaimed")
    }
}
