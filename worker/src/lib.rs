//! `edgecount-worker`: the Workers glue around `edgecount-core`.
//!
//! Layout, by role:
//! - [`http`], the HTTP router and its handlers: [`http::routes`] (route, method, names and
//!   shard resolved once, then charged and authorized), [`http::target`] (the key a path names,
//!   validated), [`http::counters`], [`http::cache`], [`http::batch`], [`http::badge`],
//!   [`http::operations`] (`/v1/health`, `/v1/stats`, `/metrics`), [`http::documents`] (demo
//!   page, client, OpenAPI), [`http::respond`] and [`http::api_error`] (every answer and error),
//!   [`http::cancellation`] (a request whose client hangs up).
//! - [`isolate`], what one isolate keeps between requests: [`isolate::config`] (the vars, read
//!   once), [`isolate::hot_reads`] (kept reads of hot keys), [`isolate::meter`] (rate-limit
//!   buckets), [`isolate::shard_calls`] (concurrent calls to one shard merged),
//!   [`isolate::shard_client`] (the RPC to a shard), [`isolate::clock`].
//! - [`shard`], the Durable Object: [`shard::durable_object`] (a shell over the core's engine)
//!   and [`shard::sql_store`] (its SQLite tables).

use worker::{event, Context, Env, Request, Response, Result};

pub mod http;
pub mod isolate;
pub mod shard;

#[event(fetch)]
async fn fetch(req: Request, env: Env, ctx: Context) -> Result<Response> {
    let signal = req.inner().signal();
    http::cancellation::serve_cancellable(signal, move |cancellation| {
        http::routes::handle(req, env, ctx, cancellation)
    })
    .await
}
