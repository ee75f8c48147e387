//! One-way writes in this isolate: accepted deltas wait in the buffer of
//! `edgecount_core::edge::one_way`, and a flusher per shard (`shared::one_way_flusher`) applies
//! their sums, straight at the shard or, when `EDGECOUNT_RELAYS` is set, through the one of the
//! shard's relays this isolate's name picks (`relay`).
//!
//! A flusher is a task of a request whose arrival the buffer said needs one (it opened the
//! shard's window, found something of it overdue, or brought something due after the flushers
//! woken so far end), kept running with `waitUntil` after that request has answered its 202.
//! The runtime ends a request's `waitUntil` work 30 s after the answer at the latest, so a
//! flusher runs no longer (`FLUSHER_ALLOWANCE_MS`); what falls due after it is another's.

use edgecount_core::edge::one_way::{Accept, Counted, OneWayBuffer, OneWayStats};
use edgecount_core::relay::relay_for;
use edgecount_core::shard::protocol::ShardRequest;
use edgecount_core::{CoreError, Key, Namespace, OpResult, ShardId};
use worker::{js_sys, Env};

use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::config::Config;
use crate::shared::one_way_flusher::{self, random_name, FlushSite};
use crate::shared::state::{self, OneWayWrites};
use crate::shared::{shard_client, tasks};

fn with_buffer<T>(config: &Config, f: impl FnOnce(&mut OneWayBuffer) -> T) -> T {
    state::with(|s| {
        let mut slot = s.one_way.borrow_mut();
        let writes = slot.get_or_insert_with(|| OneWayWrites {
            buffer: OneWayBuffer::new(config.one_way),
            name: random_name(),
        });
        f(&mut writes.buffer)
    })
}

/// This isolate's one-way counts, and the keys and bytes its buffer holds.
#[must_use]
pub fn snapshot(config: &Config) -> (OneWayStats, (usize, u64)) {
    with_buffer(config, |buffer| (buffer.stats(), buffer.held()))
}

/// Accepts `count` for `ns`/`key` on `shard`, to be applied within the flush interval. When
/// the buffer asks for a flusher, starts one and answers the promise of its end, which the
/// request keeps alive (`waitUntil`).
///
/// # Errors
/// [`ApiError::OneWayBufferFull`] when the buffer is at its bound, and `overflow` when the
/// key's pending sum would pass what any counter could absorb: nothing was accepted.
pub fn accept(
    env: &Env,
    config: &Config,
    (shard, ns, key): (ShardId, &Namespace, &Key),
    count: Counted,
) -> Result<Option<js_sys::Promise>, ApiError> {
    let accepted = with_buffer(config, |buffer| buffer.accept(shard, ns, key, count, now_ms()));
    match accepted {
        Accept::Full => Err(ApiError::OneWayBufferFull),
        Accept::Overflow => Err(CoreError::Overflow.into()),
        Accept::Accepted { wake } => Ok(wake.then(|| {
            let site = IsolateSite { env: env.clone(), config: config.clone() };
            tasks::spawn(async move { one_way_flusher::run(&site, shard).await })
        })),
    }
}

/// This isolate's buffer, flushed to the shards or their relays.
struct IsolateSite {
    env: Env,
    config: Config,
}

impl FlushSite for IsolateSite {
    fn with_buffer<T>(&self, f: impl FnOnce(&mut OneWayBuffer) -> T) -> T {
        with_buffer(&self.config, f)
    }

    fn sender(&self) -> String {
        // The buffer that made the flush made the name too.
        state::with(|s| s.one_way.borrow().as_ref().map(|writes| writes.name.clone())).unwrap_or_default()
    }

    async fn send(&self, shard: ShardId, request: &ShardRequest) -> Result<Vec<OpResult>, ApiError> {
        if self.config.relays == 0 {
            return shard_client::execute_request(&self.env, shard, request).await;
        }
        // Always the same relay of the shard for this isolate, so that a resend meets the relay
        // that took the first send.
        let relay = relay_for(&self.sender(), self.config.relays);
        shard_client::execute_relayed(&self.env, shard, relay, request).await
    }
}
