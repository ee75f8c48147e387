//! Operations routes: `/v1/health`, `/v1/stats` and `/metrics` (Prometheus text format).

use std::fmt::Write as _;

use edgecount_core::protocol::ShardStats;
use edgecount_core::ShardId;
use futures_util::future::join_all;
use serde_json::json;
use worker::{Env, Response};

use crate::api_error::ApiError;
use crate::config::Config;
use crate::{respond, shard_client};

/// `GET /v1/health`: answered by the worker alone, so it shows the worker is up and configured.
///
/// # Errors
/// Only if the runtime cannot build a response.
pub fn health(config: &Config) -> Result<Response, ApiError> {
    respond::json(
        200,
        &json!({
            "status": "ok",
            "shards": config.shards,
            "auth": "open",
            "version": env!("CARGO_PKG_VERSION"),
        }),
    )
}

/// Every shard's statistics, asked concurrently.
async fn all_shard_stats(env: &Env, config: &Config) -> Result<Vec<ShardStats>, ApiError> {
    join_all((0..config.shards).map(|i| shard_client::stats(env, ShardId(i))))
        .await
        .into_iter()
        .collect()
}

/// `GET /v1/stats`.
///
/// # Errors
/// [`ApiError::ShardUnavailable`] when a shard does not answer.
pub async fn stats(env: &Env, config: &Config) -> Result<Response, ApiError> {
    let per_shard = all_shard_stats(env, config).await?;
    let shards: Vec<_> = per_shard
        .iter()
        .enumerate()
        .map(|(i, s)| json!({"shard": i, "ops": s.ops, "keys": s.keys}))
        .collect();
    let total_ops: u64 = per_shard.iter().map(|s| s.ops).sum();
    let total_keys: u64 = per_shard.iter().map(|s| s.keys).sum();
    let response = respond::json(
        200,
        &json!({"shards": shards, "totals": {"ops": total_ops, "keys": total_keys}}),
    )?;
    response.headers().set("cache-control", "no-store")?;
    Ok(response)
}

/// `GET /metrics`.
///
/// # Errors
/// [`ApiError::ShardUnavailable`] when a shard does not answer.
pub async fn metrics(env: &Env, config: &Config) -> Result<Response, ApiError> {
    let per_shard = all_shard_stats(env, config).await?;
    let mut text = String::new();
    text.push_str(
        "# HELP edgecount_shard_ops_total Ops executed by a shard since its object started.\n",
    );
    text.push_str("# TYPE edgecount_shard_ops_total counter\n");
    for (i, s) in per_shard.iter().enumerate() {
        let _ = writeln!(text, "edgecount_shard_ops_total{{shard=\"{i}\"}} {}", s.ops);
    }
    text.push_str("# HELP edgecount_shard_keys Live counters stored by a shard.\n");
    text.push_str("# TYPE edgecount_shard_keys gauge\n");
    for (i, s) in per_shard.iter().enumerate() {
        let _ = writeln!(text, "edgecount_shard_keys{{shard=\"{i}\"}} {}", s.keys);
    }
    let response = respond::text(200, text)?;
    response
        .headers()
        .set("content-type", "text/plain; version=0.0.4; charset=utf-8")?;
    Ok(response)
}
