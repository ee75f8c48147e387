//! What the isolate's coalescer queues for a shard (`isolate::state`): each op, and the slot
//! its outcome is handed in. Apart from the calls and the waits of the parent module, so that
//! the state can name them without using that module, which uses the state.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::Waker;

use edgecount_core::{OpResult, ShardCall};

use crate::http::api_error::ApiError;

/// A queued op.
pub struct Waiter {
    pub(super) call: ShardCall,
    pub(super) slot: Rc<Slot>,
}

/// What one waiting op is handed.
#[derive(Default)]
pub struct Slot {
    pub(super) outcome: RefCell<Option<Result<OpResult, ApiError>>>,
    /// An outcome was handed over (the waiter may have taken it since).
    pub(super) delivered: Cell<bool>,
    /// Woken on delivery: only ever the waker of the request whose task delivers (see the
    /// parent module's `Delivery`).
    pub(super) waker: RefCell<Option<Waker>>,
}

impl Slot {
    /// Hands over the op's outcome, unless it has one already: a call abandoned with its
    /// request may still report back later, and then changes nothing.
    pub(super) fn deliver_first(&self, outcome: impl FnOnce() -> Result<OpResult, ApiError>) {
        if !self.delivered.replace(true) {
            *self.outcome.borrow_mut() = Some(outcome());
            let waker = self.waker.borrow_mut().take();
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }
}
