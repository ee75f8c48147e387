//! Runs each request's Rust future on an executor of its own, so that its code only ever runs
//! in its own request's context.
//!
//! The runtime ties every promise and timer to the request whose turn creates it, and a
//! request may only do I/O from its own turns. wasm-bindgen's executor keeps one task queue for
//! the whole isolate and runs every queued task in the turn of whichever request queued the
//! run first: a request woken by another (an op whose result another request's shard call
//! delivered) could be polled in that other request's turn, and then its timers and promises
//! belonged to that request, and were lost when it finished, and its I/O failed ("Cannot
//! perform I/O on behalf of a different request").
//!
//! Here a request's future is polled only from the reaction of a promise the request itself
//! created during its previous poll, and its waker resolves that promise. Woken from its own
//! turns (its own timers, the shard calls that are its own tasks), a request is polled in its
//! own context. Woken from another request's turn it is not reliably so: coalesced waiters
//! woken by the call another request ran failed, under 32 kept-alive clients, with "Cannot
//! perform I/O on behalf of a different request" (`tests/client-resets.spec.ts`). So nothing
//! wakes another request's task; [`crate::isolate::shard_calls`] says how its waiters look
//! instead.
//!
//! A future ready in its first poll (most requests answered by the worker alone) costs no
//! promise and no closure: [`run`] hands back its value itself.
//!
//! Timers work the same way: [`sleep`] and [`executor::wake_after`] have the runtime's `setTimeout`
//! resolve the promise that polls the task next, so a timer is one call into JavaScript, with no
//! closure to make. Timers are never cleared: one that fires after the task was polled for
//! another reason resolves a promise already resolved and polls nothing, and the runtime drops
//! a request's pending timers when the request ends. Such a timer polls the task's future from
//! the top, so it serves futures awaited directly on this executor's tasks, not ones inside a
//! combinator that polls only the children whose own waker fired (as `join_all` does past 30
//! futures): [`join_every`] polls every child each time, for futures that wait on timers.

pub mod executor;
#[cfg(test)]
pub(crate) mod fake;
pub mod js_turns;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use futures_util::future::{maybe_done, poll_fn, select, Either, MaybeDone};
use wasm_bindgen::prelude::{wasm_bindgen, Closure, JsValue};
use worker::js_sys;

use crate::isolate::clock::now_ms;
use crate::isolate::state;
use executor::{Executor, Sleep, Turns};
pub use js_turns::JsTurns;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, ms: f64) -> JsValue;
}

impl Turns for JsTurns {
    type Output = Result<JsValue, JsValue>;
    type Resolver = js_sys::Function;
    /// Polls the task; one closure for the task's life, passed to every `then`.
    type Hook = Closure<dyn FnMut(JsValue)>;
    type Settle = (js_sys::Function, js_sys::Function);

    fn with_executor<T>(f: impl FnOnce(&Executor<Self>) -> T) -> T {
        state::with(|s| f(&s.executor))
    }

    fn hook(id: u64) -> Self::Hook {
        // A poll that traps leaves the request unsettled; the runtime then fails it, as it
        // fails any request that can no longer answer.
        Closure::new(move |_| {
            executor::poll::<Self>(id);
        })
    }

    fn next_poll(hook: &Self::Hook) -> Self::Resolver {
        let mut poll_next = None;
        let next = js_sys::Promise::new(&mut |resolve, _reject| poll_next = Some(resolve));
        let _ = next.then(hook);
        poll_next.expect("the promise executor runs at once")
    }

    fn resolve(resolver: &Self::Resolver) {
        // Resolving cannot fail; a gone request never sees it.
        let _ = resolver.call0(&JsValue::UNDEFINED);
    }

    fn resolve_after(resolver: &Self::Resolver, ms: u64) {
        #[allow(clippy::cast_precision_loss)] // waits of seconds, far below 2^53 ms
        set_timeout(resolver, ms as f64);
    }

    fn settle((resolve, reject): Self::Settle, outcome: Self::Output) {
        let _ = match outcome {
            Ok(value) => resolve.call1(&JsValue::UNDEFINED, &value),
            Err(error) => reject.call1(&JsValue::UNDEFINED, &error),
        };
    }
}

/// Waits about `ms` milliseconds: until the task is next polled, which is after `ms` at the
/// latest (sooner if something else wakes it, so only for waits that look again anyway).
pub fn sleep(ms: u64) -> impl Future<Output = ()> {
    Sleep::<JsTurns>::new(ms)
}

/// `future`'s output if it comes within `ms` milliseconds, else `None` (the future is then
/// dropped; what it started in the runtime may still run).
pub async fn within<F: Future>(future: F, ms: u64) -> Option<F::Output> {
    within_on(future, ms, now_ms, sleep).await
}

/// [`within`] on any clock and sleep: [`sleep`] may end early, so the deadline is checked on
/// the clock each time the task wakes.
async fn within_on<F: Future, S: Future<Output = ()>>(
    future: F,
    ms: u64,
    now_ms: impl Fn() -> u64,
    sleep: impl Fn(u64) -> S,
) -> Option<F::Output> {
    let deadline = now_ms().saturating_add(ms);
    let mut future = std::pin::pin!(future);
    loop {
        let now = now_ms();
        if now >= deadline {
            return None;
        }
        match select(future.as_mut(), std::pin::pin!(sleep(deadline - now))).await {
            Either::Left((output, _)) => return Some(output),
            Either::Right(((), _)) => {}
        }
    }
}

/// Runs `futures` together and answers their outputs in order. Unlike `join_all`, which past 30
/// futures polls only those whose own waker fired, every unfinished one is polled whenever the
/// task is: the timers of [`sleep`] and [`within`] wake the task, not the future that set them.
pub async fn join_every<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let mut all: Vec<Pin<Box<MaybeDone<F>>>> = futures.into_iter().map(|f| Box::pin(maybe_done(f))).collect();
    poll_fn(|cx| {
        let mut pending = false;
        for future in &mut all {
            pending |= future.as_mut().poll(cx).is_pending();
        }
        if pending {
            return Poll::Pending;
        }
        // Every one is done, so each holds its output once.
        Poll::Ready(all.iter_mut().filter_map(|future| future.as_mut().take_output()).collect())
    })
    .await
}

/// Runs `future` as the current request's task: its first poll happens now, in the caller's
/// turn. Answers its outcome if that poll finished it (an error as a rejected promise), else a
/// promise of the outcome.
pub fn run(future: impl Future<Output = Result<JsValue, JsValue>> + 'static) -> JsValue {
    match executor::start::<JsTurns>(future) {
        (_, Some(Ok(value))) => value,
        (id, outcome) => promise_of(id, outcome).into(),
    }
}

/// [`run`] where a promise is needed whatever happens; also answers the task's number on
/// [`JsTurns`]' executor (for [`executor::abandon`]).
pub fn spawn_with_id(
    future: impl Future<Output = Result<JsValue, JsValue>> + 'static,
) -> (u64, js_sys::Promise) {
    let (id, outcome) = executor::start::<JsTurns>(future);
    (id, promise_of(id, outcome))
}

/// The promise of a task's outcome: settled already if its first poll finished it.
fn promise_of(id: u64, outcome: Option<Result<JsValue, JsValue>>) -> js_sys::Promise {
    match outcome {
        Some(Ok(value)) => return js_sys::Promise::resolve(&value),
        Some(Err(error)) => return js_sys::Promise::reject(&error),
        None => {}
    }
    let mut settle = None;
    let outcome = js_sys::Promise::new(&mut |resolve, reject| settle = Some((resolve, reject)));
    if let Some(settle) = settle {
        executor::await_outcome::<JsTurns>(id, settle);
    }
    outcome
}

/// Tasks on this isolate's executor now: requests being served and shard calls in flight. It
/// returns to zero when the isolate is idle, whatever clients did (`/v1/stats` shows it).
#[must_use]
pub fn in_flight() -> usize {
    executor::in_flight::<JsTurns>()
}
