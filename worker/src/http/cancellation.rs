//! What happens when a client hangs up. The runtime then cancels its request: the request's
//! Rust future is never polled again, and, left alone, never dropped either, so everything it
//! holds (its request, its waits, its share of the JS heap) would stay in the isolate for good,
//! a few kilobytes per hang-up. So each request runs under [`serve_cancellable`], which listens
//! to the request's abort signal (`request.signal`, the `enable_request_signal` compatibility
//! flag) and on abort first runs what the request registered with [`Cancellation::on_cancel`]
//! (a shard call it carried is abandoned, see `isolate::shard_calls`), then drops the request's future.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context as TaskContext, Poll, Waker};

use wasm_bindgen::prelude::Closure;
use wasm_bindgen::JsCast;
use worker::web_sys::AbortSignal;
use worker::{Response, Result};

type Handler = Box<dyn FnOnce()>;
type Serving = Pin<Box<dyn Future<Output = Result<Response>>>>;

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

/// Serves a request with `serve`, dropping its future at once if its client hangs up.
///
/// # Errors
/// Whatever `serve` answers; a cancelled request's answer is never delivered.
pub async fn serve_cancellable<F>(
    signal: AbortSignal,
    serve: impl FnOnce(Cancellation) -> F,
) -> Result<Response>
where
    F: Future<Output = Result<Response>> + 'static,
{
    let cancellation = Cancellation::default();
    cancellation.state.borrow_mut().serving = Some(Box::pin(serve(cancellation.clone())));
    let listener = {
        let cancellation = cancellation.clone();
        Closure::<dyn FnMut()>::new(move || cancellation.cancel())
    };
    // The signal is the runtime's own; adding a listener to it does not fail.
    let _ = signal.add_event_listener_with_callback("abort", listener.as_ref().unchecked_ref());
    let answer = Serve { cancellation: &cancellation }.await;
    let _ = signal.remove_event_listener_with_callback("abort", listener.as_ref().unchecked_ref());
    answer
}

/// Polls the request's future while it is there.
struct Serve<'a> {
    cancellation: &'a Cancellation,
}

impl Future for Serve<'_> {
    type Output = Result<Response>;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<Self::Output> {
        // Taken out while polled, so that nothing polled can reach it through the state.
        let serving = self.cancellation.state.borrow_mut().serving.take();
        let Some(mut serving) = serving else {
            return Poll::Ready(Response::error("the client went away", 499));
        };
        match serving.as_mut().poll(cx) {
            Poll::Ready(answer) => Poll::Ready(answer),
            Poll::Pending => {
                let mut state = self.cancellation.state.borrow_mut();
                if state.cancelled {
                    // Cancelled while being polled: drop it now.
                    drop(state);
                    drop(serving);
                    return Poll::Ready(Response::error("the client went away", 499));
                }
                state.serving = Some(serving);
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
