//! The configuration this isolate runs under: the vars read into one value ([`vars`]) on the
//! isolate's first request, then kept in its state (`shared::state`) and shared.

pub mod vars;

use std::rc::Rc;

use worker::Env;

use crate::shared::api_error::ApiError;
use crate::shared::state;
pub use vars::{
    Config, CorsOrigins, DEFAULT_DAYS_KEPT, DEFAULT_HAND_OVER_KEYS, DEFAULT_RELAY, DEFAULT_SHARDS,
    DEFAULT_SHARD_CACHE_BOUNDS,
};

impl Config {
    /// The configuration for this isolate: read from the vars once, then shared.
    ///
    /// # Errors
    /// As [`Config::from_env`]; a malformed configuration is read again on every request, so
    /// the error is reported each time.
    pub fn for_isolate(env: &Env) -> Result<Rc<Self>, ApiError> {
        if let Some(config) = state::with(|s| s.config.borrow().clone()) {
            return Ok(config);
        }
        let config = Rc::new(Self::from_env(env)?);
        state::with(|s| *s.config.borrow_mut() = Some(Rc::clone(&config)));
        Ok(config)
    }
}
