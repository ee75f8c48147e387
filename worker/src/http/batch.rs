//! `POST /v1/batch`: many ops in one request, grouped so each shard gets one call.
//!
//! Shard calls run concurrently; each shard runs its ops in request order, so ops on one key
//! apply in the order sent. A shard that cannot be reached fails only its own ops. The answer
//! keeps to a byte budget (`edgecount_core::shard::answer_budget`): cache reads past it are answered
//! `payload_too_large` in their place.
//!
//! A batch that asks for one-way writes (`Prefer: respond-async` or `?async=1`) is answered 202
//! at once: its incr and decr ops without an idempotency key are accepted into the isolate's
//! one-way buffer (`{"accepted": true}` in their place), and every other op gets the per-op
//! error `invalid_op`, since nothing in such a batch waits for a shard.

use std::collections::BTreeMap;

use edgecount_core::edge::access::Right;
use edgecount_core::edge::one_way::Counted;
use edgecount_core::http::batch::{error_json, parse_batch, result_json, MAX_BATCH_BODY_BYTES};
use edgecount_core::http::body::is_json_content_type;
use edgecount_core::http::negotiate::prefers_respond_async;
use edgecount_core::http::query::batch_asks_one_way;
use edgecount_core::shard::answer_budget::{shard_shares, AnswerBudget, MAX_BATCH_ANSWER_BYTES};
use edgecount_core::{shard_for, CoreError, OpKind, OpResult, ShardCall, ShardId, ShardOp};
use serde_json::{json, Value};

use crate::http::message::{Header, Request, Response};
use crate::http::request_context::RequestContext;
use crate::http::respond;
use crate::http::target::Target;
use crate::http::{counters, days};
use crate::isolate::meter::Meter;
use crate::isolate::{hot_reads, visitors};
use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::config::Config;
use crate::shared::shard_client;

/// Serves `POST /v1/batch`.
///
/// # Errors
/// A body that is not a batch (400), too many ops or bytes (413), a non-JSON body (415).
pub async fn serve(
    req: Request,
    cx: &RequestContext<'_>,
    token: Option<&str>,
    meter: &mut Meter,
) -> Result<Response, ApiError> {
    let (env, config) = (cx.env, cx.config);
    let one_way =
        batch_asks_one_way(req.query())? || prefers_respond_async(req.header(Header::Prefer).as_deref());
    let text = read_body(&req).await?;
    let parsed = parse_batch(&text)?;
    // A batch costs at most the burst, so one from a visitor (a public page's) may hold no more
    // ops than that: else it would count many times the rate that single counts may.
    if let Some(limit) = config.rate_limit {
        let burst = limit.burst.get() as usize;
        if !config.access.is_open() && visitors::is_visitor(config, token) && parsed.len() > burst {
            return Err(CoreError::TooManyOps { max: burst }.into());
        }
    }
    // Tops the arrival charge up to the batch's cost before any op is sent.
    meter.charge(config, parsed.len())?;
    if one_way {
        return serve_one_way(parsed, &req, cx, token);
    }
    let mut results: Vec<Value> = vec![Value::Null; parsed.len()];
    let mut by_shard: BTreeMap<ShardId, (Vec<usize>, Vec<ShardCall>)> = BTreeMap::new();
    for (index, call) in parsed.into_iter().enumerate() {
        match call.map_err(ApiError::from).and_then(|call| permitted(&req, config, token, call)) {
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
    let reads: Vec<usize> = by_shard.values().map(|(_, ops)| cache_reads(ops)).collect();
    let calls =
        by_shard.into_iter().zip(shard_shares(&reads)).map(|((shard, (indexes, ops)), share)| async move {
            let outcome = shard_client::execute(env, shard, &ops, share).await;
            (indexes, ops, outcome)
        });
    let mut answered: Vec<Option<OpResult>> = vec![None; results.len()];
    for (indexes, ops, outcome) in futures_util::future::join_all(calls).await {
        match outcome {
            Ok(shard_results) => {
                for ((index, call), result) in indexes.into_iter().zip(&ops).zip(shard_results) {
                    hot_reads::after_op(config, &call.op, Some(&result), sent_at);
                    answered[index] = Some(result);
                }
            }
            Err(error) => {
                for (index, call) in indexes.into_iter().zip(&ops) {
                    hot_reads::after_op(config, &call.op, None, sent_at);
                    let error = error.after_send(call.op.is_write());
                    results[index] = error_json(error.code(), &error.message());
                }
            }
        }
    }
    // The whole answer keeps to one budget, spent in request order on entries as encoded
    // here (a text value's JSON escapes can make it longer than the base64 the shard counted).
    let mut budget = AnswerBudget::new(MAX_BATCH_ANSWER_BYTES);
    for (slot, result) in results.iter_mut().zip(answered) {
        let Some(result) = result else { continue };
        let answer = result_json(&result);
        *slot = match result {
            OpResult::Entry { .. } if !budget.try_spend(encoded_len(&answer)) => {
                let error = budget.refusal();
                error_json(error.code(), &error.to_string())
            }
            _ => answer,
        };
    }
    let mut response = respond::json(200, &json!({ "results": results }))?;
    response.set_header("cache-control", "no-store");
    Ok(response)
}

/// A one-way batch: each incr or decr without an idempotency key accepted into the buffer, in
/// order, every other op refused in its place.
fn serve_one_way(
    parsed: Vec<Result<ShardCall, CoreError>>,
    req: &Request,
    cx: &RequestContext<'_>,
    token: Option<&str>,
) -> Result<Response, ApiError> {
    let config = cx.config;
    let results: Vec<Value> = parsed
        .into_iter()
        .map(|call| {
            let accepted = call
                .map_err(ApiError::from)
                .and_then(|call| {
                    let counts = Right::for_op(&call.op) == Right::Count;
                    permitted(req, config, token, call).map(|call| (counts, call))
                })
                .and_then(|(counts, call)| {
                    let (delta, ttl) = match call.op {
                        // A count `permitted` turned into a read: a bot's, accepted, not counted.
                        ShardOp::Get { .. } if counts => return Ok(()),
                        ShardOp::Incr { by, ttl, .. } if call.idempotency_key.is_none() => {
                            (i128::from(by), ttl)
                        }
                        ShardOp::Decr { by, ttl, .. } if call.idempotency_key.is_none() => {
                            (-i128::from(by), ttl)
                        }
                        ShardOp::Get { .. }
                        | ShardOp::Incr { .. }
                        | ShardOp::Decr { .. }
                        | ShardOp::Set { .. }
                        | ShardOp::Delete { .. }
                        | ShardOp::CacheGet { .. }
                        | ShardOp::CachePut { .. }
                        | ShardOp::CacheDelete { .. }
                        | ShardOp::Create { .. }
                        | ShardOp::Guarded { .. }
                        | ShardOp::Info { .. }
                        | ShardOp::Days { .. } => {
                            return Err(ApiError::from(CoreError::InvalidOp {
                                reason: "cannot be one-way: a one-way batch takes only incr and \
                                         decr ops without an idempotency_key"
                                    .to_owned(),
                            }))
                        }
                    };
                    let (ns, key) = call.op.target();
                    let target =
                        Target { shard: shard_for(ns, key, config.shards), ns: ns.clone(), key: key.clone() };
                    let visit = call
                        .visit
                        .unwrap_or_else(|| days::visit_of(req, config, &target, OpKind::Incr, false));
                    let visitor = visit.visitors.first().copied();
                    counters::accept_one_way(
                        cx,
                        &target,
                        Counted { ttl, delta, day: Some(visit.day), visitor, operator: call.operator },
                    )
                });
            match accepted {
                Ok(()) => json!({ "accepted": true }),
                Err(error) => error_json(error.code(), &error.message()),
            }
        })
        .collect();
    let mut response = respond::json(202, &json!({ "results": results }))?;
    response.set_header("cache-control", "no-store");
    Ok(response)
}

fn cache_reads(ops: &[ShardCall]) -> usize {
    ops.iter().filter(|call| matches!(call.op, ShardOp::CacheGet { .. })).count()
}

/// Bytes of `value` as JSON text.
fn encoded_len(value: &Value) -> u64 {
    serde_json::to_string(value).map_or(u64::MAX, |text| text.len() as u64)
}

/// An op the token may run, or the per-op error saying why not.
fn permitted(
    req: &Request,
    config: &Config,
    token: Option<&str>,
    call: ShardCall,
) -> Result<ShardCall, ApiError> {
    let (ns, key) = call.op.target();
    let need = Right::for_op(&call.op);
    config.access.check(token, need, Some(ns))?;
    if need == Right::Count
        && visitors::leaves_uncounted(req.header(Header::UserAgent).as_deref(), config, token, ns)
    {
        // A bot's count in a public namespace: answered with the value, not counted. In a
        // one-way batch, where a read is refused, it is accepted and dropped instead.
        let op = ShardOp::Get { ns: ns.clone(), key: key.clone() };
        return Ok(ShardCall {
            op,
            idempotency_key: None,
            operator: false,
            visit: None,
            count_visitor: false,
        });
    }
    // Only a write beyond counting can meet a counter's owner key (`shard::owner`): the token
    // is looked at again for those alone, not for every count and read of a batch.
    let operator = need == Right::Write && config.access.is_operator(token, ns);
    Ok(days::with_day(ShardCall { operator, ..call }, req, config))
}

async fn read_body(req: &Request) -> Result<String, ApiError> {
    let content_type = req.header(Header::ContentType);
    if !is_json_content_type(content_type.as_deref()) {
        return Err(ApiError::UnsupportedMediaType { expected: "application/json" });
    }
    let bytes = respond::read_bounded_body(req, MAX_BATCH_BODY_BYTES).await?;
    String::from_utf8(bytes)
        .map_err(|_| CoreError::InvalidBody { reason: "is not valid UTF-8".to_owned() }.into())
}
