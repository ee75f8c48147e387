//! `edgecount-worker`: the Workers glue around `edgecount-core`.
//!
//! Layout:
//! - [`config`]: the `wrangler.toml` vars, read once per request into a typed [`config::Config`].
//! - [`routes`]: which handler serves a path, and the 404 / 405 answers.
//! - [`target`]: the key a request names, validated once, with the shard that owns it.
//! - [`counters`]: the counter routes of API v1.
//! - [`cache`]: the cache-entry routes.
//! - [`batch`]: `POST /v1/batch`, ops grouped into one call per shard.
//! - [`operations`]: `/v1/health`, `/v1/stats` and `/metrics`.
//! - [`badge`]: `/v1/badge/:ns/:key.svg`, a counter as an SVG badge.
//! - [`documents`]: the demo page, the browser client and the OpenAPI description.
//! - [`shard`]: the `Shard` Durable Object that owns and stores a slice of the keys.
//! - [`shard_store`]: the shard's SQLite tables.
//! - [`shard_client`]: how the worker calls shards.
//! - [`cancellation`]: what happens to a request whose client hangs up.
//! - [`clock`]: the runtime's clock, read in one place.
//! - [`coalescing`]: concurrent single-key ops to one shard merged into one call.
//! - [`edge`]: this isolate's hot-key sketch and cache of hot reads.
//! - [`rate_limits`]: the token bucket each request is charged to.
//! - [`api_error`]: every error a client can see, mapped to its HTTP status in one place.
//! - [`respond`]: JSON and text responses, and the CORS headers every response carries.

use worker::{event, Context, Env, Request, Response, Result};

pub mod api_error;
pub mod badge;
pub mod batch;
pub mod cache;
pub mod cancellation;
pub mod clock;
pub mod coalescing;
pub mod config;
pub mod counters;
pub mod documents;
pub mod edge;
pub mod operations;
pub mod rate_limits;
pub mod respond;
pub mod routes;
pub mod shard;
pub mod shard_client;
pub mod shard_store;
pub mod target;

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> Result<Response> {
    let signal = req.inner().signal();
    cancellation::serve_cancellable(signal, move |cancellation| routes::handle(req, env, ctx, cancellation))
        .await
}
