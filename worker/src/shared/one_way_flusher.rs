//! The flusher of a one-way buffer (`edgecount_core::edge::one_way`), wherever the buffer
//! lives: in an isolate (`isolate::one_way`, sending to a shard or to its relay) or in a relay
//! (`relay`, sending to its shard).
//!
//! A flusher is woken by an arrival that the buffer says needs one. It asks the buffer what to
//! do (`OneWayBuffer::next`): send a flush (in one call under one receipt made of its buffer's
//! name and the flush's number, so a flush sent again is applied once), wait until something
//! falls due, or stop. It holds no claim on anything: two flushers of a shard may both wait,
//! and whichever looks first when something falls due sends it, until the earlier one sees
//! the later one has enlisted and stops. A flusher cut off by the runtime leaves a flush in
//! flight that is due again after its grace, for a flusher still running or the next one an
//! arrival wakes.

use edgecount_core::edge::one_way::{Flush, Next, OneWayBuffer};
use edgecount_core::shard::protocol::ShardRequest;
use edgecount_core::{OpResult, ShardId};
use worker::console_error;

use crate::shared::api_error::ApiError;
use crate::shared::clock::now_ms;
use crate::shared::tasks;

/// Where a buffer lives and where its flushes go.
// Its futures run on the one thread of a Wasm isolate: no caller needs them `Send`.
#[allow(async_fn_in_trait)]
pub trait FlushSite {
    /// Runs `f` on the buffer.
    fn with_buffer<T>(&self, f: impl FnOnce(&mut OneWayBuffer) -> T) -> T;
    /// The name the buffer's receipts carry: unique to this buffer, for as long as it lives.
    fn sender(&self) -> String;
    /// Sends `request` (the flush of `shard`) once.
    async fn send(&self, shard: ShardId, request: &ShardRequest) -> Result<Vec<OpResult>, ApiError>;
}

/// Flushes `shard`'s sums as they fall due, until nothing is left, a flusher woken later has
/// enlisted, or what falls due next is past this one's allowance
/// (`OneWayBuffer::flusher_allowance_ms`): the buffer has arrivals wake another for that.
pub async fn run(site: &impl FlushSite, shard: ShardId) {
    let (me, allowance) = site.with_buffer(|buffer| (buffer.enlist(shard), buffer.flusher_allowance_ms()));
    let wait_until = now_ms().saturating_add(allowance);
    loop {
        let now = now_ms();
        let (next, given_up) = site.with_buffer(|buffer| {
            let dropped = buffer.stats().dropped;
            let next = buffer.next(shard, me, now);
            (next, buffer.stats().dropped - dropped)
        });
        if given_up > 0 {
            console_error!(
                "one-way flush to shard {}: {given_up} ops unsettled for 12 h given up, not sent again past their record",
                shard.0
            );
        }
        match next {
            Next::Send(flush) => send(site, &flush).await,
            Next::At(at) if at <= wait_until => tasks::sleep(at.saturating_sub(now)).await,
            Next::At(_) | Next::Idle => return,
        }
    }
}

/// Sends `flush` once and reports to the buffer what it settled.
async fn send(site: &impl FlushSite, flush: &Flush) {
    let total = flush.total_ops();
    let (applied, dropped) = match flush.request(&site.sender()) {
        Ok(request) => match site.send(flush.shard, &request).await {
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
    site.with_buffer(|buffer| buffer.finish(flush, applied, dropped, now_ms()));
}

/// 96 random bits as hex (`Math.random` gives about 52 per call: enough to tell buffers apart,
/// which is all this is for).
#[must_use]
pub fn random_name() -> String {
    (0..3).map(|_| format!("{:08x}", (worker::js_sys::Math::random() * f64::from(u32::MAX)) as u32)).collect()
}
