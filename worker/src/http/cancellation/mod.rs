//! What happens when a client hangs up. The runtime then cancels its request: the request's
//! Rust future is never polled again, and, left alone, never dropped either, so everything it
//! holds (its request, its waits, its share of the JS heap) would stay in the isolate for good,
//! a few kilobytes per hang-up. So each request runs under [`serve_cancellable`], which listens
//! to the request's abort signal (`request.signal`, the `enable_request_signal` compatibility
//! flag) and on abort drops the request's future.
//! A request answered in its first poll (health, a hot read from this isolate's cache) never
//! waits, so it never listens: the listener is added only once the request is pending, in one
//! call into JavaScript; the listeners of all requests call one function of the isolate with the
//! request's number, and a request that has finished is no longer listed, so a late abort
//! changes nothing. Whatever the request started with `waitUntil` (a one-way flush) is its own
//! task, and goes on or is cancelled by the runtime as it decides.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context as TaskContext, Poll, Waker};

use wasm_bindgen::prelude::{wasm_bindgen, Closure, JsValue};
use worker::worker_sys::web_sys;

use crate::http::message::Response;
use crate::http::respond;
use crate::shared::state;

type Serving = Pin<Box<dyn Future<Output = Response>>>;

#[derive(Default)]
struct State {
    cancelled: bool,
    /// The request's future, until it finishes or is cancelled.
    serving: Option<Serving>,
    waker: Option<Waker>,
}

/// A request's cancellation: its future, dropped if its client hangs up.
#[derive(Clone, Default)]
pub struct Cancellation {
    state: Rc<RefCell<State>>,
}

impl Cancellation {
    fn cancel(&self) {
        let (serving, waker) = {
            let mut state = self.state.borrow_mut();
            state.cancelled = true;
            (state.serving.take(), state.waker.take())
        };
        // Dropped outside the borrow: dropping a future runs its drops, which may look here.
        drop(serving);
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

#[wasm_bindgen(inline_js = "
export function listenForAbort(request, number, onAbort) {
  const signal = request.signal;
  if (signal.aborted) return true;
  signal.addEventListener('abort', () => onAbort(number), { once: true });
  return false;
}
")]
extern "C" {
    /// Calls `on_abort(number)` when `request`'s client hangs up; `true` if it already has.
    #[wasm_bindgen(js_name = listenForAbort)]
    fn listen_for_abort(request: &web_sys::Request, number: f64, on_abort: &JsValue) -> bool;
}

thread_local! {
    /// What every request's abort listener calls, made once per isolate: it runs what the
    /// isolate's state lists for the request's number (`shared::state`'s `waiting_requests`).
    static ON_ABORT: Closure<dyn Fn(f64)> = Closure::new(|number: f64| {
        // Numbers count up from zero, far below 2^53.
        let waiting = state::with(|s| s.waiting_requests.borrow_mut().remove(&(number as u64)));
        if let Some(cancel) = waiting {
            cancel();
        }
    });
}

/// Serves a request with `serve`, dropping its future at once if its client hangs up (the
/// runtime aborts `request`'s signal then).
pub async fn serve_cancellable<F>(request: web_sys::Request, serve: F) -> Response
where
    F: Future<Output = Response> + 'static,
{
    serve_until_cancelled(serve, move |cancellation: &Cancellation| Listening::start(&request, cancellation))
        .await
}

/// [`serve_cancellable`] with its listening apart: `listen` is called once, when the request
/// first waits, and what it answers stops listening when dropped (when the request ends,
/// either way).
async fn serve_until_cancelled<F, G>(serve: F, listen: impl FnOnce(&Cancellation) -> G) -> Response
where
    F: Future<Output = Response> + 'static,
{
    let cancellation = Cancellation::default();
    cancellation.state.borrow_mut().serving = Some(Box::pin(serve));
    Serve { cancellation: &cancellation, listen: Some(listen), listening: None }.await
}

/// Polls the request's future while it is there.
struct Serve<'a, L, G> {
    cancellation: &'a Cancellation,
    /// Until the request first waits.
    listen: Option<L>,
    /// From then on.
    listening: Option<G>,
}

/// A waiting request, listed for its abort listener until dropped.
struct Listening {
    number: u64,
}

impl Listening {
    fn start(request: &web_sys::Request, cancellation: &Cancellation) -> Self {
        let number = state::with(|s| s.next_request_number.replace(s.next_request_number.get() + 1));
        let on_abort = cancellation.clone();
        state::with(|s| s.waiting_requests.borrow_mut().insert(number, Box::new(move || on_abort.cancel())));
        #[allow(clippy::cast_precision_loss)] // far below 2^53
        let already_gone =
            ON_ABORT.with(|on_abort| listen_for_abort(request, number as f64, on_abort.as_ref()));
        if already_gone {
            state::with(|s| s.waiting_requests.borrow_mut().remove(&number));
            cancellation.cancel();
        }
        Self { number }
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        state::with(|s| s.waiting_requests.borrow_mut().remove(&self.number));
    }
}

fn went_away() -> Response {
    respond::text(499, "the client went away".to_owned())
}

// The listener is only ever held, never pinned: the future is `Unpin` whatever it is.
impl<L, G> Unpin for Serve<'_, L, G> {}

impl<L: FnOnce(&Cancellation) -> G, G> Future for Serve<'_, L, G> {
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
                if let Some(listen) = self.listen.take() {
                    // The first wait: from now on a hang-up matters.
                    self.listening = Some(listen(self.cancellation));
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

#[cfg(test)]
mod tests;
