//! How the worker calls shards: one RPC to the shard's Durable Object per call, carrying a list
//! of ops, so a batch costs one hop per shard rather than one per op; statistics are an RPC too.
//! The namespace and each shard's object id are looked up once per isolate; stubs are made per
//! call, as a stub belongs to the request that makes it.

use edgecount_core::shard::answer_budget::MAX_SHARD_ANSWER_BYTES;
use edgecount_core::shard::protocol::{ShardRequest, ShardResponse, ShardStats};
use edgecount_core::{OpResult, ShardCall, ShardId};
use serde::Serialize;
use std::cell::RefCell;
use wasm_bindgen::prelude::{wasm_bindgen, JsValue};

use wasm_bindgen::JsCast;
use worker::js_sys;
use worker::wasm_bindgen_futures::JsFuture;
use worker::worker_sys::{DurableObjectId, DurableObjectNamespace};
use worker::Env;

use crate::http::api_error::ApiError;

/// The Durable Object binding in `wrangler.toml`.
pub const SHARDS_BINDING: &str = "SHARDS";

/// The shards' namespace and the ids of the shards called so far.
struct ShardIds {
    namespace: DurableObjectNamespace,
    ids: Vec<Option<DurableObjectId>>,
}

thread_local! {
    /// Bindings cannot change under a running isolate, and an object id is a plain value, so
    /// both serve every request of the isolate; looking them up again would take several calls
    /// into JavaScript per shard call.
    static SHARD_IDS: RefCell<Option<ShardIds>> = const { RefCell::new(None) };
}

/// A stub for `shard`, for one call.
fn stub(env: &Env, shard: ShardId) -> Result<ShardRpc, ApiError> {
    let js_error = |error: JsValue| ApiError::from(worker::Error::from(error));
    SHARD_IDS.with(|cell| {
        let mut cell = cell.borrow_mut();
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

/// `edgecount_core::shard::protocol::ShardRequest` borrowing its ops, so callers keep theirs without a copy.
#[derive(Serialize)]
struct ShardRequestRef<'a> {
    ops: &'a [ShardCall],
    answer_budget: u64,
}

/// Runs `ops` on `shard` in order and returns one result per op; cache entries past
/// `answer_budget` bytes (see `edgecount_core::shard::answer_budget`) come back `payload_too_large`.
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
    let body = serde_json::to_string(&ShardRequestRef { ops, answer_budget })
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    run(env, shard, &body, ops.len()).await
}

/// Runs `request` on `shard` (a receipted one, say) and returns one result per op.
///
/// # Errors
/// As [`execute`].
pub async fn execute_request(
    env: &Env,
    shard: ShardId,
    request: &ShardRequest,
) -> Result<Vec<OpResult>, ApiError> {
    let body = serde_json::to_string(request).map_err(|e| ApiError::Internal(e.to_string()))?;
    run(env, shard, &body, request.ops.len()).await
}

/// Sends the JSON request `body` of `expected` ops to `shard`.
async fn run(env: &Env, shard: ShardId, body: &str, expected: usize) -> Result<Vec<OpResult>, ApiError> {
    let rpc = stub(env, shard)?;
    let answer = JsFuture::from(rpc.run_ops(body)).await.map_err(|e| unreachable(&e))?;
    let text = answer.as_string().ok_or(ApiError::ShardUnavailable)?;
    let answer: ShardResponse = serde_json::from_str(&text).map_err(|_| ApiError::ShardUnavailable)?;
    if answer.results.len() != expected {
        return Err(ApiError::ShardUnavailable);
    }
    Ok(answer.results)
}

#[wasm_bindgen]
extern "C" {
    /// The shard's RPC surface (see `Shard::run_ops_rpc`).
    #[wasm_bindgen(extends = js_sys::Object)]
    type ShardRpc;

    /// Resolves to the JSON `ShardResponse` for a JSON `ShardRequest`.
    #[wasm_bindgen(method, js_name = runOps)]
    fn run_ops(this: &ShardRpc, body: &str) -> js_sys::Promise;

    /// Resolves to the shard's JSON `ShardStats`.
    #[wasm_bindgen(method, js_name = stats)]
    fn stats(this: &ShardRpc) -> js_sys::Promise;

    /// Resolves when the shard count agrees with the kept one (see `Shard::placement_rpc`).
    #[wasm_bindgen(method, js_name = placement)]
    fn placement(this: &ShardRpc, shards: u32) -> js_sys::Promise;

    /// Resolves to a `ReadableStream` of a counter's value as server-sent events.
    #[wasm_bindgen(method, js_name = watch)]
    fn watch(this: &ShardRpc, ns: &str, key: &str) -> js_sys::Promise;
}

/// Asks the keeper of the placement (`shard-0`) whether `configured` is the shard count the keys
/// were placed under.
///
/// # Errors
/// [`CoreError::PlacementChanged`](edgecount_core::CoreError::PlacementChanged) when it is
/// not; [`ApiError::ShardUnavailable`] when the shard cannot say.
pub async fn check_placement(env: &Env, configured: u32) -> Result<(), ApiError> {
    let rpc = stub(env, ShardId(0))?;
    JsFuture::from(rpc.placement(configured)).await.map(drop).map_err(|error| {
        let message = rejection_message(&error);
        match message.split_once("placement_changed:").and_then(|(_, kept)| kept.trim().parse().ok()) {
            Some(kept) => ApiError::Core(edgecount_core::CoreError::PlacementChanged { kept, configured }),
            None => ApiError::ShardUnavailable,
        }
    })
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
pub async fn watch(env: &Env, shard: ShardId, ns: &str, key: &str) -> Result<JsValue, WatchRefusal> {
    let rpc = stub(env, shard).map_err(|_| WatchRefusal::Unavailable)?;
    JsFuture::from(rpc.watch(ns, key)).await.map_err(|error| {
        let message = rejection_message(&error);
        if message.contains("not_found") {
            WatchRefusal::NotFound
        } else if message.contains("too_many_streams") {
            WatchRefusal::TooManyStreams
        } else {
            WatchRefusal::Unavailable
        }
    })
}

fn unreachable(error: &JsValue) -> ApiError {
    classify_failure(&rejection_message(error))
}

/// The message of a rejected call: an `Error`'s, or a rejection with a plain string.
fn rejection_message(error: &JsValue) -> String {
    error
        .dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| error.as_string())
        .unwrap_or_default()
}

/// Why a call to a shard failed: the runtime says "overloaded" when a Durable Object's queue of
/// incoming requests is too long, and a client should then back off rather than retry at once.
fn classify_failure(message: &str) -> ApiError {
    if message.to_ascii_lowercase().contains("overloaded") {
        ApiError::ShardOverloaded
    } else {
        ApiError::ShardUnavailable
    }
}

/// Runs a single op on `shard`.
///
/// # Errors
/// As [`execute`], with a write whose call failed reported as [`ApiError::OutcomeUnknown`].
pub async fn execute_one(env: &Env, shard: ShardId, call: ShardCall) -> Result<OpResult, ApiError> {
    let is_write = call.op.is_write();
    let results = execute(env, shard, std::slice::from_ref(&call), MAX_SHARD_ANSWER_BYTES).await;
    results.and_then(|mut r| r.pop().ok_or(ApiError::ShardUnavailable)).map_err(|e| e.after_send(is_write))
}

/// Asks `shard` for its statistics.
///
/// # Errors
/// [`ApiError::ShardUnavailable`] when the shard cannot be reached.
pub async fn stats(env: &Env, shard: ShardId) -> Result<ShardStats, ApiError> {
    let rpc = stub(env, shard)?;
    let answer = JsFuture::from(rpc.stats()).await.map_err(|_| ApiError::ShardUnavailable)?;
    let text = answer.as_string().ok_or(ApiError::ShardUnavailable)?;
    serde_json::from_str(&text).map_err(|_| ApiError::ShardUnavailable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overload_is_told_apart_from_other_failures() {
        assert_eq!(
            classify_failure("Error: Durable Object is overloaded. Too many requests queued."),
            ApiError::ShardOverloaded
        );
        assert_eq!(classify_failure("Network connection lost."), ApiError::ShardUnavailable);
    }
}
