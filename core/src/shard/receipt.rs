//! Receipts: a request applied at most once as a whole, under one idempotency record.
//!
//! The one-way flusher sends a shard the sums of many keys in one request and, when the answer
//! is lost, sends the same request again. Per-op idempotency keys make that safe at the price
//! of one record row per key: as many billed rows again as the counters themselves. A receipt
//! is one idempotency key for the whole request. The shard stores one record for it, in the
//! same transaction as the counters, naming the places of the ops it did *not* apply (refused,
//! as by an owner key; usually none). The same request sent again under the same receipt runs
//! only those ops, answers every op applied before as replayed, and rewrites the record if
//! what is left unapplied changed. A send whose writes cannot be stored applies nothing and
//! stores no record, so its resend runs it whole, once.
//!
//! A replayed op answers the counter's value now, not the value its first send saw: the record
//! keeps no per-op answers (that would cost bytes per key again), and the flusher needs only
//! to know that the op was applied.
//!
//! Bounds: only counter increments and decrements travel under a receipt, at most
//! [`MAX_RECEIPT_OPS`] of them; a request outside that is refused whole and changes nothing.
//! The record then holds at most [`MAX_RECEIPT_RECORD_BYTES`] of places.

use crate::shard::idempotency::{self, IdempotencyRecord, IdempotencyStore, RecordScope};
use crate::shard::protocol::{ShardCall, ShardOp, Visit};
use xxhash_rust::xxh3::Xxh3;

use crate::partition::ShardId;
use crate::{CoreError, IdempotencyKey};

/// Most ops one receipted request may carry.
pub const MAX_RECEIPT_OPS: usize = 10_000;

/// Most bytes a receipt's record of unapplied places takes: every op unapplied, each place
/// (below 10,000: at most four digits) and its comma within six bytes, plus the brackets.
pub const MAX_RECEIPT_RECORD_BYTES: usize = MAX_RECEIPT_OPS * 6 + 2;

/// What a receipt's record is kept under: the receipt on the request's first key, as a kind
/// of its own, so it can share neither a per-op record's nor another request's scope.
#[must_use]
pub fn scope(receipt: &IdempotencyKey, first: &ShardOp) -> RecordScope {
    let (ns, key) = first.target();
    RecordScope { idempotency_key: receipt.clone(), kind: "request", ns: ns.clone(), key: key.clone() }
}

/// Why `calls` cannot travel under a receipt, if they cannot.
#[must_use]
pub fn refusal(calls: &[ShardCall]) -> Option<CoreError> {
    if calls.len() > MAX_RECEIPT_OPS {
        return Some(CoreError::TooManyOps { max: MAX_RECEIPT_OPS });
    }
    let receiptable = |call: &ShardCall| {
        matches!(call.op, ShardOp::Incr { .. } | ShardOp::Decr { .. }) && call.idempotency_key.is_none()
    };
    (!calls.iter().all(receiptable)).then(|| CoreError::InvalidOp {
        reason: "a receipted request carries only incr and decr ops, without their own idempotency keys"
            .into(),
    })
}

/// The digest a resend is compared by: xxh3-128 of the ops' canonical encodings, in order.
/// The visitors' hashes are left out: the record is kept a day, and nothing that could be
/// tested against a guessed address and user agent may be kept (see [`crate::visits::visitor`]);
/// a resend carries the same ones.
#[must_use]
pub fn digest(calls: &[ShardCall]) -> u128 {
    if calls.iter().all(|call| call.visit.as_ref().is_none_or(|visit| visit.visitors.is_empty())) {
        return idempotency::json_digest(&calls);
    }
    let without_visitors: Vec<ShardCall> = calls
        .iter()
        .map(|call| ShardCall {
            visit: call.visit.as_ref().map(|visit| Visit { day: visit.day, visitors: Vec::new() }),
            ..call.clone()
        })
        .collect();
    idempotency::json_digest(&without_visitors)
}

/// What an earlier send of a request under its receipt left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Earlier {
    /// Never sent, or sent longer ago than the window: run every op.
    None,
    /// Sent before: only the ops at these places were not applied.
    Sent { unapplied: Vec<usize>, created_at_ms: u64 },
}

impl Earlier {
    /// What `record` says of the request with `digest`.
    ///
    /// # Errors
    /// [`CoreError::IdempotencyMismatch`] when the receipt was used for another request,
    /// [`CoreError::StorageUnavailable`] when the stored places cannot be read.
    pub fn from_record(
        record: Option<IdempotencyRecord>,
        digest: u128,
        now_ms: u64,
    ) -> Result<Self, CoreError> {
        let Some(record) = record else { return Ok(Self::None) };
        if now_ms.saturating_sub(record.created_at_ms) >= idempotency::IDEMPOTENCY_WINDOW_MS {
            return Ok(Self::None);
        }
        if record.request_digest != digest {
            return Err(CoreError::IdempotencyMismatch);
        }
        let unapplied = serde_json::from_str(&record.result)
            .map_err(|e| CoreError::StorageUnavailable { detail: format!("stored receipt: {e}") })?;
        Ok(Self::Sent { unapplied, created_at_ms: record.created_at_ms })
    }

    /// Whether the op at `place` must run this time.
    #[must_use]
    pub fn runs(&self, place: usize) -> bool {
        match self {
            Self::None => true,
            Self::Sent { unapplied, .. } => unapplied.binary_search(&place).is_ok(),
        }
    }

    /// The record to store after this send left `unapplied` (sorted), if it differs from the
    /// one stored: the first send's time is kept, so the window runs from the first send.
    #[must_use]
    pub fn record_after(&self, unapplied: &[usize], digest: u128, now_ms: u64) -> Option<IdempotencyRecord> {
        let created_at_ms = match self {
            Self::Sent { unapplied: before, .. } if before == unapplied => return None,
            Self::Sent { created_at_ms, .. } => *created_at_ms,
            Self::None => now_ms,
        };
        let result = serde_json::to_string(unapplied).unwrap_or_default();
        Some(IdempotencyRecord { request_digest: digest, result, created_at_ms })
    }
}

/// Which ops of `calls`, sent under `receipt`, an earlier send applied on this shard: what a
/// shard forwarding the request elsewhere (during a change of the shard count, see
/// [`crate::shard::migration`]) must not send on, since those ops were applied here before
/// their keys moved.
///
/// # Errors
/// As [`Earlier::from_record`], or a storage failure.
pub fn applied_earlier(
    store: &impl IdempotencyStore,
    receipt: &IdempotencyKey,
    calls: &[ShardCall],
    now_ms: u64,
) -> Result<Vec<bool>, CoreError> {
    let Some(first) = calls.first() else { return Ok(Vec::new()) };
    let record = store.load_record(&scope(receipt, &first.op)).map_err(CoreError::storage)?;
    let earlier = Earlier::from_record(record, digest(calls), now_ms)?;
    Ok((0..calls.len()).map(|place| !earlier.runs(place)).collect())
}

/// The receipt a forwarded part of a receipted request travels under to `home` (see
/// [`crate::shard::migration`]): the same for every resend, another for each home, and never
/// the whole request's, whose record on the forwarding shard says what it applied itself.
#[must_use]
pub fn forwarded(receipt: &IdempotencyKey, home: ShardId) -> IdempotencyKey {
    let mut hasher = Xxh3::new();
    hasher.update(receipt.as_str().as_bytes());
    hasher.update(&[0]);
    hasher.update(&home.0.to_le_bytes());
    let derived = format!("forwarded-{:032x}", hasher.digest128());
    // 42 visible ASCII characters: always a valid key.
    IdempotencyKey::new(&derived).unwrap_or_else(|_| receipt.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::cache_table::CacheBounds;
    use crate::shard::engine::ShardEngine;
    use crate::shard::memory_store::MemoryStore;
    use crate::shard::protocol::ShardRequest;
    use crate::{Key, Namespace};

    #[test]
    fn a_forwarded_part_has_a_receipt_of_its_own_per_home() {
        let receipt = IdempotencyKey::new("flush-1").unwrap();
        let to_three = forwarded(&receipt, ShardId(3));
        assert_eq!(to_three, forwarded(&receipt, ShardId(3)), "the same on every resend");
        assert_ne!(to_three, forwarded(&receipt, ShardId(4)));
        assert_ne!(to_three, forwarded(&IdempotencyKey::new("flush-2").unwrap(), ShardId(3)));
        assert_ne!(to_three, receipt);
        assert!(to_three.as_str().starts_with("forwarded-"), "{}", to_three.as_str());
    }

    #[test]
    fn a_forwarder_learns_which_ops_an_earlier_send_applied() {
        let store = MemoryStore::default();
        let mut engine = ShardEngine::new(CacheBounds { bytes: 1 << 20, entries: 100 });
        let receipt = IdempotencyKey::new("flush-1").unwrap();
        let set = ShardOp::Set {
            ns: Namespace::new("n").unwrap(),
            key: Key::new("b").unwrap(),
            value: i64::MAX,
            ttl: None,
        };
        engine.run(&store, &ShardRequest { ops: vec![set.into()], ..Default::default() }, 0);
        let calls = vec![incr("a", 1), incr("b", 1), incr("c", 1)];
        assert_eq!(applied_earlier(&store, &receipt, &calls, 1).unwrap(), vec![false; 3], "never sent");
        let request =
            ShardRequest { ops: calls.clone(), receipt: Some(receipt.clone()), ..Default::default() };
        engine.run(&store, &request, 1);
        // `b` overflowed and was not applied; the others were.
        assert_eq!(applied_earlier(&store, &receipt, &calls, 2).unwrap(), vec![true, false, true]);
        assert_eq!(
            applied_earlier(&store, &receipt, &calls[..2], 2),
            Err(CoreError::IdempotencyMismatch),
            "another request under the same receipt"
        );
    }

    fn incr(key: &str, by: i64) -> ShardCall {
        ShardOp::Incr { ns: Namespace::new("n").unwrap(), key: Key::new(key).unwrap(), by, ttl: None }.into()
    }

    #[test]
    fn only_unkeyed_increments_and_decrements_within_the_bound_take_a_receipt() {
        assert_eq!(refusal(&[incr("a", 1), incr("b", -1)]), None);
        let read = ShardOp::Get { ns: Namespace::new("n").unwrap(), key: Key::new("a").unwrap() };
        assert!(matches!(refusal(&[incr("a", 1), read.into()]), Some(CoreError::InvalidOp { .. })));
        let mut keyed = incr("a", 1);
        keyed.idempotency_key = Some(IdempotencyKey::new("k").unwrap());
        assert!(matches!(refusal(&[keyed]), Some(CoreError::InvalidOp { .. })));
        let at_bound = vec![incr("a", 1); MAX_RECEIPT_OPS];
        assert_eq!(refusal(&at_bound), None);
        let past = vec![incr("a", 1); MAX_RECEIPT_OPS + 1];
        assert_eq!(refusal(&past), Some(CoreError::TooManyOps { max: MAX_RECEIPT_OPS }));
    }

    #[test]
    fn a_record_of_every_place_unapplied_stays_within_its_byte_bound() {
        let every: Vec<usize> = (0..MAX_RECEIPT_OPS).collect();
        let record = Earlier::None.record_after(&every, 1, 0).unwrap();
        assert!(record.result.len() <= MAX_RECEIPT_RECORD_BYTES, "{}", record.result.len());
    }

    #[test]
    fn a_resend_runs_only_what_was_left_and_keeps_the_first_time() {
        let calls = [incr("a", 1), incr("b", 2)];
        let first = Earlier::None.record_after(&[1], digest(&calls), 5).unwrap();
        let earlier = Earlier::from_record(Some(first), digest(&calls), 10).unwrap();
        assert!(!earlier.runs(0) && earlier.runs(1));
        assert_eq!(earlier.record_after(&[1], digest(&calls), 10), None, "nothing changed, nothing written");
        let second = earlier.record_after(&[], digest(&calls), 10).unwrap();
        assert_eq!((second.result.as_str(), second.created_at_ms), ("[]", 5));
        let other = [incr("a", 1), incr("b", 3)];
        assert_eq!(
            Earlier::from_record(Some(second), digest(&other), 10),
            Err(CoreError::IdempotencyMismatch)
        );
    }
}
