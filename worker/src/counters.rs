//! The counter routes: `GET|PUT|DELETE /v1/counters/:ns/:key` and `POST .../incr|decr`.
//!
//! Each handler validates everything it can before calling a shard, so bad input costs no shard
//! call and changes nothing; the shard then applies the op and answers once it is durable.

use edgecount_core::body::{is_json_content_type, parse_set_body, MAX_COUNTER_BODY_BYTES};
use edgecount_core::negotiate::prefers_text_plain;
use edgecount_core::query::CounterQuery;
use edgecount_core::{shard_for, CoreError, Key, Namespace, OpResult, ShardId, ShardOp};
use serde::Serialize;
use serde_json::json;
use worker::{Env, Request, Response};

use crate::api_error::ApiError;
use crate::config::Config;
use crate::{respond, shard_client};

/// A counter as the API shows it, fields in the documented order.
#[derive(Serialize)]
struct CounterBody<'a> {
    ns: &'a str,
    key: &'a str,
    value: i64,
    exists: bool,
}

/// What a counter request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterAction {
    Read,
    Set,
    Delete,
    Incr,
    Decr,
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
    let response = match apply(action, &mut req, env, shard, ns, key).await {
        Ok(response) => response,
        Err(error) => respond::error(&error)?,
    };
    response.headers().set("x-edgecount-shard", &shard.to_string())?;
    Ok(response)
}

async fn apply(
    action: CounterAction,
    req: &mut Request,
    env: &Env,
    shard: ShardId,
    ns: Namespace,
    key: Key,
) -> Result<Response, ApiError> {
    let query = CounterQuery::parse(req.url()?.query().unwrap_or(""))?;
    let (ttl, by) = (query.ttl, query.by.unwrap_or(1));
    let op = match action {
        CounterAction::Read => ShardOp::Get { ns: ns.clone(), key: key.clone() },
        CounterAction::Delete => ShardOp::Delete { ns: ns.clone(), key: key.clone() },
        CounterAction::Incr => ShardOp::Incr { ns: ns.clone(), key: key.clone(), by, ttl },
        CounterAction::Decr => ShardOp::Decr { ns: ns.clone(), key: key.clone(), by, ttl },
        CounterAction::Set => {
            let value = read_set_body(req).await?;
            ShardOp::Set { ns: ns.clone(), key: key.clone(), value, ttl }
        }
    };
    let result = shard_client::execute_one(env, shard, op).await?;
    let accept = req.headers().get("accept")?;
    let response = match result {
        OpResult::Failed { error } => return Err(error.into()),
        OpResult::Deleted { deleted } => respond::json(200, &json!({ "deleted": deleted }))?,
        OpResult::Entry { .. } | OpResult::Stored => return Err(ApiError::ShardUnavailable),
        OpResult::Value { value, .. } if prefers_text_plain(accept.as_deref()) => {
            respond::text(200, value.to_string())?
        }
        OpResult::Value { value, exists, .. } => {
            respond::json(200, &CounterBody { ns: ns.as_str(), key: key.as_str(), value, exists })?
        }
    };
    // Reads must be revalidated until hot-key caching decides otherwise; writes never cached.
    let cache_control = if action == CounterAction::Read { "no-cache" } else { "no-store" };
    response.headers().set("cache-control", cache_control)?;
    Ok(response)
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
