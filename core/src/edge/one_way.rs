//! One-way counting: increments and decrements accepted at once (`202`) and applied later.
//!
//! Increments commute, so an isolate may add up the deltas it accepts per key and apply each
//! key's sum in one op: many page views of one page cost one shard call and one row write
//! instead of one each. This module is the isolate's buffer of those sums, grouped by shard,
//! and its bookkeeping; it is clock-free (times come in as arguments). The worker supplies the
//! flushers: tasks that ask the buffer what is due ([`OneWayBuffer::next`]), send it and report
//! back ([`OneWayBuffer::finish`]).
//!
//! What it guarantees:
//! - **Bounded.** Every pending sum (a key's in one day) is charged its names and a fixed
//!   overhead ([`pending_charge`]), and each of its visitors [`VISITOR_CHARGE_BYTES`]; past
//!   [`OneWayLimits::max_keys`] or [`OneWayLimits::max_bytes`] a new sum is refused
//!   ([`Accept::Full`]), while a delta for a sum already pending is still taken (it costs no
//!   memory, unless it brings a new visitor). Sums of a flush in flight stay charged until it
//!   finishes.
//! - **Exact sums.** Sums are kept in `i128`, and a flush splits a sum beyond `i64` into
//!   several ops ([`FlushOp`]); nothing wraps. A delta that would take a key's sum beyond what
//!   any counter could absorb ([`MAX_PENDING_SUM`]) is refused at once ([`Accept::Overflow`]),
//!   as it would certainly overflow when applied; so a key's sum is at most three ops.
//! - **In order.** A key has one sum a day whatever the TTLs its deltas carried, applied with
//!   the last TTL given (as one by one, where each write's TTL replaces the one before). Each
//!   day's sum carries that day's visitors, and a flush sends a key's earlier day before its
//!   later one (in an earlier flush, or earlier in the same), since a shard counts a write for
//!   a day before the counter's latest in the latest: counts made either side of midnight stay
//!   in their days.
//! - **Applied once.** A flush keeps its number until it finishes, and its receipt (one
//!   idempotency key for the whole request, [`Flush::request`]) is made from it: a flush sent
//!   again after an unknown outcome is applied once, at the cost of one record row per flush.
//! - **Not stranded while arrivals come, never claimed.** Nothing in the buffer belongs to a
//!   task, and nothing waits on another. A flusher runs for at most its allowance ([`FLUSHER_ALLOWANCE_MS`] in
//!   an isolate, where the runtime ends a request's background work 30 s after its answer; a
//!   relay's run as long as it lives) and asks [`OneWayBuffer::next`] what to do: send what is
//!   due, or sleep until something falls due. The buffer notes until when the flushers woken
//!   so far run (`covered_until_ms`), and an arrival is told to wake another
//!   ([`Accept::Accepted`]) when it opens a shard's window (nothing pending or in flight),
//!   finds something overdue, or brings something due after that time; a flusher stops once
//!   one woken later has enlisted ([`OneWayBuffer::enlist`]). With no arrival at all, what
//!   falls due after the last flusher ends waits for the next. A shard has one flush
//!   in flight at most (a relay remembers a sender's last number, so numbers must arrive in
//!   order); one sent and not reported on within [`IN_FLIGHT_GRACE_MS`] (its sender was cut
//!   off) is overdue, and a flusher sends it again under its number; a late report of an
//!   earlier send of it is ignored.

use std::collections::BTreeSet;

use crate::edge::access::Right;
use crate::hashing::{key_map, KeyMap};
use crate::shard::idempotency::IDEMPOTENCY_WINDOW_MS;
use crate::shard::protocol::{OpResult, ShardCall, ShardOp, ShardRequest, Visit};
use crate::visits::day::Day;
use crate::{CoreError, IdempotencyKey, Key, Namespace, ShardId};

/// What a pending key is charged besides its names: the map slot, the sum and the names'
/// buffers, rounded up.
pub const PENDING_OVERHEAD_BYTES: u64 = 96;

/// Most keys one flush carries: a shard with more pending is flushed in several calls.
pub const MAX_FLUSH_KEYS: usize = 1_000;

/// The largest sum a key may have pending, either way: from `i64::MIN` to `i64::MAX`. A
/// counter could absorb no more whatever its value, so a delta past it is refused at once.
pub const MAX_PENDING_SUM: u128 = u64::MAX as u128;

/// A flush still unsettled this long after its first send is given up, not sent again: its
/// receipt's record may lapse before a resend arrives, and the shard would apply it twice.
pub const MAX_RESEND_AGE_MS: u64 = IDEMPOTENCY_WINDOW_MS / 2;

/// The bytes a pending key is charged against [`OneWayLimits::max_bytes`].
#[must_use]
pub fn pending_charge(ns: &Namespace, key: &Key) -> u64 {
    PENDING_OVERHEAD_BYTES + (ns.as_str().len() + key.as_str().len()) as u64
}

/// How much the buffer holds and how soon it flushes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OneWayLimits {
    /// A shard's sums are flushed once the oldest is this old.
    pub interval_ms: u64,
    /// ... or once this many ops are pending for the shard, whichever comes first.
    pub flush_ops: u64,
    /// ... or once this many keys are pending for the shard (a flush carries at most
    /// [`MAX_FLUSH_KEYS`]; a relay, which holds many more for its whole window, sends them in
    /// several).
    pub flush_keys: usize,
    /// Most pending sums in the isolate (in flight included): a key's in each day it counted
    /// in, its counts apart from its other deltas (see [`Slot`]).
    pub max_keys: usize,
    /// Most bytes charged for them (see [`pending_charge`]).
    pub max_bytes: u64,
}

/// What became of an accepted delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accept {
    /// Added to its key's sum. `wake`: the caller must run a flusher for the shard (see
    /// [`OneWayBuffer::enlist`]): this arrival opened the shard's window (nothing was pending or
    /// in flight), found something of it overdue, or brought something due after the flushers
    /// woken so far end (and before a new one would). Not twice within a second, before the
    /// flusher woken first has enlisted.
    Accepted { wake: bool },
    /// The buffer is at a bound: nothing was added.
    Full,
    /// The key's sum would pass [`MAX_PENDING_SUM`]: nothing was added.
    Overflow,
}

/// Counts for `/v1/stats` and `/metrics`, in ops (each accepted increment or decrement is one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OneWayStats {
    /// Ops accepted (answered 202).
    pub accepted: u64,
    /// Ops refused because the buffer was full (answered 503).
    pub refused: u64,
    /// Ops accepted and not yet applied or dropped (in flight included).
    pub pending: u64,
    /// Ops applied by their shard.
    pub flushed: u64,
    /// Shard calls made to flush (first sends and resends).
    pub flush_calls: u64,
    /// Resends of a flush whose outcome was unknown or that partly failed.
    pub retried: u64,
    /// Ops that could not be applied after every attempt.
    pub dropped: u64,
}

/// One accepted increment or decrement: `delta` with its TTL, the day it counts in, and the
/// visitor it counts when unique visitors are asked for (see [`crate::visits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted {
    pub ttl: Option<u32>,
    pub delta: i128,
    pub day: Option<Day>,
    pub visitor: Option<u64>,
    /// The caller holds an operator's token for the namespace, which a counter's owner key does
    /// not bind (see [`crate::shard::owner`]): the flush carries the right with the delta.
    pub operator: bool,
}

/// A sum of accepted ops as a relay takes it from an isolate's flush: `delta` over `ops` ops,
/// with the distinct `visitors` they counted in `day` (see [`OneWayBuffer::merge`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Merged<'a> {
    pub ttl: Option<u32>,
    pub delta: i128,
    pub ops: u64,
    pub day: Option<Day>,
    pub visitors: &'a [u64],
    pub operator: bool,
    /// The sum only adds to a counter, which no counter refuses (see
    /// [`crate::shard::owner`]): it is summed with other such sums, apart from the rest.
    pub adds: bool,
}

/// The bytes a pending visitor is charged against [`OneWayLimits::max_bytes`]: its 8 and what
/// the set holding it spends on it.
pub const VISITOR_CHARGE_BYTES: u64 = 16;

/// One op of a flush: `by` added to a key (negative for decrements).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushOp {
    pub ns: Namespace,
    pub key: Key,
    pub ttl: Option<u32>,
    pub by: i64,
    /// The day of the sum's counts, and the distinct visitors they counted.
    pub visit: Option<Visit>,
    /// Accepted ops this flush op applies: the first op of a split sum carries them all and the
    /// others none, so a key's ops are the first op's and those after it with none.
    pub ops: u64,
    /// Sent as an operator's (see [`Counted::operator`]).
    pub operator: bool,
}

/// How a flush's receipt starts: `one-way-<sender>-<number>` (see [`Flush::request`]).
const FLUSH_RECEIPT_PREFIX: &str = "one-way-";

/// The sender and number of a flush's receipt, or `None` for any other idempotency key.
#[must_use]
pub fn flush_receipt_parts(receipt: &IdempotencyKey) -> Option<(&str, u64)> {
    let (sender, number) = receipt.as_str().strip_prefix(FLUSH_RECEIPT_PREFIX)?.rsplit_once('-')?;
    Some((sender, number.parse().ok()?))
}

/// A flush: the sums taken from one shard, under one number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flush {
    pub shard: ShardId,
    /// Unique in the isolate; the same on every send of this flush.
    pub number: u64,
    pub ops: Vec<FlushOp>,
    /// Sends so far (the first send included).
    pub attempts: u32,
}

impl Flush {
    /// The flush as one shard request under a receipt (see [`crate::shard::receipt`]) made of
    /// `sender` (unique to the isolate) and the flush's number: every send of the flush carries
    /// the same receipt, so the shard applies each op once, and stores one record for the whole
    /// flush instead of one per key.
    ///
    /// # Errors
    /// [`CoreError::InvalidIdempotencyKey`] when `sender` makes a receipt the rules refuse.
    pub fn request(&self, sender: &str) -> Result<ShardRequest, CoreError> {
        let receipt = IdempotencyKey::new(&format!("{FLUSH_RECEIPT_PREFIX}{sender}-{}", self.number))?;
        let ops = self
            .ops
            .iter()
            .map(|op| ShardCall {
                visit: op.visit.clone(),
                operator: op.operator,
                ..ShardOp::Incr { ns: op.ns.clone(), key: op.key.clone(), by: op.by, ttl: op.ttl }.into()
            })
            .collect();
        Ok(ShardRequest { ops, answer_budget: None, receipt: Some(receipt), placed: None })
    }

    /// Accepted ops the flush carries.
    #[must_use]
    pub fn total_ops(&self) -> u64 {
        self.ops.iter().map(|op| op.ops).sum()
    }

    /// What one send's `results` settled, as ops `(applied, dropped)`, a key at a time (all
    /// the ops of its sum): applied when every op of the sum was, where a value is applied and
    /// so is any replay (under a receipt, a replayed op is one an earlier send applied,
    /// whatever reading its value now gave); left for a resend when one failed for a passing
    /// reason (storage, or a change of shard count the operator is to finish); dropped when one
    /// was refused for good (the counter would overflow, say).
    #[must_use]
    pub fn settled(&self, results: Vec<OpResult>) -> (u64, u64) {
        let (mut applied, mut dropped) = (0, 0);
        let mut ops =
            self.ops.iter().zip(results.into_iter().map(Some).chain(std::iter::repeat(None))).peekable();
        while let Some((first, result)) = ops.next() {
            let mut outcomes = vec![result];
            while let Some((_, result)) = ops.next_if(|(op, _)| op.ops == 0) {
                outcomes.push(result);
            }
            let passing = |result: &Option<OpResult>| match result {
                None => true,
                Some(OpResult::Failed { error }) => error.may_pass(),
                Some(_) => false,
            };
            let is_applied = |result: &Option<OpResult>| {
                matches!(result, Some(OpResult::Value { .. } | OpResult::Relayed | OpResult::Replayed { .. }))
            };
            if outcomes.iter().all(is_applied) {
                applied += first.ops;
            } else if !outcomes.iter().any(passing) {
                dropped += first.ops;
            }
        }
        (applied, dropped)
    }
}

/// The sum pending for one key and day, the TTL it is applied with and its distinct visitors.
#[derive(Debug, Clone)]
struct Pending {
    sum: i128,
    ops: u64,
    ttl: Option<u32>,
    visitors: BTreeSet<u64>,
}

impl Pending {
    /// Bytes charged for the key's pending sum and visitors.
    fn charge(&self, ns: &Namespace, key: &Key) -> u64 {
        pending_charge(ns, key) + VISITOR_CHARGE_BYTES * self.visitors.len() as u64
    }
}

/// A key's pending sum in one day, by who may apply it (see [`Writer`]). The day (none when days
/// are not counted) keeps each day's sum and visitors apart.
type Slot = (Namespace, Key, Writer, Option<Day>);

/// Whom a pending sum is applied as, so that no delta is refused for another's, nor applied
/// with a right its caller did not have: counts (+1s without a TTL) no counter refuses (see
/// [`crate::shard::owner`]), so a decrement or a TTL sent beside them, which an owned counter
/// refuses, never takes visitors' counts down with it; decrements, which an owned counter
/// always refuses, are never summed with additions, which it may take (those with its own TTL);
/// an operator's deltas, which an owner key does not bind, are never summed with anyone else's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Writer {
    Counts,
    Anyone,
    Lowers,
    Operator,
}

/// A flush sent and not yet settled.
#[derive(Debug)]
struct InFlight {
    flush: Flush,
    /// Bytes charged for its keys, freed when it settles.
    charged: u64,
    first_sent_ms: u64,
    sent_at_ms: u64,
    /// Sent and not reported on: its sender may still be waiting for the answer.
    awaiting_report: bool,
    /// Reported unsettled: when it is to be sent again.
    resend_at_ms: u64,
}

impl InFlight {
    /// When it is to be sent (again): once its sender has had its grace, or its resend is due.
    fn due_ms(&self) -> u64 {
        if self.awaiting_report {
            self.sent_at_ms + IN_FLIGHT_GRACE_MS
        } else {
            self.resend_at_ms
        }
    }
}

#[derive(Debug, Default)]
struct ShardBuffer {
    pending: KeyMap<Slot, Pending>,
    /// Ops in `pending`.
    ops: u64,
    /// When the oldest pending sum was started.
    oldest_ms: Option<u64>,
    in_flight: Option<InFlight>,
    /// Until when the flushers woken for the shard so far run: something due later needs
    /// another.
    covered_until_ms: u64,
    /// When a flusher was last woken, until it enlists: the arrivals of one batch, made before
    /// it runs, wake it once.
    woken_ms: Option<u64>,
    /// The last flusher enlisted (see [`OneWayBuffer::enlist`]).
    newest_flusher: u64,
}

/// An isolate's one-way buffer.
#[derive(Debug)]
pub struct OneWayBuffer {
    limits: OneWayLimits,
    /// How long a flusher runs after it is woken.
    flusher_allowance_ms: u64,
    shards: KeyMap<ShardId, ShardBuffer>,
    keys: usize,
    bytes: u64,
    next_number: u64,
    next_flusher: u64,
    stats: OneWayStats,
}

/// What a flusher is to do for a shard (see [`OneWayBuffer::next`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    /// Send this flush now, and report how it went ([`OneWayBuffer::finish`]).
    Send(Flush),
    /// Nothing is due before this time (a flush in flight waits for its sender's report until
    /// then).
    At(u64),
    /// Nothing is pending or in flight.
    Idle,
}

/// The longest flush interval of an isolate's buffer: a flusher is a request's background work,
/// which the runtime ends 30 s after the answer, so the window it was woken for must end well
/// before.
pub const MAX_INTERVAL_MS: u64 = 20_000;

/// How long a flush sent and not reported on is left to its sender (the shard call's 15 s
/// deadline and a margin) before it is overdue and a flusher sends it again.
pub const IN_FLIGHT_GRACE_MS: u64 = 20_000;

/// How long an isolate's flusher runs after it is woken: the runtime ends a request's
/// background work 30 s after its answer.
pub const FLUSHER_ALLOWANCE_MS: u64 = 30_000;

/// How long a wake is taken to be on its way: a woken flusher asks the buffer within the
/// request's next turns.
const WAKE_ON_ITS_WAY_MS: u64 = 1_000;

/// The wait before a flush reported unsettled is sent again; each later resend waits four
/// times as long, up to 64 s.
pub const FIRST_RESEND_MS: u64 = 250;

impl OneWayBuffer {
    #[must_use]
    pub fn new(limits: OneWayLimits) -> Self {
        Self {
            limits,
            flusher_allowance_ms: FLUSHER_ALLOWANCE_MS,
            shards: key_map(),
            keys: 0,
            bytes: 0,
            next_number: 0,
            next_flusher: 0,
            stats: OneWayStats::default(),
        }
    }

    /// The buffer with flushers that run `ms` after they are woken ([`FLUSHER_ALLOWANCE_MS`]
    /// unless set): a relay's run as long as it lives.
    #[must_use]
    pub fn with_flusher_allowance(self, ms: u64) -> Self {
        Self { flusher_allowance_ms: ms, ..self }
    }

    /// How long a flusher runs after it is woken.
    #[must_use]
    pub fn flusher_allowance_ms(&self) -> u64 {
        self.flusher_allowance_ms
    }

    #[must_use]
    pub fn stats(&self) -> OneWayStats {
        self.stats
    }

    /// Pending keys (in flight included) and the bytes charged for them.
    #[must_use]
    pub fn held(&self) -> (usize, u64) {
        (self.keys, self.bytes)
    }

    /// Adds `count`'s delta to the sum pending for `ns`/`key` in its day on `shard` at `now_ms`:
    /// its TTL, if given, replaces the TTL the sum is applied with, and its visitor joins the
    /// sum's, once.
    pub fn accept(
        &mut self,
        shard: ShardId,
        ns: &Namespace,
        key: &Key,
        count: Counted,
        now_ms: u64,
    ) -> Accept {
        let Counted { ttl, delta, day, visitor, operator } = count;
        let visitors: Vec<u64> = visitor.into_iter().collect();
        let adds = i64::try_from(delta).is_ok_and(|by| Right::for_increment(by, ttl) == Right::Count);
        self.merge(
            shard,
            ns,
            key,
            Merged { ttl, delta, ops: 1, day, visitors: &visitors, operator, adds },
            now_ms,
        )
    }

    /// Whether `keys` new sums charged `bytes` in all would fit under the bounds now: a relay
    /// takes an isolate's flush whole or not at all.
    #[must_use]
    pub fn has_room(&self, keys: usize, bytes: u64) -> bool {
        self.keys.saturating_add(keys) <= self.limits.max_keys
            && self.bytes.saturating_add(bytes) <= self.limits.max_bytes
    }

    /// [`Self::accept`] for a sum already made of `merged.ops` accepted ops and any number of
    /// visitors (a relay merging an isolate's flush): all of it is added, or nothing.
    pub fn merge(
        &mut self,
        shard: ShardId,
        ns: &Namespace,
        key: &Key,
        merged: Merged<'_>,
        now_ms: u64,
    ) -> Accept {
        let Merged { ttl, delta, ops, day, visitors, operator, adds } = merged;
        let writer = if adds {
            Writer::Counts
        } else if operator {
            Writer::Operator
        } else if delta < 0 {
            Writer::Lowers
        } else {
            Writer::Anyone
        };
        let slot = (ns.clone(), key.clone(), writer, day);
        let buffer = self.shards.entry(shard).or_default();
        let opened = buffer.pending.is_empty() && buffer.in_flight.is_none();
        if let Some(pending) = buffer.pending.get_mut(&slot) {
            let sum = pending.sum + delta;
            if sum.unsigned_abs() > MAX_PENDING_SUM {
                return Accept::Overflow;
            }
            // A set: a key's visitors are looked up once each, however many are pending.
            let new_visitors: BTreeSet<u64> =
                visitors.iter().copied().filter(|v| !pending.visitors.contains(v)).collect();
            let charge = VISITOR_CHARGE_BYTES * new_visitors.len() as u64;
            if charge > 0 && self.bytes + charge > self.limits.max_bytes {
                self.stats.refused += ops;
                return Accept::Full;
            }
            pending.sum = sum;
            pending.ops += ops;
            pending.ttl = ttl.or(pending.ttl);
            pending.visitors.extend(new_visitors);
            self.bytes += charge;
        } else {
            let pending = Pending { sum: delta, ops, ttl, visitors: visitors.iter().copied().collect() };
            let charge = pending.charge(ns, key);
            if self.keys >= self.limits.max_keys || self.bytes.saturating_add(charge) > self.limits.max_bytes
            {
                self.stats.refused += ops;
                if buffer.pending.is_empty() && buffer.in_flight.is_none() {
                    self.shards.remove(&shard);
                }
                return Accept::Full;
            }
            buffer.pending.insert(slot, pending);
            self.keys += 1;
            self.bytes += charge;
        }
        buffer.ops += ops;
        buffer.oldest_ms.get_or_insert(now_ms);
        self.stats.accepted += ops;
        self.stats.pending += ops;
        Accept::Accepted { wake: self.wakes(shard, opened, now_ms) }
    }

    /// Whether an arrival for `shard` at `now_ms` (that `opened` its window or not) must wake a
    /// flusher, noting the wake if so.
    fn wakes(&mut self, shard: ShardId, opened: bool, now_ms: u64) -> bool {
        let allowance = self.flusher_allowance_ms;
        let Some(buffer) = self.shards.get(&shard) else { return false };
        let pending = self.pending_due(buffer);
        let in_flight = buffer.in_flight.as_ref().map(InFlight::due_ms);
        let Some(buffer) = self.shards.get_mut(&shard) else { return false };
        if buffer.woken_ms.is_some_and(|woken| now_ms < woken.saturating_add(WAKE_ON_ITS_WAY_MS)) {
            return false;
        }
        // Due after the flushers woken so far end, and before one woken now would.
        let covered = buffer.covered_until_ms;
        let past_cover = |due: u64| due > covered && due <= now_ms.saturating_add(allowance);
        let uncovered = match in_flight {
            // Sums behind a flush in flight wait for it: only the cover counts for them.
            Some(flight) => flight <= now_ms || past_cover(flight) || pending.is_some_and(past_cover),
            None => pending.is_some_and(|due| due <= now_ms || past_cover(due)),
        };
        if !opened && !uncovered {
            return false;
        }
        buffer.woken_ms = Some(now_ms);
        buffer.covered_until_ms = covered.max(now_ms.saturating_add(allowance));
        true
    }

    /// When `shard` has something to flush: a flush in flight reported unsettled once its
    /// resend is due, one not reported on after [`IN_FLIGHT_GRACE_MS`]; pending
    /// sums once [`OneWayLimits::flush_ops`] ops wait, else once the oldest is
    /// [`OneWayLimits::interval_ms`] old. `None` when nothing is pending or in flight.
    #[must_use]
    pub fn due_at(&self, shard: ShardId) -> Option<u64> {
        let buffer = self.shards.get(&shard)?;
        buffer.in_flight.as_ref().map(InFlight::due_ms).or_else(|| self.pending_due(buffer))
    }

    /// When `buffer`'s pending sums are due, a flush in flight or not (they wait for it).
    fn pending_due(&self, buffer: &ShardBuffer) -> Option<u64> {
        let oldest = buffer.oldest_ms?;
        // Half the buffer's bytes taken: flushed early, so that it keeps room for what arrives.
        let half_full = self.bytes.saturating_mul(2) >= self.limits.max_bytes;
        if buffer.ops >= self.limits.flush_ops || buffer.pending.len() >= self.limits.flush_keys || half_full
        {
            return Some(oldest);
        }
        Some(oldest + self.limits.interval_ms)
    }

    /// Enlists a flusher woken for `shard`: the number it asks [`Self::next`] with. A flusher
    /// enlisted later runs at least as long, so an earlier one stops once a later one has
    /// enlisted.
    pub fn enlist(&mut self, shard: ShardId) -> u64 {
        self.next_flusher += 1;
        let number = self.next_flusher;
        let buffer = self.shards.entry(shard).or_default();
        buffer.newest_flusher = number;
        buffer.woken_ms = None;
        number
    }

    /// What flusher `flusher` (see [`Self::enlist`]) of `shard` is to do at `now_ms`: send what
    /// is due ([`Self::take`]), wait for what falls due next, or stop (nothing is pending or in
    /// flight, or a flusher enlisted later looks after the shard). A flush in flight is due again
    /// once its sender has had [`IN_FLIGHT_GRACE_MS`], so a flusher outlives a sender cut off;
    /// meanwhile it looks again when the sums behind it fall due, as the sender will most often
    /// have reported by then.
    pub fn next(&mut self, shard: ShardId, flusher: u64, now_ms: u64) -> Next {
        let Some(buffer) = self.shards.get(&shard) else { return Next::Idle };
        if buffer.newest_flusher > flusher {
            return Next::Idle;
        }
        let behind = buffer
            .in_flight
            .as_ref()
            .filter(|in_flight| in_flight.awaiting_report)
            .and_then(|_| self.pending_due(buffer))
            .filter(|due| *due > now_ms);
        match self.due_at(shard) {
            Some(due) if due <= now_ms => self.take(shard, now_ms).map_or(Next::Idle, Next::Send),
            Some(due) => Next::At(behind.map_or(due, |behind| behind.min(due))),
            None => {
                self.shards.remove(&shard);
                Next::Idle
            }
        }
    }

    /// The flush to send for `shard` at `now_ms`, due or not: the one in flight if any (to be
    /// sent again under its number), else up to [`MAX_FLUSH_KEYS`] pending sums under a new
    /// number, earliest day first (a shard counts a write for a day before the counter's latest
    /// in the latest, so a key's earlier day must reach it first). `None` when nothing is left.
    pub fn take(&mut self, shard: ShardId, now_ms: u64) -> Option<Flush> {
        let buffer = self.shards.get_mut(&shard)?;
        if buffer
            .in_flight
            .as_ref()
            .is_some_and(|f| now_ms.saturating_sub(f.first_sent_ms) > MAX_RESEND_AGE_MS)
        {
            let number = buffer.in_flight.as_ref().map_or(0, |f| f.flush.number);
            self.settle(shard, number, 0, 0, (now_ms, true));
            return self.take(shard, now_ms);
        }
        let buffer = self.shards.get_mut(&shard)?;
        if let Some(in_flight) = &mut buffer.in_flight {
            in_flight.flush.attempts += 1;
            in_flight.sent_at_ms = now_ms;
            in_flight.awaiting_report = true;
            self.stats.retried += 1;
            self.stats.flush_calls += 1;
            return Some(in_flight.flush.clone());
        }
        if buffer.pending.is_empty() {
            self.shards.remove(&shard);
            return None;
        }
        // Days pending are few (more than one only around a midnight): a pass over the keys for
        // each, in order, until the flush is full.
        let days: BTreeSet<Option<Day>> = buffer.pending.keys().map(|slot| slot.3).collect();
        let pending = &buffer.pending;
        let slots: Vec<Slot> = days
            .into_iter()
            .flat_map(|day| pending.keys().filter(move |slot| slot.3 == day))
            .take(MAX_FLUSH_KEYS)
            .cloned()
            .collect();
        let mut ops = Vec::with_capacity(slots.len());
        let (mut taken_ops, mut charged) = (0, 0);
        for slot in slots {
            // Split sums may make more ops than keys (three at most each): a flush stays within
            // a receipt's bound.
            if ops.len() >= MAX_FLUSH_KEYS {
                break;
            }
            let Some(mut pending) = buffer.pending.remove(&slot) else { continue };
            taken_ops += pending.ops;
            let (ns, key, writer, day) = slot;
            charged += pending.charge(&ns, &key);
            let ttl = pending.ttl;
            // The visitors ride the sum's first op; each op of a split sum counts in its day.
            let mut visitors: Vec<u64> = std::mem::take(&mut pending.visitors).into_iter().collect();
            ops.extend(split(pending.sum).enumerate().map(|(i, by)| FlushOp {
                ns: ns.clone(),
                key: key.clone(),
                ttl,
                by,
                visit: day.map(|day| Visit { day, visitors: std::mem::take(&mut visitors) }),
                ops: if i == 0 { pending.ops } else { 0 },
                operator: writer == Writer::Operator,
            }));
        }
        buffer.ops -= taken_ops;
        // What stays pending keeps the oldest time (an over-estimate of its age, so it is
        // flushed no later than promised).
        if buffer.pending.is_empty() {
            buffer.oldest_ms = None;
        }
        self.next_number += 1;
        let flush = Flush { shard, number: self.next_number, ops, attempts: 1 };
        buffer.in_flight = Some(InFlight {
            flush: flush.clone(),
            charged,
            first_sent_ms: now_ms,
            sent_at_ms: now_ms,
            awaiting_report: true,
            resend_at_ms: now_ms,
        });
        self.stats.flush_calls += 1;
        Some(flush)
    }

    /// Reports at `now_ms` how a send of flush `number` of `shard` went: `applied` and `dropped`
    /// ops (see [`FlushOp::ops`]) are settled. If some are not (the outcome is unknown, or the
    /// shard refused for a passing reason such as `shard_overloaded`), the flush stays in flight
    /// to be sent again whole after [`FIRST_RESEND_MS`], 1, 4, 16 and then every 64 s (a resend
    /// replays what was applied), however many sends it takes: an
    /// accepted count is applied unless the isolate dies, or its record's window would pass
    /// ([`MAX_RESEND_AGE_MS`]). Meanwhile the buffer stays charged, so new one-way counts are
    /// refused at its bounds rather than accepted and dropped. A report about a flush no longer
    /// in flight, or about an earlier send of it than the last (its sender was taken to be cut
    /// off and it was sent again), changes nothing.
    pub fn finish(&mut self, flush: &Flush, applied: u64, dropped: u64, now_ms: u64) {
        let current =
            self.shards.get(&flush.shard).and_then(|b| b.in_flight.as_ref()).map(|f| f.flush.attempts);
        if current == Some(flush.attempts) {
            self.settle(flush.shard, flush.number, applied, dropped, (now_ms, false));
        }
    }

    /// [`Self::finish`], and with `give_up` the unsettled ops are dropped too.
    fn settle(
        &mut self,
        shard: ShardId,
        number: u64,
        applied: u64,
        dropped: u64,
        (now_ms, give_up): (u64, bool),
    ) {
        let Some(buffer) = self.shards.get_mut(&shard) else { return };
        let Some(in_flight) = buffer.in_flight.as_mut().filter(|in_flight| in_flight.flush.number == number)
        else {
            return;
        };
        let total = in_flight.flush.total_ops();
        let unsettled = total.saturating_sub(applied + dropped);
        if unsettled > 0 && !give_up {
            in_flight.awaiting_report = false;
            let resends = in_flight.flush.attempts.saturating_sub(1).min(4);
            in_flight.resend_at_ms = now_ms + (FIRST_RESEND_MS << (2 * resends));
            return;
        }
        let Some(in_flight) = buffer.in_flight.take() else { return };
        let dropped = dropped + unsettled;
        self.stats.flushed += applied;
        self.stats.dropped += dropped;
        self.stats.pending -= applied + dropped;
        self.keys -= in_flight.flush.ops.iter().filter(|op| op.ops > 0).count();
        self.bytes -= in_flight.charged;
    }
}

/// `sum` as ops of at most `i64` each, in order; one op of 0 for a sum of 0 (its ops still
/// create the key and set its TTL, as they would have one by one).
fn split(sum: i128) -> impl Iterator<Item = i64> {
    let mut rest = sum;
    let mut first = true;
    std::iter::from_fn(move || {
        if rest == 0 && !first {
            return None;
        }
        first = false;
        let step = rest.clamp(i128::from(i64::MIN), i128::from(i64::MAX));
        rest -= step;
        i64::try_from(step).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    impl Counted {
        /// `delta` with `ttl`, counted in no day and for no visitor.
        fn plain(ttl: Option<u32>, delta: i128) -> Self {
            Self { ttl, delta, day: None, visitor: None, operator: false }
        }
    }

    fn limits() -> OneWayLimits {
        OneWayLimits {
            interval_ms: 1_000,
            flush_ops: 100,
            flush_keys: MAX_FLUSH_KEYS,
            max_keys: 3,
            max_bytes: 10_000,
        }
    }

    fn names(key: &str) -> (Namespace, Key) {
        (Namespace::new("n").unwrap(), Key::new(key).unwrap())
    }

    fn accept(buffer: &mut OneWayBuffer, key: &str, delta: i128, now: u64) -> Accept {
        let (ns, key) = names(key);
        buffer.accept(ShardId(0), &ns, &key, Counted::plain(None, delta), now)
    }

    impl OneWayBuffer {
        /// What a flusher woken now is to do at `now`.
        fn look(&mut self, now: u64) -> Next {
            let me = self.enlist(ShardId(0));
            self.next(ShardId(0), me, now)
        }
    }

    /// What a flusher takes at `now`, due or not.
    fn take(buffer: &mut OneWayBuffer, now: u64) -> Option<Flush> {
        buffer.take(ShardId(0), now)
    }

    fn sums(flush: &Flush) -> HashMap<String, i128> {
        let mut sums = HashMap::new();
        for op in &flush.ops {
            *sums.entry(op.key.to_string()).or_default() += i128::from(op.by);
        }
        sums
    }

    #[test]
    fn a_decrement_is_never_summed_with_an_addition_an_owned_counter_may_take() {
        let mut buffer = OneWayBuffer::new(limits());
        let (ns, key) = names("a");
        let day = None;
        let mut count = |delta: i128, ttl: Option<u32>| {
            let counted = Counted { ttl, delta, day, visitor: None, operator: false };
            buffer.accept(ShardId(0), &ns, &key, counted, 0)
        };
        count(-1, None);
        count(5, Some(60));
        count(-2, None);
        let flush = take(&mut buffer, 1_000).unwrap();
        let mut bys: Vec<i64> = flush.ops.iter().map(|op| op.by).collect();
        bys.sort_unstable();
        assert_eq!(bys, vec![-3, 5], "the decrements apart from the addition with a TTL");
    }

    #[test]
    fn a_buffer_half_full_of_bytes_is_due_at_once() {
        let charge = pending_charge(&names("a").0, &names("a").1);
        let mut buffer = OneWayBuffer::new(OneWayLimits {
            interval_ms: 60_000,
            flush_ops: u64::MAX,
            flush_keys: usize::MAX,
            max_keys: 100,
            max_bytes: 4 * charge,
        });
        accept(&mut buffer, "a", 1, 0);
        assert_eq!(buffer.due_at(ShardId(0)), Some(60_000), "a quarter full: at its interval");
        accept(&mut buffer, "b", 1, 0);
        assert_eq!(buffer.due_at(ShardId(0)), Some(0), "half full: at once");
    }

    #[test]
    fn sums_deltas_per_key_and_flushes_them_when_due() {
        let mut buffer = OneWayBuffer::new(limits());
        assert_eq!(accept(&mut buffer, "a", 1, 100), Accept::Accepted { wake: true }, "opens the window");
        assert_eq!(accept(&mut buffer, "a", 2, 200), Accept::Accepted { wake: false });
        assert_eq!(accept(&mut buffer, "b", -5, 300), Accept::Accepted { wake: false });
        assert_eq!(buffer.look(1_099), Next::At(1_100));
        let Next::Send(flush) = buffer.look(1_100) else { panic!("due") };
        assert_eq!(sums(&flush), HashMap::from([("a".into(), 3), ("b".into(), -5)]));
        assert_eq!(buffer.stats().pending, 3);
        assert_eq!(
            buffer.look(1_101),
            Next::At(1_100 + IN_FLIGHT_GRACE_MS),
            "in flight: its sender's, unless it is cut off"
        );
        buffer.finish(&flush, 3, 0, 1_150);
        let stats = buffer.stats();
        assert_eq!((stats.accepted, stats.pending, stats.flushed, stats.flush_calls), (3, 0, 3, 1));
        assert_eq!(buffer.held(), (0, 0));
        assert_eq!(buffer.look(1_200), Next::Idle, "nothing left");
        assert_eq!(accept(&mut buffer, "a", 1, 1_300), Accept::Accepted { wake: true });
    }

    #[test]
    fn a_shard_with_many_ops_pending_is_due_at_once() {
        let mut buffer = OneWayBuffer::new(OneWayLimits { flush_ops: 2, ..limits() });
        accept(&mut buffer, "a", 1, 100);
        assert_eq!(buffer.due_at(ShardId(0)), Some(1_100));
        accept(&mut buffer, "a", 1, 150);
        assert_eq!(buffer.due_at(ShardId(0)), Some(100));
    }

    #[test]
    fn new_keys_past_either_bound_are_refused_and_pending_keys_still_count() {
        let mut buffer = OneWayBuffer::new(limits());
        for key in ["a", "b", "c"] {
            assert!(matches!(accept(&mut buffer, key, 1, 0), Accept::Accepted { .. }));
        }
        assert_eq!(accept(&mut buffer, "d", 1, 0), Accept::Full, "the key bound, exactly");
        assert!(matches!(accept(&mut buffer, "a", 1, 0), Accept::Accepted { .. }));
        assert_eq!(buffer.stats().refused, 1);
        assert_eq!(buffer.stats().accepted, 4);

        let (ns, key) = names("a");
        let charge = pending_charge(&ns, &key);
        let mut buffer = OneWayBuffer::new(OneWayLimits { max_bytes: 2 * charge, max_keys: 100, ..limits() });
        assert!(matches!(accept(&mut buffer, "a", 1, 0), Accept::Accepted { .. }));
        assert!(matches!(accept(&mut buffer, "b", 1, 0), Accept::Accepted { .. }), "the byte bound, exactly");
        for _ in 0..1_000 {
            assert_eq!(accept(&mut buffer, "c", 1, 0), Accept::Full, "one key past it");
        }
        assert_eq!(buffer.held(), (2, 2 * charge), "refusals hold nothing");
    }

    fn view(buffer: &mut OneWayBuffer, day: i32, visitor: u64) -> Accept {
        let (ns, key) = names("page");
        let count =
            Counted { ttl: None, delta: 1, day: Some(Day(day)), visitor: Some(visitor), operator: false };
        buffer.accept(ShardId(0), &ns, &key, count, 0)
    }

    #[test]
    fn a_sum_a_day_carries_that_day_s_visitors_once_each_charged_until_it_settles() {
        let (ns, key) = names("page");
        let base = pending_charge(&ns, &key);
        let bound = 2 * base + 3 * VISITOR_CHARGE_BYTES;
        let mut buffer = OneWayBuffer::new(OneWayLimits { max_bytes: bound, ..limits() });
        for visitor in [7, 8, 7, 7] {
            assert!(matches!(view(&mut buffer, 100, visitor), Accept::Accepted { .. }));
        }
        assert_eq!(buffer.held(), (1, base + 2 * VISITOR_CHARGE_BYTES), "two distinct visitors");
        // After midnight: a sum of its own, charged as another key, where 8 is a visitor again.
        assert!(matches!(view(&mut buffer, 101, 8), Accept::Accepted { .. }));
        assert_eq!(buffer.held(), (2, bound));
        assert_eq!(view(&mut buffer, 101, 9), Accept::Full, "a new visitor passes the byte bound");
        assert_eq!(view(&mut buffer, 100, 9), Accept::Full, "on either day");
        assert!(matches!(view(&mut buffer, 101, 8), Accept::Accepted { .. }), "a known one still counts");
        let flush = take(&mut buffer, 1_000).unwrap();
        let ops: Vec<_> = flush.ops.iter().map(|op| (op.by, op.ops, op.visit.clone())).collect();
        assert_eq!(
            ops,
            [
                (4, 4, Some(Visit { day: Day(100), visitors: vec![7, 8] })),
                (2, 2, Some(Visit { day: Day(101), visitors: vec![8] })),
            ],
            "each day's count and visitors apart, the earlier first"
        );
        let calls = flush.request("isolate").unwrap().ops;
        assert_eq!(calls[1].visit, flush.ops[1].visit, "the shard gets each day and its visitors");
        buffer.finish(&flush, 6, 0, 0);
        assert_eq!(buffer.held(), (0, 0));
    }

    #[test]
    fn a_key_s_next_day_is_a_new_sum_under_the_key_bound() {
        let mut buffer = OneWayBuffer::new(OneWayLimits { max_keys: 2, ..limits() });
        assert!(matches!(view(&mut buffer, 100, 1), Accept::Accepted { .. }));
        assert!(matches!(view(&mut buffer, 101, 1), Accept::Accepted { .. }));
        assert_eq!(view(&mut buffer, 102, 1), Accept::Full);
        assert!(matches!(view(&mut buffer, 101, 2), Accept::Accepted { .. }));
        assert_eq!(buffer.held().0, 2);
    }

    #[test]
    fn counts_either_side_of_midnight_stay_in_their_days_on_the_shard() {
        const DAY_MS: u64 = 86_400_000;
        let (monday, tuesday) = (Day(20_000), Day(20_001));
        let store = crate::shard::memory_store::MemoryStore::default();
        let mut shard = new_shard();
        // More sums than one flush carries: a key's Monday must reach the shard before its
        // Tuesday, whichever flush or place in it each sum takes.
        let keys = MAX_FLUSH_KEYS * 3 / 4;
        let mut buffer =
            OneWayBuffer::new(OneWayLimits { max_keys: 2 * keys, max_bytes: u64::MAX, ..limits() });
        for n in 0..keys {
            let (ns, key) = names(&format!("k{n}"));
            for (day, visitor) in [(tuesday, 1), (monday, 2), (monday, 3), (tuesday, 2)] {
                let count =
                    Counted { ttl: None, delta: 1, day: Some(day), visitor: Some(visitor), operator: false };
                assert!(matches!(buffer.accept(ShardId(0), &ns, &key, count, 0), Accept::Accepted { .. }));
            }
        }
        let now = u64::try_from(tuesday.0).unwrap() * DAY_MS + 1_000;
        let mut flushes = 0;
        while let Some(flush) = take(&mut buffer, now) {
            let results = on_shard(&mut shard, &store, &flush.request("i").unwrap(), now);
            let (applied, dropped) = flush.settled(results);
            buffer.finish(&flush, applied, dropped, 0);
            flushes += 1;
        }
        assert_eq!((flushes, buffer.stats().flushed), (2, 4 * keys as u64));
        for n in 0..keys {
            let (ns, key) = names(&format!("k{n}"));
            let request = ShardRequest {
                ops: vec![ShardOp::Days { ns, key, from: monday, to: tuesday, unique: true }.into()],
                ..Default::default()
            };
            let OpResult::Days(answer) = on_shard(&mut shard, &store, &request, now).remove(0) else {
                panic!("k{n}: not days")
            };
            let days: Vec<_> = answer.days.iter().map(|d| (d.day, d.count, d.uniques)).collect();
            assert_eq!(days, [(monday, 2, Some(2)), (tuesday, 2, Some(2))], "k{n}");
        }
    }

    #[test]
    fn keys_in_flight_stay_charged_until_their_flush_settles() {
        let mut buffer = OneWayBuffer::new(limits());
        for key in ["a", "b", "c"] {
            accept(&mut buffer, key, 1, 0);
        }
        let flush = take(&mut buffer, 1_000).unwrap();
        assert_eq!(accept(&mut buffer, "d", 1, 1_000), Accept::Full);
        buffer.finish(&flush, 3, 0, 0);
        assert!(matches!(accept(&mut buffer, "d", 1, 1_000), Accept::Accepted { .. }));
    }

    #[test]
    fn an_unsettled_flush_is_sent_again_under_its_number_then_dropped_if_given_up() {
        let mut buffer = OneWayBuffer::new(limits());
        accept(&mut buffer, "a", 1, 0);
        accept(&mut buffer, "b", 1, 0);
        let first = take(&mut buffer, 1_000).unwrap();
        assert_eq!(buffer.due_at(ShardId(0)), Some(1_000 + IN_FLIGHT_GRACE_MS), "left to its sender");
        // Arrivals meanwhile wait for the next flush.
        accept(&mut buffer, "a", 1, 1_010);
        buffer.finish(&first, 0, 0, 1_010);
        assert_eq!(
            buffer.due_at(ShardId(0)),
            Some(1_010 + FIRST_RESEND_MS),
            "reported unsettled: sent again"
        );
        let again = take(&mut buffer, 1_020).unwrap();
        assert_eq!((again.number, again.ops.clone(), again.attempts), (first.number, first.ops.clone(), 2));
        // Partly applied: the rest is sent again, as many times as it takes.
        buffer.finish(&again, 1, 0, 0);
        for attempt in 3..10 {
            let resent = take(&mut buffer, 1_000 * u64::from(attempt)).unwrap();
            assert_eq!((resent.number, resent.attempts), (first.number, attempt));
            buffer.finish(&resent, 0, 0, 0);
        }
        assert_eq!(buffer.stats().dropped, 0, "nothing accepted is given up while it can be sent");
        let last = take(&mut buffer, 10_000).unwrap();
        buffer.finish(&last, 2, 0, 0);
        let stats = buffer.stats();
        assert_eq!((stats.flushed, stats.dropped, stats.pending), (2, 0, 1));
        let next = take(&mut buffer, 10_010).unwrap();
        assert_ne!(next.number, first.number);
        assert_eq!(sums(&next), HashMap::from([("a".into(), 1)]));
        // A late report about a settled flush changes nothing.
        buffer.finish(&first, 5, 5, 0);
        assert_eq!(buffer.stats().flushed, 2);
    }

    #[test]
    fn an_arrival_wakes_a_flusher_only_for_a_new_window_or_something_overdue() {
        let mut buffer = OneWayBuffer::new(OneWayLimits { max_keys: 10, ..limits() });
        assert_eq!(accept(&mut buffer, "a", 1, 0), Accept::Accepted { wake: true });
        assert_eq!(accept(&mut buffer, "b", 1, 999), Accept::Accepted { wake: false });
        // Its flusher was cut off before the window ended: the next arrival finds it overdue.
        assert_eq!(accept(&mut buffer, "c", 1, 1_000), Accept::Accepted { wake: true });
        let flush = take(&mut buffer, 1_000).unwrap();
        // Sums arriving while a flush is in flight wait for its sender, who looks again after it.
        assert_eq!(accept(&mut buffer, "a", 1, 1_001), Accept::Accepted { wake: false });
        buffer.finish(&flush, 0, 0, 1_010);
        assert_eq!(buffer.look(1_011), Next::At(1_010 + FIRST_RESEND_MS), "a resend is due");
        assert_eq!(accept(&mut buffer, "a", 1, 1_010 + FIRST_RESEND_MS), Accept::Accepted { wake: true });
    }

    #[test]
    fn a_flush_left_in_flight_by_a_cut_off_sender_is_sent_again_by_the_next() {
        let mut buffer = OneWayBuffer::new(limits());
        accept(&mut buffer, "a", 1, 0);
        let lost = take(&mut buffer, 1_000).unwrap();
        // Its sender is cut off without a report: left to it until the grace ends.
        assert_eq!(
            accept(&mut buffer, "b", 1, 1_000 + IN_FLIGHT_GRACE_MS - 1),
            Accept::Accepted { wake: false }
        );
        assert_eq!(buffer.look(1_000 + IN_FLIGHT_GRACE_MS - 1), Next::At(1_000 + IN_FLIGHT_GRACE_MS));
        assert_eq!(accept(&mut buffer, "b", 1, 1_000 + IN_FLIGHT_GRACE_MS), Accept::Accepted { wake: true });
        let Next::Send(again) = buffer.look(1_000 + IN_FLIGHT_GRACE_MS) else { panic!("overdue") };
        assert_eq!((again.number, again.attempts), (lost.number, 2));
    }

    #[test]
    fn an_arrival_due_after_the_woken_flushers_have_ended_wakes_another() {
        let mut buffer = OneWayBuffer::new(OneWayLimits { max_keys: 10, ..limits() });
        assert_eq!(accept(&mut buffer, "a", 1, 0), Accept::Accepted { wake: true });
        // That flusher runs until FLUSHER_ALLOWANCE_MS; it sends just before.
        let Next::Send(flush) = buffer.look(29_500) else { panic!("due") };
        // A count arrives while the flush is in flight: the flush is due again (if its sender
        // was cut off) after the first flusher has ended, so another is woken.
        const { assert!(29_500 + IN_FLIGHT_GRACE_MS > FLUSHER_ALLOWANCE_MS) };
        assert_eq!(accept(&mut buffer, "b", 1, 29_600), Accept::Accepted { wake: true });
        // Its sender reports; the second flusher, which runs until 59,600, sends the count.
        buffer.finish(&flush, 1, 0, 29_700);
        assert_eq!(buffer.look(29_700), Next::At(30_600));
        assert!(matches!(buffer.look(30_600), Next::Send(_)));
        assert_eq!(accept(&mut buffer, "c", 1, 30_601), Accept::Accepted { wake: false }, "covered");
    }

    #[test]
    fn a_flusher_stops_once_a_later_one_has_enlisted() {
        let mut buffer = OneWayBuffer::new(limits());
        accept(&mut buffer, "a", 1, 0);
        let first = buffer.enlist(ShardId(0));
        assert_eq!(buffer.next(ShardId(0), first, 10), Next::At(1_000));
        let second = buffer.enlist(ShardId(0));
        assert_eq!(buffer.next(ShardId(0), first, 20), Next::Idle, "the later one runs as long");
        assert!(matches!(buffer.next(ShardId(0), second, 1_000), Next::Send(_)));
    }

    #[test]
    fn sums_behind_a_flush_in_flight_due_after_the_cover_wake_a_flusher() {
        let mut buffer = OneWayBuffer::new(OneWayLimits { max_keys: 10, ..limits() });
        assert_eq!(accept(&mut buffer, "a", 1, 0), Accept::Accepted { wake: true });
        let flusher = buffer.enlist(ShardId(0));
        let Next::Send(flush) = buffer.next(ShardId(0), flusher, 28_000) else { panic!("due") };
        buffer.finish(&flush, 0, 0, 29_000);
        // A resend is due at 29,250, within the cover (30,000); a count arriving at 29,200 is
        // due at 30,200, after it: a flusher is woken for it.
        assert_eq!(accept(&mut buffer, "b", 1, 29_200), Accept::Accepted { wake: true });
        // The new one looks when the sums behind a flush it waits on fall due.
        let later = buffer.enlist(ShardId(0));
        assert!(matches!(buffer.next(ShardId(0), later, 29_250), Next::Send(_)), "the resend");
    }

    #[test]
    fn the_arrivals_of_one_batch_wake_one_flusher() {
        let mut buffer = OneWayBuffer::new(OneWayLimits { flush_ops: 2, max_keys: 10, ..limits() });
        // Due at once from the second: a batch's accepts all come before its flusher runs.
        let wakes = (0..6)
            .filter(|i| accept(&mut buffer, &format!("k{i}"), 1, 5) == Accept::Accepted { wake: true })
            .count();
        assert_eq!(wakes, 1);
        let Next::Send(flush) = buffer.look(5) else { panic!("due") };
        buffer.finish(&flush, 0, 0, 6);
        // Once the flusher has looked, an arrival that finds something overdue wakes one again.
        assert_eq!(accept(&mut buffer, "k0", 1, 6 + FIRST_RESEND_MS), Accept::Accepted { wake: true });
    }

    #[test]
    fn a_late_report_of_an_earlier_send_is_ignored() {
        let mut buffer = OneWayBuffer::new(limits());
        accept(&mut buffer, "a", 1, 0);
        let first = take(&mut buffer, 1_000).unwrap();
        // Its sender is taken to be cut off: the flush is sent again.
        let resent_at = 1_000 + IN_FLIGHT_GRACE_MS;
        let Next::Send(again) = buffer.look(resent_at) else { panic!("overdue") };
        assert_eq!((again.number, again.attempts), (first.number, 2));
        // The first send's unknown outcome arrives late: the second is still awaited.
        buffer.finish(&first, 0, 0, resent_at + 1);
        assert_eq!(buffer.look(resent_at + 2), Next::At(resent_at + IN_FLIGHT_GRACE_MS));
        buffer.finish(&again, 1, 0, resent_at + 3);
        assert_eq!((buffer.stats().flushed, buffer.stats().retried), (1, 1));
        assert_eq!(buffer.look(resent_at + 4), Next::Idle);
    }

    #[test]
    fn resends_wait_longer_each_time_up_to_64_s() {
        let mut buffer = OneWayBuffer::new(limits());
        accept(&mut buffer, "a", 1, 0);
        let mut now = 1_000;
        let mut waits = Vec::new();
        let mut flush = take(&mut buffer, now).unwrap();
        for _ in 0..6 {
            buffer.finish(&flush, 0, 0, now);
            let Next::At(at) = buffer.look(now) else { panic!("a resend waits") };
            waits.push(at - now);
            now = at;
            let Next::Send(again) = buffer.look(now) else { panic!("due") };
            flush = again;
        }
        assert_eq!(waits, [250, 1_000, 4_000, 16_000, 64_000, 64_000]);
    }

    #[test]
    fn sums_beyond_i64_are_split_never_wrapped_and_past_any_counter_refused() {
        let mut buffer = OneWayBuffer::new(limits());
        let (max, min) = (i128::from(i64::MAX), i128::from(i64::MIN));
        assert!(matches!(accept(&mut buffer, "a", max, 0), Accept::Accepted { .. }));
        assert!(matches!(accept(&mut buffer, "a", max, 0), Accept::Accepted { .. }));
        // 3 * i64::MAX would overflow whatever the counter held: refused now, not dropped later.
        assert_eq!(accept(&mut buffer, "a", max, 0), Accept::Overflow);
        accept(&mut buffer, "b", 0, 0);
        accept(&mut buffer, "c", min, 0);
        assert!(matches!(accept(&mut buffer, "c", min + 1, 0), Accept::Accepted { .. }), "at the bound");
        assert_eq!(accept(&mut buffer, "c", -1, 0), Accept::Overflow);
        assert_eq!(buffer.stats().accepted, 5);
        let flush = take(&mut buffer, 1_000).unwrap();
        assert_eq!(
            sums(&flush),
            HashMap::from([("a".into(), 2 * max), ("b".into(), 0), ("c".into(), 2 * min + 1)])
        );
        let ops = |key: &str| -> Vec<_> {
            flush.ops.iter().filter(|op| op.key.as_str() == key).map(|op| (op.by, op.ops)).collect()
        };
        assert_eq!(ops("a"), [(i64::MAX, 2), (i64::MAX, 0)]);
        assert_eq!(ops("c"), [(i64::MIN, 2), (i64::MIN + 1, 0)]);
        assert_eq!(flush.total_ops(), 5);
    }

    /// Runs `ops` on `shard` over `store` at `now`, as a shard call does.
    fn on_shard(
        shard: &mut crate::ShardEngine,
        store: &crate::shard::memory_store::MemoryStore,
        request: &ShardRequest,
        now: u64,
    ) -> Vec<OpResult> {
        shard.run(store, request, now).response.results
    }

    fn new_shard() -> crate::ShardEngine {
        crate::ShardEngine::new(crate::shard::cache_table::CacheBounds { bytes: 1_000, entries: 1 })
    }

    fn read(
        shard: &mut crate::ShardEngine,
        store: &crate::shard::memory_store::MemoryStore,
        key: &str,
        now: u64,
    ) -> OpResult {
        let (ns, key) = names(key);
        let request = ShardRequest {
            ops: vec![ShardOp::Get { ns, key }.into()],
            answer_budget: None,
            receipt: None,
            placed: None,
        };
        on_shard(shard, store, &request, now).remove(0)
    }

    #[test]
    fn a_keys_sum_is_applied_with_the_last_ttl_given_as_one_by_one() {
        let store = crate::shard::memory_store::MemoryStore::default();
        let mut shard = new_shard();
        let mut buffer = OneWayBuffer::new(OneWayLimits { max_keys: 100, ..limits() });
        for n in 0..20 {
            let (ns, key) = names(&format!("k{n}"));
            buffer.accept(ShardId(0), &ns, &key, Counted::plain(Some(60), 1), 0);
            buffer.accept(ShardId(0), &ns, &key, Counted::plain(Some(86_400), 1), 1);
            // No TTL keeps the one before, as a write without one does.
            buffer.accept(ShardId(0), &ns, &key, Counted::plain(None, 1), 2);
        }
        let flush = take(&mut buffer, 1_000).unwrap();
        // The TTL'd sum and the plain count go apart: two ops a key, in either order the same.
        assert_eq!(flush.ops.len(), 40, "two ops per key");
        on_shard(&mut shard, &store, &flush.request("i").unwrap(), 1_000);
        for n in 0..20 {
            let now = read(&mut shard, &store, &format!("k{n}"), 121_000);
            assert!(
                matches!(now, OpResult::Value { value: 3, exists: true, .. }),
                "k{n} lives 24 h: {now:?}"
            );
        }
    }

    /// `n/owned` at 100, created with an admin key: an owned counter.
    fn owned_counter(
        shard: &mut crate::ShardEngine,
        store: &crate::shard::memory_store::MemoryStore,
    ) -> (Namespace, Key) {
        let (ns, key) = names("owned");
        let create = ShardOp::Create {
            ns: ns.clone(),
            key: key.clone(),
            value: 100,
            settings: crate::shard::settings::CounterSettings::default(),
            admin_key: Some("k".to_owned()),
            ttl: None,
        };
        shard.run(store, &ShardRequest { ops: vec![create.into()], ..Default::default() }, 0);
        (ns, key)
    }

    #[test]
    fn counts_are_kept_apart_from_deltas_an_owned_counter_refuses() {
        let store = crate::shard::memory_store::MemoryStore::default();
        let mut shard = new_shard();
        let (ns, key) = owned_counter(&mut shard, &store);
        let mut buffer = OneWayBuffer::new(limits());
        for _ in 0..10 {
            buffer.accept(ShardId(0), &ns, &key, Counted::plain(None, 1), 0);
        }
        buffer.accept(ShardId(0), &ns, &key, Counted::plain(None, -9), 0);
        buffer.accept(ShardId(0), &ns, &key, Counted::plain(Some(1), 1), 0);
        let flush = take(&mut buffer, 1_000).unwrap();
        let results = on_shard(&mut shard, &store, &flush.request("i").unwrap(), 1_000);
        // The ten counts are applied; the decrement and the TTL'd increment are refused.
        assert_eq!(flush.settled(results), (10, 2));
        assert!(matches!(read(&mut shard, &store, "owned", 2_000), OpResult::Value { value: 110, .. }));
    }

    #[test]
    fn an_operator_s_deltas_are_applied_as_an_operator_s_and_nobody_else_s_are() {
        let store = crate::shard::memory_store::MemoryStore::default();
        let mut shard = new_shard();
        let (ns, key) = owned_counter(&mut shard, &store);
        let mut buffer = OneWayBuffer::new(limits());
        let operator = |delta| Counted { operator: true, ..Counted::plain(None, delta) };
        buffer.accept(ShardId(0), &ns, &key, operator(-30), 0);
        buffer.accept(ShardId(0), &ns, &key, Counted::plain(None, -9), 0);
        buffer.accept(ShardId(0), &ns, &key, operator(5), 0);
        let flush = take(&mut buffer, 1_000).unwrap();
        let results = on_shard(&mut shard, &store, &flush.request("i").unwrap(), 1_000);
        // The operator's two deltas (one sum) are applied; the other caller's decrement is not.
        assert_eq!(flush.settled(results), (2, 1));
        assert!(matches!(read(&mut shard, &store, "owned", 2_000), OpResult::Value { value: 75, .. }));
    }

    #[test]
    fn a_split_sum_counts_as_applied_only_when_all_of_it_was() {
        let store = crate::shard::memory_store::MemoryStore::default();
        let mut shard = new_shard();
        let mut buffer = OneWayBuffer::new(limits());
        let max = i128::from(i64::MAX);
        accept(&mut buffer, "a", max, 0);
        accept(&mut buffer, "a", max, 0);
        accept(&mut buffer, "b", 1, 0);
        let flush = take(&mut buffer, 1_000).unwrap();
        let results = on_shard(&mut shard, &store, &flush.request("i").unwrap(), 1_000);
        // a's first i64::MAX fits a new counter, its second overflows: a's two ops are dropped.
        assert_eq!(flush.settled(results), (1, 2));
    }

    #[test]
    fn a_refusal_that_may_pass_is_left_for_a_resend() {
        let mut buffer = OneWayBuffer::new(limits());
        accept(&mut buffer, "a", 1, 0);
        let flush = take(&mut buffer, 1_000).unwrap();
        let interrupted = OpResult::Failed { error: CoreError::ChangeInterrupted { from: 8, to: 16 } };
        assert_eq!(flush.settled(vec![interrupted]), (0, 0));
        assert_eq!(flush.settled(vec![OpResult::Failed { error: CoreError::Overflow }]), (0, 1));
        assert_eq!(flush.settled(Vec::new()), (0, 0), "no answer for it: unsettled");
    }

    #[test]
    fn a_flush_unsettled_for_half_the_record_window_is_given_up_not_sent_again() {
        let mut buffer = OneWayBuffer::new(limits());
        accept(&mut buffer, "a", 1, 0);
        let flush = take(&mut buffer, 1_000).unwrap();
        buffer.finish(&flush, 0, 0, 0);
        let resent = take(&mut buffer, 1_000 + MAX_RESEND_AGE_MS).expect("still within the window");
        buffer.finish(&resent, 0, 0, 0);
        // Its receipt's record could lapse before a resend arrived: the shard would apply it again.
        assert_eq!(take(&mut buffer, 1_001 + MAX_RESEND_AGE_MS), None);
        assert_eq!((buffer.stats().dropped, buffer.stats().pending, buffer.held()), (1, 0, (0, 0)));
    }

    #[test]
    fn a_flush_sent_again_after_a_lost_answer_is_applied_once() {
        let store = crate::shard::memory_store::MemoryStore::default();
        let mut shard = new_shard();
        let mut buffer = OneWayBuffer::new(limits());
        for delta in [5, 7, -2] {
            accept(&mut buffer, "a", delta, 0);
        }
        accept(&mut buffer, "b", 1, 0);
        let first = take(&mut buffer, 1_000).unwrap();
        // Applied, but the answer is lost: nothing is settled.
        on_shard(&mut shard, &store, &first.request("isolate1").unwrap(), 1_000);
        buffer.finish(&first, 0, 0, 0);
        let again = take(&mut buffer, 1_250).unwrap();
        let results = on_shard(&mut shard, &store, &again.request("isolate1").unwrap(), 1_000);
        assert!(results.iter().all(|r| matches!(r, OpResult::Replayed { .. })), "{results:?}");
        let (applied, dropped) = again.settled(results);
        assert_eq!((applied, dropped), (4, 0));
        buffer.finish(&again, applied, dropped, 0);
        assert!(matches!(read(&mut shard, &store, "a", 2_000), OpResult::Value { value: 10, .. }));
        assert!(matches!(read(&mut shard, &store, "b", 2_000), OpResult::Value { value: 1, .. }));
        assert_eq!((buffer.stats().flushed, buffer.stats().pending), (4, 0));
    }

    #[test]
    fn an_op_the_shard_refuses_for_good_is_dropped_and_counted() {
        let mut buffer = OneWayBuffer::new(limits());
        accept(&mut buffer, "a", 1, 0);
        accept(&mut buffer, "b", 1, 0);
        let flush = take(&mut buffer, 1_000).unwrap();
        let results = flush
            .ops
            .iter()
            .map(|op| {
                if op.key.as_str() == "a" {
                    OpResult::Failed { error: CoreError::Overflow }
                } else {
                    OpResult::Value { value: 1, exists: true, version: 1 }
                }
            })
            .collect();
        let (applied, dropped) = flush.settled(results);
        assert_eq!((applied, dropped), (1, 1));
        buffer.finish(&flush, applied, dropped, 0);
        let stats = buffer.stats();
        assert_eq!((stats.flushed, stats.dropped, stats.pending), (1, 1, 0));
    }

    #[test]
    fn a_replayed_op_counts_as_applied_even_when_its_value_could_not_be_read() {
        let mut buffer = OneWayBuffer::new(limits());
        accept(&mut buffer, "a", 1, 0);
        let flush = take(&mut buffer, 1_000).unwrap();
        let unreadable = OpResult::Failed { error: CoreError::StorageUnavailable { detail: "read".into() } };
        let results = vec![OpResult::Replayed { first: Box::new(unreadable) }];
        assert_eq!(flush.settled(results), (1, 0));
    }

    proptest! {
        #[test]
        fn every_accepted_delta_is_flushed_exactly_once(
            deltas in prop::collection::vec((0..5_usize, -1_000_i64..1_000, 0..3_u64), 1..200),
        ) {
            let mut buffer = OneWayBuffer::new(OneWayLimits { max_keys: 100, ..limits() });
            let mut expected: HashMap<String, i128> = HashMap::new();
            let mut applied: HashMap<String, i128> = HashMap::new();
            let mut flush_all = |buffer: &mut OneWayBuffer, now: u64, until_empty: bool| {
                while buffer.due_at(ShardId(0)).is_some_and(|due| until_empty || due <= now) {
                    let Some(flush) = take(buffer, now) else { break };
                    for (key, sum) in sums(&flush) {
                        *applied.entry(key).or_default() += sum;
                    }
                    buffer.finish(&flush, flush.total_ops(), 0, 0);
                }
            };
            let mut now = 0;
            for (key, delta, step) in deltas {
                now += step * 400;
                let key = format!("k{key}");
                let accepted = matches!(accept(&mut buffer, &key, i128::from(delta), now), Accept::Accepted { .. });
                prop_assert!(accepted);
                *expected.entry(key).or_default() += i128::from(delta);
                flush_all(&mut buffer, now, false);
            }
            flush_all(&mut buffer, now, true);
            expected.retain(|_, sum| *sum != 0);
            applied.retain(|_, sum| *sum != 0);
            prop_assert_eq!(applied, expected);
            prop_assert_eq!(buffer.stats().pending, 0);
            prop_assert_eq!(buffer.held(), (0, 0));
        }
    }
}
