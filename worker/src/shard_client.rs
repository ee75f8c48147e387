//! How the worker calls shards: one `fetch` to the shard's Durable Object per call, carrying a
//! list of ops, so a batch costs one hop per shard rather than one per op.

use edgecount_core::protocol::{ShardResponse, ShardStats};
use edgecount_core::{OpResult, ShardCall, ShardId};
use serde::Serialize;
use worker::{Env, Headers, Method, Request, RequestInit, Stub};

use crate::api_error::ApiError;

/// The Durable Object binding in `wrangler.toml`.
pub const SHARDS_BINDING: &str = "SHARDS";

fn stub(env: &Env, shard: ShardId) -> Result<Stub, ApiError> {
    let namespace = env.durable_object(SHARDS_BINDING)?;
    Ok(namespace.id_from_name(&shard.object_name())?.get_stub()?)
}

/// `edgecount_core::protocol::ShardRequest` borrowing its ops, so callers keep theirs without a copy.
#[derive(Serialize)]
struct ShardRequestRef<'a> {
    ops: &'a [ShardCall],
}

/// Runs `ops` on `shard` in order and returns one result per op.
///
/// # Errors
/// [`ApiError::ShardUnavailable`] when the shard cannot be reached or answers out of protocol.
pub async fn execute(env: &Env, shard: ShardId, ops: &[ShardCall]) -> Result<Vec<OpResult>, ApiError> {
    let expected = ops.len();
    let body =
        serde_json::to_string(&ShardRequestRef { ops }).map_err(|e| ApiError::Internal(e.to_string()))?;
    let headers = Headers::new();
    headers.set("content-type", "application/json")?;
    let mut init = RequestInit::new();
    init.with_method(Method::Post).with_headers(headers).with_body(Some(body.into()));
    let request = Request::new_with_init("https://shard/ops", &init)?;
    let mut response = stub(env, shard)?.fetch_with_request(request).await.map_err(|e| unreachable(&e))?;
    if response.status_code() != 200 {
        return Err(ApiError::ShardUnavailable);
    }
    let text = response.text().await.map_err(|_| ApiError::ShardUnavailable)?;
    let answer: ShardResponse = serde_json::from_str(&text).map_err(|_| ApiError::ShardUnavailable)?;
    if answer.results.len() != expected {
        return Err(ApiError::ShardUnavailable);
    }
    Ok(answer.results)
}

/// Why a call to a shard failed: the runtime says "overloaded" when a Durable Object's queue of
/// incoming requests is too long, and a client should then back off rather than retry at once.
fn unreachable(error: &worker::Error) -> ApiError {
    classify_failure(&error.to_string())
}

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
/// As [`execute`].
pub async fn execute_one(env: &Env, shard: ShardId, call: ShardCall) -> Result<OpResult, ApiError> {
    let mut results = execute(env, shard, std::slice::from_ref(&call)).await?;
    results.pop().ok_or(ApiError::ShardUnavailable)
}

/// Asks `shard` for its statistics.
///
/// # Errors
/// [`ApiError::ShardUnavailable`] when the shard cannot be reached.
pub async fn stats(env: &Env, shard: ShardId) -> Result<ShardStats, ApiError> {
    let mut response = stub(env, shard)?
        .fetch_with_str("https://shard/stats")
        .await
        .map_err(|_| ApiError::ShardUnavailable)?;
    let text = response.text().await.map_err(|_| ApiError::ShardUnavailable)?;
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
