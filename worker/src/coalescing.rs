//! Group commit for single-key counter ops: while a call to a shard is in flight, later ops
//! for that shard wait and then go together in one call. The queue discipline is
//! `edgecount_core::coalesce`; this module adds the slots that carry results and leadership
//! between the waiting requests of this isolate.
//!
//! Why slots polled on a timer rather than channels: the Workers runtime ties every request to
//! its own I/O context and cancels a request as hung if it waits on a promise only another
//! request can settle. So a waiting request never blocks on another one: it checks its slot
//! after short timers of its own, and every shard call is made by the request that leads it.

use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::time::Duration;

use edgecount_core::coalesce::{Arrival, CoalesceStats, Coalescer};
use edgecount_core::{OpResult, ShardCall, ShardId};
use worker::{Delay, Env};

use crate::api_error::ApiError;
use crate::config::Config;
use crate::shard_client;

/// How often a waiting op checks its slot.
const POLL_INTERVAL: Duration = Duration::from_millis(1);
/// How long an op waits for its turn before giving up with 503.
const MAX_WAIT_POLLS: u32 = 20_000;

/// What a waiting op is told.
enum Signal {
    /// Its result (the call it rode in is over).
    Done(Result<OpResult, ApiError>),
    /// The previous call is over and this op leads the next one.
    Lead,
}

type Slot = RefCell<Option<Signal>>;

/// A queued op. The queue holds its slot weakly: when the waiting request goes away, the slot
/// dies with it and the op is neither sent nor handed the lead.
struct Waiter {
    call: ShardCall,
    slot: Weak<Slot>,
}

/// Hands `signal` to a waiting op; false when its request is gone.
fn deliver(slot: &Weak<Slot>, signal: Signal) -> bool {
    match slot.upgrade() {
        Some(slot) => {
            *slot.borrow_mut() = Some(signal);
            true
        }
        None => false,
    }
}

thread_local! {
    static COALESCER: RefCell<Coalescer<Waiter>> = RefCell::new(Coalescer::new());
}

/// This isolate's coalescing counts.
#[must_use]
pub fn stats() -> CoalesceStats {
    COALESCER.with(|c| c.borrow().stats())
}

/// Runs `op` on `shard`, in the next call to that shard if one is in flight.
///
/// # Errors
/// [`ApiError::ShardUnavailable`] when the call carrying the op fails or its turn never comes;
/// [`ApiError::ShardOverloaded`] when `config.shard_queue_limit` ops already wait for the shard.
pub async fn submit(
    env: &Env,
    config: &Config,
    shard: ShardId,
    call: ShardCall,
) -> Result<OpResult, ApiError> {
    let slot: Rc<Slot> = Rc::new(RefCell::new(None));
    let waiter = Waiter { call, slot: Rc::downgrade(&slot) };
    let call = match COALESCER.with(|c| c.borrow_mut().arrive(shard, waiter, config.shard_queue_limit)) {
        Arrival::Lead(waiter) => waiter.call,
        Arrival::Full(_) => return Err(ApiError::ShardOverloaded),
        Arrival::Queued => match wait(&slot).await {
            Some(Signal::Done(result)) => return result,
            // The op is still in the queue's hands: the new leader takes it back from there.
            Some(Signal::Lead) => return lead(env, shard, None).await,
            None => return Err(ApiError::ShardUnavailable),
        },
    };
    lead(env, shard, Some(call)).await
}

async fn wait(slot: &Rc<Slot>) -> Option<Signal> {
    for _ in 0..MAX_WAIT_POLLS {
        if let Some(signal) = slot.borrow_mut().take() {
            return Some(signal);
        }
        Delay::from(POLL_INTERVAL).await;
    }
    None
}

/// Makes one call to `shard` carrying `own` (or, for a promoted waiter, its call at the head of
/// the queue) and every live waiter, then hands each its result.
async fn lead(env: &Env, shard: ShardId, own: Option<ShardCall>) -> Result<OpResult, ApiError> {
    let _handoff = Handoff(shard);
    let followers = COALESCER.with(|c| c.borrow_mut().take_followers(shard, own.is_none()));
    let mut followers: Vec<Waiter> = followers.into_iter().filter(|w| w.slot.strong_count() > 0).collect();
    let own = match own {
        Some(call) => call,
        None if !followers.is_empty() => followers.remove(0).call,
        None => return Err(ApiError::ShardUnavailable),
    };
    let (mut ops, mut slots) = (Vec::with_capacity(followers.len() + 1), Vec::with_capacity(followers.len()));
    ops.push(own);
    for waiter in followers {
        ops.push(waiter.call);
        slots.push(waiter.slot);
    }
    match shard_client::execute(env, shard, &ops).await {
        Ok(results) => {
            let mut results = results.into_iter();
            let own = results.next().ok_or(ApiError::ShardUnavailable);
            for (slot, result) in slots.iter().zip(results) {
                deliver(slot, Signal::Done(Ok(result)));
            }
            own
        }
        Err(error) => {
            for slot in &slots {
                deliver(slot, Signal::Done(Err(error.clone())));
            }
            Err(error)
        }
    }
}

/// Passes leadership on when the leading op's call is over, also if its request is dropped
/// mid-call, so waiters are never left without a leader. The promoted waiter stays at the head
/// of the queue, so it leads with its own op first.
struct Handoff(ShardId);

impl Drop for Handoff {
    fn drop(&mut self) {
        COALESCER.with(|c| {
            let mut coalescer = c.borrow_mut();
            while let Some(next) = coalescer.peek_next(self.0) {
                if deliver(&next.slot, Signal::Lead) {
                    return;
                }
                coalescer.drop_next(self.0);
            }
            coalescer.go_idle(self.0);
        });
    }
}
