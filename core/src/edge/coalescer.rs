//! Coalescing: single-key ops for a shard that arrive while a call to that shard is in flight
//! wait, then go together in the next call (group commit).
//!
//! A shard runs one call's ops in order and makes them durable together, so N requests cost one
//! hop and one storage flush instead of N, and each op still gets its own result, exactly as if
//! the ops had run one after another. At most one call per shard is in flight from an isolate.
//!
//! No waiter is ever responsible for another's progress, because on the Workers runtime any
//! request may be cancelled (its client hung up) and then never runs again. So there is no
//! hand-over of leadership: every op is queued, and whoever runs next (a new arrival, a waiter
//! woken because a call ended, a waiter whose timer fired) calls [`Coalescer::try_start`], which
//! starts the next call with everything queued if the shard is idle. A call that never reports
//! back (its task was killed) is declared lost once it outlives a lease, so the shard cannot
//! stay busy for good. A waiter that gives up takes its op back with [`Coalescer::withdraw`]
//! if it is still queued, which proves the op was never sent.
//!
//! This module holds the queue discipline and is clock-free (times come in as arguments); the
//! worker supplies the waiters, the wake-ups and the calls.

use std::collections::{HashMap, VecDeque};

use crate::ShardId;

/// Counts for `/v1/stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoalesceStats {
    /// Ops submitted.
    pub ops: u64,
    /// Shard calls made for them.
    pub calls: u64,
    /// Ops that rode along in a call started for another op (a call of n ops counts n - 1).
    pub coalesced: u64,
    /// Ops refused because their shard's queue was full.
    pub refused: u64,
    /// Ops taken back unsent by a waiter that gave up.
    pub withdrawn: u64,
    /// Calls that never reported back: abandoned with their request, or past their lease.
    pub lost_calls: u64,
}

impl CoalesceStats {
    /// Calls saved compared with one call per op.
    #[must_use]
    pub fn calls_saved(&self) -> u64 {
        self.ops.saturating_sub(self.withdrawn).saturating_sub(self.calls)
    }
}

/// Names one queued op, so that its waiter can take it back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ticket(u64);

/// Names one shard call, so that a late report from a lost call changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallId(u64);

#[derive(Debug, Clone, Copy)]
struct InFlight {
    call: CallId,
    /// When the call is declared lost if it has not reported back.
    lease_ends_ms: u64,
}

#[derive(Debug)]
struct Queue<W> {
    in_flight: Option<InFlight>,
    waiting: VecDeque<(Ticket, W)>,
}

impl<W> Default for Queue<W> {
    fn default() -> Self {
        Self { in_flight: None, waiting: VecDeque::new() }
    }
}

/// Per-shard queues of waiters `W`.
#[derive(Debug)]
pub struct Coalescer<W> {
    queues: HashMap<ShardId, Queue<W>>,
    next_id: u64,
    stats: CoalesceStats,
}

impl<W> Default for Coalescer<W> {
    fn default() -> Self {
        Self { queues: HashMap::new(), next_id: 0, stats: CoalesceStats::default() }
    }
}

/// What an arriving op is told.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival<W> {
    /// Queued; the ticket takes it back if its waiter gives up before it is sent.
    Queued(Ticket),
    /// The queue already holds its limit: the shard is overloaded (the waiter comes back
    /// unqueued and its op must not be sent).
    Full(W),
}

/// A call [`Coalescer::try_start`] started: the caller sends `ops` and reports back with
/// [`Coalescer::end`].
#[derive(Debug, PartialEq, Eq)]
pub struct Started<W> {
    pub call: CallId,
    /// Every queued op, in arrival order.
    pub ops: Vec<W>,
}

impl<W> Coalescer<W> {
    #[must_use]
    pub fn stats(&self) -> CoalesceStats {
        self.stats
    }

    /// Queues an op for `shard`, unless `max_waiting` ops already wait: one call then carries at
    /// most `max_waiting` ops, and a shard that cannot keep up sheds load instead of queueing
    /// without bound.
    pub fn arrive(&mut self, shard: ShardId, waiter: W, max_waiting: usize) -> Arrival<W> {
        let queue = self.queues.entry(shard).or_default();
        if queue.waiting.len() >= max_waiting.max(1) {
            self.stats.refused += 1;
            return Arrival::Full(waiter);
        }
        self.stats.ops += 1;
        self.next_id += 1;
        let ticket = Ticket(self.next_id);
        queue.waiting.push_back((ticket, waiter));
        Arrival::Queued(ticket)
    }

    /// Starts a call to `shard` with every queued op, if the shard is idle (or its call has
    /// outlived its lease) and anything is queued. The new call's lease ends at
    /// `now_ms + lease_ms`.
    pub fn try_start(&mut self, shard: ShardId, now_ms: u64, lease_ms: u64) -> Option<Started<W>> {
        let id = self.next_id + 1;
        let queue = self.queues.get_mut(&shard)?;
        if let Some(in_flight) = queue.in_flight {
            if now_ms < in_flight.lease_ends_ms {
                return None;
            }
            self.stats.lost_calls += 1;
            queue.in_flight = None;
        }
        if queue.waiting.is_empty() {
            self.queues.remove(&shard);
            return None;
        }
        self.next_id = id;
        let call = CallId(id);
        queue.in_flight = Some(InFlight { call, lease_ends_ms: now_ms.saturating_add(lease_ms) });
        let ops: Vec<W> = queue.waiting.drain(..).map(|(_, waiter)| waiter).collect();
        self.stats.calls += 1;
        self.stats.coalesced += ops.len() as u64 - 1;
        Some(Started { call, ops })
    }

    /// `call` to `shard` is over: the shard goes idle, unless the call was already declared
    /// lost and another has started; the ops still queued start the next call when they next
    /// look. `lost`: it will never report back (the request whose task carried it was
    /// cancelled, its client hung up, and the task with it), so the shard is free at once,
    /// without waiting for the lease to end; its ops have an unknown outcome.
    pub fn end(&mut self, shard: ShardId, call: CallId, lost: bool) {
        let Some(queue) = self.queues.get_mut(&shard) else { return };
        if queue.in_flight.is_some_and(|f| f.call == call) {
            queue.in_flight = None;
            self.stats.lost_calls += u64::from(lost);
        }
        if queue.in_flight.is_none() && queue.waiting.is_empty() {
            self.queues.remove(&shard);
        }
    }

    /// Takes a queued op back; `None` when it has already been sent in a call (its outcome then
    /// comes from that call).
    pub fn withdraw(&mut self, shard: ShardId, ticket: Ticket) -> Option<W> {
        let queue = self.queues.get_mut(&shard)?;
        let at = queue.waiting.iter().position(|(t, _)| *t == ticket)?;
        let (_, waiter) = queue.waiting.remove(at)?;
        self.stats.withdrawn += 1;
        if queue.in_flight.is_none() && queue.waiting.is_empty() {
            self.queues.remove(&shard);
        }
        Some(waiter)
    }

    /// When a waiter on `shard` should look again even if nothing wakes it: the end of the lease
    /// of the call in flight, after which a queued op may start a new call.
    #[must_use]
    pub fn lease_ends_ms(&self, shard: ShardId) -> Option<u64> {
        self.queues.get(&shard)?.in_flight.map(|f| f.lease_ends_ms)
    }

    /// Ops queued for `shard` (not yet sent).
    #[must_use]
    pub fn queued(&self, shard: ShardId) -> usize {
        self.queues.get(&shard).map_or(0, |q| q.waiting.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: u64 = 1_000;

    fn queued<W: std::fmt::Debug>(arrival: Arrival<W>) -> Ticket {
        match arrival {
            Arrival::Queued(ticket) => ticket,
            Arrival::Full(w) => panic!("{w:?} was refused"),
        }
    }

    #[test]
    fn an_idle_shard_starts_a_call_with_the_first_op() {
        let mut c: Coalescer<u32> = Coalescer::default();
        queued(c.arrive(ShardId(0), 1, 10));
        let started = c.try_start(ShardId(0), 0, LEASE).unwrap();
        assert_eq!(started.ops, vec![1]);
        // Another shard is independent.
        queued(c.arrive(ShardId(1), 2, 10));
        assert_eq!(c.try_start(ShardId(1), 0, LEASE).unwrap().ops, vec![2]);
    }

    #[test]
    fn ops_arriving_during_a_call_go_together_in_order_in_the_next() {
        let mut c: Coalescer<u32> = Coalescer::default();
        let s = ShardId(3);
        queued(c.arrive(s, 0, 10));
        let first = c.try_start(s, 0, LEASE).unwrap();
        for i in 1..=4 {
            queued(c.arrive(s, i, 10));
            assert!(c.try_start(s, 1, LEASE).is_none(), "a call is in flight");
        }
        c.end(s, first.call, false);
        assert_eq!(c.queued(s), 4);
        let second = c.try_start(s, 2, LEASE).unwrap();
        assert_eq!(second.ops, vec![1, 2, 3, 4]);
        c.end(s, second.call, false);
        assert_eq!(c.queued(s), 0);
        assert!(c.queues.is_empty(), "an idle shard is forgotten");
        assert_eq!(c.stats(), CoalesceStats { ops: 5, calls: 2, coalesced: 3, ..CoalesceStats::default() });
        assert_eq!(c.stats().calls_saved(), 3);
    }

    #[test]
    fn a_full_queue_refuses_without_queueing() {
        let mut c: Coalescer<u32> = Coalescer::default();
        let s = ShardId(1);
        queued(c.arrive(s, 0, 2));
        c.try_start(s, 0, LEASE).unwrap();
        queued(c.arrive(s, 1, 2));
        queued(c.arrive(s, 2, 2));
        assert_eq!(c.arrive(s, 3, 2), Arrival::Full(3));
        // Other shards are not affected.
        queued(c.arrive(ShardId(2), 4, 2));
        assert_eq!(c.stats().refused, 1);
        assert_eq!(c.stats().ops, 4);
    }

    #[test]
    fn a_waiter_that_gives_up_before_its_op_is_sent_takes_it_back() {
        let mut c: Coalescer<u32> = Coalescer::default();
        let s = ShardId(0);
        queued(c.arrive(s, 0, 10));
        let first = c.try_start(s, 0, LEASE).unwrap();
        let one = queued(c.arrive(s, 1, 10));
        queued(c.arrive(s, 2, 10));
        assert_eq!(c.withdraw(s, one), Some(1));
        assert_eq!(c.withdraw(s, one), None, "only once");
        c.end(s, first.call, false);
        assert_eq!(c.try_start(s, 1, LEASE).unwrap().ops, vec![2], "the withdrawn op is not sent");
    }

    #[test]
    fn an_op_already_sent_cannot_be_withdrawn() {
        let mut c: Coalescer<u32> = Coalescer::default();
        let s = ShardId(0);
        let ticket = queued(c.arrive(s, 7, 10));
        c.try_start(s, 0, LEASE).unwrap();
        assert_eq!(c.withdraw(s, ticket), None);
    }

    #[test]
    fn queued_ops_of_requests_that_never_run_again_go_with_the_next_arrival() {
        // Waiters 1 and 2 belong to cancelled requests: when the call ends they are woken but
        // never run. Nothing is stuck: the shard is idle, and the next arrival starts a call.
        let mut c: Coalescer<u32> = Coalescer::default();
        let s = ShardId(5);
        queued(c.arrive(s, 0, 10));
        let first = c.try_start(s, 0, LEASE).unwrap();
        queued(c.arrive(s, 1, 10));
        queued(c.arrive(s, 2, 10));
        c.end(s, first.call, false);
        assert_eq!(c.queued(s), 2);
        queued(c.arrive(s, 3, 10));
        assert_eq!(c.try_start(s, 5, LEASE).unwrap().ops, vec![1, 2, 3]);
    }

    #[test]
    fn a_call_that_never_reports_back_is_lost_after_its_lease() {
        let mut c: Coalescer<u32> = Coalescer::default();
        let s = ShardId(2);
        queued(c.arrive(s, 0, 10));
        let lost = c.try_start(s, 100, LEASE).unwrap();
        queued(c.arrive(s, 1, 10));
        assert_eq!(c.lease_ends_ms(s), Some(100 + LEASE));
        assert!(c.try_start(s, 100 + LEASE - 1, LEASE).is_none());
        let next = c.try_start(s, 100 + LEASE, LEASE).unwrap();
        assert_eq!(next.ops, vec![1]);
        assert_eq!(c.stats().lost_calls, 1);
        // The lost call's late report does not free the shard while the new call runs.
        queued(c.arrive(s, 2, 10));
        c.end(s, lost.call, false);
        assert_eq!(c.queued(s), 1);
        assert!(c.try_start(s, 100 + LEASE + 1, LEASE).is_none());
        c.end(s, next.call, false);
        assert_eq!(c.try_start(s, 100 + LEASE + 2, LEASE).unwrap().ops, vec![2]);
    }

    #[test]
    fn an_abandoned_call_frees_its_shard_at_once_and_only_once() {
        let mut c: Coalescer<u32> = Coalescer::default();
        let s = ShardId(4);
        queued(c.arrive(s, 0, 10));
        let dead = c.try_start(s, 0, LEASE).unwrap();
        queued(c.arrive(s, 1, 10));
        c.end(s, dead.call, true);
        c.end(s, dead.call, true);
        assert_eq!(c.stats().lost_calls, 1, "lost once");
        let next = c.try_start(s, 1, LEASE).unwrap();
        assert_eq!(next.ops, vec![1], "no need to wait for the lease");
        // A late report or abandonment of the dead call leaves the new one in flight.
        c.end(s, dead.call, false);
        c.end(s, dead.call, true);
        queued(c.arrive(s, 2, 10));
        assert!(c.try_start(s, 2, LEASE).is_none());
        assert_eq!(c.stats().lost_calls, 1);
    }

    #[test]
    fn an_idle_shard_with_an_empty_queue_starts_nothing() {
        let mut c: Coalescer<u32> = Coalescer::default();
        assert!(c.try_start(ShardId(0), 0, LEASE).is_none());
        let t = queued(c.arrive(ShardId(0), 1, 10));
        c.withdraw(ShardId(0), t);
        assert!(c.try_start(ShardId(0), 0, LEASE).is_none());
        assert!(c.queues.is_empty(), "idle shards are forgotten");
    }
}
