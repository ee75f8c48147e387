//! The cache routes: `PUT|GET|DELETE /v1/cache/:ns/:key`, opaque bytes with their content type.
//! Every answer on these paths is sandboxed ([`respond::sandbox`]).

use edgecount_core::edge::read_cache::revalidate;
use edgecount_core::http::query::CacheQuery;
use edgecount_core::shard::cache_table::MAX_CACHE_VALUE_BYTES;
use edgecount_core::shard::content_type::{self, ContentType, FALLBACK_CONTENT_TYPE};
use edgecount_core::{OpKind, OpResult, ShardCall, ShardOp};
use serde_json::json;
use worker::{Env, Headers, Request, Response};

use crate::http::api_error::ApiError;
use crate::http::counters::{idempotency_key, read_audience};
use crate::http::respond;
use crate::http::target::Target;
use crate::isolate::config::Config;
use crate::isolate::shard_client;

/// Content type kept for a value sent without one.
const DEFAULT_CONTENT_TYPE: &str = FALLBACK_CONTENT_TYPE;

/// Serves one cache request for `target`, whose names the router validated.
///
/// # Errors
/// Bad TTLs or content types, oversized values, missing entries, unavailable shards.
pub async fn serve(
    kind: OpKind,
    mut req: Request,
    env: &Env,
    config: &Config,
    target: &Target,
) -> Result<Response, ApiError> {
    let req = &mut req;
    let (ns, key, shard) = (target.ns.clone(), target.key.clone(), target.shard);
    let query = CacheQuery::parse(req.url()?.query().unwrap_or(""))?;
    let op = match kind {
        OpKind::CacheGet => ShardOp::CacheGet { ns, key },
        OpKind::CacheDelete => ShardOp::CacheDelete { ns, key },
        OpKind::CachePut => {
            let sent = req.headers().get("content-type")?.filter(|c| !c.trim().is_empty());
            let content_type = ContentType::new(sent.as_deref().unwrap_or(DEFAULT_CONTENT_TYPE))?;
            let value = respond::read_bounded_body(req, MAX_CACHE_VALUE_BYTES).await?;
            ShardOp::CachePut { ns, key, value, content_type, ttl: query.ttl }
        }
        _ => return Err(ApiError::Internal(format!("`{}` on a cache route", kind.spec().name))),
    };
    let call = ShardCall { op, idempotency_key: idempotency_key(req)? };
    let (result, replayed) = shard_client::execute_one(env, shard, call).await?.unwrap_replay();
    let response = match result {
        OpResult::Failed { error } => return Err(error.into()),
        OpResult::Stored => {
            let response = Response::empty()?.with_status(204);
            response.headers().set("cache-control", "no-store")?;
            response
        }
        OpResult::Entry { value, content_type } => {
            let headers = Headers::new();
            headers.set("content-type", content_type::served(&content_type))?;
            headers.set("cache-control", revalidate(read_audience(config)))?;
            Response::from_bytes(value)?.with_headers(headers)
        }
        OpResult::Deleted { deleted } => respond::json(200, &json!({ "deleted": deleted }))?,
        _ => return Err(ApiError::ShardUnavailable),
    };
    if replayed {
        response.headers().set("idempotent-replayed", "true")?;
    }
    Ok(response)
}
