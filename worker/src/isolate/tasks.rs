//! Futures on the runtime: a request's Rust future turned into what the runtime takes, timers,
//! and a deadline. Every request and every Durable Object call runs on wasm-bindgen's executor,
//! which polls a task when a promise it waits on settles. No request waits on anything another
//! request resolves (each shard call is its own request's; in a shard, calls that wait for the
//! next group are promises the group's run resolves, not Rust tasks), so a task is only ever
//! woken from its own request's turns.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll};

use futures_util::future::{select, Either};
use wasm_bindgen::prelude::{wasm_bindgen, JsValue};
use worker::{js_sys, wasm_bindgen_futures};

use crate::isolate::state;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, ms: f64) -> JsValue;
}

/// Runs `future` for the runtime: its value when the first poll finishes it (most requests the
/// worker answers alone, and most shard calls, wait for nothing), else a promise of it.
///
/// The first poll has no task to wake, so the futures awaited here must register the waker of
/// each poll, not only the first's, as promises (`JsFuture`), channels and [`sleep`] do.
pub fn run(future: impl Future<Output = Result<JsValue, JsValue>> + 'static) -> JsValue {
    let mut future = Box::pin(future);
    match future.as_mut().poll(&mut Context::from_waker(std::task::Waker::noop())) {
        Poll::Ready(Ok(value)) => value,
        Poll::Ready(Err(error)) => js_sys::Promise::reject(&error).into(),
        Poll::Pending => wasm_bindgen_futures::future_to_promise(future).into(),
    }
}

/// Runs `future` to its end as a task of its own, answering the promise of its end (for
/// `waitUntil`); counted in [`in_flight`] meanwhile.
pub fn spawn(future: impl Future<Output = ()> + 'static) -> js_sys::Promise {
    wasm_bindgen_futures::future_to_promise(counted(async move {
        future.await;
        Ok(JsValue::UNDEFINED)
    }))
}

/// `future`, counted in [`in_flight`] until it ends or is dropped.
pub async fn counted<F: Future>(future: F) -> F::Output {
    let _counted = InFlight::begin();
    future.await
}

/// Requests being served and background tasks running on this isolate now (`/v1/stats`): it
/// returns to zero when the isolate is idle, whatever clients did, as a request whose client
/// hung up is dropped (`http::cancellation`).
#[must_use]
pub fn in_flight() -> usize {
    state::with(|s| s.tasks_in_flight.get())
}

/// One task counted in [`in_flight`].
struct InFlight;

impl InFlight {
    fn begin() -> Self {
        state::with(|s| s.tasks_in_flight.set(s.tasks_in_flight.get() + 1));
        Self
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        state::with(|s| s.tasks_in_flight.set(s.tasks_in_flight.get().saturating_sub(1)));
    }
}

/// Waits `ms` milliseconds.
pub async fn sleep(ms: u64) {
    let timer = js_sys::Promise::new(&mut |resolve, _| {
        #[allow(clippy::cast_precision_loss)] // waits of seconds, far below 2^53 ms
        set_timeout(&resolve, ms as f64);
    });
    // A timer's promise only resolves.
    let _ = wasm_bindgen_futures::JsFuture::from(timer).await;
}

/// `future`'s output if it comes within `ms` milliseconds, else `None` (the future is then
/// dropped; what it started in the runtime may still run).
pub async fn within<F: Future>(future: F, ms: u64) -> Option<F::Output> {
    match select(pin!(future), pin!(sleep(ms))).await {
        Either::Left((output, _)) => Some(output),
        Either::Right(((), _)) => None,
    }
}
