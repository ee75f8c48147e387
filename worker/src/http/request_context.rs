//! What every handler of one request needs besides the request itself: the bindings, the
//! isolate's configuration, and the request's own runtime context and cancellation, so that
//! work it starts (a shard call, a one-way flusher) can run on after it has answered, and a
//! shard call it carries is abandoned at once if its client hangs up first. Made once per
//! request by the router and passed down by reference, instead of the same four values
//! through every handler.

use worker::{js_sys, Context, Env};

use crate::http::cancellation::Cancellation;
use crate::isolate::config::Config;

/// One request's context (see the module's documentation).
pub struct RequestContext<'a> {
    pub env: &'a Env,
    pub config: &'a Config,
    runtime: &'a Context,
    cancellation: Cancellation,
}

impl<'a> RequestContext<'a> {
    #[must_use]
    pub fn new(env: &'a Env, config: &'a Config, runtime: &'a Context, cancellation: Cancellation) -> Self {
        Self { env, config, runtime, cancellation }
    }

    /// Keeps `work` running after the request has answered (`waitUntil`). Only fails once the
    /// request has ended, and then the work ends with it.
    pub fn keep_alive(&self, work: &js_sys::Promise) {
        let _ = self.runtime.as_ref().wait_until(work);
    }

    /// Runs `handler` if the request's client hangs up before it finishes: the runtime then
    /// cancels the request and any work it started, even work kept with [`Self::keep_alive`].
    pub fn on_cancel(&self, handler: impl FnOnce() + 'static) {
        self.cancellation.on_cancel(handler);
    }
}
