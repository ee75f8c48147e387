//! A relay: the tier between isolates and a shard for one-way counts.
//!
//! Every isolate serving a popular page flushes its one-way sums once a window, so a shard
//! that took those flushes itself would take a call a window from every isolate: thousands a
//! second for a page on a front page, past what one Durable Object serves. With relays, an
//! isolate sends its flush for a shard to one of that shard's relays (the one its name picks,
//! always the same), and each relay merges what its isolates send into one
//! [`OneWayBuffer`] and forwards the sums once its own window is over. What a shard takes then
//! grows with the number of relays, not of isolates.
//!
//! What it guarantees:
//! - **Once per hop.** A flush is taken whole under its receipt (`one-way-<sender>-<number>`),
//!   and the relay keeps the last number it took from each of [`MAX_SENDERS`] senders: an
//!   isolate sends a shard one flush at a time, under increasing numbers, so a number no
//!   higher than the last is a resend of what was taken, and is answered as a replay. The
//!   relay's own flushes to the shard carry receipts of its own (see [`Flush::request`]).
//! - **Bounded.** The relay's buffer has the bounds it is given; a flush that would not fit
//!   whole is refused, nothing of it taken ([`Refusal::Overloaded`]), and its isolate sends it
//!   again later, as it does any flush refused for a passing reason.
//! - **What a death loses.** The relay holds its sums in memory only (writing them would cost
//!   the rows it is there to save): a relay that dies loses the sums it took and had not yet
//!   forwarded, at most one relay window of its isolates' counts (plus a flush it was still
//!   sending). A resend that reaches a relay started again after the first send was taken
//!   and forwarded would be taken again: that needs the first answer lost and the relay
//!   restarted within the isolate's resend delay.
//!
//! [`Flush::request`]: crate::edge::one_way::Flush::request

use std::num::NonZeroUsize;

use lru::LruCache;

use crate::edge::one_way::{
    flush_receipt_parts, pending_charge, Accept, Merged, OneWayBuffer, OneWayLimits, VISITOR_CHARGE_BYTES,
};
use crate::shard::protocol::{OpResult, ShardOp, ShardRequest};
use crate::shard::refusal::Refusal;
use crate::{CoreError, ShardId};

/// Senders a relay remembers the last flush of; the least recently heard from is forgotten
/// first (an isolate that has not flushed for that long has no resend left to make).
pub const MAX_SENDERS: usize = 50_000;

/// Which of a shard's `relays` a sender's flushes go to: always the same one for a sender, so
/// that a resend meets the relay that took the first send.
#[must_use]
pub fn relay_for(sender: &str, relays: u32) -> u32 {
    (xxhash_rust::xxh3::xxh3_64(sender.as_bytes()) % u64::from(relays.max(1))) as u32
}

/// The name of the Durable Object that is relay `index` of `shard` for isolates that place
/// keys under `shards` shards. The count is in the name so that a relay forwards only keys
/// placed under one count, with that count: during a change of the shard count, isolates on
/// either side of it use relays of their own.
#[must_use]
pub fn object_name(shards: u32, shard: ShardId, index: u32) -> String {
    format!("relay-{shards}-{}-{index}", shard.0)
}

/// A relay's state: the sums it holds for its shard and what it took from whom.
#[derive(Debug)]
pub struct Relay {
    /// The shard it relays for, known from the first flush it takes.
    shard: Option<ShardId>,
    buffer: OneWayBuffer,
    last_taken: LruCache<String, u64>,
}

impl Relay {
    /// A relay whose buffer has `limits`.
    #[must_use]
    pub fn new(limits: OneWayLimits) -> Self {
        Self {
            shard: None,
            // A relay's flushers run as long as it lives: they wait for its whole window.
            buffer: OneWayBuffer::new(limits).with_flusher_allowance(u64::MAX),
            last_taken: LruCache::new(NonZeroUsize::new(MAX_SENDERS).unwrap_or(NonZeroUsize::MIN)),
        }
    }

    /// The buffer its flusher takes flushes from and reports to.
    pub fn buffer(&mut self) -> &mut OneWayBuffer {
        &mut self.buffer
    }

    /// Takes an isolate's flush for `shard` at `now_ms`: one result per op ([`OpResult::Relayed`], a
    /// replay of it for a resend, or a refusal for good such as an overflow), and whether to wake
    /// a flusher for the shard (see [`Accept::Accepted`]).
    ///
    /// # Errors
    /// [`Refusal::Core`] for a request that is not a flush (no flush receipt, an op other than
    /// an increment) or is for another shard than the relay's; [`Refusal::Overloaded`] when
    /// the flush would not fit whole.
    pub fn take(
        &mut self,
        request: &ShardRequest,
        shard: ShardId,
        now_ms: u64,
    ) -> Result<(Vec<OpResult>, bool), Refusal> {
        let not_a_flush = |reason: &str| Refusal::from(CoreError::InvalidBody { reason: reason.into() });
        if *self.shard.get_or_insert(shard) != shard {
            return Err(not_a_flush("is for another shard than this relay's"));
        }
        let (sender, number) = request
            .receipt
            .as_ref()
            .and_then(flush_receipt_parts)
            .ok_or_else(|| not_a_flush("is not a one-way flush"))?;
        if request.ops.iter().any(|call| !matches!(call.op, ShardOp::Incr { .. })) {
            return Err(not_a_flush("carries an op other than an increment"));
        }
        if self.last_taken.get(sender).is_some_and(|&last| number <= last) {
            let replay = OpResult::Replayed { first: Box::new(OpResult::Relayed) };
            return Ok((vec![replay; request.ops.len()], false));
        }
        let (keys, bytes) = request.ops.iter().fold((0, 0), |(keys, bytes), call| {
            let (ns, key) = call.op.target();
            let visitors = call.visit.as_ref().map_or(0, |visit| visit.visitors.len() as u64);
            (keys + 1, bytes + pending_charge(ns, key) + VISITOR_CHARGE_BYTES * visitors)
        });
        if !self.buffer.has_room(keys, bytes) {
            return Err(Refusal::Overloaded);
        }
        let mut wake = false;
        let results = request
            .ops
            .iter()
            .map(|call| {
                let ShardOp::Incr { ns, key, by, ttl } = &call.op else { return OpResult::Relayed };
                let visit = call.visit.as_ref();
                let merged = Merged {
                    ttl: *ttl,
                    delta: i128::from(*by),
                    // The ops a sum stands for are the isolate's to count: one here.
                    ops: 1,
                    day: visit.map(|visit| visit.day),
                    visitors: visit.map_or(&[], |visit| visit.visitors.as_slice()),
                    operator: call.operator,
                    // The isolate kept its visitors' +1s apart; summed, they still only add.
                    adds: *by > 0 && ttl.is_none(),
                };
                match self.buffer.merge(shard, ns, key, merged, now_ms) {
                    Accept::Accepted { wake: woken } => {
                        wake |= woken;
                        OpResult::Relayed
                    }
                    Accept::Overflow => OpResult::Failed { error: CoreError::Overflow },
                    // Room was made sure of above for every op.
                    Accept::Full => OpResult::Failed { error: CoreError::Overflow },
                }
            })
            .collect();
        self.last_taken.put(sender.to_owned(), number);
        Ok((results, wake))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::edge::one_way::MAX_FLUSH_KEYS;
    use crate::shard::protocol::{ShardCall, Visit};
    use crate::visits::day::Day;
    use crate::{IdempotencyKey, Key, Namespace};

    const SHARD: ShardId = ShardId(3);

    fn limits(max_keys: usize) -> OneWayLimits {
        OneWayLimits {
            interval_ms: 5_000,
            flush_ops: u64::MAX,
            flush_keys: max_keys,
            max_keys,
            max_bytes: 1 << 20,
        }
    }

    fn flush(sender: &str, number: u64, keys: &[(&str, i64, &[u64])]) -> ShardRequest {
        let ops = keys
            .iter()
            .map(|(key, by, visitors)| ShardCall {
                visit: Some(Visit { day: Day::parse("2026-11-29").unwrap(), visitors: visitors.to_vec() }),
                ..ShardOp::Incr {
                    ns: Namespace::new("site").unwrap(),
                    key: Key::new(key).unwrap(),
                    by: *by,
                    ttl: None,
                }
                .into()
            })
            .collect();
        ShardRequest {
            ops,
            answer_budget: None,
            receipt: Some(IdempotencyKey::new(&format!("one-way-{sender}-{number}")).unwrap()),
            placed: None,
        }
    }

    /// What the relay would forward now: each key's sum and visitors.
    fn forwarded(relay: &mut Relay, now: u64) -> Vec<(String, i64, Vec<u64>)> {
        let mut out = Vec::new();
        let shard = SHARD;
        while let Some(flush) = relay.buffer().take(shard, now) {
            for op in &flush.ops {
                let visitors = op.visit.as_ref().map(|v| v.visitors.clone()).unwrap_or_default();
                out.push((op.key.as_str().to_owned(), op.by, visitors));
            }
            relay.buffer().finish(&flush, flush.total_ops(), 0, now);
        }
        out.sort();
        out
    }

    #[test]
    fn flushes_of_many_isolates_are_merged_into_one_sum_a_key() {
        let mut relay = Relay::new(limits(100));
        for (i, sender) in ["a", "b", "c"].iter().enumerate() {
            let (results, _) = relay
                .take(&flush(sender, 1, &[("home", 10, &[1, 2]), ("about", 1, &[9])]), SHARD, i as u64)
                .unwrap();
            assert_eq!(results, vec![OpResult::Relayed, OpResult::Relayed]);
        }
        assert_eq!(
            forwarded(&mut relay, 10_000),
            vec![("about".into(), 3, vec![9]), ("home".into(), 30, vec![1, 2])],
            "one op a key, visitors once each"
        );
    }

    #[test]
    fn a_resend_is_answered_as_a_replay_and_taken_once() {
        let mut relay = Relay::new(limits(100));
        let first = flush("a", 7, &[("home", 5, &[])]);
        relay.take(&first, SHARD, 0).unwrap();
        let (again, wake) = relay.take(&first, SHARD, 1).unwrap();
        assert_eq!(again, vec![OpResult::Replayed { first: Box::new(OpResult::Relayed) }]);
        assert!(!wake, "a replay wakes nothing");
        // An older number (a first send that arrives after its resend) is a replay too.
        relay.take(&flush("a", 8, &[("home", 1, &[])]), SHARD, 2).unwrap();
        relay.take(&flush("a", 7, &[("home", 5, &[])]), SHARD, 3).unwrap();
        assert_eq!(forwarded(&mut relay, 10_000), vec![("home".into(), 6, vec![])]);
    }

    #[test]
    fn a_flush_that_does_not_fit_whole_is_refused_with_nothing_taken() {
        let mut relay = Relay::new(limits(2));
        relay.take(&flush("a", 1, &[("one", 1, &[])]), SHARD, 0).unwrap();
        let refused = relay.take(&flush("b", 1, &[("two", 1, &[]), ("three", 1, &[])]), SHARD, 1);
        assert_eq!(refused, Err(Refusal::Overloaded));
        // Not remembered as taken: its resend, once there is room, is taken.
        assert_eq!(forwarded(&mut relay, 10_000), vec![("one".into(), 1, vec![])]);
        let (results, _) =
            relay.take(&flush("b", 1, &[("two", 1, &[]), ("three", 1, &[])]), SHARD, 10_001).unwrap();
        assert_eq!(results, vec![OpResult::Relayed, OpResult::Relayed]);
    }

    #[test]
    fn only_flushes_are_taken() {
        let mut relay = Relay::new(limits(10));
        let mut no_receipt = flush("a", 1, &[("k", 1, &[])]);
        no_receipt.receipt = Some(IdempotencyKey::new("chosen-by-a-client").unwrap());
        assert!(matches!(relay.take(&no_receipt, SHARD, 0), Err(Refusal::Core { .. })));
        let mut read = flush("a", 1, &[]);
        read.ops
            .push(ShardOp::Get { ns: Namespace::new("site").unwrap(), key: Key::new("k").unwrap() }.into());
        assert!(matches!(relay.take(&read, SHARD, 0), Err(Refusal::Core { .. })));
        relay.take(&flush("a", 1, &[("k", 1, &[])]), SHARD, 0).unwrap();
        let elsewhere = relay.take(&flush("a", 2, &[("k", 1, &[])]), ShardId(4), 0);
        assert!(matches!(elsewhere, Err(Refusal::Core { .. })), "a relay serves one shard");
    }

    #[test]
    fn senders_spread_over_the_relays_and_keep_theirs() {
        let picks: Vec<u32> = (0..4_000).map(|i| relay_for(&format!("isolate{i}"), 4)).collect();
        for relay in 0..4 {
            let share = picks.iter().filter(|&&p| p == relay).count();
            assert!((800..1_200).contains(&share), "relay {relay} got {share} of 4,000");
        }
        assert_eq!(relay_for("isolate7", 4), picks[7]);
        assert_eq!(object_name(16, ShardId(3), 1), "relay-16-3-1");
    }

    #[test]
    fn senders_remembered_are_bounded() {
        let mut relay = Relay::new(limits(MAX_FLUSH_KEYS));
        for i in 0..MAX_SENDERS + 10 {
            relay.take(&flush(&format!("s{i}"), 1, &[]), SHARD, 0).unwrap();
        }
        assert_eq!(relay.last_taken.len(), MAX_SENDERS);
    }
}
