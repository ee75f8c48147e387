//! Futures on the runtime: a request's Rust future turned into what the runtime takes, timers,
//! and a deadline. Every request and every Durable Object call runs on wasm-bindgen's executor,
//! which polls a task when a promise it waits on settles. No request waits on anything another
//! request resolves (each shard call is its own request's; in a shard, calls that wait for the
//! next group are promises the group's run resolves, not Rust tasks), so a task is only ever
//! woken from its own request's turns.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use futures_util::future::{select, Either};
use wasm_bindgen::prelude::{wasm_bindgen, Closure, JsValue};
use wasm_bindgen::JsCast;
use worker::{js_sys, wasm_bindgen_futures};

use crate::shared::state;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, ms: f64) -> JsValue;
    #[wasm_bindgen(js_name = clearTimeout)]
    fn clear_timeout(id: &JsValue);
}

/// Runs `future` for the runtime: its value when the first poll finishes it (most requests the
/// worker answers alone, and most shard calls, wait for nothing), else a promise of it.
///
/// The first poll has no task to wake, so the futures awaited here must register the waker of
/// each poll, not only the first's, as promises (`JsFuture`), channels and [`sleep`] do
/// (`worker::Delay` keeps its first poll's, and must not be used).
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
pub fn sleep(ms: u64) -> Sleep {
    Sleep { ms, timer: None, state: Rc::default() }
}

/// [`sleep`]'s future: one `setTimeout` on its first poll, which wakes the waker of the latest
/// poll, and cleared if the future is dropped first (a deadline that was not needed leaves no
/// timer behind).
pub struct Sleep {
    ms: u64,
    /// The runtime's timer and the function it calls, once set.
    timer: Option<(JsValue, Closure<dyn FnMut()>)>,
    state: Rc<SleepState>,
}

#[derive(Default)]
struct SleepState {
    fired: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.state.fired.get() {
            return Poll::Ready(());
        }
        *self.state.waker.borrow_mut() = Some(cx.waker().clone());
        if self.timer.is_none() {
            let state = Rc::clone(&self.state);
            let fire = Closure::new(move || {
                state.fired.set(true);
                if let Some(waker) = state.waker.borrow_mut().take() {
                    waker.wake();
                }
            });
            #[allow(clippy::cast_precision_loss)] // waits of seconds, far below 2^53 ms
            let id = set_timeout(fire.as_ref().unchecked_ref(), self.ms as f64);
            self.timer = Some((id, fire));
        }
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let Some((id, _)) = &self.timer {
            if !self.state.fired.get() {
                clear_timeout(id);
            }
        }
    }
}

/// `future`'s output if it comes within `ms` milliseconds, else `None` (the future is then
/// dropped; what it started in the runtime may still run).
pub async fn within<F: Future>(future: F, ms: u64) -> Option<F::Output> {
    match select(pin!(future), pin!(sleep(ms))).await {
        Either::Left((output, _)) => Some(output),
        Either::Right(((), _)) => None,
    }
}
