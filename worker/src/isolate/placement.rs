//! Each isolate checks, once, that its `EDGECOUNT_SHARDS` (and `EDGECOUNT_SHARDS_FROM`) agree
//! with the placement the keys are under (see [`edgecount_core::shard::placement`]) before any
//! request of it reads or writes a key, one-way writes included; while a change of count is
//! declared, it also wakes every shard to hand over the keys that leave it. A refusal is not remembered: the next request asks again, so
//! a deployment that puts the count back recovers at once.

use edgecount_core::ShardId;
use worker::Env;

use crate::shared::api_error::ApiError;
use crate::shared::config::Config;
use crate::shared::{shard_client, state};

/// Succeeds once this isolate's shard count is known to be the placement's.
///
/// # Errors
/// [`edgecount_core::CoreError::PlacementChanged`] (500 `misconfigured`) or an unavailable shard.
pub async fn ensure(env: &Env, config: &Config) -> Result<(), ApiError> {
    if state::with(|s| s.placement_checked.get()) {
        return Ok(());
    }
    shard_client::check_placement(env, config.placement()).await?;
    if config.migration().is_some() {
        // Every shard of either count hears of the change, so that each hands over its leaving
        // keys even if no request ever reaches it. Until all have heard, the next request asks
        // again; this one goes on, as its own keys do not need the others.
        let shards =
            (0..config.shards_holding_keys()).map(|shard| shard_client::migrate(env, ShardId(shard)));
        if futures_util::future::join_all(shards).await.iter().any(Result::is_err) {
            return Ok(());
        }
    }
    state::with(|s| s.placement_checked.set(true));
    Ok(())
}
