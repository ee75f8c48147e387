//! The shards' statistics as this isolate asks for them: one request asks every shard at a
//! time, the others wait for its answer, and an answer is reused for
//! `EDGECOUNT_STATS_MAX_AGE_MS` (`edgecount_core::edge::single_flight`). So `/v1/stats`,
//! `/metrics` and the compatible `/stats` cost the shards the same however many ask at once.

use std::rc::Rc;

use edgecount_core::edge::single_flight::{SingleFlight, Step, Ticket};
use edgecount_core::shard::protocol::ShardStats;
use edgecount_core::ShardId;
use futures_util::future::join_all;
use worker::Env;

use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::config::Config;
use crate::shared::{shard_client, state, tasks};

/// A claim to ask lapses after this: past the 15 s every shard call is given, and then some.
const LEASE_MS: u64 = 20_000;
/// How often a waiting request looks for the answer.
const LOOK_EVERY_MS: u64 = 10;

type Figures = Rc<Vec<ShardStats>>;

/// How many times this isolate has asked every shard for its statistics.
pub fn asks() -> u64 {
    state::with(|s| s.shard_stats_asks.get())
}

/// Runs `act` on this isolate's flight, made on first use.
fn with_flight<R>(config: &Config, act: impl FnOnce(&mut SingleFlight<Figures, ApiError>) -> R) -> R {
    state::with(|s| {
        act(s
            .shard_stats
            .borrow_mut()
            .get_or_insert_with(|| SingleFlight::new(config.stats_max_age_ms, LEASE_MS)))
    })
}

/// Every shard's statistics, asked concurrently.
async fn all_shard_stats(env: &Env, config: &Config) -> Result<Vec<ShardStats>, ApiError> {
    let shards = 0..config.shards_holding_keys();
    join_all(shards.map(|i| shard_client::stats(env, ShardId(i)))).await.into_iter().collect()
}

/// Lets the next request ask if this one's asking ends without a word (its client hung up and
/// its work was dropped).
struct Claim(Ticket);

impl Drop for Claim {
    fn drop(&mut self) {
        state::with(|s| {
            if let Some(flight) = s.shard_stats.borrow_mut().as_mut() {
                flight.abandon(self.0);
            }
        });
    }
}

/// Every shard's statistics, at most `EDGECOUNT_STATS_MAX_AGE_MS` old (or made while this
/// request waited).
///
/// # Errors
/// [`ApiError::ShardUnavailable`] when a shard does not answer (this request's asking, or the
/// one it waited for).
pub async fn shard_stats(env: &Env, config: &Config) -> Result<Figures, ApiError> {
    let since = now_ms();
    loop {
        match with_flight(config, |flight| flight.step(now_ms(), since)) {
            Step::Use(figures) => return Ok(figures),
            Step::Failed(error) => return Err(error),
            Step::Wait => tasks::sleep(LOOK_EVERY_MS).await,
            Step::Ask(ticket) => {
                let claim = Claim(ticket);
                state::with(|s| s.shard_stats_asks.set(s.shard_stats_asks.get() + 1));
                let asked = all_shard_stats(env, config).await.map(Rc::new);
                std::mem::forget(claim);
                with_flight(config, |flight| match &asked {
                    Ok(figures) => flight.finish(ticket, now_ms(), Rc::clone(figures)),
                    Err(error) => flight.fail(ticket, now_ms(), error.clone()),
                });
                return asked;
            }
        }
    }
}
