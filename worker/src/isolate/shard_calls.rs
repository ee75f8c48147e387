//! Group commit for single-key counter ops: while a call to a shard is in flight, later ops
//! for that shard wait and then go together in one call. The queue discipline is
//! `edgecount_core::edge::coalescer`; this module adds the calls and the wake-ups.
//!
//! The runtime cancels a request whose client hangs up, and a cancelled request never runs
//! again, so nothing here waits on a particular request:
//! - a shard call runs as a task of the request that starts it, kept going with `waitUntil`
//!   after that request has answered, and hands every op of the call its result; if that
//!   request is cancelled first, the call dies with it, and is abandoned at once (see
//!   [`Caller`]);
//! - a waiting request awaits a promise of its own that is resolved when it has a result or when
//!   the shard goes idle, raced with one timer of its own (a request that waits on nothing but
//!   another request's promise would be cancelled as hung); whoever runs first after the shard
//!   goes idle starts the next call, so a waiter that never runs again strands nobody;
//! - a call that never reports back is declared lost when its lease ends.
//!
//! A promise resolved from another request's task runs its reaction in the request that made
//! it (the runtime's `handle_cross_request_promise_resolution`, on by default), and that
//! reaction hands over through a timer of the request's own (see [`Slot::woken`]), so each
//! request's code only ever runs in its own context.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use edgecount_core::edge::coalescer::{Arrival, CallId, CoalesceStats, Coalescer, Started, Ticket};
use edgecount_core::shard::answer_budget::MAX_SHARD_ANSWER_BYTES;
use edgecount_core::{OpResult, ShardCall, ShardId};
use futures_util::future::select;
use wasm_bindgen::prelude::{wasm_bindgen, Closure, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{js_sys, Context, Delay, Env};

use crate::http::api_error::ApiError;
use crate::http::cancellation::Cancellation;
use crate::isolate::clock::now_ms;
use crate::isolate::config::Config;
use crate::isolate::shard_client;

/// How long an op waits for its result before giving up.
const MAX_WAIT_MS: u64 = 15_000;
/// How long a call may go without reporting back before it is declared lost and the shard may
/// take another. Longer than any op takes on a healthy shard, shorter than a client's patience.
const CALL_LEASE_MS: u64 = 10_000;
/// A waiting op looks at its slot again after this long, then after twice as long, and so on,
/// even if nothing woke it. Wake-ups can be lost: when requests arrive together, one request's
/// turn may run another's wait, and the timer that hands the wake-up over is then set in a
/// request that may finish before it fires (seen under load: every op of a burst waiting out
/// the whole lease, 10 s, with its result long delivered). A recheck bounds such a wait at about
/// a second. It is not shorter because a recheck's timer has the same flaw the other way round:
/// at 16 ms, under 300 concurrent clients, rechecks ran requests' continuations in other
/// requests and their I/O failed ("Cannot perform I/O on behalf of a different request"); at
/// 1 s, none did. The lost wake-up itself is not fixed.
const FIRST_RECHECK_MS: u64 = 1_000;

/// What one waiting op is handed, and how to wake its request.
#[derive(Default)]
struct Slot {
    outcome: RefCell<Option<Result<OpResult, ApiError>>>,
    /// An outcome was handed over (the waiter may have taken it since).
    delivered: Cell<bool>,
    /// Resolves the promise the op's request awaits now, if it awaits one.
    wake: RefCell<Option<js_sys::Function>>,
}

impl Slot {
    /// Hands over the op's outcome and wakes its request, unless it has one already: a call
    /// abandoned with its request may still report back later, and then changes nothing.
    fn deliver_first(&self, outcome: impl FnOnce() -> Result<OpResult, ApiError>) {
        if self.delivered.replace(true) {
            return;
        }
        *self.outcome.borrow_mut() = Some(outcome());
        self.wake();
    }

    /// Wakes the op's request (a no-op if it is not waiting, or is gone).
    fn wake(&self) {
        if let Some(resolve) = self.wake.borrow_mut().take() {
            // A resolver cannot fail; a gone request simply never sees the resolution.
            let _ = resolve.call0(&JsValue::UNDEFINED);
        }
    }

    /// A wait, made in the calling request, that [`Slot::wake`] ends.
    ///
    /// The resolution reaches the request through a timer of its own: the promise that
    /// [`Slot::wake`] resolves runs its reaction in the request that made it, and that reaction
    /// sets a zero-delay timer there, which ends the wait. Waking the Rust task straight from the
    /// reaction would not do: the tasks of every request share one queue, so several requests
    /// woken at once would all be run in whichever request's turn drains it, and their I/O
    /// (reading a body, building a response) would fail there as another request's.
    fn woken(&self) -> Wake {
        let woken = js_sys::Promise::new(&mut |resolve, _reject| {
            *self.wake.borrow_mut() = Some(resolve);
        });
        let mut hop = None;
        let own_turn = js_sys::Promise::new(&mut |resolve, _reject| {
            hop = Some(Closure::once(move |_: JsValue| {
                set_timeout(&resolve, 0);
            }));
        });
        let hop = hop.expect("the promise executor runs at once");
        let _ = woken.then(&hop);
        Wake { future: JsFuture::from(own_turn), _hop: hop }
    }
}

/// A wake-up in flight: the future, and the reaction that turns it into a timer of the
/// waiting request's own (kept alive as long as the wait).
struct Wake {
    future: JsFuture,
    _hop: Closure<dyn FnMut(JsValue)>,
}

impl std::future::Future for Wake {
    type Output = ();

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        std::pin::Pin::new(&mut self.future).poll(cx).map(|_| ())
    }
}

#[wasm_bindgen]
extern "C" {
    /// The runtime's `setTimeout`: its callback runs in the request that set it.
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, delay_ms: i32) -> JsValue;
}

/// Clears a slot's wake-up when its request stops waiting, also when the request is dropped
/// because its client hung up: nothing may then call into the wait it left.
struct Disarm<'a>(&'a Slot);

impl Drop for Disarm<'_> {
    fn drop(&mut self) {
        self.0.wake.borrow_mut().take();
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

/// What the coalescer needs of the request an op comes from: its context, to keep a shard call
/// it starts running after it has answered (`waitUntil`), and its cancellation: if its client
/// hangs up first, the runtime cancels the request and any call it started (even one kept with
/// `waitUntil`), so the call is abandoned at once rather than waited for.
pub struct Caller<'a> {
    ctx: &'a Context,
    cancellation: Cancellation,
}

impl<'a> Caller<'a> {
    #[must_use]
    pub fn new(ctx: &'a Context, cancellation: Cancellation) -> Self {
        Self { ctx, cancellation }
    }
}

/// Runs `op` on `shard`, in the next call to that shard if one is in flight.
///
/// # Errors
/// [`ApiError::ShardOverloaded`] when `config.shard_queue_limit` ops already wait for the shard
/// (nothing sent); [`ApiError::ShardUnavailable`] when the op was never sent or is a read;
/// [`ApiError::OutcomeUnknown`] for a write whose call failed, was cancelled or did not answer
/// in time, which may have been applied.
pub async fn submit(
    caller: &Caller<'_>,
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
    let mut recheck_ms = FIRST_RECHECK_MS;
    loop {
        start_next_call(caller, env, shard);
        if let Some(outcome) = slot.outcome.borrow_mut().take() {
            return outcome;
        }
        let now = now_ms();
        if now >= deadline {
            return Err(give_up(shard, ticket, &slot, is_write));
        }
        // Look again when woken, at the deadline, when the call in flight loses its lease, or
        // after a recheck interval that doubles on each wait (see [`FIRST_RECHECK_MS`]).
        let lease = COALESCER.with(|c| c.borrow().lease_ends_ms(shard)).unwrap_or(deadline);
        let wait_ms = deadline.min(lease.saturating_add(1)).saturating_sub(now).clamp(1, recheck_ms);
        recheck_ms = recheck_ms.saturating_mul(2);
        let _disarm = Disarm(&slot);
        let woken = slot.woken();
        let timer = Delay::from(Duration::from_millis(wait_ms));
        select(woken, timer).await;
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

/// A call in flight: its ops' slots, shared by the task that runs it and the abort handler of
/// the request that started it.
struct CallInFlight {
    shard: ShardId,
    id: CallId,
    /// Each op's slot, and whether the op is a write.
    slots: Vec<(Rc<Slot>, bool)>,
}

impl CallInFlight {
    /// The call is over, one way or the other: hands each op that has no outcome yet
    /// `outcome(is_write)`, in op order (the first outcome stands), frees the shard if this call
    /// still holds it, and wakes the ops still queued so that one of them starts the next call.
    fn end(&self, mut outcome: impl FnMut(bool) -> Result<OpResult, ApiError>, abandoned: bool) {
        for (slot, is_write) in &self.slots {
            slot.deliver_first(|| outcome(*is_write));
        }
        let queued: Vec<Rc<Slot>> = COALESCER.with(|c| {
            let mut coalescer = c.borrow_mut();
            if abandoned {
                coalescer.abandon(self.shard, self.id);
            } else {
                coalescer.finish(self.shard, self.id);
            }
            coalescer.waiting(self.shard).map(|w| Rc::clone(&w.slot)).collect()
        });
        for slot in queued {
            slot.wake();
        }
    }
}

/// Starts a call with every op queued for `shard`, if the shard is idle: a task of the caller's
/// request, which the call abandons if that request is cancelled.
fn start_next_call(caller: &Caller<'_>, env: &Env, shard: ShardId) {
    let Some(Started { call: id, ops }) =
        COALESCER.with(|c| c.borrow_mut().try_start(shard, now_ms(), CALL_LEASE_MS))
    else {
        return;
    };
    let (calls, slots): (Vec<ShardCall>, Vec<(Rc<Slot>, bool)>) = ops
        .into_iter()
        .map(|Waiter { call, slot }| {
            let is_write = call.op.is_write();
            (call, (slot, is_write))
        })
        .unzip();
    let in_flight = Rc::new(CallInFlight { shard, id, slots });
    {
        // Cancelled with its request, the call may or may not have reached the shard: the same
        // outcome as a call that failed after sending. Once the call has reported back this
        // changes nothing: every op has its outcome and the shard no longer holds the call.
        let in_flight = Rc::clone(&in_flight);
        caller.cancellation.on_cancel(move || {
            in_flight.end(|is_write| Err(ApiError::ShardUnavailable.after_send(is_write)), true);
        });
    }
    let env = env.clone();
    caller.ctx.wait_until(async move {
        let results = shard_client::execute(&env, shard, &calls, MAX_SHARD_ANSWER_BYTES).await;
        match results {
            Ok(results) => {
                let mut results = results.into_iter();
                in_flight.end(|_| results.next().ok_or(ApiError::ShardUnavailable), false);
            }
            Err(error) => in_flight.end(|is_write| Err(error.after_send(is_write)), false),
        }
    });
}
