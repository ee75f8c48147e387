//! Cancellation without the runtime: the tests poll the served future by hand, stand in for
//! the abort listener, and cancel when they choose.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::{serve_until_cancelled, went_away, Cancellation};
use crate::http::message::Response;

/// Counts its wakes.
#[derive(Default)]
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// What the stand-in listener saw: how often it was started, whether it was stopped, and the
/// request's cancellation (to cancel it as an abort would).
#[derive(Default)]
struct Listener {
    started: Cell<u32>,
    stopped: Rc<Cell<bool>>,
    cancellation: RefCell<Option<Cancellation>>,
}

/// Stops listening when dropped.
struct Listening(Rc<Cell<bool>>);

impl Drop for Listening {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

impl Listener {
    fn listen(self: &Rc<Self>) -> impl FnOnce(&Cancellation) -> Listening {
        let listener = Rc::clone(self);
        move |cancellation: &Cancellation| {
            listener.started.set(listener.started.get() + 1);
            *listener.cancellation.borrow_mut() = Some(cancellation.clone());
            Listening(Rc::clone(&listener.stopped))
        }
    }

    /// What the abort listener does when the client hangs up.
    fn abort(&self) {
        let cancellation = self.cancellation.borrow().clone();
        cancellation.expect("listening").cancel();
    }
}

/// Sets its flag when dropped.
struct DropFlag(Rc<Cell<bool>>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.set(true);
    }
}

fn ok() -> Response {
    Response::empty(204)
}

/// A request that waits until `open` is set, holding `flag` until it is dropped.
fn waiting_request(open: Rc<Cell<bool>>, flag: DropFlag) -> impl Future<Output = Response> + 'static {
    std::future::poll_fn(move |_| {
        let _held = &flag;
        if open.get() {
            Poll::Ready(ok())
        } else {
            Poll::Pending
        }
    })
}

#[test]
fn a_request_answered_at_once_never_listens() {
    let listener = Rc::new(Listener::default());
    let served = pin!(serve_until_cancelled(async { ok() }, listener.listen()));
    let waker = Waker::from(Arc::new(CountingWaker::default()));
    assert_eq!(served.poll(&mut Context::from_waker(&waker)), Poll::Ready(ok()));
    assert_eq!(listener.started.get(), 0);
}

#[test]
fn a_waiting_request_listens_once_and_stops_when_it_is_answered() {
    let listener = Rc::new(Listener::default());
    let (open, dropped) = (Rc::new(Cell::new(false)), Rc::new(Cell::new(false)));
    let request = waiting_request(Rc::clone(&open), DropFlag(Rc::clone(&dropped)));
    let mut served = Box::pin(serve_until_cancelled(request, listener.listen()));
    let waker = Waker::from(Arc::new(CountingWaker::default()));
    let mut cx = Context::from_waker(&waker);
    assert!(served.as_mut().poll(&mut cx).is_pending());
    assert!(served.as_mut().poll(&mut cx).is_pending());
    assert_eq!(listener.started.get(), 1);
    open.set(true);
    assert_eq!(served.as_mut().poll(&mut cx), Poll::Ready(ok()));
    assert!(dropped.get(), "the answered request's future is dropped with its answer");
    assert!(listener.stopped.get(), "and it no longer listens for a hang-up");
}

#[test]
fn a_hang_up_drops_the_request_and_wakes_its_task() {
    let listener = Rc::new(Listener::default());
    let (open, dropped) = (Rc::new(Cell::new(false)), Rc::new(Cell::new(false)));
    let request = waiting_request(open, DropFlag(Rc::clone(&dropped)));
    let mut served = pin!(serve_until_cancelled(request, listener.listen()));
    let counting = Arc::new(CountingWaker::default());
    let waker = Waker::from(Arc::clone(&counting));
    let mut cx = Context::from_waker(&waker);
    assert!(served.as_mut().poll(&mut cx).is_pending());
    listener.abort();
    // The request's future is gone at once, before its task is polled again.
    assert!(dropped.get());
    assert_eq!(counting.0.load(Ordering::SeqCst), 1);
    assert_eq!(served.as_mut().poll(&mut cx), Poll::Ready(went_away()));
}

#[test]
fn a_client_gone_before_the_first_wait_ends_the_request_in_that_poll() {
    // The listener finds the signal already aborted and cancels at once, as `listenForAbort`
    // answering `true` does.
    let dropped = Rc::new(Cell::new(false));
    let request = waiting_request(Rc::new(Cell::new(false)), DropFlag(Rc::clone(&dropped)));
    let served = pin!(serve_until_cancelled(request, |cancellation: &Cancellation| {
        cancellation.cancel();
        Listening(Rc::new(Cell::new(false)))
    }));
    let waker = Waker::from(Arc::new(CountingWaker::default()));
    assert_eq!(served.poll(&mut Context::from_waker(&waker)), Poll::Ready(went_away()));
    assert!(dropped.get());
}
