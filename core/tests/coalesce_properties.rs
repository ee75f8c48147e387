//! Properties of the coalescer under any interleaving of arrivals, call ends, wake-ups, give-ups
//! and requests that are cancelled and never run again: no op is sent twice, every op is sent
//! or taken back, and no shard stays busy with ops queued once anyone alive runs.

use std::collections::HashSet;

use edgecount_core::edge::coalescer::{Arrival, CallId, Coalescer, Started, Ticket};
use edgecount_core::ShardId;
use proptest::prelude::*;

const SHARD: ShardId = ShardId(0);
const LEASE_MS: u64 = 100;

#[derive(Debug, Clone)]
enum Event {
    /// A request arrives and queues its op; it may later be cancelled.
    Arrive,
    /// The call in flight reports back, and every queued waiter still alive is woken.
    CallEnds,
    /// The call in flight is killed: it never reports back.
    CallKilled,
    /// The request carrying the call in flight is cancelled, and says so: the call is abandoned.
    CallAbandoned,
    /// A queued request is cancelled (its client hung up): it never runs again.
    Cancel(usize),
    /// A queued live request's timer fires: it gives up, taking its op back if still queued.
    GiveUp(usize),
    /// Time passes.
    Tick(u64),
}

fn events() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(
        prop_oneof![
            4 => Just(Event::Arrive),
            3 => Just(Event::CallEnds),
            1 => Just(Event::CallKilled),
            1 => Just(Event::CallAbandoned),
            2 => (0_usize..64).prop_map(Event::Cancel),
            1 => (0_usize..64).prop_map(Event::GiveUp),
            1 => (1_u64..150).prop_map(Event::Tick),
        ],
        1..200,
    )
}

#[derive(Default)]
struct World {
    coalescer: Coalescer<u32>,
    now: u64,
    next_op: u32,
    /// Requests still waiting: (op, ticket, alive).
    waiting: Vec<(u32, Ticket, bool)>,
    in_flight: Option<CallId>,
    sent: HashSet<u32>,
    withdrawn: HashSet<u32>,
}

impl World {
    fn take(&mut self, started: Started<u32>) {
        for op in started.ops {
            assert!(self.sent.insert(op), "op {op} sent twice");
            assert!(!self.withdrawn.contains(&op), "op {op} sent after it was taken back");
        }
        self.in_flight = Some(started.call);
    }

    /// A live request runs: it starts the next call if it can (what every waiter does first).
    fn runs(&mut self) {
        if let Some(started) = self.coalescer.try_start(SHARD, self.now, LEASE_MS) {
            self.take(started);
        }
    }

    fn live_queued(&self) -> Vec<usize> {
        (0..self.waiting.len())
            .filter(|&i| self.waiting[i].2 && !self.sent.contains(&self.waiting[i].0))
            .collect()
    }

    fn apply(&mut self, event: Event) {
        match event {
            Event::Arrive => {
                let op = self.next_op;
                self.next_op += 1;
                match self.coalescer.arrive(SHARD, op, 1_000) {
                    Arrival::Queued(ticket) => self.waiting.push((op, ticket, true)),
                    Arrival::Full(_) => unreachable!("the limit is never reached here"),
                }
                self.runs();
            }
            Event::CallEnds => {
                if let Some(call) = self.in_flight.take() {
                    self.coalescer.end(SHARD, call, false);
                    let woken = self.coalescer.queued(SHARD);
                    let live = self.live_queued();
                    assert!(woken >= live.len(), "a live queued waiter was not woken");
                    for _ in live {
                        self.runs();
                    }
                }
            }
            Event::CallKilled => {
                self.in_flight = None;
            }
            Event::CallAbandoned => {
                if let Some(call) = self.in_flight.take() {
                    // Counted lost once: not again if its lease had already run out.
                    self.coalescer.end(SHARD, call, true);
                    for _ in self.live_queued() {
                        self.runs();
                    }
                }
            }
            Event::Cancel(i) => {
                if !self.waiting.is_empty() {
                    let i = i % self.waiting.len();
                    self.waiting[i].2 = false;
                }
            }
            Event::GiveUp(i) => {
                let live = self.live_queued();
                if !live.is_empty() {
                    let (op, ticket, _) = self.waiting.remove(live[i % live.len()]);
                    if self.coalescer.withdraw(SHARD, ticket).is_some() {
                        self.withdrawn.insert(op);
                    } else {
                        assert!(self.sent.contains(&op), "op {op} neither queued nor sent");
                    }
                }
            }
            Event::Tick(ms) => {
                self.now += ms;
                // Live waiters look again when the lease of the call in flight ends.
                if self.coalescer.lease_ends_ms(SHARD).is_some_and(|end| self.now >= end) {
                    self.runs();
                }
            }
        }
    }
}

proptest! {
    #[test]
    fn no_op_is_sent_twice_and_no_live_waiter_is_stranded(events in events()) {
        let mut world = World::default();
        for event in events {
            world.apply(event);
        }
        // Whatever happened, once the call in flight ends (or its lease runs out) and one new
        // request arrives, every op still queued goes out: cancelled requests strand nobody.
        if let Some(call) = world.in_flight.take() {
            world.coalescer.end(SHARD, call, false);
        }
        world.now += LEASE_MS;
        world.apply(Event::Arrive);
        for op in 0..world.next_op {
            prop_assert!(
                world.sent.contains(&op) != world.withdrawn.contains(&op),
                "op {} is neither sent nor taken back (or both)", op
            );
        }
        prop_assert_eq!(world.coalescer.queued(SHARD), 0);
    }
}
