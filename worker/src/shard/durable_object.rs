//! The `Shard` Durable Object: the authority for the keys that hash to it. This file is its
//! face to the runtime (the RPC methods the worker calls, the constructor and the alarm); what
//! it keeps and does is in [`crate::shard::object`], and its part in a change of the shard count
//! in [`crate::shard::resharding::hand_over`].
//!
//! A call answers at once, without a promise, unless it has to read or set the alarm first:
//! the runtime takes either from an RPC method, and most calls find the alarm already due.

use std::rc::Rc;

use edgecount_core::shard::migration::{Migration, Parcel};
use edgecount_core::shard::placement::{self, Kept, Placement};
use edgecount_core::shard::protocol::{ShardOp, ShardRequest, ShardStats};
use edgecount_core::shard::refusal::Refusal;
use edgecount_core::visits::day::Day;
use edgecount_core::{CoreError, Key, Namespace};
use worker::{durable_object, DurableObject, Env, Request, Response, Result, State};

use wasm_bindgen::prelude::{wasm_bindgen, JsValue};

use crate::shard::group::{self, Groups};
use crate::shard::object::{refusal, rejected, ShardObject};
use crate::shard::resharding;
use crate::shard::resharding::hand_over::{self, Route};
use crate::shared::clock::now_ms;
use crate::shared::tasks;

#[durable_object]
pub struct Shard {
    object: Rc<ShardObject>,
    /// The calls waiting for the next group.
    groups: Rc<Groups>,
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
    /// it waits for the next group ([`group`]) or the alarm has to be read or set first (a
    /// rejected one for a malformed request, a full group, or a failure to schedule the
    /// reclaiming alarm). The output gate holds the answer until the writes it made are
    /// durable, as for `fetch`. A call during a change of the shard count goes to
    /// [`resharding::run`].
    #[wasm_bindgen(js_name = runOps)]
    pub fn run_ops_rpc(&self, body: &str) -> JsValue {
        let Ok(request) = serde_json::from_str::<ShardRequest>(body) else {
            return rejected(CoreError::InvalidBody { reason: "is not a shard request".into() });
        };
        if self.object.is_steady_for(&request) {
            return group::arrive(&self.groups, &self.object, request, body.len());
        }
        resharding::run(&self.object, request)
    }

    /// What the next hand-over call carries of the keys named in the JSON `[[ns, key], ...]`,
    /// the first one's records continuing after the JSON `after` (see [`hand_over`]); reading
    /// them changes nothing.
    ///
    /// Named for the protocol that pages a key's records, as is [`Self::adopt_rpc`]: a shard
    /// of a release with another protocol (whose parcels carry all of a key's records, and
    /// which would store a page of them as the whole key) has neither name, so a call between
    /// the two releases fails and is tried again later, never misread.
    ///
    /// # Errors
    /// A malformed list or cursor, or a storage failure.
    #[wasm_bindgen(js_name = handOverPaged)]
    pub fn hand_over_rpc(
        &self,
        keys: &str,
        after: &str,
        from: u32,
        to: u32,
    ) -> std::result::Result<String, JsValue> {
        hand_over::hand_over(&self.object, keys, after, Migration { from, to }).map_err(JsValue::from)
    }

    /// Stores the JSON parcels handed over by their old home, each unless its key has arrived
    /// already, and sees the alarm set to reclaim what they hold when it lapses; the answer,
    /// held until they are durable, lets the old home delete its copies. It names, as JSON
    /// `[[ns, key], ...]`, the keys ignored as arrived before: their old home sends no further
    /// page of their records. A promise when the alarm has to be set first; rejected for
    /// malformed parcels, no change under way, or a storage failure.
    #[wasm_bindgen(js_name = adoptPaged)]
    pub fn adopt_rpc(&self, parcels: &str, from: u32, to: u32) -> JsValue {
        let (lapses_at, there_before) = match hand_over::adopt(&self.object, parcels, Migration { from, to })
        {
            Err(detail) => return rejected(CoreError::storage(detail.to_string().into())),
            Ok(adoption) => adoption,
        };
        // The keys whose parcels were ignored, as JSON `[[ns, key], ...]` (a pair of strings
        // cannot fail to encode).
        let answer = JsValue::from_str(&serde_json::to_string(&there_before).unwrap_or_default());
        if self.object.alarm_due_by(lapses_at) {
            return answer;
        }
        let object = Rc::clone(&self.object);
        tasks::run(async move {
            object.reclaim_by(lapses_at).await?;
            Ok(answer)
        })
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
            .map_err(|detail| JsValue::from_str(&detail.to_string()))
    }

    /// Tells this shard its index and, while a change of count is under way, starts its alarm
    /// handing over the keys that leave it.
    ///
    /// # Errors
    /// A failure to store the index or to set the alarm.
    #[wasm_bindgen(js_name = migrate)]
    pub fn migrate_rpc(&self, shard: u32) -> JsValue {
        if let Err(detail) = self.object.hand_overs.learn_shard(&self.object.store, shard) {
            return rejected(CoreError::storage(detail));
        }
        if !self.object.hand_overs.pending() {
            return JsValue::UNDEFINED;
        }
        let object = Rc::clone(&self.object);
        tasks::run(async move {
            let now = now_ms();
            object.ensure_alarm(now, now).await?;
            Ok(JsValue::UNDEFINED)
        })
    }

    /// A stream of server-sent events of one counter's value (Abacus's `/stream`): the value
    /// now, then each new value a write stores, until the counter is deleted or the reader
    /// leaves. `client` names who reads it ([`edgecount_core::edge::rate_limit::ClientId::label`]).
    /// Rejected ([`Refusal`]) with [`CoreError::NotFound`] for a counter that does not exist,
    /// [`Refusal::TooManyStreams`] past [`watchers::MAX_WATCHERS_PER_SHARD`] or
    /// [`watchers::MAX_WATCHERS_PER_CLIENT`] for the client, [`CoreError::InvalidKey`] for a bad
    /// name.
    ///
    /// # Errors
    /// Those three refusals, as the rejection's message.
    #[wasm_bindgen(js_name = watch)]
    pub fn watch_rpc(&self, ns: &str, key: &str, client: &str) -> std::result::Result<JsValue, JsValue> {
        let (Ok(ns), Ok(key)) = (Namespace::new(ns), Key::new(key)) else {
            return Err(refusal(CoreError::InvalidKey { reason: "is not a valid name".into() }));
        };
        let read = ShardRequest {
            ops: vec![ShardOp::Get { ns: ns.clone(), key: key.clone() }.into()],
            ..Default::default()
        };
        match hand_over::route(&self.object, &read) {
            Ok(Route::Here) => self.object.open_stream(ns, key, client, &read),
            Ok(Route::Refused(error)) => Err(refusal(error)),
            // A counter moving here during a change of count is taken over first.
            Ok(Route::AfterHandOvers) => {
                let object = Rc::clone(&self.object);
                let client = client.to_owned();
                Ok(tasks::run(async move {
                    hand_over::take_over_keys_of(&object, &read).await?;
                    object.open_stream(ns, key, &client, &read)
                }))
            }
            Err(detail) => Err(refusal(CoreError::storage(detail.to_string().into()))),
        }
    }

    /// Compares an isolate's placement (its JSON [`Kept`]) with the one the keys were placed
    /// under, keeping it when [`placement::check`] says so (only `shard-0` is asked). A change
    /// declared over is kept only once every shard of either count has handed over its keys.
    ///
    /// # Errors
    /// Rejected with [`CoreError::PlacementChanged`] when they differ,
    /// [`CoreError::ChangeUnfinished`] when keys are still to move, or a storage failure (each a
    /// [`Refusal`]).
    #[wasm_bindgen(js_name = placement)]
    pub fn placement_rpc(&self, configured: &str) -> JsValue {
        let configured: Kept = match serde_json::from_str(configured) {
            Ok(configured) => configured,
            Err(e) => return rejected(CoreError::InvalidBody { reason: format!("is not a placement: {e}") }),
        };
        let store = &self.object.store;
        let kept = match store.kept_placement() {
            Ok(kept) => kept,
            Err(detail) => return rejected(CoreError::storage(detail)),
        };
        let keep = |kept: Kept| match store.keep_placement(kept) {
            Ok(()) => JsValue::UNDEFINED,
            Err(detail) => rejected(CoreError::storage(detail)),
        };
        match placement::check(kept, configured) {
            Ok(Placement::Agrees) => JsValue::UNDEFINED,
            Ok(Placement::Remember(kept)) => keep(kept),
            Ok(Placement::Finish { change, settled }) => {
                let object = Rc::clone(&self.object);
                tasks::run(async move {
                    let mut unfinished = hand_over::shards_unfinished(&object, change).await;
                    if unfinished == 0 {
                        unfinished = hand_over::settle_everywhere(&object, change).await;
                    }
                    if unfinished > 0 {
                        let to = configured.shards;
                        return Err(refusal(CoreError::ChangeUnfinished {
                            from: change.from,
                            to,
                            unfinished,
                        }));
                    }
                    object
                        .store
                        .keep_placement(settled)
                        .map_err(|detail| refusal(CoreError::storage(detail)))?;
                    Ok(JsValue::UNDEFINED)
                })
            }
            Err(_) => rejected(CoreError::PlacementChanged {
                kept: kept.map_or(0, |k| k.shards),
                configured: configured.shards,
            }),
        }
    }

    /// Whether this shard has handed over every key that left it in the change from `from` to
    /// `to` shards.
    ///
    /// # Errors
    /// A storage failure.
    #[wasm_bindgen(js_name = handedOver)]
    pub fn handed_over_rpc(&self, from: u32, to: u32) -> std::result::Result<bool, JsValue> {
        hand_over::handed_over(&self.object, Migration { from, to }).map_err(JsValue::from)
    }

    /// A page of this shard's export (see [`crate::shard::transfer_store`]): `after` is the
    /// JSON of the name the last page ended at (`null` to start), `ns` the only namespace
    /// wanted (empty for all), `most` names and about `budget` bytes at most. Refused while the
    /// shard count changes: a key would be in two places.
    ///
    /// # Errors
    /// `change_under_way`, a malformed `after`, or a storage failure.
    #[wasm_bindgen(js_name = exportPage)]
    pub fn export_page_rpc(
        &self,
        after: &str,
        ns: &str,
        most: u32,
        budget: u32,
    ) -> std::result::Result<String, JsValue> {
        if self.object.hand_overs.migration.is_some() {
            return Err(refusal(Refusal::ChangeUnderWay));
        }
        let after: Option<(String, String)> =
            serde_json::from_str(after).map_err(|e| JsValue::from_str(&format!("malformed cursor: {e}")))?;
        let ns = (!ns.is_empty()).then_some(ns);
        let bounds = (u64::from(most), budget as usize);
        let page = self
            .object
            .store
            .export_page(after.as_ref(), ns, bounds, now_ms())
            .map_err(|d| JsValue::from_str(&d.to_string()))?;
        serde_json::to_string(&page).map_err(|e| JsValue::from_str(&e.to_string()))
    }

    /// This shard's part of namespace `ns` over the days `from..=to`, with its `top` keys: the
    /// JSON [`ShardPart`](edgecount_core::visits::namespace::ShardPart). Refused while the
    /// shard count changes, as an export is: a key would count in two places.
    ///
    /// # Errors
    /// `change_under_way`, a malformed namespace, or a storage failure.
    #[wasm_bindgen(js_name = namespacePart)]
    pub fn namespace_part_rpc(
        &self,
        ns: &str,
        from: i32,
        to: i32,
        top: u32,
    ) -> std::result::Result<String, JsValue> {
        if self.object.hand_overs.migration.is_some() {
            return Err(refusal(Refusal::ChangeUnderWay));
        }
        let ns = Namespace::new(ns).map_err(|e| refusal(Refusal::from(e)))?;
        let part = self
            .object
            .store
            .namespace_part(&ns, (Day(from), Day(to)), top, now_ms())
            .map_err(|d| JsValue::from_str(&d.to_string()))?;
        serde_json::to_string(&part).map_err(|e| JsValue::from_str(&e.to_string()))
    }

    /// Stores the JSON array of parcels an import sent this shard (each validated by the
    /// worker; see [`crate::shard::transfer_store`] for `respect_owners` and `cache_bytes`);
    /// resolves once they are stored and the alarm is set for what lapses, to the JSON list of
    /// the parcels refused: `[place, error]` each.
    ///
    /// # Errors
    /// `change_under_way`, malformed parcels, or a storage failure.
    #[wasm_bindgen(js_name = import)]
    pub fn import_rpc(&self, parcels: &str, respect_owners: bool, cache_bytes: f64) -> JsValue {
        if self.object.hand_overs.migration.is_some() {
            return rejected(Refusal::ChangeUnderWay);
        }
        let parcels: Vec<Parcel> = match serde_json::from_str(parcels) {
            Ok(parcels) => parcels,
            Err(e) => {
                return rejected(CoreError::InvalidBody { reason: format!("is not a list of parcels: {e}") })
            }
        };
        let object = Rc::clone(&self.object);
        tasks::run(async move {
            let refused = object.import(&parcels, respect_owners, cache_bytes as u64).await?;
            serde_json::to_string(&refused).map(JsValue::from).map_err(|e| JsValue::from_str(&e.to_string()))
        })
    }

    /// Answers this shard's JSON [`ShardStats`] for `/v1/stats`, over RPC like ops; `shard` is
    /// its index, which the keys it has still to hand over are counted by.
    ///
    /// # Errors
    /// A failure to count the stored rows.
    #[wasm_bindgen(js_name = stats)]
    pub fn stats_rpc(&self, shard: u32) -> std::result::Result<String, JsValue> {
        let stats = self.object.stats(shard).map_err(|detail| JsValue::from_str(&detail.to_string()))?;
        let stats = ShardStats { overloaded: self.groups.refused(), ..stats };
        serde_json::to_string(&stats).map_err(|e| JsValue::from_str(&e.to_string()))
    }
}

impl DurableObject for Shard {
    fn new(state: State, env: Env) -> Self {
        Self { object: Rc::new(ShardObject::open(state, env)), groups: Rc::default() }
    }

    /// The worker reaches shards over RPC only (`runOps`, `stats`); this door stays shut.
    async fn fetch(&self, _req: Request) -> Result<Response> {
        Response::error("shards answer over RPC only", 404)
    }

    async fn alarm(&self) -> Result<Response> {
        let object = &self.object;
        object.reclaim_on_alarm().await?;
        if let Some(at) = hand_over::push(object).await {
            object.ensure_alarm(at, now_ms()).await?;
        }
        Response::ok("reclaimed")
    }
}
