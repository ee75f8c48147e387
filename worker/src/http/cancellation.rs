//! What happens when a client hangs up. The runtime then cancels its request: the request's
//! Rust future is never polled again, and, left alone, never dropped either, so everything it
//! holds (its request, its waits, its share of the JS heap) would stay in the isolate for good,
//! a few kilobytes per hang-up. So each request runs under [`serve_cancellable`], which listens
//! to the request's abort signal (`request.signal`, the `enable_request_signal` compatibility
//! flag) and on abort first runs what the request registered with [`Cancellation::on_cancel`]
//! (a shard call it carried is abandoned, see `isolate::shard_calls`), then drops the request's future.
//! A request answered in its first poll (health, a hot read from this isolate's cache) never
//! waits, so it never listens: the listener is added only once the request is pending.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context as TaskContext, Poll, Waker};

use wasm_bindgen::prelude::Closure;
use wasm_bindgen::JsCast;
use worker::web_sys::AbortSignal;

use crate::http::message::Response;
use crate::http::respond;

type Handler = Box<dyn FnOnce()>;
type Serving = Pin<Box<dyn Future<Output = Response>>>;

#[derive(Default)]
struct State {
    handlers: Vec<Handler>,
    cancelled: bool,
    /// The request's future, until it finishes or is cancelled.
    serving: Option<Serving>,
    waker: Option<Waker>,
}

/// A request's cancellation: what to do if its client hangs up.
#[derive(Clone, Default)]
pub struct Cancellation {
    state: Rc<RefCell<State>>,
}

impl Cancellation {
    /// Runs `handler` if the request is cancelled before it finishes.
    pub fn on_cancel(&self, handler: impl FnOnce() + 'static) {
        let mut state = self.state.borrow_mut();
        if !state.cancelled {
            state.handlers.push(Box::new(handler));
        }
    }

    fn cancel(&self) {
        let (handlers, serving, waker) = {
            let mut state = self.state.borrow_mut();
            state.cancelled = true;
            (std::mem::take(&mut state.handlers), state.serving.take(), state.waker.take())
        };
        for handler in handlers {
            handler();
        }
        // Dropped outside the borrow: dropping a future may run code that registers handlers.
        drop(serving);
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// Serves a request with `serve`, dropping its future at once if its client hangs up. `signal`
/// gives the request's abort signal, asked for only if the request has to wait.
pub async fn serve_cancellable<F>(
    signal: impl FnOnce() -> AbortSignal + 'static,
    serve: impl FnOnce(Cancellation) -> F,
) -> Response
where
    F: Future<Output = Response> + 'static,
{
    let cancellation = Cancellation::default();
    cancellation.state.borrow_mut().serving = Some(Box::pin(serve(cancellation.clone())));
    Serve { cancellation: &cancellation, signal: Some(Box::new(signal)), listener: None }.await
}

/// Polls the request's future while it is there.
struct Serve<'a> {
    cancellation: &'a Cancellation,
    /// Until the request first waits.
    signal: Option<Box<dyn FnOnce() -> AbortSignal>>,
    /// From then on; removed from the signal when the request ends either way.
    listener: Option<AbortListener>,
}

/// A listener on a request's abort signal, removed when dropped.
struct AbortListener {
    signal: AbortSignal,
    listener: Closure<dyn FnMut()>,
}

impl AbortListener {
    fn listen(signal: AbortSignal, cancellation: &Cancellation) -> Self {
        let listener = {
            let cancellation = cancellation.clone();
            Closure::<dyn FnMut()>::new(move || cancellation.cancel())
        };
        // The signal is the runtime's own; adding a listener to it does not fail.
        let _ = signal.add_event_listener_with_callback("abort", listener.as_ref().unchecked_ref());
        if signal.aborted() {
            // Gone before it was listened to.
            cancellation.cancel();
        }
        Self { signal, listener }
    }
}

impl Drop for AbortListener {
    fn drop(&mut self) {
        let _ =
            self.signal.remove_event_listener_with_callback("abort", self.listener.as_ref().unchecked_ref());
    }
}

fn went_away() -> Response {
    respond::text(499, "the client went away".to_owned())
}

impl Future for Serve<'_> {
    type Output = Response;

    fn poll(mut self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        // Taken out while polled, so that nothing polled can reach it through the state.
        let serving = self.cancellation.state.borrow_mut().serving.take();
        let Some(mut serving) = serving else {
            return Poll::Ready(went_away());
        };
        match serving.as_mut().poll(cx) {
            Poll::Ready(answer) => Poll::Ready(answer),
            Poll::Pending => {
                if let Some(signal) = self.signal.take() {
                    // The first wait: from now on a hang-up matters.
                    self.listener = Some(AbortListener::listen(signal(), self.cancellation));
                }
                let mut state = self.cancellation.state.borrow_mut();
                if state.cancelled {
                    // Cancelled while being polled: drop it now.
                    drop(state);
                    drop(serving);
                    return Poll::Ready(went_away());
                }
                state.serving = Some(serving);
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
