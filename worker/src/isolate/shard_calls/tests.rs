//! Coalescing on the fake runtime of [`crate::isolate::request_task::fake`]: each request is a
//! task there, each shard call one the test answers by hand, and the clock moves only when the
//! test moves it.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::task::{Poll, Waker};

use edgecount_core::{Key, Namespace, OpResult, ShardCall, ShardId, ShardOp};

use super::{busy, stats, submit, Site, MAX_RECHECK_MS};
use crate::http::api_error::ApiError;
use crate::isolate::request_task::executor;
use crate::isolate::request_task::fake::{self, advance, now, run_reactions, Fake};

const SHARD: ShardId = ShardId(3);

type Outcome = Rc<RefCell<Option<Result<OpResult, ApiError>>>>;

/// A shard call as sent, answered when the test says.
struct SentCall {
    ops: Vec<ShardCall>,
    answer: RefCell<Option<Result<Vec<OpResult>, ApiError>>>,
    waker: RefCell<Option<Waker>>,
}

/// Every call sent, in order.
#[derive(Default)]
struct Shards {
    calls: RefCell<Vec<Rc<SentCall>>>,
}

impl Shards {
    fn sent(&self) -> usize {
        self.calls.borrow().len()
    }

    fn ops_of(&self, call: usize) -> usize {
        self.calls.borrow()[call].ops.len()
    }

    /// Answers call `call` with a value per op, from `first` up.
    fn answer(&self, call: usize, first: i64) {
        let sent = Rc::clone(&self.calls.borrow()[call]);
        let values = (first..).take(sent.ops.len()).map(value).collect();
        *sent.answer.borrow_mut() = Some(Ok(values));
        let waker = sent.waker.borrow_mut().take();
        if let Some(waker) = waker {
            waker.wake();
        }
        run_reactions();
    }
}

fn value(value: i64) -> OpResult {
    OpResult::Value { value, exists: true, version: 1 }
}

/// One request: what coalescing sees of it.
struct Request {
    shards: Rc<Shards>,
    queue_limit: usize,
    on_cancel: RefCell<Vec<Box<dyn FnOnce()>>>,
    task: RefCell<Option<u64>>,
    outcome: Outcome,
}

impl Site for Request {
    type Turns = Fake;

    fn now_ms(&self) -> u64 {
        now()
    }

    fn queue_limit(&self) -> usize {
        self.queue_limit
    }

    fn send(
        &self,
        _shard: ShardId,
        ops: Vec<ShardCall>,
    ) -> impl Future<Output = Result<Vec<OpResult>, ApiError>> + 'static {
        let call = Rc::new(SentCall { ops, answer: RefCell::new(None), waker: RefCell::new(None) });
        let (shards, mut sent) = (Rc::clone(&self.shards), false);
        // Counted as sent when first polled, as the worker's call sends then.
        std::future::poll_fn(move |cx| {
            if !std::mem::replace(&mut sent, true) {
                shards.calls.borrow_mut().push(Rc::clone(&call));
            }
            match call.answer.borrow_mut().take() {
                Some(answer) => Poll::Ready(answer),
                None => {
                    *call.waker.borrow_mut() = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
    }

    fn spawn(&self, task: impl Future<Output = ()> + 'static) -> u64 {
        fake::spawn(async move {
            task.await;
            0
        })
    }

    fn on_cancel(&self, handler: impl FnOnce() + 'static) {
        self.on_cancel.borrow_mut().push(Box::new(handler));
    }
}

impl Request {
    /// What the request's cancellation does when its client hangs up before it has answered:
    /// its handlers, then its future dropped. A request that has answered no longer listens.
    fn hang_up(&self) {
        if self.outcome.borrow().is_some() {
            return;
        }
        let handlers = std::mem::take(&mut *self.on_cancel.borrow_mut());
        for handler in handlers {
            handler();
        }
        if let Some(task) = self.task.borrow_mut().take() {
            executor::abandon::<Fake>(task);
        }
    }

    fn outcome(&self) -> Option<Result<OpResult, ApiError>> {
        self.outcome.borrow().clone()
    }
}

fn incr() -> ShardOp {
    let (ns, key) = (Namespace::new("pages").unwrap(), Key::new("home").unwrap());
    ShardOp::Incr { ns, key, by: 1, ttl: None }
}

fn get() -> ShardOp {
    ShardOp::Get { ns: Namespace::new("pages").unwrap(), key: Key::new("home").unwrap() }
}

/// Starts a request that submits `op` to [`SHARD`].
fn request(shards: &Rc<Shards>, op: ShardOp, queue_limit: usize) -> Rc<Request> {
    let request = Rc::new(Request {
        shards: Rc::clone(shards),
        queue_limit,
        on_cancel: RefCell::new(Vec::new()),
        task: RefCell::new(None),
        outcome: Rc::default(),
    });
    let serving = Rc::clone(&request);
    let task = fake::spawn(async move {
        let call =
            ShardCall { op, idempotency_key: None, operator: false, visit: None, count_visitor: false };
        let outcome = submit(&*serving, SHARD, call).await;
        *serving.outcome.borrow_mut() = Some(outcome);
        0
    });
    *request.task.borrow_mut() = Some(task);
    request
}

fn incr_request(shards: &Rc<Shards>) -> Rc<Request> {
    request(shards, incr(), 100)
}

#[test]
fn ops_that_arrive_during_a_call_go_together_in_the_next_and_each_gets_its_own_result() {
    let shards = Rc::new(Shards::default());
    let first = incr_request(&shards);
    let (second, third) = (incr_request(&shards), incr_request(&shards));
    assert_eq!(shards.sent(), 1, "the later ops wait for the call in flight");
    shards.answer(0, 1);
    // The request whose own call delivered is woken by it, at once, and starts the next call
    // with the ops queued meanwhile.
    assert_eq!(first.outcome(), Some(Ok(value(1))));
    assert_eq!((shards.sent(), shards.ops_of(1)), (2, 2));
    shards.answer(1, 2);
    advance(MAX_RECHECK_MS);
    assert_eq!((second.outcome(), third.outcome()), (Some(Ok(value(2))), Some(Ok(value(3)))));
    let counted = stats();
    assert_eq!((counted.ops, counted.calls, counted.coalesced), (3, 2, 1));
}

#[test]
fn a_waiter_starts_the_next_call_within_its_longest_recheck_of_the_shard_going_idle() {
    let shards = Rc::new(Shards::default());
    let first = incr_request(&shards);
    let second = incr_request(&shards);
    // Long enough that rechecks doubling without a cap would next look long after (at 2,047).
    advance(1_100);
    // No request is woken when the shard goes idle this way: the queued op finds out on its
    // own timers, by now at their longest.
    first.hang_up();
    run_reactions();
    assert_eq!(shards.sent(), 1, "nothing woke the queued op");
    let idle_at = now();
    while shards.sent() < 2 {
        advance(1);
        assert!(now() - idle_at <= MAX_RECHECK_MS, "waited past the longest recheck");
    }
    shards.answer(1, 2);
    assert_eq!(second.outcome(), Some(Ok(value(2))), "its own call wakes it");
}

#[test]
fn a_call_past_its_lease_frees_the_shard_and_unanswered_ops_give_up_at_their_deadline() {
    let shards = Rc::new(Shards::default());
    let stuck = incr_request(&shards);
    let (write, read) = (incr_request(&shards), request(&shards, get(), 100));
    advance(super::CALL_LEASE_MS - 1);
    assert_eq!(shards.sent(), 1);
    advance(2);
    assert_eq!((shards.sent(), shards.ops_of(1), stats().lost_calls), (2, 2, 1));
    advance(super::MAX_WAIT_MS - super::CALL_LEASE_MS - 2);
    assert_eq!((stuck.outcome(), write.outcome(), read.outcome()), (None, None, None));
    advance(1);
    // Sent and never answered: a write may have been applied, a read changed nothing.
    assert_eq!(stuck.outcome(), Some(Err(ApiError::OutcomeUnknown)));
    assert_eq!(write.outcome(), Some(Err(ApiError::OutcomeUnknown)));
    assert_eq!(read.outcome(), Some(Err(ApiError::ShardUnavailable)));
}

#[test]
fn a_call_whose_request_hangs_up_ends_at_once_for_every_op_it_carried() {
    let shards = Rc::new(Shards::default());
    let first = incr_request(&shards);
    let (second, third) = (incr_request(&shards), incr_request(&shards));
    // The first request hangs up while its call is in flight: the queued ops find the shard
    // free on their timers, and the first to look starts a call carrying both.
    first.hang_up();
    advance(1);
    assert_eq!((shards.sent(), shards.ops_of(1)), (2, 2));
    let (leader, rider) =
        if second.on_cancel.borrow().is_empty() { (third, second) } else { (second, third) };
    assert_eq!((leader.on_cancel.borrow().len(), rider.on_cancel.borrow().len()), (1, 0));
    leader.hang_up();
    let next = incr_request(&shards);
    assert_eq!((shards.sent(), stats().lost_calls), (3, 2), "the shard is free at once, not after the lease");
    advance(MAX_RECHECK_MS);
    assert_eq!(rider.outcome(), Some(Err(ApiError::OutcomeUnknown)));
    // The abandoned call's late answer changes nothing.
    shards.answer(1, 100);
    assert_eq!(rider.outcome(), Some(Err(ApiError::OutcomeUnknown)));
    shards.answer(2, 7);
    assert_eq!(next.outcome(), Some(Ok(value(7))));
}

#[test]
fn a_queued_op_whose_request_hangs_up_is_taken_back_and_never_sent() {
    let shards = Rc::new(Shards::default());
    let _first = incr_request(&shards);
    let gone = incr_request(&shards);
    gone.hang_up();
    shards.answer(0, 1);
    let next = incr_request(&shards);
    assert_eq!((shards.sent(), shards.ops_of(1)), (2, 1));
    shards.answer(1, 2);
    assert_eq!(next.outcome(), Some(Ok(value(2))));
    assert_eq!((gone.outcome(), stats().withdrawn), (None, 1));
}

#[test]
fn an_op_past_the_queue_limit_is_refused_at_once_and_never_sent() {
    let shards = Rc::new(Shards::default());
    let _first = request(&shards, incr(), 1);
    let _queued = request(&shards, incr(), 1);
    let refused = request(&shards, incr(), 1);
    assert_eq!(refused.outcome(), Some(Err(ApiError::ShardOverloaded)));
    shards.answer(0, 1);
    advance(1);
    assert_eq!((shards.sent(), shards.ops_of(1)), (2, 1));
    assert_eq!(stats().refused, 1);
}

#[test]
fn a_shard_is_busy_for_reads_while_a_write_to_it_is_under_way_and_only_then() {
    let shards = Rc::new(Shards::default());
    let read = request(&shards, get(), 100);
    assert!(!busy(SHARD), "a read under way alone holds no read back");
    let write = incr_request(&shards);
    assert!(busy(SHARD), "a queued write holds reads back");
    shards.answer(0, 7);
    assert_eq!(read.outcome(), Some(Ok(value(7))));
    assert!(busy(SHARD), "the write is in the next call, not yet answered");
    advance(MAX_RECHECK_MS);
    shards.answer(1, 8);
    advance(MAX_RECHECK_MS);
    assert_eq!(write.outcome(), Some(Ok(value(8))));
    assert!(!busy(SHARD));
    // Two writes under way: the shard stays busy until both have ended, and a write whose
    // request is dropped (its client hung up) has ended.
    let (abandoned, kept) = (incr_request(&shards), incr_request(&shards));
    assert!(busy(SHARD));
    abandoned.hang_up();
    run_reactions();
    assert!(busy(SHARD), "the other write is still under way");
    kept.hang_up();
    run_reactions();
    assert!(!busy(SHARD));
}
