//! The executor on the fake runtime of [`super::fake`].

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use super::executor::{self, Sleep};
use super::fake::{
    advance, now, promises_made, reactions_due, resolves, run_reactions, settled, spawn, Fake,
};
use super::{join_every, within_on};

/// A future that counts its polls and is ready once `open` is set; keeps its last waker.
#[derive(Clone, Default)]
struct Gate {
    open: Rc<Cell<bool>>,
    polls: Rc<Cell<u32>>,
    waker: Rc<RefCell<Option<Waker>>>,
}

impl Gate {
    fn wait(&self) -> impl Future<Output = u32> + 'static {
        let gate = self.clone();
        std::future::poll_fn(move |cx: &mut Context<'_>| {
            gate.polls.set(gate.polls.get() + 1);
            if gate.open.get() {
                return Poll::Ready(gate.polls.get());
            }
            *gate.waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
    }

    fn open_and_wake(&self) {
        self.open.set(true);
        self.wake();
    }

    fn wake(&self) {
        if let Some(waker) = self.waker.borrow().as_ref() {
            waker.wake_by_ref();
        }
    }
}

#[test]
fn a_future_ready_at_once_costs_no_promise() {
    let task = spawn(async { 7 });
    assert_eq!(settled(task), Some(7));
    assert_eq!((executor::in_flight::<Fake>(), promises_made()), (0, 0));
}

#[test]
fn a_wake_polls_later_and_once_however_often_it_comes() {
    let gate = Gate::default();
    let task = spawn(gate.wait());
    assert_eq!((gate.polls.get(), promises_made()), (1, 1));
    gate.open.set(true);
    gate.wake();
    gate.wake();
    // Never polled inside the wake itself, and the second wake finds nothing to resolve.
    assert_eq!((gate.polls.get(), reactions_due(), resolves()), (1, 1, 1));
    run_reactions();
    assert_eq!(settled(task), Some(2));
    assert_eq!(executor::in_flight::<Fake>(), 0);
}

#[test]
fn a_task_woken_while_it_is_polled_is_polled_again() {
    let mut first = true;
    let task = spawn(std::future::poll_fn(move |cx| {
        if std::mem::take(&mut first) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(1)
    }));
    assert_eq!(settled(task), None);
    assert_eq!(reactions_due(), 1);
    run_reactions();
    assert_eq!(settled(task), Some(1));
}

#[test]
fn a_sleep_ends_when_its_timer_fires_and_not_before() {
    let task = spawn(async {
        Sleep::<Fake>::new(50).await;
        now() as u32
    });
    advance(49);
    assert_eq!(settled(task), None);
    advance(1);
    assert_eq!(settled(task), Some(50));
}

#[test]
fn a_timer_that_fires_after_the_task_was_woken_polls_nothing() {
    let gate = Gate::default();
    let waiting = gate.clone();
    let task = spawn(async move {
        // Woken by the gate before its sleep's timer fires (the sleep then ends, as any poll
        // after the first ends it), then waits on the gate alone, that timer still set.
        futures_util::future::select(Box::pin(Sleep::<Fake>::new(100)), Box::pin(waiting.wait())).await;
        waiting.wait().await
    });
    gate.wake();
    run_reactions();
    let polls = gate.polls.get();
    advance(100);
    assert_eq!(gate.polls.get(), polls, "the stale timer resolved a promise already resolved");
    gate.open_and_wake();
    run_reactions();
    assert!(settled(task).is_some());
}

#[test]
fn an_abandoned_task_is_dropped_at_once_and_later_wakes_do_nothing() {
    struct DropFlag(Rc<Cell<bool>>);
    impl Drop for DropFlag {
        fn drop(&mut self) {
            self.0.set(true);
        }
    }
    let dropped = Rc::new(Cell::new(false));
    let gate = Gate::default();
    let (flag, waiting) = (DropFlag(Rc::clone(&dropped)), gate.clone());
    let task = spawn(async move {
        let _flag = flag;
        waiting.wait().await
    });
    executor::abandon::<Fake>(task);
    assert!(dropped.get());
    assert_eq!(executor::in_flight::<Fake>(), 0);
    gate.open_and_wake();
    run_reactions();
    assert_eq!((settled(task), gate.polls.get()), (None, 1));
}

#[test]
fn within_gives_up_at_its_deadline_however_early_the_task_is_woken() {
    let gate = Gate::default();
    let waiting = gate.clone();
    let task = spawn(async move {
        let answer = within_on(waiting.wait(), 30, now, Sleep::<Fake>::new).await;
        u32::from(answer.is_some())
    });
    advance(10);
    gate.wake();
    run_reactions();
    assert_eq!(settled(task), None);
    advance(20);
    assert_eq!(settled(task), Some(0));
}

#[test]
fn join_every_polls_each_child_when_the_task_wakes() {
    // Past 30 futures `join_all` polls only the children whose own waker fired; a sleep's timer
    // wakes the task, not the child.
    let task = spawn(async {
        let sleeps = (0..40).map(|_| Sleep::<Fake>::new(10));
        join_every(sleeps).await.len() as u32
    });
    advance(10);
    assert_eq!(settled(task), Some(40));
}

#[test]
fn a_task_started_inside_another_asks_for_its_own_timer() {
    let outer = spawn(async {
        let inner = spawn(async {
            Sleep::<Fake>::new(5).await;
            5
        });
        Sleep::<Fake>::new(50).await;
        u32::try_from(inner).unwrap_or(u32::MAX)
    });
    advance(5);
    assert_eq!(settled(outer), None, "the inner task's timer polled only the inner task");
    assert_eq!(settled(1), Some(5));
    advance(45);
    assert_eq!(settled(outer), Some(1));
}
