//! Coalescing: single-key ops for a shard that arrive while a call to that shard is in flight
//! wait, then go together in the next call (group commit).
//!
//! A shard runs one call's ops in order and makes them durable together, so N requests cost one
//! hop and one storage flush instead of N, and each op still gets its own result, exactly as if
//! the ops had run one after another. At most one call per shard is in flight from an isolate;
//! when it returns, the first waiter leads the next call and takes every other waiter along.
//! This module holds the queue discipline; the worker supplies the waiters (channels) and the
//! calls.

use std::collections::{HashMap, VecDeque};

use crate::ShardId;

/// Counts for `/v1/stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CoalesceStats {
    /// Ops submitted.
    pub ops: u64,
    /// Shard calls made for them.
    pub calls: u64,
    /// Ops that rode along in a call led by another op.
    pub coalesced: u64,
    /// Ops refused because their shard's queue was full.
    pub refused: u64,
}

impl CoalesceStats {
    /// Calls saved compared with one call per op.
    #[must_use]
    pub fn calls_saved(&self) -> u64 {
        self.ops.saturating_sub(self.calls)
    }
}

#[derive(Debug)]
struct Queue<W> {
    in_flight: bool,
    waiting: VecDeque<W>,
}

impl<W> Default for Queue<W> {
    fn default() -> Self {
        Self { in_flight: false, waiting: VecDeque::new() }
    }
}

/// Per-shard queues of waiters `W`.
#[derive(Debug)]
pub struct Coalescer<W> {
    queues: HashMap<ShardId, Queue<W>>,
    stats: CoalesceStats,
}

impl<W> Default for Coalescer<W> {
    fn default() -> Self {
        Self { queues: HashMap::new(), stats: CoalesceStats::default() }
    }
}

/// What an arriving op must do.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival<W> {
    /// No call is in flight: call the shard now (the waiter comes back unqueued).
    Lead(W),
    /// A call is in flight: the waiter was queued; wait for a result or for leadership.
    Queued,
    /// A call is in flight and the queue is full: the shard is overloaded (the waiter comes
    /// back unqueued and its op must not be sent).
    Full(W),
}

impl<W> Coalescer<W> {
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    #[must_use]
    pub fn stats(&self) -> CoalesceStats {
        self.stats
    }

    /// An op for `shard` arrives; `waiter` is queued unless the op may lead at once, or the
    /// queue already holds `max_waiting` ops: one call then carries at most `max_waiting + 1`
    /// ops, and a shard that cannot keep up sheds load instead of queueing without bound.
    pub fn arrive(&mut self, shard: ShardId, waiter: W, max_waiting: usize) -> Arrival<W> {
        let queue = self.queues.entry(shard).or_default();
        if queue.in_flight && queue.waiting.len() >= max_waiting {
            self.stats.refused += 1;
            return Arrival::Full(waiter);
        }
        self.stats.ops += 1;
        if queue.in_flight {
            queue.waiting.push_back(waiter);
            Arrival::Queued
        } else {
            queue.in_flight = true;
            Arrival::Lead(waiter)
        }
    }

    /// A leader is about to call `shard`: every queued waiter goes along, in arrival order.
    /// `leader_queued` says the leader itself is the first of them (a promoted waiter).
    pub fn take_followers(&mut self, shard: ShardId, leader_queued: bool) -> Vec<W> {
        self.stats.calls += 1;
        let followers: Vec<W> =
            self.queues.get_mut(&shard).map(|q| q.waiting.drain(..).collect()).unwrap_or_default();
        self.stats.coalesced += (followers.len() as u64).saturating_sub(u64::from(leader_queued));
        followers
    }

    /// The call to `shard` is over: the first queued waiter, if any, is to lead the next one.
    /// It stays queued, so that it takes its own op back with the others.
    #[must_use]
    pub fn peek_next(&self, shard: ShardId) -> Option<&W> {
        self.queues.get(&shard)?.waiting.front()
    }

    /// Drops the first queued waiter (it is gone and cannot lead).
    pub fn drop_next(&mut self, shard: ShardId) {
        if let Some(queue) = self.queues.get_mut(&shard) {
            queue.waiting.pop_front();
        }
    }

    /// No waiter is left to lead: the shard's queue goes idle.
    pub fn go_idle(&mut self, shard: ShardId) {
        self.queues.remove(&shard);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_idle_shard_lets_the_first_op_lead() {
        let mut c: Coalescer<u32> = Coalescer::new();
        assert_eq!(c.arrive(ShardId(0), 1, 10), Arrival::Lead(1));
        assert_eq!(c.arrive(ShardId(1), 2, 10), Arrival::Lead(2));
        assert_eq!(c.arrive(ShardId(0), 3, 10), Arrival::Queued);
    }

    #[test]
    fn waiters_arriving_during_a_call_go_together_in_order() {
        let mut c: Coalescer<u32> = Coalescer::new();
        let s = ShardId(3);
        assert_eq!(c.arrive(s, 0, 10), Arrival::Lead(0));
        assert!(c.take_followers(s, false).is_empty());
        for i in 1..=4 {
            assert_eq!(c.arrive(s, i, 10), Arrival::Queued);
        }
        // The call is over: waiter 1 is to lead and takes everyone, itself first.
        assert_eq!(c.peek_next(s), Some(&1));
        assert_eq!(c.take_followers(s, true), vec![1, 2, 3, 4]);
        assert_eq!(c.peek_next(s), None);
        c.go_idle(s);
        assert_eq!(c.arrive(s, 5, 10), Arrival::Lead(5));
        assert_eq!(c.stats(), CoalesceStats { ops: 6, calls: 2, coalesced: 3, refused: 0 });
        assert_eq!(c.stats().calls_saved(), 4);
    }

    #[test]
    fn a_full_queue_refuses_without_queueing() {
        let mut c: Coalescer<u32> = Coalescer::new();
        let s = ShardId(1);
        assert_eq!(c.arrive(s, 0, 2), Arrival::Lead(0));
        assert_eq!(c.arrive(s, 1, 2), Arrival::Queued);
        assert_eq!(c.arrive(s, 2, 2), Arrival::Queued);
        assert_eq!(c.arrive(s, 3, 2), Arrival::Full(3));
        // Other shards are not affected.
        assert_eq!(c.arrive(ShardId(2), 4, 2), Arrival::Lead(4));
        assert_eq!(c.take_followers(s, true), vec![1, 2]);
        assert_eq!(c.stats().refused, 1);
        assert_eq!(c.stats().ops, 4);
    }

    #[test]
    fn a_gone_waiter_is_skipped() {
        let mut c: Coalescer<u32> = Coalescer::new();
        let s = ShardId(0);
        assert_eq!(c.arrive(s, 0, 10), Arrival::Lead(0));
        assert_eq!(c.arrive(s, 1, 10), Arrival::Queued);
        assert_eq!(c.arrive(s, 2, 10), Arrival::Queued);
        c.drop_next(s);
        assert_eq!(c.peek_next(s), Some(&2));
    }
}
