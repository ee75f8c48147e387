//! How the worker calls shards: one RPC to the shard's Durable Object per call, carrying a list
//! of ops, so a batch costs one hop per shard rather than one per op; statistics are an RPC too.
//! The namespace and each shard's object id are looked up once per isolate; stubs are made per
//! call, as a stub belongs to the request that makes it.

use edgecount_core::edge::one_way::flush_receipt_parts;
use edgecount_core::edge::rate_limit::ClientId;
use edgecount_core::shard::answer_budget::MAX_SHARD_ANSWER_BYTES;
use edgecount_core::shard::migration::{Migration, Parcel, RecordsAfter};
use edgecount_core::shard::placement::Kept;
use edgecount_core::shard::protocol::{Placed, ShardRequest, ShardResponse, ShardStats};
use edgecount_core::shard::refusal::Refusal;
use edgecount_core::shard::transfer::ExportPage;
use edgecount_core::visits::day::Day;
use edgecount_core::visits::namespace::ShardPart;
use edgecount_core::{CoreError, Key, Namespace, OpResult, ShardCall, ShardId};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::future::Future;
use wasm_bindgen::prelude::{wasm_bindgen, JsValue};

use wasm_bindgen::JsCast;
use worker::js_sys;
use worker::wasm_bindgen_futures::JsFuture;
use worker::Env;

use crate::shared::api_error::ApiError;
use crate::shared::config::Config;
use crate::shared::state::{self, ShardIds};
use crate::shared::{drills, tasks};

/// The Durable Object binding in `wrangler.toml`.
pub const SHARDS_BINDING: &str = "SHARDS";

/// A stub for `shard`, for one call.
fn stub(env: &Env, shard: ShardId) -> Result<ShardRpc, ApiError> {
    let js_error = |error: JsValue| ApiError::from(worker::Error::from(error));
    state::with(|s| {
        let mut cell = s.shard_ids.borrow_mut();
        let known = match cell.as_mut() {
            Some(known) => known,
            None => {
                let namespace = env.durable_object(SHARDS_BINDING)?;
                let namespace = AsRef::<JsValue>::as_ref(&namespace).clone().unchecked_into();
                cell.insert(ShardIds { namespace, ids: Vec::new() })
            }
        };
        let index = shard.0 as usize;
        if known.ids.len() <= index {
            known.ids.resize_with(index + 1, || None);
        }
        let id = match &mut known.ids[index] {
            Some(id) => id,
            empty => empty.insert(known.namespace.id_from_name(&shard.object_name()).map_err(js_error)?),
        };
        Ok(known.namespace.get(id).map_err(js_error)?.unchecked_into())
    })
}

/// [`stub`] for the calls shards make to each other during a change of count, which report
/// failures as the rejection they pass on.
fn shard_to_shard_stub(env: &Env, shard: ShardId) -> Result<ShardRpc, JsValue> {
    stub(env, shard).map_err(|e| JsValue::from_str(&format!("{e:?}")))
}

/// `edgecount_core::shard::protocol::ShardRequest` borrowing its ops, so callers keep theirs without a copy.
#[derive(Serialize)]
struct ShardRequestRef<'a> {
    ops: &'a [ShardCall],
    answer_budget: u64,
    placed: Placed,
}

/// Runs `ops` on `shard` in order and returns one result per op; cache entries and days answers
/// past `answer_budget` bytes (see `edgecount_core::shard::answer_budget`) come back
/// `payload_too_large`.
///
/// # Errors
/// [`ApiError::ShardUnavailable`] when the shard cannot be reached or answers out of protocol.
/// The ops may have run all the same: see [`ApiError::after_send`].
pub async fn execute(
    env: &Env,
    shard: ShardId,
    ops: &[ShardCall],
    answer_budget: u64,
) -> Result<Vec<OpResult>, ApiError> {
    let placed = placed_by_this_isolate(env, shard)?;
    let body = serde_json::to_string(&ShardRequestRef { ops, answer_budget, placed })
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    run(env, shard, &body, ops.len()).await
}

/// Where this isolate places the keys it sends `shard`: under its own count.
fn placed_by_this_isolate(env: &Env, shard: ShardId) -> Result<Placed, ApiError> {
    Ok(Placed { shards: Config::for_isolate(env)?.shards, shard: shard.0 })
}

/// Runs `request` on `shard` (a receipted one, say) and returns one result per op; a request
/// that does not say where its keys were placed is placed by this isolate's count.
///
/// # Errors
/// As [`execute`].
pub async fn execute_request(
    env: &Env,
    shard: ShardId,
    request: &ShardRequest,
) -> Result<Vec<OpResult>, ApiError> {
    let body = if request.placed.is_some() {
        serde_json::to_string(request)
    } else {
        let placed = Some(placed_by_this_isolate(env, shard)?);
        serde_json::to_string(&ShardRequest { placed, ..request.clone() })
    };
    let body = body.map_err(|e| ApiError::Internal(e.to_string()))?;
    let results = run(env, shard, &body, request.ops.len()).await?;
    lose_flush_answer_in_drill(env, request)?;
    Ok(results)
}

/// The drill that loses a one-way flush's answer on the way back, after it was applied (the
/// resend's replay): the flusher sees an unknown outcome, as it would in production.
fn lose_flush_answer_in_drill(env: &Env, request: &ShardRequest) -> Result<(), ApiError> {
    let is_flush = request.receipt.as_ref().and_then(flush_receipt_parts).is_some();
    if is_flush && drills::loses_flush_answer(env) {
        return Err(ApiError::ShardUnavailable);
    }
    Ok(())
}

/// The relays' Durable Object binding in `wrangler.toml`.
pub const RELAYS_BINDING: &str = "RELAYS";

/// Sends the one-way flush `request` for `shard` to that shard's relay `relay` (see
/// `edgecount_core::relay`), which answers one result per op once it has taken them.
///
/// # Errors
/// As [`execute`]; [`ApiError::ShardOverloaded`] when the relay has no room for the flush.
pub async fn execute_relayed(
    env: &Env,
    shard: ShardId,
    relay: u32,
    request: &ShardRequest,
) -> Result<Vec<OpResult>, ApiError> {
    let placed = placed_by_this_isolate(env, shard)?;
    let name = edgecount_core::relay::object_name(placed.shards, shard, relay);
    let body = serde_json::to_string(&ShardRequest { placed: Some(placed), ..request.clone() })
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let namespace = env.durable_object(RELAYS_BINDING)?;
    let rpc: RelayRpc = namespace.id_from_name(&name)?.get_stub()?.into_rpc();
    let answer = answer_of(JsFuture::from(rpc.relay_ops(&body))).await.map_err(|e| unreachable(&e))?;
    let text = answer.as_string().ok_or(ApiError::ShardUnavailable)?;
    let answer: ShardResponse = serde_json::from_str(&text).map_err(|_| ApiError::ShardUnavailable)?;
    if answer.results.len() != request.ops.len() {
        return Err(ApiError::ShardUnavailable);
    }
    lose_flush_answer_in_drill(env, request)?;
    Ok(answer.results)
}

/// How long a shard's answer is waited for, on every call. Past it the call is given up as
/// unanswered (its ops may have run all the same: see [`ApiError::after_send`]), so that a
/// shard that hangs holds no request, batch, one-way flusher or hand-over for longer than a
/// single-key request waits.
pub const ANSWER_DEADLINE_MS: u64 = 15_000;

/// What a shard answers (`answer`: one of its RPC methods' promises), waited for
/// [`ANSWER_DEADLINE_MS`] at most: past it, an error as if the call had failed (it may have run
/// all the same).
async fn answer_of(answer: impl Future<Output = Result<JsValue, JsValue>>) -> Result<JsValue, JsValue> {
    tasks::within(answer, ANSWER_DEADLINE_MS)
        .await
        .unwrap_or_else(|| Err(JsValue::from_str("the shard did not answer in time")))
}

/// Sends the JSON request `body` of `expected` ops to `shard`.
async fn run(env: &Env, shard: ShardId, body: &str, expected: usize) -> Result<Vec<OpResult>, ApiError> {
    let rpc = stub(env, shard)?;
    let sent = JsFuture::from(rpc.run_ops(body));
    let answer = if drills::stalls_call(env) {
        answer_of(std::future::pending()).await
    } else {
        answer_of(sent).await
    };
    let answer = answer.map_err(|e| unreachable(&e))?;
    let text = answer.as_string().ok_or(ApiError::ShardUnavailable)?;
    let answer: ShardResponse = serde_json::from_str(&text).map_err(|_| ApiError::ShardUnavailable)?;
    if answer.results.len() != expected {
        return Err(ApiError::ShardUnavailable);
    }
    Ok(answer.results)
}

#[wasm_bindgen]
extern "C" {
    /// A relay's RPC surface (see `relay::durable_object::Relay`).
    #[wasm_bindgen(extends = js_sys::Object)]
    type RelayRpc;

    /// Resolves to the JSON `ShardResponse` for a JSON one-way flush.
    #[wasm_bindgen(method, js_name = relayOps)]
    fn relay_ops(this: &RelayRpc, body: &str) -> js_sys::Promise;

    /// The shard's RPC surface (see `Shard::run_ops_rpc`).
    #[wasm_bindgen(extends = js_sys::Object)]
    type ShardRpc;

    /// Resolves to the JSON `ShardResponse` for a JSON `ShardRequest`.
    #[wasm_bindgen(method, js_name = runOps)]
    fn run_ops(this: &ShardRpc, body: &str) -> js_sys::Promise;

    /// Resolves to the shard's JSON `ShardStats`; `shard` is its index.
    #[wasm_bindgen(method, js_name = stats)]
    fn stats(this: &ShardRpc, shard: u32) -> js_sys::Promise;

    /// Resolves when the JSON placement agrees with the kept one (see `Shard::placement_rpc`).
    #[wasm_bindgen(method, js_name = placement)]
    fn placement(this: &ShardRpc, placement: &str) -> js_sys::Promise;

    /// Resolves to the JSON parcels of the JSON keys, the first one's records continuing after
    /// the JSON cursor (see `Shard::hand_over_rpc`; a shard of another release lacks the name).
    #[wasm_bindgen(method, js_name = handOverPaged)]
    fn hand_over(this: &ShardRpc, keys: &str, after: &str, from: u32, to: u32) -> js_sys::Promise;

    /// Resolves once the JSON parcels are stored (see `Shard::adopt_rpc`; a shard of another
    /// release lacks the name).
    #[wasm_bindgen(method, js_name = adoptPaged)]
    fn adopt(this: &ShardRpc, parcels: &str, from: u32, to: u32) -> js_sys::Promise;

    /// Resolves once the shard has forgotten a change declared over.
    #[wasm_bindgen(method, js_name = settleChange)]
    fn settle_change(this: &ShardRpc, from: u32, to: u32) -> js_sys::Promise;

    /// Resolves to whether the shard has handed over its keys in a change of count.
    #[wasm_bindgen(method, js_name = handedOver)]
    fn handed_over(this: &ShardRpc, from: u32, to: u32) -> js_sys::Promise;

    /// Resolves once the shard knows its index and has started handing over its leaving keys.
    #[wasm_bindgen(method, js_name = migrate)]
    fn migrate(this: &ShardRpc, shard: u32) -> js_sys::Promise;

    /// Resolves to the JSON of a page of the shard's export (see `Shard::export_page_rpc`).
    #[wasm_bindgen(method, js_name = exportPage)]
    fn export_page(this: &ShardRpc, after: &str, ns: &str, most: u32, budget: u32) -> js_sys::Promise;

    /// Resolves to the JSON of the shard's part of a namespace's period (see
    /// `Shard::namespace_part_rpc`).
    #[wasm_bindgen(method, js_name = namespacePart)]
    fn namespace_part(this: &ShardRpc, ns: &str, from: i32, to: i32, top: u32) -> js_sys::Promise;

    /// Resolves once the JSON parcels are stored (see `Shard::import_rpc`).
    #[wasm_bindgen(method, js_name = import)]
    fn import(this: &ShardRpc, parcels: &str, respect_owners: bool, cache_bytes: f64) -> js_sys::Promise;

    /// Resolves to a `ReadableStream` of a counter's value as server-sent events.
    #[wasm_bindgen(method, js_name = watch)]
    fn watch(this: &ShardRpc, ns: &str, key: &str, client: &str) -> js_sys::Promise;
}

/// Asks the keeper of the placement (`shard-0`) whether `configured` agrees with the placement
/// the keys are under.
///
/// # Errors
/// [`CoreError::PlacementChanged`](edgecount_core::CoreError::PlacementChanged) when it does
/// not; [`ApiError::ShardUnavailable`] when the shard cannot say.
pub async fn check_placement(env: &Env, configured: Kept) -> Result<(), ApiError> {
    let rpc = stub(env, ShardId(0))?;
    let configured_json =
        serde_json::to_string(&configured).map_err(|e| ApiError::Internal(e.to_string()))?;
    answer_of(JsFuture::from(rpc.placement(&configured_json))).await.map(drop).map_err(|error| {
        match refusal_of(&error) {
            Some(Refusal::Core {
                error: error @ (CoreError::PlacementChanged { .. } | CoreError::ChangeUnfinished { .. }),
            }) => ApiError::Core(error),
            _ => ApiError::ShardUnavailable,
        }
    })
}

/// The shard's typed refusal a rejected call carries, if any (see `Refusal`).
fn refusal_of(error: &JsValue) -> Option<Refusal> {
    Refusal::from_message(&rejection_message(error))
}

/// Whether `shard` has handed over every key that left it in `change`.
///
/// # Errors
/// A rejected call.
pub async fn handed_over(env: &Env, shard: ShardId, change: Migration) -> Result<bool, JsValue> {
    let rpc = shard_to_shard_stub(env, shard)?;
    let answer = answer_of(JsFuture::from(rpc.handed_over(change.from, change.to))).await?;
    Ok(answer.as_bool() == Some(true))
}

/// What the next hand-over call carries of `keys` from their old home `shard`, the first
/// one's records continuing `after` (see `SqlShardStore::parcels`).
///
/// # Errors
/// A rejected call (its message), or an answer out of protocol.
pub async fn hand_over(
    env: &Env,
    shard: ShardId,
    keys: &[(Namespace, Key)],
    after: Option<&RecordsAfter>,
    change: Migration,
) -> Result<Vec<Parcel>, JsValue> {
    let rpc = shard_to_shard_stub(env, shard)?;
    let keys = serde_json::to_string(keys).map_err(|e| JsValue::from_str(&e.to_string()))?;
    let after = serde_json::to_string(&after).map_err(|e| JsValue::from_str(&e.to_string()))?;
    let answer = answer_of(JsFuture::from(rpc.hand_over(&keys, &after, change.from, change.to))).await?;
    let text = answer.as_string().ok_or_else(|| JsValue::from_str("a hand-over answered no text"))?;
    serde_json::from_str(&text).map_err(|e| JsValue::from_str(&e.to_string()))
}

/// Has `shard` store `parcels`; resolves once they are durable there, with the keys whose
/// parcels it ignored as they had arrived before (none from a shard of a release that does not
/// say).
///
/// # Errors
/// A rejected call (its message).
pub async fn adopt(
    env: &Env,
    shard: ShardId,
    parcels: &[Parcel],
    change: Migration,
) -> Result<Vec<(Namespace, Key)>, JsValue> {
    let rpc = shard_to_shard_stub(env, shard)?;
    let parcels = serde_json::to_string(parcels).map_err(|e| JsValue::from_str(&e.to_string()))?;
    let answer = answer_of(JsFuture::from(rpc.adopt(&parcels, change.from, change.to))).await?;
    Ok(answer.as_string().and_then(|held| serde_json::from_str(&held).ok()).unwrap_or_default())
}

/// Has `shard` forget `change`, declared over (see `Shard::settle_change_rpc`).
///
/// # Errors
/// A rejected call.
pub async fn settle_change(env: &Env, shard: ShardId, change: Migration) -> Result<(), JsValue> {
    let rpc = shard_to_shard_stub(env, shard)?;
    answer_of(JsFuture::from(rpc.settle_change(change.from, change.to))).await.map(drop)
}

/// Tells `shard` its index and starts its hand-overs (see `Shard::migrate_rpc`).
///
/// # Errors
/// [`ApiError::ShardUnavailable`] when the shard cannot be reached.
pub async fn migrate(env: &Env, shard: ShardId) -> Result<(), ApiError> {
    let rpc = stub(env, shard)?;
    answer_of(JsFuture::from(rpc.migrate(shard.0))).await.map(drop).map_err(|_| ApiError::ShardUnavailable)
}

/// Why a shard would not open a stream (see `Shard::watch_rpc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchRefusal {
    NotFound,
    TooManyStreams,
    Unavailable,
}

/// Opens a stream of server-sent events of `ns`/`key`'s value on its shard.
///
/// # Errors
/// The shard's [`WatchRefusal`].
pub async fn watch(
    env: &Env,
    shard: ShardId,
    ns: &str,
    key: &str,
    client: ClientId,
) -> Result<JsValue, WatchRefusal> {
    let rpc = stub(env, shard).map_err(|_| WatchRefusal::Unavailable)?;
    answer_of(JsFuture::from(rpc.watch(ns, key, &client.label()))).await.map_err(|error| {
        match refusal_of(&error) {
            Some(Refusal::Core { error: CoreError::NotFound }) => WatchRefusal::NotFound,
            Some(Refusal::TooManyStreams) => WatchRefusal::TooManyStreams,
            _ => WatchRefusal::Unavailable,
        }
    })
}

fn unreachable(error: &JsValue) -> ApiError {
    match refusal_of(error) {
        Some(Refusal::StoredWithoutAlarm) => return ApiError::OutcomeUnknown,
        Some(Refusal::Overloaded) => return ApiError::ShardOverloaded,
        _ => {}
    }
    classify_failure(error_flag(error, "overloaded"), error_flag(error, "remote"))
}

/// The message of a rejected call: an `Error`'s, or a rejection with a plain string.
fn rejection_message(error: &JsValue) -> String {
    error
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| error.as_string())
        .unwrap_or_default()
}

/// Whether the runtime marked a rejected call's error with `flag` (`error.overloaded`,
/// `error.remote`: see the Durable Objects docs' "Error handling").
fn error_flag(error: &JsValue, flag: &str) -> bool {
    js_sys::Reflect::get(error, &JsValue::from_str(flag)).is_ok_and(|value| value.is_truthy())
}

/// Why a call to a shard failed. Only the runtime's own refusal of a call, marked `overloaded`
/// and not thrown by the shard's code (`remote`), applied nothing for sure: the shard's queue
/// was too long, and a client should back off rather than retry at once. Any other failure,
/// whatever its text says, may have come after the shard stored the call's writes.
fn classify_failure(overloaded: bool, remote: bool) -> ApiError {
    if overloaded && !remote {
        ApiError::ShardOverloaded
    } else {
        ApiError::ShardUnavailable
    }
}

/// Runs a single op on `shard`, in a call of its own.
///
/// # Errors
/// As [`execute`], with a write whose call failed reported as [`ApiError::OutcomeUnknown`];
/// [`ApiError::ShardOverloaded`], with nothing sent, when this isolate already has
/// `EDGECOUNT_SHARD_QUEUE_LIMIT` calls under way to the shard.
pub async fn execute_one(env: &Env, shard: ShardId, call: ShardCall) -> Result<OpResult, ApiError> {
    let is_write = call.op.is_write();
    let _under_way = CallUnderWay::begin(shard, Config::for_isolate(env)?.shard_queue_limit)?;
    let results = execute(env, shard, std::slice::from_ref(&call), MAX_SHARD_ANSWER_BYTES).await;
    let answer = results
        .and_then(|mut r| r.pop().ok_or(ApiError::ShardUnavailable))
        .map_err(|e| e.after_send(is_write));
    if matches!(answer, Err(ApiError::ShardOverloaded)) {
        state::with(|s| s.single_key_calls_refused.set(s.single_key_calls_refused.get() + 1));
    }
    answer
}

/// This isolate's single-key calls: made, refused as overloaded (here or by their shard), and
/// under way now.
#[must_use]
pub fn single_key_calls() -> (u64, u64, usize) {
    state::with(|s| {
        let under_way = s.calls_under_way.borrow().values().sum();
        (s.single_key_calls.get(), s.single_key_calls_refused.get(), under_way)
    })
}

/// A single-key call under way to a shard, counted against the isolate's bound until it ends
/// however it ends (answered, given up, or dropped with a request whose client hung up).
struct CallUnderWay(ShardId);

impl CallUnderWay {
    fn begin(shard: ShardId, limit: usize) -> Result<Self, ApiError> {
        state::with(|s| {
            let mut under_way = s.calls_under_way.borrow_mut();
            let count = under_way.entry(shard).or_default();
            if *count >= limit {
                s.single_key_calls_refused.set(s.single_key_calls_refused.get() + 1);
                return Err(ApiError::ShardOverloaded);
            }
            *count += 1;
            s.single_key_calls.set(s.single_key_calls.get() + 1);
            Ok(Self(shard))
        })
    }
}

impl Drop for CallUnderWay {
    fn drop(&mut self) {
        state::with(|s| {
            let mut under_way = s.calls_under_way.borrow_mut();
            if let Some(count) = under_way.get_mut(&self.0) {
                *count -= 1;
                if *count == 0 {
                    under_way.remove(&self.0);
                }
            }
        });
    }
}

/// A page of `shard`'s export after `after` (see `Shard::export_page_rpc`).
///
/// # Errors
/// [`ApiError::ChangeUnderWay`] while the shard count changes, else
/// [`ApiError::ShardUnavailable`] when the shard cannot answer.
pub async fn export_page(
    env: &Env,
    shard: ShardId,
    after: Option<&(String, String)>,
    ns: Option<&str>,
    (most, budget): (u32, u32),
) -> Result<ExportPage, ApiError> {
    let rpc = stub(env, shard)?;
    let after = serde_json::to_string(&after).map_err(|e| ApiError::Internal(e.to_string()))?;
    let asked = rpc.export_page(&after, ns.unwrap_or(""), most, budget);
    json_answer(asked).await
}

/// `shard`'s part of `ns` over `from..=to`, with its `top` keys (see
/// `Shard::namespace_part_rpc`).
///
/// # Errors
/// As [`export_page`].
pub async fn namespace_part(
    env: &Env,
    shard: ShardId,
    ns: &Namespace,
    (from, to): (Day, Day),
    top: u32,
) -> Result<ShardPart, ApiError> {
    let rpc = stub(env, shard)?;
    let asked = rpc.namespace_part(ns.as_str(), from.0, to.0, top);
    json_answer(asked).await
}

/// Has `shard` store imported parcels (see `Shard::import_rpc`); answers those it refused.
///
/// # Errors
/// As [`export_page`].
pub async fn import(
    env: &Env,
    shard: ShardId,
    parcels: &[Parcel],
    respect_owners: bool,
    cache_bytes: u64,
) -> Result<Vec<(usize, CoreError)>, ApiError> {
    let rpc = stub(env, shard)?;
    let parcels = serde_json::to_string(parcels).map_err(|e| ApiError::Internal(e.to_string()))?;
    let asked = rpc.import(&parcels, respect_owners, cache_bytes as f64);
    json_answer(asked).await
}

/// The JSON a shard's `asked` call answers (an export page, an import's refusals, a namespace
/// part), waited for as every call is; a refusal as [`transfer_failure`] reads it.
async fn json_answer<T: DeserializeOwned>(asked: js_sys::Promise) -> Result<T, ApiError> {
    let answer = answer_of(JsFuture::from(asked)).await.map_err(|e| transfer_failure(&e))?;
    let text = answer.as_string().ok_or(ApiError::ShardUnavailable)?;
    serde_json::from_str(&text).map_err(|_| ApiError::ShardUnavailable)
}

fn transfer_failure(error: &JsValue) -> ApiError {
    match refusal_of(error) {
        Some(Refusal::ChangeUnderWay) => ApiError::ChangeUnderWay,
        Some(Refusal::StoredWithoutAlarm) => ApiError::OutcomeUnknown,
        _ => ApiError::ShardUnavailable,
    }
}

/// Asks `shard` for its statistics.
///
/// # Errors
/// [`ApiError::ShardUnavailable`] when the shard cannot be reached.
pub async fn stats(env: &Env, shard: ShardId) -> Result<ShardStats, ApiError> {
    let rpc = stub(env, shard)?;
    let answer =
        answer_of(JsFuture::from(rpc.stats(shard.0))).await.map_err(|_| ApiError::ShardUnavailable)?;
    let text = answer.as_string().ok_or(ApiError::ShardUnavailable)?;
    serde_json::from_str(&text).map_err(|_| ApiError::ShardUnavailable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overload_is_told_apart_from_other_failures_by_the_runtime_s_mark_not_the_text() {
        assert_eq!(classify_failure(true, false), ApiError::ShardOverloaded);
        assert_eq!(classify_failure(true, true), ApiError::ShardUnavailable, "thrown by the shard's code");
        assert_eq!(classify_failure(false, false), ApiError::ShardUnavailable);
    }
}
