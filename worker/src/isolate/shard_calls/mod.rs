//! Group commit for single-key counter ops: while a call to a shard is in flight, later ops
//! for that shard wait and then go together in one call. The queue discipline is
//! `edgecount_core::edge::coalescer`; this module adds the calls and the waits. The queues are
//! the isolate's (`isolate::state`), each op in them a [`waiter::Waiter`].
//!
//! The runtime cancels a request whose client hangs up, and a cancelled request never runs
//! again, so nothing here waits on a particular request:
//! - a shard call runs as a task of the request that starts it, kept going with `waitUntil`
//!   after that request has answered, and hands every op of the call its result; if that
//!   request is cancelled first, the call dies with it, and is abandoned at once (see
//!   [`RequestContext::on_cancel`]);
//! - a waiting request looks at its slot on timers of its own, the first soon and each later
//!   one after twice as long (see [`FIRST_RECHECK_MS`]); whoever looks first after the shard
//!   goes idle starts the next call, so a waiter that never runs again strands nobody;
//! - except the request that starts a call: the call is its own task, so the call wakes it
//!   when it delivers, and it needs no timer but the one bounding its wait;
//! - a call that never reports back is declared lost when its lease ends.
//!
//! No request wakes another: a call wakes only the request it is a task of. Every request runs
//! on its own executor ([`crate::isolate::request_task`]), so its timers poll it in its own
//! context; a promise of one request resolved by another did not reliably do so, with or
//! without that executor (under 32 clients on kept-alive connections, requests ran in
//! another's context and failed with "Cannot perform I/O on behalf of a different request";
//! tried again on 2026-11-25, waking each queued op when its shard's call ended, instead of
//! the rechecks: `tests/client-resets.spec.ts` failed the same way).

#[cfg(test)]
mod tests;
pub mod waiter;

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context as TaskContext, Poll};

use edgecount_core::edge::coalescer::{Arrival, CallId, CoalesceStats, Started, Ticket};
use edgecount_core::shard::answer_budget::MAX_SHARD_ANSWER_BYTES;
use edgecount_core::{OpResult, ShardCall, ShardId};
use wasm_bindgen::prelude::JsValue;

use crate::http::api_error::ApiError;
use crate::http::request_context::RequestContext;
use crate::isolate::clock;
use crate::isolate::request_task::executor::{self, Sleep, Turns};
use crate::isolate::request_task::{self, JsTurns};
use crate::isolate::shard_calls::waiter::{Slot, Waiter};
use crate::isolate::{shard_client, state};

/// How long an op waits for its result before giving up: as long as its call is waited for.
const MAX_WAIT_MS: u64 = shard_client::ANSWER_DEADLINE_MS;
/// How long a call may go without reporting back before it is declared lost and the shard may
/// take another. Longer than any op takes on a healthy shard, shorter than a client's patience.
const CALL_LEASE_MS: u64 = 10_000;
/// A waiting op first looks at its slot again after this long, then after twice as long, and so
/// on up to [`MAX_RECHECK_MS`]: soon enough that an op coalesced behind a call of a millisecond
/// or two waits little longer than the call, and with few timers for an op that waits long.
const FIRST_RECHECK_MS: u64 = 1;
const MAX_RECHECK_MS: u64 = 64;

/// Whether this isolate has writes to `shard` submitted and not yet ended. A read sent
/// straight to the shard then could overtake a write sent before it and answered after it,
/// and leave its older value in the isolate's kept reads in place of the write's; queued
/// behind the write, it reads what the write left. Reads under way do not count: a read
/// queued behind reads alone would only wait.
#[must_use]
pub fn busy(shard: ShardId) -> bool {
    state::with(|s| s.writes_under_way.borrow().contains_key(&shard))
}

/// Single-key writes this isolate has submitted and not yet ended, over every shard (for
/// `/v1/stats`).
#[must_use]
pub fn writes_under_way() -> usize {
    state::with(|s| s.writes_under_way.borrow().values().sum())
}

/// A write submitted to its shard, counted in [`busy`] until its submission ends, however it
/// ends (answered, given up, or dropped with a cancelled request).
struct WriteUnderWay(ShardId);

impl WriteUnderWay {
    fn begin(shard: ShardId) -> Self {
        state::with(|s| *s.writes_under_way.borrow_mut().entry(shard).or_default() += 1);
        Self(shard)
    }
}

impl Drop for WriteUnderWay {
    fn drop(&mut self) {
        // As for `QueuedOp`: never inside the map's own borrow, and the state may be gone at
        // the end of a native test's thread.
        state::try_with(|s| {
            if let Ok(mut under_way) = s.writes_under_way.try_borrow_mut() {
                if let Some(count) = under_way.get_mut(&self.0) {
                    *count -= 1;
                    if *count == 0 {
                        under_way.remove(&self.0);
                    }
                }
            }
        });
    }
}

/// Ready once the slot's outcome is delivered, or after `bound_ms`. Awaited only by the request
/// that started the call carrying the op: that call is a task of the same request, so the
/// wake-up stays within the request.
struct Delivery<'a, R> {
    slot: &'a Slot,
    bound_ms: u64,
    armed: bool,
    runtime: PhantomData<fn() -> R>,
}

impl<R: Turns> Future for Delivery<'_, R> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<()> {
        if self.slot.delivered.get() || self.armed {
            self.slot.waker.borrow_mut().take();
            return Poll::Ready(());
        }
        self.armed = true;
        *self.slot.waker.borrow_mut() = Some(cx.waker().clone());
        executor::wake_after::<R>(self.bound_ms);
        Poll::Pending
    }
}

/// What coalescing needs of the request an op comes from and of the runtime: a request's
/// [`RequestContext`] on the runtime's executor in the worker, a fake in the tests.
pub trait Site {
    /// The executor the request's waits run on.
    type Turns: Turns;
    fn now_ms(&self) -> u64;
    /// Most ops that may wait for one shard.
    fn queue_limit(&self) -> usize;
    /// A future that sends `ops` to `shard` in one call when first polled; it answers a result
    /// per op, or why the call failed.
    fn send(
        &self,
        shard: ShardId,
        ops: Vec<ShardCall>,
    ) -> impl Future<Output = Result<Vec<OpResult>, ApiError>> + 'static;
    /// Runs `task` as a task of this request on [`Self::Turns`], kept running after the
    /// request has answered; answers its id there.
    fn spawn(&self, task: impl Future<Output = ()> + 'static) -> u64;
    /// Runs `handler` if the request is cancelled (its client hung up) before it finishes.
    fn on_cancel(&self, handler: impl FnOnce() + 'static);
}

impl Site for RequestContext<'_> {
    type Turns = JsTurns;

    fn now_ms(&self) -> u64 {
        clock::now_ms()
    }

    fn queue_limit(&self) -> usize {
        self.config.shard_queue_limit
    }

    fn send(
        &self,
        shard: ShardId,
        ops: Vec<ShardCall>,
    ) -> impl Future<Output = Result<Vec<OpResult>, ApiError>> + 'static {
        let env = self.env.clone();
        async move { shard_client::execute(&env, shard, &ops, MAX_SHARD_ANSWER_BYTES).await }
    }

    fn spawn(&self, task: impl Future<Output = ()> + 'static) -> u64 {
        let (id, promise) = request_task::spawn_with_id(async move {
            task.await;
            Ok(JsValue::UNDEFINED)
        });
        // Only fails if the request has ended, and then its tasks are cancelled with it.
        self.keep_alive(&promise);
        id
    }

    fn on_cancel(&self, handler: impl FnOnce() + 'static) {
        RequestContext::on_cancel(self, handler);
    }
}

/// This isolate's coalescing counts.
#[must_use]
pub fn stats() -> CoalesceStats {
    state::with(|s| s.shard_calls.borrow().stats())
}

/// Runs `op` on `shard`, in the next call to that shard if one is in flight.
///
/// # Errors
/// [`ApiError::ShardOverloaded`] when `config.shard_queue_limit` ops already wait for the shard
/// (nothing sent); [`ApiError::ShardUnavailable`] when the op was never sent or is a read;
/// [`ApiError::OutcomeUnknown`] for a write whose call failed, was cancelled or did not answer
/// in time, which may have been applied.
pub async fn submit<S: Site>(site: &S, shard: ShardId, call: ShardCall) -> Result<OpResult, ApiError> {
    let is_write = call.op.is_write();
    let _under_way = is_write.then(|| WriteUnderWay::begin(shard));
    let slot = Rc::new(Slot::default());
    let waiter = Waiter { call, slot: Rc::clone(&slot) };
    let arrival = state::with(|s| s.shard_calls.borrow_mut().arrive(shard, waiter, site.queue_limit()));
    let Arrival::Queued(ticket) = arrival else {
        return Err(ApiError::ShardOverloaded);
    };
    let _queued = QueuedOp { shard, ticket };
    let deadline = site.now_ms() + MAX_WAIT_MS;
    let mut recheck_ms = FIRST_RECHECK_MS;
    // Whether the call carrying the op is this request's own.
    let mut led = false;
    loop {
        led |= start_next_call(site, shard, &slot);
        if let Some(outcome) = slot.outcome.borrow_mut().take() {
            return outcome;
        }
        let now = site.now_ms();
        if now >= deadline {
            return Err(give_up(shard, ticket, &slot, is_write));
        }
        // Look again at the deadline or when the call in flight loses its lease, whichever is
        // first; before then on delivery by this request's own call, or else after the
        // recheck interval.
        let lease = state::with(|s| s.shard_calls.borrow().lease_ends_ms(shard)).unwrap_or(deadline);
        let until_lease = deadline.min(lease.saturating_add(1)).saturating_sub(now).max(1);
        if led {
            Delivery::<S::Turns> { slot: &slot, bound_ms: until_lease, armed: false, runtime: PhantomData }
                .await;
        } else {
            let wait_ms = until_lease.min(recheck_ms);
            recheck_ms = (recheck_ms * 2).min(MAX_RECHECK_MS);
            Sleep::<S::Turns>::new(wait_ms).await;
        }
    }
}

/// An op in its shard's queue, taken back if the request waiting for it goes away before it
/// was sent (its client hung up, and the request's future was dropped): left there, it would
/// go out with whatever request next calls the shard, at any later time, applying a write that
/// nobody waits for over writes acknowledged since. Once sent, it is no longer queued, and this
/// does nothing.
struct QueuedOp {
    shard: ShardId,
    ticket: Ticket,
}

impl Drop for QueuedOp {
    fn drop(&mut self) {
        // A drop never happens inside the coalescer's own borrow; if it ever did, the op would
        // stay queued as before rather than panic. Nor after the coalescer is gone, but for a
        // native test's thread ending with requests still waiting (`try_with`).
        state::try_with(|s| {
            if let Ok(mut coalescer) = s.shard_calls.try_borrow_mut() {
                coalescer.withdraw(self.shard, self.ticket);
            }
        });
    }
}

/// The error for an op that stops waiting: it never went out if it can still be withdrawn.
fn give_up(shard: ShardId, ticket: Ticket, slot: &Slot, is_write: bool) -> ApiError {
    if state::with(|s| s.shard_calls.borrow_mut().withdraw(shard, ticket)).is_some() || !is_write {
        return ApiError::ShardUnavailable;
    }
    match slot.outcome.borrow_mut().take() {
        Some(Err(error)) => error,
        // Sent in a call that has not answered: it may yet be applied.
        _ => ApiError::OutcomeUnknown,
    }
}

/// A call in flight: its ops' slots, shared by the task that runs it and the abort handler of
/// the request that started it.
struct CallInFlight {
    shard: ShardId,
    id: CallId,
    /// Each op's slot, and whether the op is a write.
    slots: Vec<(Rc<Slot>, bool)>,
}

impl CallInFlight {
    fn carries(&self, slot: &Rc<Slot>) -> bool {
        self.slots.iter().any(|(carried, _)| Rc::ptr_eq(carried, slot))
    }

    /// The call is over, one way or the other: hands each op that has no outcome yet
    /// `outcome(is_write)`, in op order (the first outcome stands), and frees the shard if this
    /// call still holds it; the ops still queued start the next call when they next look.
    fn end(&self, mut outcome: impl FnMut(bool) -> Result<OpResult, ApiError>, abandoned: bool) {
        for (slot, is_write) in &self.slots {
            slot.deliver_first(|| outcome(*is_write));
        }
        state::with(|s| s.shard_calls.borrow_mut().end(self.shard, self.id, abandoned));
    }
}

/// Starts a call with every op queued for `shard`, if the shard is idle: a task of the caller's
/// request, which the call abandons if that request is cancelled. Answers whether it started
/// one that carries `own`, the caller's op.
fn start_next_call<S: Site>(site: &S, shard: ShardId, own: &Rc<Slot>) -> bool {
    let Some(Started { call: id, ops }) =
        state::with(|s| s.shard_calls.borrow_mut().try_start(shard, site.now_ms(), CALL_LEASE_MS))
    else {
        return false;
    };
    let (calls, slots): (Vec<ShardCall>, Vec<(Rc<Slot>, bool)>) = ops
        .into_iter()
        .map(|Waiter { call, slot }| {
            let is_write = call.op.is_write();
            (call, (slot, is_write))
        })
        .unzip();
    let in_flight = Rc::new(CallInFlight { shard, id, slots });
    let carries_own = in_flight.carries(own);
    let sent = site.send(shard, calls);
    let call = Rc::clone(&in_flight);
    let task = site.spawn(async move {
        match sent.await {
            Ok(results) => {
                let mut results = results.into_iter();
                call.end(|_| results.next().ok_or(ApiError::ShardUnavailable), false);
            }
            Err(error) => call.end(|is_write| Err(error.after_send(is_write)), false),
        }
    });
    // Cancelled with its request, the call may or may not have reached the shard: the same
    // outcome as a call that failed after sending. Its task is dropped too, as its answer
    // never comes. Once the call has reported back this changes nothing: every op has its
    // outcome, the shard no longer holds the call, and the task is gone.
    site.on_cancel(move || {
        in_flight.end(|is_write| Err(ApiError::ShardUnavailable.after_send(is_write)), true);
        executor::abandon::<S::Turns>(task);
    });
    carries_own
}
