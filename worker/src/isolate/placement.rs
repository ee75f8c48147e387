//! Each isolate checks, once, that its `EDGECOUNT_SHARDS` is the count the keys were placed
//! under (see [`edgecount_core::shard::placement`]) before any request of it reads or writes a
//! key, one-way writes included. A refusal is not remembered: the next request asks again, so
//! a deployment that puts the count back recovers at once.

use std::cell::Cell;

use worker::Env;

use crate::http::api_error::ApiError;
use crate::isolate::config::Config;
use crate::isolate::shard_client;

thread_local! {
    static CHECKED: Cell<bool> = const { Cell::new(false) };
}

/// Succeeds once this isolate's shard count is known to be the placement's.
///
/// # Errors
/// [`edgecount_core::CoreError::PlacementChanged`] (500 `misconfigured`) or an unavailable shard.
pub async fn ensure(env: &Env, config: &Config) -> Result<(), ApiError> {
    if CHECKED.with(Cell::get) {
        return Ok(());
    }
    shard_client::check_placement(env, config.shards).await?;
    CHECKED.with(|checked| checked.set(true));
    Ok(())
}
