//! The flusher of a one-way buffer (`edgecount_core::edge::one_way`), wherever the buffer
//! lives: in an isolate (`isolate::one_way`, sending to a shard or to its relay) or in a relay
//! (`relay`, sending to its shard).
//!
//! A flusher waits until a shard's sums are due, sends them in one call under one receipt made
//! of its buffer's name and the flush's number (one idempotency record per flush), so a flush
//! sent again is applied once; it sends a flush whose outcome is unknown (or that was refused
//! for a passing reason, as `shard_overloaded`) again, after 0.25, 1, 4, 16 and then every 64 s,
//! for as long as it takes: what was accepted is applied unless its holder dies (the buffer
//! stays charged meanwhile, so new counts are refused at its bounds, never accepted and
//! dropped). It ends when nothing is pending, or when the buffer names another flusher.

use edgecount_core::edge::one_way::{Flush, FlusherId, OneWayBuffer};
use edgecount_core::shard::protocol::ShardRequest;
use edgecount_core::{OpResult, ShardId};
use worker::console_error;

use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::tasks;

/// The wait before the first resend; each later one waits four times as long, up to 64 s.
const FIRST_RESEND_MS: u64 = 250;
/// A waiting flusher looks again at least this often: sums may fall due sooner than it was told
/// (a shard reaching its op bound).
const MAX_NAP_MS: u64 = 250;

/// Where a buffer lives and where its flushes go.
// Its futures run on the one thread of a Wasm isolate: no caller needs them `Send`.
#[allow(async_fn_in_trait)]
pub trait FlushSite {
    /// Runs `f` on the buffer.
    fn with_buffer<T>(&self, f: impl FnOnce(&mut OneWayBuffer) -> T) -> T;
    /// The name the buffer's receipts carry: unique to this buffer, for as long as it lives.
    fn sender(&self) -> String;
    /// Whether the drill that loses flush answers is on.
    fn loses_answers(&self) -> bool;
    /// Sends `request` (the flush of `shard`) once.
    async fn send(&self, shard: ShardId, request: &ShardRequest) -> Result<Vec<OpResult>, ApiError>;
}

/// Flushes `shard`'s sums as they fall due, until none are pending or another flusher takes
/// over.
pub async fn run(site: &impl FlushSite, shard: ShardId, flusher: FlusherId) {
    loop {
        let now = now_ms();
        let due = site.with_buffer(|buffer| buffer.claim(shard, flusher, now).then(|| buffer.due_at(shard)));
        let Some(due) = due else { return };
        if let Some(due) = due.filter(|due| *due > now) {
            tasks::sleep((due - now).min(MAX_NAP_MS)).await;
            continue;
        }
        let (flush, given_up) = site.with_buffer(|buffer| {
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
        send(site, &flush).await;
    }
}

/// Sends `flush` once and reports to the buffer what it settled.
async fn send(site: &impl FlushSite, flush: &Flush) {
    let total = flush.total_ops();
    let (applied, dropped) = match flush.request(&site.sender()) {
        Ok(request) => match site.send(flush.shard, &request).await {
            Ok(_) if site.loses_answers() => (0, 0),
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
    site.with_buffer(|buffer| buffer.finish(flush.shard, flush.number, applied, dropped));
}

/// 96 random bits as hex (`Math.random` gives about 52 per call: enough to tell buffers apart,
/// which is all this is for).
#[must_use]
pub fn random_name() -> String {
    (0..3).map(|_| format!("{:08x}", (worker::js_sys::Math::random() * f64::from(u32::MAX)) as u32)).collect()
}
