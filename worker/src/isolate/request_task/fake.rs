//! A fake runtime for the executor's tests and those of the code that runs on it: resolving a
//! promise queues its reaction, which runs only when the test turns the queue
//! ([`run_reactions`]); timers fire when the test moves the clock ([`advance`]). So each test
//! says exactly when a task is polled, and how often. Each test runs on a thread of its own,
//! and so has a runtime and an executor of its own.

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::rc::Rc;

use super::executor::{self, Executor, Turns};

/// A promise of the fake runtime: the task its reaction polls, and whether it was resolved.
pub(crate) struct FakePromise {
    task: u64,
    resolved: Cell<bool>,
}

#[derive(Default)]
struct Runtime {
    now_ms: Cell<u64>,
    /// Tasks whose poll reaction is due, in the order their promises were resolved.
    reactions: RefCell<VecDeque<u64>>,
    timers: RefCell<Vec<(u64, Rc<FakePromise>)>>,
    /// Outcomes settled through a task's promise.
    settled: RefCell<HashMap<u64, u32>>,
    /// Promises made, which the JavaScript runtime would make one each.
    promises: Cell<usize>,
    /// Calls to resolve a promise, those that found it resolved already included.
    resolves: Cell<usize>,
}

thread_local! {
    static RUNTIME: Runtime = Runtime::default();
    static EXECUTOR: Executor<Fake> = Executor::default();
}

/// The fake runtime; a task's outcome is a number.
pub(crate) struct Fake;

impl Turns for Fake {
    type Output = u32;
    type Resolver = Rc<FakePromise>;
    type Hook = u64;
    type Settle = u64;

    fn with_executor<T>(f: impl FnOnce(&Executor<Self>) -> T) -> T {
        EXECUTOR.with(f)
    }

    fn hook(id: u64) -> u64 {
        id
    }

    fn next_poll(hook: &u64) -> Rc<FakePromise> {
        RUNTIME.with(|r| r.promises.set(r.promises.get() + 1));
        Rc::new(FakePromise { task: *hook, resolved: Cell::new(false) })
    }

    fn resolve(resolver: &Rc<FakePromise>) {
        RUNTIME.with(|r| r.resolves.set(r.resolves.get() + 1));
        if !resolver.resolved.replace(true) {
            RUNTIME.with(|r| r.reactions.borrow_mut().push_back(resolver.task));
        }
    }

    fn resolve_after(resolver: &Rc<FakePromise>, ms: u64) {
        RUNTIME.with(|r| r.timers.borrow_mut().push((r.now_ms.get() + ms, Rc::clone(resolver))));
    }

    fn settle(task: u64, outcome: u32) {
        RUNTIME.with(|r| r.settled.borrow_mut().insert(task, outcome));
    }
}

pub(crate) fn now() -> u64 {
    RUNTIME.with(|r| r.now_ms.get())
}

pub(crate) fn promises_made() -> usize {
    RUNTIME.with(|r| r.promises.get())
}

pub(crate) fn resolves() -> usize {
    RUNTIME.with(|r| r.resolves.get())
}

pub(crate) fn reactions_due() -> usize {
    RUNTIME.with(|r| r.reactions.borrow().len())
}

/// Starts `future` as a task; answers its id, with someone holding its promise unless its first
/// poll finished it (then its outcome is settled at once, as the worker does).
pub(crate) fn spawn(future: impl Future<Output = u32> + 'static) -> u64 {
    let (id, outcome) = executor::start::<Fake>(future);
    match outcome {
        Some(outcome) => Fake::settle(id, outcome),
        None => executor::await_outcome::<Fake>(id, id),
    }
    id
}

/// Runs the reactions due, and those they make due, as the runtime's microtask queue would.
pub(crate) fn run_reactions() {
    while let Some(task) = RUNTIME.with(|r| r.reactions.borrow_mut().pop_front()) {
        executor::poll::<Fake>(task);
    }
}

/// Moves the clock by `ms`, a timer at a time: the clock stops at each due time in order, the
/// timers due then are resolved (in the order they were set) and the reactions run, as the
/// runtime would, so that timers set meanwhile fire in their turn too.
pub(crate) fn advance(ms: u64) {
    let until = now() + ms;
    loop {
        let next =
            RUNTIME.with(|r| r.timers.borrow().iter().map(|(at, _)| *at).filter(|at| *at <= until).min());
        let Some(at) = next else { break };
        let due: Vec<Rc<FakePromise>> = RUNTIME.with(|r| {
            r.now_ms.set(at.max(r.now_ms.get()));
            let mut timers = r.timers.borrow_mut();
            let (due, later) = timers.drain(..).partition(|(when, _)| *when <= at);
            *timers = later;
            due.into_iter().map(|(_, promise): (u64, Rc<FakePromise>)| promise).collect()
        });
        for promise in &due {
            Fake::resolve(promise);
        }
        run_reactions();
    }
    RUNTIME.with(|r| r.now_ms.set(until));
    run_reactions();
}

pub(crate) fn settled(task: u64) -> Option<u32> {
    RUNTIME.with(|r| r.settled.borrow().get(&task).copied())
}
