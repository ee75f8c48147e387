//! A shard's state and what it does with it: runs a request's ops on its [`ShardEngine`] over
//! its SQLite storage, keeps the alarm that reclaims lapsed keys due, serves `/stream`s and
//! reports its figures. The Durable Object ([`crate::shard::durable_object`]) answers calls with
//! it; a change of shard count ([`crate::shard::resharding::hand_over`]) works on it in the middle of one.
//!
//! SQLite calls are synchronous and the runtime's output gate holds every response until the
//! writes made before it are durable, so an answered write is a kept write; and since nothing
//! awaits between reading and writing a key, ops from concurrent requests never interleave. An
//! alarm reclaims the storage of expired keys; when that fails it tries again a minute later
//! ([`AlarmSchedule`]).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use edgecount_core::shard::alarm_schedule::{next_alarm_after, AlarmSchedule, AlarmStep};
use edgecount_core::shard::migration::Parcel;
use edgecount_core::shard::protocol::ShardResponse;
use edgecount_core::shard::protocol::{OpResult, ShardRequest, ShardStats};
use edgecount_core::shard::refusal::Refusal;
use edgecount_core::shard::watchers::{self, Watchers};
use edgecount_core::shard::Atomic;
use edgecount_core::{CoreError, Key, Namespace, ShardEngine, StoreResult};
use futures_util::StreamExt;
use wasm_bindgen::prelude::JsValue;
use worker::{console_error, js_sys, Env, Result, State, Storage};

use crate::shard::resharding::state::HandOverState;
use crate::shard::sql_store::SqlShardStore;
use crate::shard::watch_stream::{watcher, WatchSender};
use crate::shard::{visit_store, visit_unions};
use crate::shared::clock::now_ms;
use crate::shared::config::{
    Config, DEFAULT_DAYS_KEPT, DEFAULT_HAND_OVER_KEYS, DEFAULT_SHARDS, DEFAULT_SHARD_CACHE_BOUNDS,
};
use crate::shared::{drills, tasks};

/// Tries at setting the alarm after a call's writes are stored, [`ALARM_RETRY_MS`] apart and then
/// four times longer each time: a passing storage failure does not leave the call unanswered.
const ALARM_TRIES: u32 = 3;
const ALARM_RETRY_MS: u64 = 100;

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
    /// [`crate::shard::resharding::hand_over`]).
    pub(crate) shards: u32,
    pub(crate) hand_overs: HandOverState,
}

/// What [`ShardObject::run_group_now`] answers: each call's JSON answer (a rejected promise if
/// it cannot be encoded), and when the alarm must fire for what the group wrote.
pub(crate) struct GroupAnswers {
    pub answers: Vec<JsValue>,
    pub reclaim_by: Option<u64>,
}

/// A call's answer when it fails: a rejected promise, as an `async` method's error would be.
pub(crate) fn rejected(refused: impl Into<Refusal>) -> JsValue {
    js_sys::Promise::reject(&refusal(refused)).into()
}

/// What a call throws when the shard refuses it: the [`Refusal`]'s message, which the caller
/// reads back with [`Refusal::from_message`].
pub(crate) fn refusal(refused: impl Into<Refusal>) -> JsValue {
    JsValue::from_str(&refused.into().message())
}

/// What this object knows of its alarm, so most writes need no storage call to keep it; shared
/// with a call still setting it.
#[derive(Clone)]
struct AlarmKeeper {
    schedule: Rc<Cell<AlarmSchedule>>,
    /// The earliest lapse of stored writes whose alarm could not be set: every later call sets
    /// it first, whether it stores anything that lapses or not.
    owed: Rc<Cell<Option<u64>>>,
}

impl AlarmKeeper {
    fn new() -> Self {
        Self { schedule: Rc::new(Cell::new(AlarmSchedule::unknown())), owed: Rc::new(Cell::new(None)) }
    }

    /// When the alarm must fire by, for a call whose writes lapse at `at`: the earlier of that
    /// and what is owed.
    fn needed_by(&self, at: Option<u64>) -> Option<u64> {
        at.into_iter().chain(self.owed.get()).min()
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
    /// The shard's state over `state`'s storage, with nothing read yet but the schema: counters
    /// load when first used, the cache index when a cache write or delete first needs it.
    pub fn open(state: State, env: Env) -> Self {
        crate::shared::hash_seed::seed_once();
        let (cache_bounds, shards, migration, keys_per_alarm, days_kept) = match Config::from_env(&env) {
            Ok(config) => (
                config.shard_cache,
                config.shards,
                config.migration(),
                config.hand_over_keys,
                config.days_kept,
            ),
            Err(error) => {
                // The worker refuses every request in this case, so this object is not reached.
                console_error!("{}", error.message());
                (DEFAULT_SHARD_CACHE_BOUNDS, DEFAULT_SHARDS, None, DEFAULT_HAND_OVER_KEYS, DEFAULT_DAYS_KEPT)
            }
        };
        let opened = SqlShardStore::open(&state, now_ms()).and_then(|(store, found)| {
            visit_store::open(&store, &found, days_kept)?;
            visit_unions::open(&store, &found)?;
            Ok(store)
        });
        let store = opened.unwrap_or_else(|error| {
            // Later ops then fail with storage_unavailable (503) instead of the object crashing.
            console_error!("shard storage failed to open: {error}");
            SqlShardStore::unopened(&state)
        });
        let hand_overs = HandOverState::open(&store, migration, keys_per_alarm);
        Self {
            state,
            env,
            store,
            engine: RefCell::new(ShardEngine::new(cache_bounds)),
            alarm: AlarmKeeper::new(),
            watchers: RefCell::new(Watchers::default()),
            shards,
            hand_overs,
        }
    }

    /// The alarm's own part: reclaims what lapsed, and sets the alarm again for what lapses
    /// next (a minute on if reclaiming failed).
    ///
    /// # Errors
    /// A failure to set the alarm.
    pub async fn reclaim_on_alarm(&self) -> Result<()> {
        let now = now_ms();
        // The runtime deleted the alarm that fired: remember that before anything can fail.
        self.alarm.update(AlarmSchedule::fired);
        let reclaimed = self.engine.borrow_mut().reclaim_expired(&self.store, now);
        if let Err(error) = &reclaimed {
            console_error!("reclaiming expired keys failed; trying again in a minute: {}", error.detail());
        }
        if let Some(at) = next_alarm_after(now, &reclaimed) {
            self.ensure_alarm(at, now).await?;
        }
        // The alarm is set for what storage holds that lapses next, owed or not.
        if reclaimed.is_ok() {
            self.alarm.owed.set(None);
        }
        Ok(())
    }

    /// The object's storage.
    pub(crate) fn storage(&self) -> Storage {
        self.state.storage()
    }

    /// Makes sure the alarm fires by `at`.
    ///
    /// # Errors
    /// A failure to read or set it.
    pub async fn ensure_alarm(&self, at: u64, now: u64) -> Result<()> {
        self.alarm.ensure(&self.state.storage(), at, now).await
    }
}

impl ShardObject {
    /// Runs `request` now and answers its JSON response, or a promise of it when the alarm has
    /// to be read or set first (rejected with [`Refusal::StoredWithoutAlarm`] when it cannot be).
    /// The output gate holds the answer until the writes it made are durable, as for `fetch`.
    pub(crate) fn answer(self: &Rc<Self>, request: &ShardRequest) -> JsValue {
        let now = now_ms();
        let (answer, reclaim_by) = match self.run_now(request, now) {
            Ok(ran) => ran,
            Err(detail) => return rejected(CoreError::storage(detail.into())),
        };
        if self.alarm_due_by(reclaim_by) {
            return JsValue::from(answer);
        }
        let object = Rc::clone(self);
        tasks::run(async move {
            object.reclaim_by(reclaim_by).await?;
            Ok(JsValue::from(answer))
        })
    }

    /// Whether `request` runs here with no part of a change of the shard count to play: none
    /// is declared, none was left interrupted, and its sender placed its keys under this
    /// deployment's count (one that does not say knows only that count). The steady path never
    /// enters [`crate::shard::resharding`].
    pub(crate) fn is_steady_for(&self, request: &ShardRequest) -> bool {
        self.hand_overs.migration.is_none()
            && self.hand_overs.interrupted.get().is_none()
            && request.placed.is_none_or(|placed| placed.shards == self.shards)
    }

    /// Whether the alarm is known to fire by `at` (or nothing lapses), and by whatever earlier
    /// call could not set it.
    pub(crate) fn alarm_due_by(&self, at: Option<u64>) -> bool {
        self.alarm.needed_by(at).is_none_or(|at| self.alarm.is_due_by(at))
    }

    /// Makes sure the alarm fires by `at`, when something stored here lapses then, and by what
    /// an earlier call owes. It is called once the writes are stored, so it tries
    /// [`ALARM_TRIES`] times before it gives up; then the alarm is owed, and the next call of
    /// any kind sets it.
    ///
    /// # Errors
    /// [`Refusal::StoredWithoutAlarm`], as a rejection: the writes stay stored, and the caller
    /// must not take them as unapplied.
    pub(crate) async fn reclaim_by(&self, at: Option<u64>) -> std::result::Result<(), JsValue> {
        let own = at.filter(|&at| !self.alarm.is_due_by(at));
        let Some(at) = self.alarm.needed_by(own).filter(|&at| !self.alarm.is_due_by(at)) else {
            return Ok(());
        };
        let mut tries = 1;
        loop {
            let set = if drills::fails_alarm(&self.env) {
                Err(worker::Error::RustError("Durable Object storage is overloaded (drill)".into()))
            } else {
                self.alarm.ensure(&self.state.storage(), at, now_ms()).await
            };
            match set {
                Ok(()) => {
                    // What is owed now may be a later call's, owed meanwhile and still earlier.
                    if self.alarm.owed.get().is_some_and(|owed| owed >= at) {
                        self.alarm.owed.set(None);
                    }
                    return Ok(());
                }
                // A call that lapses nothing of its own tried once for an earlier one: it
                // answers as it ran, and the alarm stays owed.
                Err(_) if own.is_none() => return Ok(()),
                Err(error) if tries == ALARM_TRIES => {
                    console_error!(
                        "the alarm could not be set after {tries} tries, the writes stay: {error}"
                    );
                    // Owed meanwhile by another call, an earlier debt stays.
                    self.alarm.owed.set(Some(self.alarm.owed.get().map_or(at, |owed| owed.min(at))));
                    return Err(refusal(Refusal::StoredWithoutAlarm));
                }
                Err(_) => {
                    tasks::sleep(ALARM_RETRY_MS << (2 * (tries - 1))).await;
                    tries += 1;
                }
            }
        }
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
    pub(crate) fn run_now(
        &self,
        request: &ShardRequest,
        now: u64,
    ) -> std::result::Result<(String, Option<u64>), String> {
        let ran = self.engine.borrow_mut().run(&self.store, request, now);
        self.notify_watchers(std::iter::once((request, &ran.response)));
        let answer = serde_json::to_string(&ran.response).map_err(|error| error.to_string())?;
        Ok((answer, ran.reclaim_by))
    }

    /// Runs `requests` in this turn as one group (see [`crate::shard::group`]).
    pub(crate) fn run_group_now(&self, requests: &[&ShardRequest], now: u64) -> GroupAnswers {
        let grouped = self.engine.borrow_mut().run_group(&self.store, requests, now);
        self.notify_watchers(requests.iter().copied().zip(&grouped.responses));
        let answers = grouped
            .responses
            .iter()
            .map(|response| {
                serde_json::to_string(response).map_or_else(
                    |error| rejected(CoreError::storage(error.to_string().into())),
                    JsValue::from,
                )
            })
            .collect();
        GroupAnswers { answers, reclaim_by: grouped.reclaim_by }
    }

    /// Tells the open streams what the requests' writes stored.
    fn notify_watchers<'a>(&self, ran: impl Iterator<Item = (&'a ShardRequest, &'a ShardResponse)>) {
        let mut watching = self.watchers.borrow_mut();
        if watching.is_empty() {
            return;
        }
        for (request, response) in ran {
            let changes = watchers::changes(&request.ops, &response.results);
            watching.notify(&changes, WatchSender::send);
        }
    }

    /// A stream of `ns`/`key`'s value, read by `read` (see [`Shard::watch_rpc`]).
    pub(crate) fn open_stream(
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
            Some(OpResult::Value { .. }) => return Err(refusal(CoreError::NotFound)),
            Some(OpResult::Failed { error }) => return Err(refusal(error.clone())),
            _ => return Err(refusal(CoreError::storage("a read answered no value".into()))),
        };
        let (sender, stream) = watcher(value);
        if watching.add(ns, key, client, sender).is_err() {
            return Err(refusal(Refusal::TooManyStreams));
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

    /// Stores imported parcels over what their names hold (see
    /// [`crate::shard::transfer_store`]); memory forgets the names, so the next op reads what
    /// was stored, and the alarm is set for what lapses first. Answers once that is done.
    ///
    /// # Errors
    /// A storage failure, or a failure to set the alarm.
    pub(crate) async fn import(
        &self,
        parcels: &[Parcel],
        respect_owners: bool,
        cache_bytes: u64,
    ) -> std::result::Result<Vec<(usize, CoreError)>, JsValue> {
        let refused = self
            .store
            .atomically(|| self.store.import(parcels, respect_owners, cache_bytes, now_ms()))
            .map_err(|detail| JsValue::from_str(&detail.to_string()))?;
        let entries = parcels.iter().any(|p| p.cache.is_some());
        self.engine.borrow_mut().forget_keys(parcels.iter().map(|p| (&p.ns, &p.key)), entries);
        self.reclaim_by(parcels.iter().filter_map(Parcel::lapses_at).min()).await?;
        Ok(refused)
    }

    pub(crate) fn stats(&self, shard: u32) -> StoreResult<ShardStats> {
        let stats = self.store.uncounted(|| self.engine.borrow_mut().stats(&self.store, now_ms()));
        let keys_to_move = self.store.uncounted(|| self.hand_overs.keys_to_move(&self.store, shard))?;
        let (rows_read, rows_written) = self.store.rows_counted();
        Ok(ShardStats { rows_read, rows_written, keys_to_move, ..stats.map_err(|error| error.detail())? })
    }
}
