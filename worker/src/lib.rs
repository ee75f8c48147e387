//! `edgecount-worker`: the Workers glue around `edgecount-core`.
//!
//! Layout, by role (see `docs/architecture.md` for the walk of a request):
//! - [`http`], the HTTP router and its handlers: [`http::routes`] (route, method, names and
//!   shard resolved once, then charged and authorized), [`http::target`] (the key a path names,
//!   validated), [`http::counters`], [`http::cache`], [`http::batch`], [`http::badge`],
//!   [`http::operations`] (`/v1/health`, `/v1/stats`, `/metrics`), [`http::documents`] (demo
//!   page, client, OpenAPI), [`http::respond`] (every answer), [`http::cancellation`] (a
//!   request whose client hangs up).
//! - [`isolate`], what the front keeps between requests: [`isolate::hot_reads`] (kept reads of
//!   hot keys), [`isolate::meter`] (rate-limit buckets), [`isolate::one_way`] (one-way writes
//!   waiting to be applied), [`isolate::placement`], [`isolate::shard_stats`],
//!   [`isolate::visitors`]. It uses nothing of `http/`.
//! - [`shard`], the Durable Object: [`shard::durable_object`] (a shell over the core's engine),
//!   [`shard::group`] (calls that arrive together run together), [`shard::sql_store`] (its
//!   SQLite tables) and [`shard::resharding`] (its part in a change of the shard count). It
//!   uses nothing of `http/` or `isolate/`.
//! - [`shared`], what both sides use: [`shared::state`] (everything an isolate keeps, in one
//!   place), [`shared::config`] (the vars, read once), [`shared::shard_client`] (the RPC to a
//!   shard), [`shared::tasks`] (futures on the runtime), [`shared::clock`],
//!   [`shared::hash_seed`], [`shared::drills`] and [`shared::api_error`] (every error).

use wasm_bindgen::prelude::{wasm_bindgen, JsValue};
use worker::{worker_sys, Context, Env};

pub mod http;
pub mod isolate;
pub mod relay;
pub mod shard;
pub mod shared;

/// The worker's `fetch` handler, called by the entry module for every request: answers the
/// `Response`, or a promise of it when the request has to wait ([`shared::tasks::run`]).
#[wasm_bindgen]
pub fn fetch(req: worker_sys::web_sys::Request, env: Env, ctx: worker_sys::Context) -> JsValue {
    shared::hash_seed::seed_once();
    shared::clock::note_request();
    shared::tasks::run(async move {
        let req = http::message::Request::new(req)?;
        let ctx = Context::new(ctx);
        let handle = req.handle();
        let serving = shared::tasks::counted(http::routes::handle(req, env, ctx));
        let response = http::cancellation::serve_cancellable(handle, serving).await;
        Ok(JsValue::from(response.into_web()?))
    })
}
