//! The counter routes: `GET|PUT|DELETE /v1/counters/:ns/:key` and `POST .../incr|decr`.
//!
//! Each handler validates everything it can before calling a shard, so bad input costs no shard
//! call and changes nothing. Reads of hot keys may be answered from this isolate's edge cache,
//! never older than the configured max age; every other op goes to the owning shard through the
//! coalescer and is answered once it is durable.

use edgecount_core::body::{is_json_content_type, parse_set_body, MAX_COUNTER_BODY_BYTES};
use edgecount_core::edge_cache::{cache_control, etag, if_none_match, CachedRead};
use edgecount_core::idempotency::IdempotencyKey;
use edgecount_core::negotiate::prefers_text_plain;
use edgecount_core::query::CounterQuery;
use edgecount_core::{shard_for, CoreError, Key, Namespace, OpResult, ShardCall, ShardId, ShardOp};
use serde::Serialize;
use serde_json::json;
use worker::{Date, Env, Request, Response};

use crate::api_error::ApiError;
use crate::config::Config;
use crate::{coalescing, edge, respond};

/// What a counter request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterAction {
    Read,
    Set,
    Delete,
    Incr,
    Decr,
}

/// A counter as the API shows it, fields in the documented order.
#[derive(Serialize)]
struct CounterBody<'a> {
    ns: &'a str,
    key: &'a str,
    value: i64,
    exists: bool,
}

/// One validated counter request.
struct Target {
    ns: Namespace,
    key: Key,
    shard: ShardId,
}

pub(crate) fn now_ms() -> u64 {
    Date::now().as_millis()
}

/// Serves one counter request; every answer, errors included, names the shard it reached.
///
/// # Errors
/// Bad names, parameters or bodies, refused ops, and unavailable shards.
pub async fn serve(
    action: CounterAction,
    mut req: Request,
    env: &Env,
    config: &Config,
    raw_ns: &str,
    raw_key: &str,
) -> Result<Response, ApiError> {
    let ns = Namespace::new(raw_ns)?;
    let key = Key::from_segment(raw_key)?;
    let shard = shard_for(&ns, &key, config.shards);
    let target = Target { ns, key, shard };
    let outcome = match action {
        CounterAction::Read => read(&req, env, config, &target).await,
        _ => write(action, &mut req, env, config, &target).await,
    };
    respond::naming_shard(shard, outcome)
}

async fn read(req: &Request, env: &Env, config: &Config, target: &Target) -> Result<Response, ApiError> {
    let query = CounterQuery::parse(req.url()?.query().unwrap_or(""))?;
    let request_cache_control = req.headers().get("cache-control")?.unwrap_or_default();
    let strong = query.strong || request_cache_control.to_ascii_lowercase().contains("no-cache");
    let now = now_ms();
    let hot = edge::record(config, &target.ns, &target.key, now);
    if hot && !strong {
        if let Some(cached) = edge::lookup(config, &target.ns, &target.key, now) {
            return read_response(req, config, target, cached, true, now, "HIT");
        }
    } else {
        edge::count_miss(config);
    }
    let op = ShardOp::Get { ns: target.ns.clone(), key: target.key.clone() };
    match coalescing::submit(env, config, target.shard, op.into()).await? {
        OpResult::Value { value, exists, version } => {
            let fresh = CachedRead { value, exists, version, read_at_ms: now };
            if hot {
                edge::fill(config, &target.ns, &target.key, fresh);
            }
            read_response(req, config, target, fresh, hot, now, "MISS")
        }
        OpResult::Failed { error } => Err(error.into()),
        _ => Err(ApiError::ShardUnavailable),
    }
}

/// A read's answer: the body (or 304), `ETag`, the max-age policy and `X-Cache`.
fn read_response(
    req: &Request,
    config: &Config,
    target: &Target,
    read: CachedRead,
    hot: bool,
    now: u64,
    x_cache: &str,
) -> Result<Response, ApiError> {
    let tag = etag(read.value, read.version);
    let not_modified = req.headers().get("if-none-match")?.is_some_and(|h| if_none_match(&h, &tag));
    let response = if not_modified {
        Response::empty()?.with_status(304)
    } else {
        counter_body(req, target, read.value, read.exists)?
    };
    let headers = response.headers();
    let age = read.age_ms(now);
    headers.set("etag", &tag)?;
    headers.set("cache-control", &cache_control(hot, config.hot_max_age_ms, age))?;
    headers.set("vary", "Accept")?;
    headers.set("x-cache", x_cache)?;
    if hot {
        headers.set("cache-tag", &format!("ec-ns:{}", target.ns))?;
        headers.set("age", &(age / 1000).to_string())?;
    }
    Ok(response)
}

fn counter_body(req: &Request, target: &Target, value: i64, exists: bool) -> Result<Response, ApiError> {
    if prefers_text_plain(req.headers().get("accept")?.as_deref()) {
        return respond::text(200, value.to_string());
    }
    respond::json(200, &CounterBody { ns: target.ns.as_str(), key: target.key.as_str(), value, exists })
}

async fn write(
    action: CounterAction,
    req: &mut Request,
    env: &Env,
    config: &Config,
    target: &Target,
) -> Result<Response, ApiError> {
    let query = CounterQuery::parse(req.url()?.query().unwrap_or(""))?;
    let (ns, key) = (target.ns.clone(), target.key.clone());
    let (ttl, by) = (query.ttl, query.by.unwrap_or(1));
    let op = match action {
        CounterAction::Delete => ShardOp::Delete { ns, key },
        CounterAction::Incr => ShardOp::Incr { ns, key, by, ttl },
        CounterAction::Decr => ShardOp::Decr { ns, key, by, ttl },
        CounterAction::Set | CounterAction::Read => {
            let value = read_set_body(req).await?;
            ShardOp::Set { ns, key, value, ttl }
        }
    };
    let call = ShardCall { op, idempotency_key: idempotency_key(req)? };
    let now = now_ms();
    edge::record(config, &target.ns, &target.key, now);
    let (result, replayed) = match coalescing::submit(env, config, target.shard, call).await {
        Ok(result) => result.unwrap_replay(),
        Err(error) => {
            // The write may or may not have happened: never serve a cached value for it.
            edge::forget(config, &target.ns, &target.key);
            return Err(error);
        }
    };
    let response = match result {
        OpResult::Failed { error } => return Err(error.into()),
        OpResult::Deleted { deleted } => {
            edge::forget(config, &target.ns, &target.key);
            respond::json(200, &json!({ "deleted": deleted }))?
        }
        OpResult::Value { value, exists, version } => {
            // A replayed answer is an old one: it must not refresh the cached read.
            if !replayed {
                let read = CachedRead { value, exists, version, read_at_ms: now };
                edge::refresh(config, &target.ns, &target.key, read);
            }
            counter_body(req, target, value, exists)?
        }
        _ => return Err(ApiError::ShardUnavailable),
    };
    if replayed {
        response.headers().set("idempotent-replayed", "true")?;
    }
    response.headers().set("cache-control", "no-store")?;
    Ok(response)
}

/// The request's `Idempotency-Key`, if it sent one.
///
/// # Errors
/// [`CoreError::InvalidIdempotencyKey`] for a malformed key.
pub(crate) fn idempotency_key(req: &Request) -> Result<Option<IdempotencyKey>, ApiError> {
    Ok(req.headers().get("idempotency-key")?.map(|k| IdempotencyKey::new(&k)).transpose()?)
}

/// Reads `{"value": N}`, refusing other media types and oversized bodies before parsing.
async fn read_set_body(req: &mut Request) -> Result<i64, ApiError> {
    let content_type = req.headers().get("content-type")?;
    if !is_json_content_type(content_type.as_deref()) {
        return Err(ApiError::UnsupportedMediaType { expected: "application/json" });
    }
    let bytes = respond::read_bounded_body(req, MAX_COUNTER_BODY_BYTES).await?;
    let text = String::from_utf8(bytes)
        .map_err(|_| CoreError::InvalidBody { reason: "is not valid UTF-8".to_owned() })?;
    Ok(parse_set_body(&text)?)
}

/// A clearer error than 404 for counter paths with an empty namespace or key, which the router
/// cannot match because its parameters are never empty.
#[must_use]
pub fn unmatched_path_error(path: &str) -> Option<ApiError> {
    let rest = path.strip_prefix("/v1/counters/")?;
    let mut segments = rest.split('/');
    let ns = segments.next().unwrap_or_default();
    let key = segments.next();
    if let Err(error) = Namespace::new(ns) {
        return Some(error.into());
    }
    match (key, segments.next()) {
        (Some(""), None | Some("incr" | "decr")) => {
            Some(CoreError::InvalidKey { reason: "is empty".to_owned() }.into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_names_get_name_errors() {
        assert_eq!(unmatched_path_error("/v1/counters//k").unwrap().code(), "invalid_namespace");
        assert_eq!(unmatched_path_error("/v1/counters/ns/").unwrap().code(), "invalid_key");
        assert_eq!(unmatched_path_error("/v1/counters/ns//incr").unwrap().code(), "invalid_key");
        assert!(unmatched_path_error("/v1/counters/ns/k/zzz").is_none());
        assert!(unmatched_path_error("/v1/other").is_none());
    }
}
