//! `edgecount-worker`: the Workers glue around `edgecount-core`.
//!
//! Layout, by role:
//! - [`http`], the HTTP router and its handlers: [`http::routes`] (route, method, names and
//!   shard resolved once, then charged and authorized), [`http::target`] (the key a path names,
//!   validated), [`http::counters`], [`http::cache`], [`http::batch`], [`http::badge`],
//!   [`http::operations`] (`/v1/health`, `/v1/stats`, `/metrics`), [`http::documents`] (demo
//!   page, client, OpenAPI), [`http::respond`] and [`http::api_error`] (every answer and error),
//!   [`http::cancellation`] (a request whose client hangs up).
//! - [`isolate`], what one isolate keeps between requests, all of it in [`isolate::state`]:
//!   [`isolate::config`] (the vars, read once), [`isolate::hot_reads`] (kept reads of hot keys), [`isolate::meter`] (rate-limit
//!   buckets), [`isolate::shard_client`] (the RPC to a shard, and the calls under way to each), [`isolate::one_way`] (one-way writes
//!   waiting to be applied), [`isolate::hash_seed`] (the random seed of its hash tables),
//!   [`isolate::clock`], [`isolate::tasks`] (futures on the runtime).
//! - [`shard`], the Durable Object: [`shard::durable_object`] (a shell over the core's engine),
//!   [`shard::group`] (calls that arrive together run together) and [`shard::sql_store`] (its
//!   SQLite tables).

use wasm_bindgen::prelude::{wasm_bindgen, JsValue};
use worker::{worker_sys, Context, Env};

pub mod http;
pub mod isolate;
pub mod shard;

/// The worker's `fetch` handler, called by the entry module for every request: answers the
/// `Response`, or a promise of it when the request has to wait ([`isolate::tasks::run`]).
#[wasm_bindgen]
pub fn fetch(req: worker_sys::web_sys::Request, env: Env, ctx: worker_sys::Context) -> JsValue {
    isolate::hash_seed::seed_once();
    isolate::clock::note_request();
    isolate::tasks::run(async move {
        let req = http::message::Request::new(req)?;
        let ctx = Context::new(ctx);
        let handle = req.handle();
        let serving = isolate::tasks::counted(http::routes::handle(req, env, ctx));
        let response = http::cancellation::serve_cancellable(handle, serving).await;
        Ok(JsValue::from(response.into_web()?))
    })
}
