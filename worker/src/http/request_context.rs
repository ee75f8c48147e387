//! What every handler of one request needs besides the request itself: the bindings, the
//! isolate's configuration, and the request's own runtime context, so that work it starts (a
//! one-way flush) can run on after it has answered. Made once per request by the router and
//! passed down by reference, instead of the same three values through every handler.

use worker::{js_sys, Context, Env};

use crate::shared::config::Config;

/// One request's context (see the module's documentation).
pub struct RequestContext<'a> {
    pub env: &'a Env,
    pub config: &'a Config,
    runtime: &'a Context,
}

impl<'a> RequestContext<'a> {
    #[must_use]
    pub fn new(env: &'a Env, config: &'a Config, runtime: &'a Context) -> Self {
        Self { env, config, runtime }
    }

    /// Keeps `work` running after the request has answered (`waitUntil`). Only fails once the
    /// request has ended, and then the work ends with it.
    pub fn keep_alive(&self, work: &js_sys::Promise) {
        let _ = self.runtime.as_ref().wait_until(work);
    }
}
