//! Group commit for single-key counter ops: while a call to a shard is in flight, later ops
//! for that shard wait and then go together in one call. The queue discipline is
//! `edgecount_core::coalesce`; this module adds the calls and the wake-ups.
//!
//! The runtime cancels a request whose client hangs up, and a cancelled request never runs
//! again, so nothing here waits on a particular request:
//! - a shard call runs as a task of its own, kept alive with `waitUntil` (which the runtime lets
//!   finish after a disconnect), and it hands every op of the call its result;
//! - a waiting request awaits a promise of its own that is resolved when it has a result or when
//!   the shard goes idle, raced with one timer of its own (a request that waits on nothing but
//!   another request's promise would be cancelled as hung); whoever runs first after the shard
//!   goes idle starts the next call, so a waiter that never runs again strands nobody;
//! - a call that never reports back is declared lost when its lease ends.
//!
//! A promise resolved from another request's task runs its continuation in the request that
//! made it (the runtime's `handle_cross_request_promise_resolution`, on by default), so each
//! request's code only ever runs in its own context.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use edgecount_core::answer_budget::MAX_SHARD_ANSWER_BYTES;
use edgecount_core::coalesce::{Arrival, CallId, CoalesceStats, Coalescer, Started, Ticket};
use edgecount_core::{OpResult, ShardCall, ShardId};
use futures_util::future::{select, Either};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{js_sys, Context, Date, Delay, Env};

use crate::api_error::ApiError;
use crate::config::Config;
use crate::shard_client;

/// How long an op waits for its result before giving up.
const MAX_WAIT_MS: u64 = 15_000;
/// How long a call may go without reporting back before it is declared lost and the shard may
/// take another. Longer than any op takes on a healthy shard, shorter than a client's patience.
const CALL_LEASE_MS: u64 = 10_000;

/// What one waiting op is handed, and how to wake its request.
#[derive(Default)]
struct Slot {
    outcome: RefCell<Option<Result<OpResult, ApiError>>>,
    /// Resolves the promise the op's request awaits now, if it awaits one.
    wake: RefCell<Option<js_sys::Function>>,
}

impl Slot {
    /// Hands over the op's outcome and wakes its request.
    fn deliver(&self, outcome: Result<OpResult, ApiError>) {
        *self.outcome.borrow_mut() = Some(outcome);
        self.wake();
    }

    /// Wakes the op's request (a no-op if it is not waiting, or is gone).
    fn wake(&self) {
        if let Some(resolve) = self.wake.borrow_mut().take() {
            // A resolver cannot fail; a gone request simply never sees the resolution.
            let _ = resolve.call0(&wasm_bindgen::JsValue::UNDEFINED);
        }
    }

    /// A promise, made in the calling request, that [`Slot::wake`] resolves.
    fn woken(&self) -> JsFuture {
        let promise = js_sys::Promise::new(&mut |resolve, _reject| {
            *self.wake.borrow_mut() = Some(resolve);
        });
        JsFuture::from(promise)
    }
}

/// A queued op.
struct Waiter {
    call: ShardCall,
    slot: Rc<Slot>,
}

thread_local! {
    static COALESCER: RefCell<Coalescer<Waiter>> = RefCell::new(Coalescer::new());
}

/// This isolate's coalescing counts.
#[must_use]
pub fn stats() -> CoalesceStats {
    COALESCER.with(|c| c.borrow().stats())
}

fn now_ms() -> u64 {
    Date::now().as_millis()
}

/// Runs `op` on `shard`, in the next call to that shard if one is in flight.
///
/// # Errors
/// [`ApiError::ShardOverloaded`] when `config.shard_queue_limit` ops already wait for the shard
/// (nothing sent); [`ApiError::ShardUnavailable`] when the op was never sent or is a read;
/// [`ApiError::OutcomeUnknown`] for a write whose call failed or did not answer in time, which
/// may have been applied.
pub async fn submit(
    ctx: &Context,
    env: &Env,
    config: &Config,
    shard: ShardId,
    call: ShardCall,
) -> Result<OpResult, ApiError> {
    let is_write = call.op.is_write();
    let slot = Rc::new(Slot::default());
    let waiter = Waiter { call, slot: Rc::clone(&slot) };
    let arrival = COALESCER.with(|c| c.borrow_mut().arrive(shard, waiter, config.shard_queue_limit));
    let Arrival::Queued(ticket) = arrival else {
        return Err(ApiError::ShardOverloaded);
    };
    let deadline = now_ms() + MAX_WAIT_MS;
    loop {
        start_next_call(ctx, env, shard);
        if let Some(outcome) = slot.outcome.borrow_mut().take() {
            return outcome;
        }
        let now = now_ms();
        if now >= deadline {
            return Err(give_up(shard, ticket, &slot, is_write));
        }
        // Look again when woken, at the deadline, or when the call in flight loses its lease.
        let lease = COALESCER.with(|c| c.borrow().lease_ends_ms(shard)).unwrap_or(deadline);
        let wait_ms = deadline.min(lease.saturating_add(1)).saturating_sub(now).max(1);
        let woken = slot.woken();
        let timer = Delay::from(Duration::from_millis(wait_ms));
        if let Either::Right(_) = select(woken, timer).await {
            slot.wake.borrow_mut().take();
        }
    }
}

/// The error for an op that stops waiting: it never went out if it can still be withdrawn.
fn give_up(shard: ShardId, ticket: Ticket, slot: &Slot, is_write: bool) -> ApiError {
    if COALESCER.with(|c| c.borrow_mut().withdraw(shard, ticket)).is_some() || !is_write {
        return ApiError::ShardUnavailable;
    }
    match slot.outcome.borrow_mut().take() {
        Some(Err(error)) => error,
        // Sent in a call that has not answered: it may yet be applied.
        _ => ApiError::OutcomeUnknown,
    }
}

/// Starts a call with every op queued for `shard`, if the shard is idle.
fn start_next_call(ctx: &Context, env: &Env, shard: ShardId) {
    let started = COALESCER.with(|c| c.borrow_mut().try_start(shard, now_ms(), CALL_LEASE_MS));
    if let Some(started) = started {
        ctx.wait_until(run_call(env.clone(), shard, started));
    }
}

/// One shard call: sends the ops, hands each its outcome, then frees the shard and wakes the
/// ops still queued so that one of them starts the next call.
async fn run_call(env: Env, shard: ShardId, started: Started<Waiter>) {
    let Started { call: call_id, ops: waiters } = started;
    let (calls, slots): (Vec<ShardCall>, Vec<Rc<Slot>>) =
        waiters.into_iter().map(|w| (w.call, w.slot)).unzip();
    match shard_client::execute(&env, shard, &calls, MAX_SHARD_ANSWER_BYTES).await {
        Ok(results) => {
            for (slot, result) in slots.iter().zip(results) {
                slot.deliver(Ok(result));
            }
        }
        Err(error) => {
            for (slot, call) in slots.iter().zip(&calls) {
                slot.deliver(Err(error.after_send(call.op.is_write())));
            }
        }
    }
    finish(shard, call_id);
}

fn finish(shard: ShardId, call: CallId) {
    let queued: Vec<Rc<Slot>> = COALESCER.with(|c| {
        let mut coalescer = c.borrow_mut();
        coalescer.finish(shard, call);
        coalescer.waiting(shard).map(|w| Rc::clone(&w.slot)).collect()
    });
    for slot in queued {
        slot.wake();
    }
}
