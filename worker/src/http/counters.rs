//! The counter routes: `GET|PUT|DELETE /v1/counters/:ns/:key`, `POST .../incr|decr` and
//! `GET .../days` (see [`crate::http::days`]).
//!
//! Each handler validates everything it can before calling a shard, so bad input costs no shard
//! call and changes nothing. Reads of hot keys may be answered from this isolate's edge cache,
//! never older than the configured max age, and other reads go to the owning shard. Every write
//! goes to it in a call of its own and is answered once it is durable (the shard groups the
//! calls that arrive together: `shard::group`), except one-way increments and decrements
//! (`Prefer: respond-async` or `?async=1`), answered 202 at once and applied within the flush
//! interval (see [`crate::isolate::one_way`]).

use edgecount_core::edge::access::Right;
use edgecount_core::edge::one_way::Counted;
use edgecount_core::edge::read_cache::{cache_control, may_serve_kept_read, Audience, CachedRead, Lookup};
use edgecount_core::http::body::{is_json_content_type, parse_set_body, MAX_COUNTER_BODY_BYTES};
use edgecount_core::http::etag::{etag, if_none_match};
use edgecount_core::http::negotiate::{prefers_respond_async, prefers_text_plain};
use edgecount_core::http::query::{parse_period, CounterQuery};
use edgecount_core::names::IdempotencyKey;
use edgecount_core::{CoreError, Namespace, OpKind, OpResult, ShardCall, ShardOp};
use serde::Serialize;
use serde_json::json;

use crate::http::days;
use crate::http::message::{Header, Request, Response};
use crate::http::request_context::RequestContext;
use crate::http::respond;
use crate::http::target::Target;
use crate::isolate::{hot_reads, one_way, visitors};
use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::config::Config;
use crate::shared::shard_client;

/// A counter as the API shows it, fields in the documented order.
#[derive(Serialize)]
struct CounterBody<'a> {
    ns: &'a str,
    key: &'a str,
    value: i64,
    exists: bool,
}

/// Serves one counter request for `target`, whose names the router validated.
///
/// # Errors
/// Bad parameters or bodies, refused ops, and unavailable shards.
pub async fn serve(
    kind: OpKind,
    req: Request,
    cx: &RequestContext<'_>,
    target: &Target,
    token: Option<&str>,
    query: Result<CounterQuery, CoreError>,
) -> Result<Response, ApiError> {
    let query = query?;
    match kind {
        OpKind::Get => read(&req, cx, target, &query).await,
        OpKind::Days => {
            let period = parse_period(req.query(), cx.config.days_kept)?;
            days::read(&req, cx, target, period, query.unique).await
        }
        OpKind::Incr
            if counts_once(&query)
                && visitors::leaves_uncounted(
                    req.header(Header::UserAgent).as_deref(),
                    cx.config,
                    token,
                    &target.ns,
                ) =>
        {
            uncounted(&req, cx, target, &query).await
        }
        OpKind::Incr
        | OpKind::Decr
        | OpKind::Set
        | OpKind::Delete
        | OpKind::CacheGet
        | OpKind::CachePut
        | OpKind::CacheDelete
        | OpKind::Create
        | OpKind::Guarded
        | OpKind::Info => {
            let operator = cx.config.access.is_operator(token, &target.ns);
            write(kind, &req, cx, target, operator, &query).await
        }
    }
}

/// Whether an incr is a count (see `Right::for_increment`), which a public namespace takes
/// from anyone.
fn counts_once(query: &CounterQuery) -> bool {
    Right::for_increment(query.by.unwrap_or(1), query.ttl) == Right::Count
}

/// A bot's count in a public namespace, answered as the count would have been and not applied:
/// a one-way count 202, an acknowledged one the value as it stands.
async fn uncounted(
    req: &Request,
    cx: &RequestContext<'_>,
    target: &Target,
    query: &CounterQuery,
) -> Result<Response, ApiError> {
    let mut response = if query.one_way || prefers_respond_async(req.header(Header::Prefer).as_deref()) {
        respond::json(202, &json!({ "status": "accepted" }))?
    } else {
        let read = current(req, cx, target, false, now_ms()).await?.read;
        counter_body(req, target, read.value, read.exists)?
    };
    response.set_header("cache-control", "no-store");
    Ok(response)
}

async fn read(
    req: &Request,
    cx: &RequestContext<'_>,
    target: &Target,
    query: &CounterQuery,
) -> Result<Response, ApiError> {
    let now = now_ms();
    let current = current(req, cx, target, query.strong, now).await?;
    read_response(req, cx.config, target, current)
}

/// A counter's value as a read sees it: from this isolate's edge cache when the key is hot and
/// the cached value is young enough (unless `strong` or `Cache-Control: no-cache`), else from
/// its shard.
pub(crate) async fn current(
    req: &Request,
    cx: &RequestContext<'_>,
    target: &Target,
    strong: bool,
    now: u64,
) -> Result<CurrentValue, ApiError> {
    let config = cx.config;
    let request_cache_control = req.header(Header::CacheControl);
    let hot = hot_reads::record(config, &target.ns, &target.key, now);
    if may_serve_kept_read(hot, strong, request_cache_control.as_deref()) {
        // A miss, or this request's turn to refresh the kept read, reads the shard.
        if let Lookup::Hit(read) = hot_reads::lookup(config, &target.ns, &target.key, now) {
            return Ok(CurrentValue { read, hot, from_edge: true });
        }
    } else {
        hot_reads::count_miss(config);
    }
    let call: ShardCall = ShardOp::Get { ns: target.ns.clone(), key: target.key.clone() }.into();
    let answer = shard_client::execute_one(cx.env, target.shard, call).await?;
    match answer {
        OpResult::Value { value, exists, version } => {
            let read = CachedRead { value, exists, version, read_at_ms: now };
            if hot {
                hot_reads::fill(config, &target.ns, &target.key, read);
            }
            Ok(CurrentValue { read, hot, from_edge: false })
        }
        OpResult::Failed { error } => Err(error.into()),
        _ => Err(ApiError::ShardUnavailable),
    }
}

/// Who may keep read answers: only the caller's own cache when reads need a token.
pub(crate) fn read_audience(config: &Config) -> Audience {
    Audience::for_reads(config.access.reads_need_a_token())
}

/// What [`current`] found.
pub(crate) struct CurrentValue {
    pub read: CachedRead,
    /// The key is hot: its reads may be cached for the max age.
    pub hot: bool,
    /// Answered from this isolate's edge cache (`X-Cache: HIT`).
    pub from_edge: bool,
}

impl CurrentValue {
    /// `ETag`, `Cache-Control` (the max-age policy, `private` when reads need a token),
    /// `X-Cache` and, for hot keys, `Age` and (unless private) `Cache-Tag`. The age is the
    /// read's as the answer leaves, its shard call's time included, so that what a downstream
    /// cache is granted never stretches the max age.
    pub(crate) fn set_cache_headers(&self, response: &mut Response, config: &Config, ns: &Namespace) {
        let age = self.read.age_ms(now_ms());
        let audience = read_audience(config);
        response.set_header("etag", etag(self.read.value, self.read.version));
        response.set_header("cache-control", cache_control(audience, self.hot, config.hot_max_age_ms, age));
        response.set_header("x-cache", if self.from_edge { "HIT" } else { "MISS" });
        if self.hot {
            response.set_header("age", (age / 1000).to_string());
            if audience.allows_shared_caches() {
                response.set_header("cache-tag", format!("ec-ns:{ns}"));
            }
        }
    }

    /// Whether the request's `If-None-Match` already holds this value.
    pub(crate) fn not_modified(&self, req: &Request) -> bool {
        let tag = etag(self.read.value, self.read.version);
        req.header(Header::IfNoneMatch).is_some_and(|h| if_none_match(&h, &tag))
    }
}

/// A read's answer: the body (or 304) with the cache headers.
fn read_response(
    req: &Request,
    config: &Config,
    target: &Target,
    current: CurrentValue,
) -> Result<Response, ApiError> {
    let mut response = if current.not_modified(req) {
        Response::empty(304)
    } else {
        counter_body(req, target, current.read.value, current.read.exists)?
    };
    current.set_cache_headers(&mut response, config, &target.ns);
    response.set_header("vary", "Accept");
    Ok(response)
}

fn counter_body(req: &Request, target: &Target, value: i64, exists: bool) -> Result<Response, ApiError> {
    if prefers_text_plain(req.header(Header::Accept).as_deref()) {
        return Ok(respond::text(200, value.to_string()));
    }
    respond::json(200, &CounterBody { ns: target.ns.as_str(), key: target.key.as_str(), value, exists })
}

async fn write(
    kind: OpKind,
    req: &Request,
    cx: &RequestContext<'_>,
    target: &Target,
    operator: bool,
    query: &CounterQuery,
) -> Result<Response, ApiError> {
    if query.unique && kind != OpKind::Incr {
        return Err(CoreError::InvalidParameter {
            name: "unique".to_owned(),
            expected: "given on `incr` alone: a visitor is counted by a count".to_owned(),
        }
        .into());
    }
    if query.unique && query.by.is_some_and(|by| by <= 0) {
        return Err(CoreError::InvalidParameter {
            name: "unique".to_owned(),
            expected: "given with a positive `by` alone: a visitor is counted by a count".to_owned(),
        }
        .into());
    }
    let (ns, key) = (target.ns.clone(), target.key.clone());
    let (ttl, by) = (query.ttl, query.by.unwrap_or(1));
    let idempotency_key = idempotency_key(req)?;
    let prefer = req.header(Header::Prefer);
    let asked_by_header = prefers_respond_async(prefer.as_deref());
    // A keyed write must answer its own result to be retried safely: it is never one-way.
    if matches!(kind, OpKind::Incr | OpKind::Decr)
        && (query.one_way || asked_by_header)
        && idempotency_key.is_none()
    {
        let delta = if kind == OpKind::Incr { i128::from(by) } else { -i128::from(by) };
        let visit = days::visit_of(req, cx.config, target, kind, query.unique);
        let visitor = visit.visitors.first().copied();
        accept_one_way(cx, target, Counted { ttl, delta, day: Some(visit.day), visitor, operator })?;
        let mut response = respond::json(202, &json!({ "status": "accepted" }))?;
        if asked_by_header {
            response.set_header("preference-applied", "respond-async");
        }
        response.set_header("cache-control", "no-store");
        return Ok(response);
    }
    let op = match kind {
        OpKind::Delete => ShardOp::Delete { ns, key },
        OpKind::Incr => ShardOp::Incr { ns, key, by, ttl },
        OpKind::Decr => ShardOp::Decr { ns, key, by, ttl },
        OpKind::Set => {
            let value = read_set_body(req).await?;
            ShardOp::Set { ns, key, value, ttl }
        }
        OpKind::Get
        | OpKind::CacheGet
        | OpKind::CachePut
        | OpKind::CacheDelete
        | OpKind::Create
        | OpKind::Guarded
        | OpKind::Info
        | OpKind::Days => {
            return Err(ApiError::Internal(format!("`{}` on a counter route", kind.spec().name)))
        }
    };
    let visit = matches!(kind, OpKind::Incr | OpKind::Decr)
        .then(|| days::visit_of(req, cx.config, target, kind, query.unique));
    let call = ShardCall { op, idempotency_key, operator, visit, count_visitor: false };
    let (result, replayed) = apply_write(cx, target, call).await?;
    let mut response = match result {
        OpResult::Failed { error } => return Err(error.into()),
        OpResult::Deleted { deleted } => respond::json(200, &json!({ "deleted": deleted }))?,
        OpResult::Value { value, exists, .. } => counter_body(req, target, value, exists)?,
        _ => return Err(ApiError::ShardUnavailable),
    };
    if replayed {
        response.set_header("idempotent-replayed", "true");
    }
    response.set_header("cache-control", "no-store");
    Ok(response)
}

/// Runs a write on its shard and keeps this isolate's cached read of
/// the key in step with it. Answers the result and whether it is a replayed earlier answer.
pub(crate) async fn apply_write(
    cx: &RequestContext<'_>,
    target: &Target,
    call: ShardCall,
) -> Result<(OpResult, bool), ApiError> {
    let now = now_ms();
    hot_reads::record(cx.config, &target.ns, &target.key, now);
    let op = call.op.clone();
    let outcome = shard_client::execute_one(cx.env, target.shard, call).await;
    hot_reads::after_op(cx.config, &op, outcome.as_ref().ok(), now);
    Ok(outcome?.unwrap_replay())
}

/// Accepts a one-way count for `target`, keeping the flusher it starts, if any, alive after the
/// request has answered.
///
/// # Errors
/// As `one_way::accept`: the buffer is full, or the key's sum would overflow.
pub(crate) fn accept_one_way(
    cx: &RequestContext<'_>,
    target: &Target,
    count: Counted,
) -> Result<(), ApiError> {
    let flusher = one_way::accept(cx.env, cx.config, (target.shard, &target.ns, &target.key), count)?;
    if let Some(flusher) = flusher {
        cx.keep_alive(&flusher);
    }
    Ok(())
}

/// The request's `Idempotency-Key`, if it sent one.
///
/// # Errors
/// [`CoreError::InvalidIdempotencyKey`] for a malformed key.
pub(crate) fn idempotency_key(req: &Request) -> Result<Option<IdempotencyKey>, ApiError> {
    Ok(req.header(Header::IdempotencyKey).map(|k| IdempotencyKey::new(&k)).transpose()?)
}

/// Reads `{"value": N}`, refusing other media types and oversized bodies before parsing.
async fn read_set_body(req: &Request) -> Result<i64, ApiError> {
    let content_type = req.header(Header::ContentType);
    if !is_json_content_type(content_type.as_deref()) {
        return Err(ApiError::UnsupportedMediaType { expected: "application/json" });
    }
    let bytes = respond::read_bounded_body(req, MAX_COUNTER_BODY_BYTES).await?;
    let text = String::from_utf8(bytes)
        .map_err(|_| CoreError::InvalidBody { reason: "is not valid UTF-8".to_owned() })?;
    Ok(parse_set_body(&text)?)
}
