//! `POST /v1/batch`: many ops in one request, grouped so each shard gets one call.
//!
//! Shard calls run concurrently; each shard runs its ops in request order, so ops on one key
//! apply in the order sent. A shard that cannot be reached fails only its own ops.

use std::collections::BTreeMap;

use edgecount_core::access::Right;
use edgecount_core::batch::{error_json, parse_batch, result_json, MAX_BATCH_BODY_BYTES};
use edgecount_core::body::is_json_content_type;
use edgecount_core::edge_cache::CachedRead;
use edgecount_core::{shard_for, CoreError, OpResult, ShardCall, ShardId, ShardOp};
use futures_util::future::join_all;
use serde_json::{json, Value};
use worker::{Env, Request, Response};

use crate::api_error::ApiError;
use crate::config::Config;
use crate::counters::now_ms;
use crate::rate_limits::Meter;
use crate::{edge, respond, shard_client};

/// Serves `POST /v1/batch`.
///
/// # Errors
/// A body that is not a batch (400), too many ops or bytes (413), a non-JSON body (415).
pub async fn serve(
    mut req: Request,
    env: &Env,
    config: &Config,
    token: Option<&str>,
    meter: &mut Meter,
) -> Result<Response, ApiError> {
    let text = read_body(&mut req).await?;
    let parsed = parse_batch(&text)?;
    // Tops the arrival charge up to the batch's cost before any op is sent.
    meter.charge(config, parsed.len())?;
    let mut results: Vec<Value> = vec![Value::Null; parsed.len()];
    let mut by_shard: BTreeMap<ShardId, (Vec<usize>, Vec<ShardCall>)> = BTreeMap::new();
    for (index, call) in parsed.into_iter().enumerate() {
        match call.map_err(ApiError::from).and_then(|call| permitted(config, token, call)) {
            Ok(call) => {
                let (ns, key) = call.op.target();
                let group = by_shard.entry(shard_for(ns, key, config.shards)).or_default();
                group.0.push(index);
                group.1.push(call);
            }
            Err(error) => results[index] = error_json(error.code(), &error.message()),
        }
    }
    let sent_at = now_ms();
    let calls = by_shard.into_iter().map(|(shard, (indexes, ops))| async move {
        let outcome = shard_client::execute(env, shard, &ops).await;
        (indexes, ops, outcome)
    });
    for (indexes, ops, outcome) in join_all(calls).await {
        match outcome {
            Ok(shard_results) => {
                for ((index, call), result) in indexes.into_iter().zip(&ops).zip(shard_results) {
                    keep_edge_cache_current(config, &call.op, &result, sent_at);
                    results[index] = result_json(&result);
                }
            }
            Err(error) => {
                for (index, call) in indexes.into_iter().zip(&ops) {
                    let (ns, key) = call.op.target();
                    edge::forget(config, ns, key);
                    results[index] = error_json(error.code(), &error.message());
                }
            }
        }
    }
    let response = respond::json(200, &json!({ "results": results }))?;
    response.headers().set("cache-control", "no-store")?;
    Ok(response)
}

/// An op the token may run, or the per-op error saying why not.
fn permitted(config: &Config, token: Option<&str>, call: ShardCall) -> Result<ShardCall, ApiError> {
    let need = if call.op.is_write() { Right::Write } else { Right::Read };
    config.access.check(token, need, Some(call.op.target().0))?;
    Ok(call)
}

/// Counter writes through a batch update this isolate's kept reads, as single writes do.
fn keep_edge_cache_current(config: &Config, op: &ShardOp, result: &OpResult, sent_at: u64) {
    let (ns, key) = op.target();
    match (op, result) {
        // Replays carry old answers; failures changed nothing.
        (ShardOp::Get { .. }, _) | (_, OpResult::Failed { .. } | OpResult::Replayed { .. }) => {}
        (_, OpResult::Value { value, exists, version }) => {
            let read = CachedRead { value: *value, exists: *exists, version: *version, read_at_ms: sent_at };
            edge::refresh(config, ns, key, read);
        }
        (ShardOp::Delete { .. }, _) => edge::forget(config, ns, key),
        _ => {}
    }
}

async fn read_body(req: &mut Request) -> Result<String, ApiError> {
    let content_type = req.headers().get("content-type")?;
    if !is_json_content_type(content_type.as_deref()) {
        return Err(ApiError::UnsupportedMediaType { expected: "application/json" });
    }
    let bytes = respond::read_bounded_body(req, MAX_BATCH_BODY_BYTES).await?;
    String::from_utf8(bytes)
        .map_err(|_| CoreError::InvalidBody { reason: "is not valid UTF-8".to_owned() }.into())
}
