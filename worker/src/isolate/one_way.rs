//! One-way writes in this isolate: accepted deltas wait in the buffer of
//! `edgecount_core::edge::one_way`, and a flusher per shard applies their sums.
//!
//! A flusher is a task of the request whose arrival found its shard without one, kept running
//! with `waitUntil` after that request has answered its 202. It waits until the shard's sums are
//! due, sends them in one call under one receipt made of this isolate's random name and the
//! flush's number (one idempotency record per flush), so a flush sent again is applied once; it sends
//! a flush whose outcome is unknown (or that a shard refused for a passing reason, as
//! `shard_overloaded`) again, after 0.25, 1, 4, 16 and then every 64 s, for as long as it takes:
//! what was accepted is applied unless the isolate dies (the buffer stays charged meanwhile,
//! so new one-way counts are refused at its bounds, never accepted and dropped). It ends when
//! nothing is pending. The runtime ends a request's `waitUntil` work 30 s after the answer at
//! the latest; a flusher that dies so keeps its lease until it runs out, and then the next
//! arrival for the shard starts another, which sends the flush in flight again under its number.

use edgecount_core::edge::one_way::{Accept, Counted, Flush, FlusherId, OneWayBuffer, OneWayStats};
use edgecount_core::{CoreError, Key, Namespace, ShardId};
use worker::{console_error, js_sys, Env};

use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::config::Config;
use crate::shared::state::{self, OneWayWrites};
use crate::shared::{drills, shard_client, tasks};

/// The wait before the first resend; each later one waits four times as long, up to 64 s.
const FIRST_RESEND_MS: u64 = 250;
/// A waiting flusher looks again at least this often: sums may fall due sooner than it was told
/// (a shard reaching its op bound).
const MAX_NAP_MS: u64 = 250;

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

/// 96 random bits as hex (`Math.random` gives about 52 per call: enough to tell isolates apart,
/// which is all this is for).
fn random_name() -> String {
    (0..3).map(|_| format!("{:08x}", (js_sys::Math::random() * f64::from(u32::MAX)) as u32)).collect()
}

/// This isolate's one-way counts, and the keys and bytes its buffer holds.
#[must_use]
pub fn snapshot(config: &Config) -> (OneWayStats, (usize, u64)) {
    with_buffer(config, |buffer| (buffer.stats(), buffer.held()))
}

/// Accepts `count` for `ns`/`key` on `shard`, to be applied within the flush interval. When
/// the shard has no flusher, starts one and answers the promise of its end, which the request
/// keeps alive (`waitUntil`).
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
        Accept::Accepted { start_flusher } => Ok(start_flusher.map(|flusher| {
            let (env, config) = (env.clone(), config.clone());
            tasks::spawn(async move { run_flusher(&env, &config, shard, flusher).await })
        })),
    }
}

/// Flushes `shard`'s sums as they fall due, until none are pending or another flusher takes
/// over.
async fn run_flusher(env: &Env, config: &Config, shard: ShardId, flusher: FlusherId) {
    loop {
        let now = now_ms();
        let due =
            with_buffer(config, |buffer| buffer.claim(shard, flusher, now).then(|| buffer.due_at(shard)));
        let Some(due) = due else { return };
        if let Some(due) = due.filter(|due| *due > now) {
            tasks::sleep((due - now).min(MAX_NAP_MS)).await;
            continue;
        }
        let (flush, given_up) = with_buffer(config, |buffer| {
            let dropped = buffer.stats().dropped;
            let flush = buffer.take(shard, flusher, now);
            (flush, buffer.stats().dropped - dropped)
        });
        if given_up > 0 {
            console_error!(
                "one-way flush to shard {}: {given_up} ops unsettled for 12 h given up, not sent again past their record",
                shard.0
            );
        }
        let Some(flush) = flush else { return };
        if flush.attempts > 1 {
            tasks::sleep(FIRST_RESEND_MS << (2 * (flush.attempts - 2).min(4))).await;
        }
        send(env, config, &flush).await;
    }
}

/// Sends `flush` once and reports to the buffer what it settled.
async fn send(env: &Env, config: &Config, flush: &Flush) {
    // The buffer that made the flush made the name too.
    let sender =
        state::with(|s| s.one_way.borrow().as_ref().map(|writes| writes.name.clone())).unwrap_or_default();
    let total = flush.total_ops();
    let (applied, dropped) = match flush.request(&sender) {
        Ok(request) => match shard_client::execute_request(env, flush.shard, &request).await {
            Ok(_) if drills::loses_flush_answer(env) => (0, 0),
            Ok(results) => flush.settled(results),
            // The outcome is unknown: nothing is settled, and a resend replays what was applied.
            Err(_) => (0, 0),
        },
        Err(error) => {
            console_error!("one-way flush could not be built: {error}");
            (0, total)
        }
    };
    if dropped > 0 {
        console_error!(
            "one-way flush {} to shard {}: {dropped} ops refused for good (an overflow, say)",
            flush.number,
            flush.shard.0
        );
    }
    if applied + dropped < total && flush.attempts >= 4 {
        console_error!(
            "one-way flush {} to shard {} still not applied after {} sends: {} ops kept to send again",
            flush.number,
            flush.shard.0,
            flush.attempts,
            total - applied - dropped
        );
    }
    with_buffer(config, |buffer| buffer.finish(flush.shard, flush.number, applied, dropped));
}
