//! The executor's bookkeeping, apart from the runtime it runs on: each task's future, the
//! promise whose resolution polls it next, and its timers. What it needs of the runtime is the
//! small [`Turns`] trait: the worker's implementation is JavaScript's promises and `setTimeout`
//! (see the parent module), the tests' a fake with a hand-turned clock and reaction queue.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// What the executor needs of the runtime.
pub trait Turns: Sized + 'static {
    /// What a task's future finishes with.
    type Output;
    /// Resolves the one promise whose reaction polls a task next.
    type Resolver: Clone;
    /// What a task keeps to make each of those promises (made once, when it first waits).
    type Hook;
    /// Settles the promise of a task's outcome.
    type Settle;

    /// This thread's executor on this runtime.
    fn with_executor<T>(f: impl FnOnce(&Executor<Self>) -> T) -> T;
    /// What makes the promises that poll task `id`. Called inside the executor's borrow: it
    /// must not call back into the executor.
    fn hook(id: u64) -> Self::Hook;
    /// A new promise, made in the current turn (the polled task's request's), whose resolution
    /// polls the task `hook` is for. Resolved from that request's own turns, the poll runs in
    /// its context; from another request's, not reliably (see the parent module). Called
    /// inside the executor's borrow: it must not call back into the executor.
    fn next_poll(hook: &Self::Hook) -> Self::Resolver;
    /// Resolves it: the poll follows later, never inside this call. Resolving twice does nothing.
    fn resolve(resolver: &Self::Resolver);
    /// Resolves it after `ms` milliseconds.
    fn resolve_after(resolver: &Self::Resolver, ms: u64);
    /// Hands a task's outcome to whoever holds its promise.
    fn settle(settle: Self::Settle, outcome: Self::Output);
}

type Body<R> = Pin<Box<dyn Future<Output = <R as Turns>::Output>>>;

/// One task: its future and what it needs to be polled again.
struct Task<R: Turns> {
    /// `None` while the future is being polled.
    future: Option<Body<R>>,
    /// Settles the promise of the task's outcome, once someone holds that promise (not during
    /// the first poll).
    settle: Option<R::Settle>,
    /// Resolves the promise whose reaction polls the future next, once armed.
    poll_next: Option<R::Resolver>,
    /// Woken while being polled: poll again at once.
    woken_in_poll: bool,
    /// Makes the promises that poll the task, once it first waits.
    hook: Option<R::Hook>,
    /// Asked for during the current poll: poll again after this many ms at the latest.
    wake_after_ms: Option<u64>,
}

/// The tasks of one runtime on this thread.
pub struct Executor<R: Turns> {
    tasks: RefCell<HashMap<u64, Task<R>>>,
    next_id: Cell<u64>,
    /// The task being polled. A task may start another inside its poll, so each poll puts back
    /// what it found.
    polling: Cell<Option<u64>>,
}

impl<R: Turns> Default for Executor<R> {
    fn default() -> Self {
        Self { tasks: RefCell::new(HashMap::new()), next_id: Cell::new(0), polling: Cell::new(None) }
    }
}

/// Makes a task of `future` and polls it once; answers its id, and its outcome if that poll
/// finished it.
pub fn start<R: Turns>(future: impl Future<Output = R::Output> + 'static) -> (u64, Option<R::Output>) {
    let id = R::with_executor(|executor| {
        let id = executor.next_id.get();
        executor.next_id.set(id + 1);
        let task = Task {
            future: Some(Box::pin(future)),
            settle: None,
            poll_next: None,
            woken_in_poll: false,
            hook: None,
            wake_after_ms: None,
        };
        executor.tasks.borrow_mut().insert(id, task);
        id
    });
    (id, poll::<R>(id))
}

/// Gives task `id` what settles its outcome, once someone holds its promise. A task already
/// gone (abandoned) is never settled.
pub fn await_outcome<R: Turns>(id: u64, settle: R::Settle) {
    R::with_executor(|executor| {
        if let Some(task) = executor.tasks.borrow_mut().get_mut(&id) {
            task.settle = Some(settle);
        }
    });
}

/// Drops task `id` without polling it again; its outcome is never settled.
pub fn abandon<R: Turns>(id: u64) {
    let removed = R::with_executor(|executor| executor.tasks.borrow_mut().remove(&id));
    // Dropped outside the borrow: dropping a future may run code that starts tasks.
    drop(removed);
}

/// Tasks not finished nor abandoned.
#[must_use]
pub fn in_flight<R: Turns>() -> usize {
    R::with_executor(|executor| executor.tasks.borrow().len())
}

/// Has the task being polled polled again within `ms` milliseconds, whatever else wakes it.
pub fn wake_after<R: Turns>(ms: u64) {
    R::with_executor(|executor| {
        let polling = executor.polling.get();
        debug_assert!(polling.is_some(), "wake_after outside a task of this executor");
        let Some(id) = polling else { return };
        if let Some(task) = executor.tasks.borrow_mut().get_mut(&id) {
            task.wake_after_ms = Some(task.wake_after_ms.map_or(ms, |earlier| earlier.min(ms)));
        }
    });
}

/// Wakes a task by its id: the waker holds no runtime value, so it is `Send` as a `Waker` must
/// be.
struct TaskWaker<R>(u64, PhantomData<fn() -> R>);

impl<R: Turns> Wake for TaskWaker<R> {
    fn wake(self: Arc<Self>) {
        wake::<R>(self.0);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        wake::<R>(self.0);
    }
}

fn wake<R: Turns>(id: u64) {
    let poll_next = R::with_executor(|executor| {
        let mut tasks = executor.tasks.borrow_mut();
        let task = tasks.get_mut(&id)?;
        if task.future.is_none() {
            task.woken_in_poll = true;
        }
        task.poll_next.take()
    });
    if let Some(resolver) = poll_next {
        R::resolve(&resolver);
    }
}

/// Polls task `id`; answers its outcome if it finished before anyone held its promise.
pub fn poll<R: Turns>(id: u64) -> Option<R::Output> {
    let mut future = R::with_executor(|executor| {
        let mut tasks = executor.tasks.borrow_mut();
        let task = tasks.get_mut(&id)?;
        task.woken_in_poll = false;
        task.future.take()
    })?;
    let waker = Waker::from(Arc::new(TaskWaker::<R>(id, PhantomData)));
    let outer = R::with_executor(|executor| executor.polling.replace(Some(id)));
    let polled = future.as_mut().poll(&mut Context::from_waker(&waker));
    R::with_executor(|executor| executor.polling.set(outer));
    match polled {
        Poll::Ready(outcome) => {
            let task = R::with_executor(|executor| executor.tasks.borrow_mut().remove(&id))?;
            // Dropped before settling: the future's own drop code runs here, in this turn.
            drop(future);
            let Some(settle) = task.settle else { return Some(outcome) };
            R::settle(settle, outcome);
            None
        }
        Poll::Pending => {
            arm::<R>(id, future);
            None
        }
    }
}

/// Puts the future back and makes the promise whose resolution polls it next, in this turn (the
/// task's request's), and starts the timer it asked for.
fn arm<R: Turns>(id: u64, future: Body<R>) {
    let armed = R::with_executor(|executor| {
        let mut tasks = executor.tasks.borrow_mut();
        let task = tasks.get_mut(&id)?;
        task.future = Some(future);
        let poll_next = R::next_poll(task.hook.get_or_insert_with(|| R::hook(id)));
        let timer = task.wake_after_ms.take().map(|ms| (poll_next.clone(), ms));
        task.poll_next = Some(poll_next);
        Some((task.woken_in_poll, timer))
    });
    let Some((woken, timer)) = armed else { return };
    if let Some((resolver, ms)) = timer {
        R::resolve_after(&resolver, ms);
    }
    if woken {
        wake::<R>(id);
    }
}

/// Waits about `ms` milliseconds: until the task is next polled, which is after `ms` at the
/// latest (sooner if something else wakes it, so only for waits that look again anyway).
pub struct Sleep<R> {
    ms: u64,
    armed: bool,
    runtime: PhantomData<fn() -> R>,
}

impl<R> Sleep<R> {
    #[must_use]
    pub fn new(ms: u64) -> Self {
        Self { ms, armed: false, runtime: PhantomData }
    }
}

impl<R: Turns> Future for Sleep<R> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        if self.armed {
            return Poll::Ready(());
        }
        self.armed = true;
        wake_after::<R>(self.ms);
        Poll::Pending
    }
}
