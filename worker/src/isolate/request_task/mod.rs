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
//! created during its previous poll. Its waker resolves that promise: from the request's own
//! turn the reaction runs in that turn; from another request's turn the runtime runs the
//! reaction in the request that made the promise (its cross-request promise resolution), or
//! drops it if that request is gone. Either way the poll happens in the right place, and a
//! wake-up from anywhere is never lost while the request lives.
//!
//! A future ready in its first poll (most requests answered by the worker alone) costs no
//! promise and no closure: [`run`] hands back its value itself.
//!
//! Timers work the same way: [`sleep`] and [`wake_after`] have the runtime's `setTimeout`
//! resolve the promise that polls the task next, so a timer is one call into JavaScript, with no
//! closure to make. Timers are never cleared: one that fires after the task was polled for
//! another reason resolves a promise already resolved and polls nothing, and the runtime drops
//! a request's pending timers when the request ends. Such a timer polls the task's future from
//! the top, so it serves futures awaited directly on this executor's tasks, not ones inside a
//! combinator that polls only the children whose own waker fired (as `join_all` does past 30
//! futures): [`join_every`] polls every child each time, for futures that wait on timers.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::future::{maybe_done, poll_fn, select, Either, MaybeDone};
use wasm_bindgen::prelude::{wasm_bindgen, Closure, JsValue};
use worker::js_sys;

use crate::isolate::clock::now_ms;

type Body = Pin<Box<dyn Future<Output = Result<JsValue, JsValue>>>>;

/// One request's future and what it needs to be polled again.
struct Task {
    /// `None` while the future is being polled.
    future: Option<Body>,
    /// Resolve and reject the promise of the task's outcome, once someone holds that promise
    /// (not during the first poll).
    settle: Option<(js_sys::Function, js_sys::Function)>,
    /// Resolves the promise whose reaction polls the future next, once armed.
    poll_next: Option<js_sys::Function>,
    /// Woken while being polled: poll again at once.
    woken_in_poll: bool,
    /// Polls the future; one closure for the task's life, passed to every `then`, made when the
    /// task first waits.
    on_poll: Option<Closure<dyn FnMut(JsValue)>>,
    /// Asked for during the current poll: poll again after this many ms at the latest.
    wake_after_ms: Option<u64>,
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = setTimeout)]
    fn set_timeout(handler: &js_sys::Function, ms: f64) -> JsValue;
}

thread_local! {
    static TASKS: RefCell<HashMap<u64, Task>> = RefCell::new(HashMap::new());
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
    /// The task being polled. A task may start another inside its poll, so each poll puts back
    /// what it found.
    static POLLING: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Has the task being polled polled again within `ms` milliseconds, whatever else wakes it.
/// Only for code polled by this executor (see the module's documentation).
pub fn wake_after(ms: u64) {
    let polling = POLLING.with(Cell::get);
    debug_assert!(polling.is_some(), "wake_after outside a task of this executor");
    let Some(id) = polling else { return };
    TASKS.with(|tasks| {
        if let Some(task) = tasks.borrow_mut().get_mut(&id) {
            task.wake_after_ms = Some(task.wake_after_ms.map_or(ms, |earlier| earlier.min(ms)));
        }
    });
}

/// Waits about `ms` milliseconds: until the task is next polled, which is after `ms` at the
/// latest (sooner if something else wakes it, so only for waits that look again anyway).
pub fn sleep(ms: u64) -> Sleep {
    Sleep { ms, armed: false }
}

/// `future`'s output if it comes within `ms` milliseconds, else `None` (the future is then
/// dropped; what it started in the runtime may still run). [`sleep`] may end early, so the
/// deadline is checked on the clock each time the task wakes.
pub async fn within<F: Future>(future: F, ms: u64) -> Option<F::Output> {
    let deadline = now_ms().saturating_add(ms);
    let mut future = std::pin::pin!(future);
    loop {
        let now = now_ms();
        if now >= deadline {
            return None;
        }
        match select(future.as_mut(), sleep(deadline - now)).await {
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

/// See [`sleep`].
pub struct Sleep {
    ms: u64,
    armed: bool,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.armed {
            return Poll::Ready(());
        }
        self.armed = true;
        wake_after(self.ms);
        Poll::Pending
    }
}

/// Wakes a task by its id: the waker holds no JS value, so it is `Send` as a `Waker` must be.
struct TaskWaker(u64);

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        wake(self.0);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        wake(self.0);
    }
}

/// A task on this executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskId(u64);

/// Runs `future` as the current request's task: its first poll happens now, in the caller's
/// turn. Answers its outcome if that poll finished it (an error as a rejected promise), else a
/// promise of the outcome.
pub fn run(future: impl Future<Output = Result<JsValue, JsValue>> + 'static) -> JsValue {
    match start(future) {
        (_, Some(Ok(value))) => value,
        (id, outcome) => promise_of(id, outcome).into(),
    }
}

/// [`run`] where a promise is needed whatever happens; also answers the task's id, for
/// [`abandon`].
pub fn spawn_with_id(
    future: impl Future<Output = Result<JsValue, JsValue>> + 'static,
) -> (TaskId, js_sys::Promise) {
    let (id, outcome) = start(future);
    (TaskId(id), promise_of(id, outcome))
}

/// Makes the task and polls it once; answers its outcome if that poll finished it.
fn start(
    future: impl Future<Output = Result<JsValue, JsValue>> + 'static,
) -> (u64, Option<Result<JsValue, JsValue>>) {
    let id = NEXT_ID.with(|next| next.replace(next.get() + 1));
    let task = Task {
        future: Some(Box::pin(future)),
        settle: None,
        poll_next: None,
        woken_in_poll: false,
        on_poll: None,
        wake_after_ms: None,
    };
    TASKS.with(|tasks| tasks.borrow_mut().insert(id, task));
    (id, poll(id))
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
    TASKS.with(|tasks| {
        if let Some(task) = tasks.borrow_mut().get_mut(&id) {
            task.settle = settle;
        }
    });
    outcome
}

/// Drops a task that will never be woken: one whose request the runtime cancelled while it
/// awaited I/O of that request, which then never completes. Its promise stays unsettled.
pub fn abandon(task: TaskId) {
    let removed = TASKS.with(|tasks| tasks.borrow_mut().remove(&task.0));
    // Dropped outside the borrow: dropping a future may run code that spawns.
    drop(removed);
}

/// Tasks on this isolate's executor now: requests being served and shard calls in flight. It
/// returns to zero when the isolate is idle, whatever clients did (`/v1/stats` shows it).
#[must_use]
pub fn in_flight() -> usize {
    TASKS.with(|tasks| tasks.borrow().len())
}

fn wake(id: u64) {
    let poll_next = TASKS.with(|tasks| {
        let mut tasks = tasks.borrow_mut();
        let task = tasks.get_mut(&id)?;
        if task.future.is_none() {
            task.woken_in_poll = true;
        }
        task.poll_next.take()
    });
    if let Some(resolve) = poll_next {
        // Resolving cannot fail; a gone request never sees it.
        let _ = resolve.call0(&JsValue::UNDEFINED);
    }
}

/// Polls a task; answers its outcome if it finished before anyone held its promise.
fn poll(id: u64) -> Option<Result<JsValue, JsValue>> {
    let mut future = TASKS.with(|tasks| {
        let mut tasks = tasks.borrow_mut();
        let task = tasks.get_mut(&id)?;
        task.woken_in_poll = false;
        task.future.take()
    })?;
    let waker = Waker::from(Arc::new(TaskWaker(id)));
    let outer = POLLING.with(|polling| polling.replace(Some(id)));
    let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
    POLLING.with(|polling| polling.set(outer));
    match polled {
        Poll::Ready(outcome) => {
            let task = TASKS.with(|tasks| tasks.borrow_mut().remove(&id))?;
            // Dropped before settling: the future's own drop code runs here, in this turn.
            drop(future);
            let Some((resolve, reject)) = task.settle else { return Some(outcome) };
            let _ = match outcome {
                Ok(value) => resolve.call1(&JsValue::UNDEFINED, &value),
                Err(error) => reject.call1(&JsValue::UNDEFINED, &error),
            };
            None
        }
        Poll::Pending => {
            arm(id, future);
            None
        }
    }
}

/// Puts the future back and makes the promise whose resolution polls it next, in this turn,
/// so that the poll belongs to this request whoever wakes it.
fn arm(id: u64, future: Body) {
    let mut poll_next = None;
    let next = js_sys::Promise::new(&mut |resolve, _reject| poll_next = Some(resolve));
    let poll_next = poll_next.expect("the promise executor runs at once");
    let woken = TASKS.with(|tasks| {
        let mut tasks = tasks.borrow_mut();
        let task = tasks.get_mut(&id)?;
        task.future = Some(future);
        // A poll that traps leaves the request unsettled; the runtime then fails it, as it
        // fails any request that can no longer answer.
        let on_poll = task.on_poll.get_or_insert_with(|| {
            Closure::new(move |_| {
                poll(id);
            })
        });
        let _ = next.then(on_poll);
        let timer = task.wake_after_ms.take().map(|ms| (poll_next.clone(), ms));
        task.poll_next = Some(poll_next);
        Some((task.woken_in_poll, timer))
    });
    let Some((woken, timer)) = woken else { return };
    if let Some((resolve, ms)) = timer {
        #[allow(clippy::cast_precision_loss)] // waits of seconds, far below 2^53 ms
        set_timeout(&resolve, ms as f64);
    }
    if woken {
        wake(id);
    }
}
