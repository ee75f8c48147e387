//! The cache routes: `PUT|GET|DELETE /v1/cache/:ns/:key`, opaque bytes with their content type.
//! Every answer on these paths is sandboxed ([`respond::sandbox`]).

use edgecount_core::edge::read_cache::revalidate;
use edgecount_core::http::query::CacheQuery;
use edgecount_core::shard::cache_table::MAX_CACHE_VALUE_BYTES;
use edgecount_core::shard::content_type::{self, ContentType, FALLBACK_CONTENT_TYPE};
use edgecount_core::{OpKind, OpResult, ShardCall, ShardOp};
use serde_json::json;
use worker::Env;

use crate::http::counters::{idempotency_key, read_audience};
use crate::http::message::{Body, Header, Request, Response};
use crate::http::respond;
use crate::http::target::Target;
use crate::shared::api_error::ApiError;
use crate::shared::config::Config;
use crate::shared::shard_client;

/// Content type kept for a value sent without one.
const DEFAULT_CONTENT_TYPE: &str = FALLBACK_CONTENT_TYPE;

/// Serves one cache request for `target`, whose names the router validated.
///
/// # Errors
/// Bad TTLs or content types, oversized values, missing entries, unavailable shards.
pub async fn serve(
    kind: OpKind,
    req: &Request,
    env: &Env,
    config: &Config,
    target: &Target,
) -> Result<Response, ApiError> {
    let (ns, key, shard) = (target.ns.clone(), target.key.clone(), target.shard);
    let query = CacheQuery::parse(req.query())?;
    let op = match kind {
        OpKind::CacheGet => ShardOp::CacheGet { ns, key },
        OpKind::CacheDelete => ShardOp::CacheDelete { ns, key },
        OpKind::CachePut => {
            let sent = req.header(Header::ContentType).filter(|c| !c.trim().is_empty());
            let content_type = ContentType::new(sent.as_deref().unwrap_or(DEFAULT_CONTENT_TYPE))?;
            let value = respond::read_bounded_body(req, MAX_CACHE_VALUE_BYTES).await?;
            ShardOp::CachePut { ns, key, value, content_type, ttl: query.ttl }
        }
        OpKind::Get
        | OpKind::Incr
        | OpKind::Decr
        | OpKind::Set
        | OpKind::Delete
        | OpKind::Create
        | OpKind::Guarded
        | OpKind::Info
        | OpKind::Days => return Err(ApiError::Internal(format!("`{}` on a cache route", kind.spec().name))),
    };
    let call = ShardCall {
        op,
        idempotency_key: idempotency_key(req)?,
        operator: false,
        visit: None,
        count_visitor: false,
    };
    let (result, replayed) = shard_client::execute_one(env, shard, call).await?.unwrap_replay();
    let mut response = match result {
        OpResult::Failed { error } => return Err(error.into()),
        OpResult::Stored => {
            let mut response = Response::empty(204);
            response.set_header("cache-control", "no-store");
            response
        }
        OpResult::Entry { value, content_type } => {
            let mut response =
                Response::with_body(200, content_type::served(&content_type), Body::Bytes(value));
            response.set_header("cache-control", revalidate(read_audience(config)));
            response
        }
        OpResult::Deleted { deleted } => respond::json(200, &json!({ "deleted": deleted }))?,
        _ => return Err(ApiError::ShardUnavailable),
    };
    if replayed {
        response.set_header("idempotent-replayed", "true");
    }
    Ok(response)
}
