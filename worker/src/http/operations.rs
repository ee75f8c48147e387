//! Operations routes: `/v1/health`, `/v1/stats` and `/metrics` (Prometheus text format).

use std::fmt::Write as _;

use edgecount_core::shard::protocol::ShardStats;
use edgecount_core::shard_for;
use serde_json::{json, Map, Value};
use worker::Env;

use crate::http::message::Response;
use crate::http::respond;
use crate::isolate::{hot_reads, one_way, shard_stats, visitors};
use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::config::Config;
use crate::shared::{shard_client, tasks};

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
            "auth": if config.access.is_open() {
                "open"
            } else if config.access.answers_reads_only() {
                "reads_only"
            } else {
                "tokens"
            },
            "version": env!("CARGO_PKG_VERSION"),
        }),
    )
}

/// `GET /v1/stats`: each shard's statistics and their totals.
///
/// # Errors
/// [`ApiError::ShardUnavailable`] when a shard does not answer.
pub async fn stats(env: &Env, config: &Config) -> Result<Response, ApiError> {
    let per_shard = shard_stats::shard_stats(env, config).await?;
    let mut totals = Map::new();
    let mut shards = Vec::with_capacity(per_shard.len());
    for (index, stats) in per_shard.iter().enumerate() {
        let mut shard = Map::new();
        shard.insert("shard".into(), json!(index));
        shard.insert("hot_keys".into(), json!([]));
        for (name, value) in stats.fields() {
            shard.insert(name.into(), json!(value));
            let total = totals.entry(name).or_insert(json!(0_u64));
            *total = json!(total.as_u64().unwrap_or(0) + value);
        }
        shards.push(Value::Object(shard));
    }
    let total = |name: &str| totals.get(name).and_then(Value::as_u64).unwrap_or(0);
    let (ops, rows_written) = (total("ops"), total("rows_written"));
    let rows_written_per_op = if ops == 0 { 0.0 } else { rows_written as f64 / ops as f64 };
    totals.insert("rows_written_per_op".into(), json!(rows_written_per_op));
    let edge = edge_stats(config, &mut shards);
    let mut response = respond::json(200, &json!({ "shards": shards, "totals": totals, "edge": edge }))?;
    response.set_header("cache-control", "no-store");
    Ok(response)
}

/// This isolate's edge figures; its hot keys are also listed under the shard that owns each.
fn edge_stats(config: &Config, shards: &mut [Value]) -> Value {
    let (hits, misses, hot_keys) = hot_reads::snapshot(config, now_ms());
    let (shard_calls, overloaded, under_way) = shard_client::single_key_calls();
    let mut listed = Vec::with_capacity(hot_keys.len());
    for hot in hot_keys {
        let shard = shard_for(&hot.ns, &hot.key, config.shards);
        let entry = json!({"ns": hot.ns.as_str(), "key": hot.key.as_str(), "shard": shard.0, "rate": hot.rate.round()});
        if let Some(Value::Object(owner)) = shards.get_mut(shard.0 as usize) {
            if let Some(Value::Array(list)) = owner.get_mut("hot_keys") {
                list.push(entry.clone());
            }
        }
        listed.push(entry);
    }
    let reads = hits + misses;
    json!({
        "hits": hits,
        "misses": misses,
        "hit_ratio": if reads == 0 { 0.0 } else { hits as f64 / reads as f64 },
        "hot_keys": listed,
        "shard_calls": shard_calls,
        "ops_shed_overloaded": overloaded,
        "calls_under_way": under_way,
        "one_way": one_way_stats(config),
        // Counts in public namespaces from known bots, answered and not counted.
        "bot_counts_not_counted": visitors::not_counted(),
        // Times this isolate asked every shard for these figures (once at a time, reused).
        "shard_stats_asks": shard_stats::asks(),
        "tasks_in_flight": tasks::in_flight(),
        // Whether this isolate's hash tables took their seed from the runtime's random source.
        "hash_seeded": edgecount_core::hashing::seeded(),
        "hot_threshold_per_s": config.hot_threshold_per_s,
        "hot_max_age_s": config.hot_max_age_ms / 1000,
    })
}

/// This isolate's one-way writes, counted in ops, and what its buffer holds.
fn one_way_stats(config: &Config) -> Value {
    let (stats, (keys, bytes)) = one_way::snapshot(config);
    json!({
        "accepted": stats.accepted,
        "refused": stats.refused,
        "pending": stats.pending,
        "flushed": stats.flushed,
        "flush_calls": stats.flush_calls,
        "retried": stats.retried,
        "dropped": stats.dropped,
        "pending_keys": keys,
        "pending_bytes": bytes,
        "interval_ms": config.one_way.interval_ms,
    })
}

/// `GET /metrics`: the same statistics, one Prometheus series per field.
///
/// # Errors
/// [`ApiError::ShardUnavailable`] when a shard does not answer.
pub async fn metrics(env: &Env, config: &Config) -> Result<Response, ApiError> {
    let per_shard = shard_stats::shard_stats(env, config).await?;
    let mut text = String::new();
    for (field, _) in ShardStats::default().fields() {
        let (kind, name) = match field {
            "calls" | "groups" | "overloaded" | "ops" | "evictions" | "reclaimed" | "rows_read"
            | "rows_written" => ("counter", format!("edgecount_shard_{field}_total")),
            _ => ("gauge", format!("edgecount_shard_{field}")),
        };
        let _ = writeln!(text, "# HELP {name} Shard statistic `{field}` (see /v1/stats).");
        let _ = writeln!(text, "# TYPE {name} {kind}");
        for (index, stats) in per_shard.iter().enumerate() {
            let value = stats.fields().iter().find(|(f, _)| *f == field).map_or(0, |(_, v)| *v);
            let _ = writeln!(text, "{name}{{shard=\"{index}\"}} {value}");
        }
    }
    let (hits, misses, _) = hot_reads::snapshot(config, now_ms());
    let (shard_calls, overloaded, under_way) = shard_client::single_key_calls();
    let isolate = [
        ("edgecount_edge_hits_total", "Reads answered from this isolate's edge cache.", hits),
        ("edgecount_edge_misses_total", "Reads answered by a shard.", misses),
        // Not `edgecount_shard_calls_total`: that is the shards' own count, per shard.
        (
            "edgecount_edge_shard_calls_total",
            "Shard calls this isolate made for single-key ops.",
            shard_calls,
        ),
        (
            "edgecount_overloaded_ops_total",
            "Single-key ops refused with 503 because their shard had too many calls under way or was overloaded.",
            overloaded,
        ),
    ];
    let (one_way, held) = one_way::snapshot(config);
    let one_way_counters = [
        ("edgecount_one_way_accepted_total", "One-way writes accepted (202).", one_way.accepted),
        (
            "edgecount_one_way_refused_total",
            "One-way writes refused because the buffer was full.",
            one_way.refused,
        ),
        ("edgecount_one_way_flushed_total", "One-way writes applied by their shard.", one_way.flushed),
        (
            "edgecount_one_way_flush_calls_total",
            "Shard calls made to apply one-way writes.",
            one_way.flush_calls,
        ),
        ("edgecount_one_way_retried_total", "Flushes sent again.", one_way.retried),
        ("edgecount_one_way_dropped_total", "One-way writes that could not be applied.", one_way.dropped),
    ];
    for (name, help, value) in isolate.into_iter().chain(one_way_counters) {
        let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}");
    }
    let (pending_keys, pending_bytes) = held;
    let gauges = [
        ("edgecount_one_way_pending", "One-way writes accepted here and not yet applied.", one_way.pending),
        ("edgecount_one_way_pending_keys", "Keys with one-way writes pending here.", pending_keys as u64),
        ("edgecount_one_way_pending_bytes", "Bytes charged for the keys pending here.", pending_bytes),
        (
            "edgecount_one_way_interval_ms",
            "How soon accepted one-way writes are applied.",
            config.one_way.interval_ms,
        ),
        ("edgecount_calls_under_way", "Single-key shard calls this isolate has under way.", under_way as u64),
    ];
    for (name, help, value) in gauges {
        let _ = writeln!(text, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}");
    }
    let mut response = respond::text(200, text);
    response.set_header("content-type", "text/plain; version=0.0.4; charset=utf-8");
    Ok(response)
}
