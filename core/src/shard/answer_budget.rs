//! The byte budget of an answer: how many bytes of cache values one shard answer, and so one
//! batch answer, may carry.
//!
//! A shard answers a call over RPC, whose result the runtime caps at 32 MiB; a result past that
//! fails the whole call after its writes are committed, and the worker could then only report
//! every op of the call as "outcome unknown". So the answer is kept far below the cap, and only
//! reads are ever refused for it: the results of writes are a few dozen bytes each and always
//! fit, so an answer cannot fail because of what a write returned.
//!
//! Only cache entries are large. Each is charged what it costs in the shard's JSON answer
//! (base64 of its value, its content type and a fixed overhead); an entry that does not fit in
//! what is left is answered `payload_too_large` in its place, and the ops after it still run.

use crate::shard::cache_table::MAX_CACHE_VALUE_BYTES;
use crate::shard::protocol::OpResult;
use crate::CoreError;

/// Cache-value bytes, as the shard encodes them (base64), that one shard answer may carry:
/// 12 MiB, well under the runtime's 32 MiB RPC result cap, so that counters and error messages
/// never bring an answer near the cap.
pub const MAX_SHARD_ANSWER_BYTES: u64 = 12 * 1024 * 1024;

/// Bytes of cache entries, as JSON text, that one batch answer may carry: 8 MiB.
pub const MAX_BATCH_ANSWER_BYTES: u64 = 8 * 1024 * 1024;

/// JSON punctuation and field names around one entry in an answer.
const ENTRY_OVERHEAD_BYTES: u64 = 64;

/// What an entry costs in an answer: its value as base64, its content type and the fields.
#[must_use]
pub const fn entry_cost(value_len: usize, content_type_len: usize) -> u64 {
    (value_len as u64).div_ceil(3) * 4 + content_type_len as u64 + ENTRY_OVERHEAD_BYTES
}

/// The most one stored entry can cost: the largest value, with a content type as long as a
/// request header can carry (entries stored before content types were limited may have one).
pub const MAX_ENTRY_COST: u64 = entry_cost(MAX_CACHE_VALUE_BYTES, 64 * 1024);

/// The budget left for one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerBudget {
    limit: u64,
    left: u64,
}

impl AnswerBudget {
    /// A budget of `limit` bytes, at most [`MAX_SHARD_ANSWER_BYTES`].
    #[must_use]
    pub fn new(limit: u64) -> Self {
        let limit = limit.min(MAX_SHARD_ANSWER_BYTES);
        Self { limit, left: limit }
    }

    /// Bytes not yet spent.
    #[must_use]
    pub fn left(&self) -> u64 {
        self.left
    }

    /// Passes `result` through, charging it to the budget; an entry that does not fit becomes
    /// a `payload_too_large` failure (an entry is a read, so nothing is lost by refusing it).
    #[must_use]
    pub fn admit(&mut self, result: OpResult) -> OpResult {
        let OpResult::Entry { value, content_type } = &result else {
            return result;
        };
        if self.try_spend(entry_cost(value.len(), content_type.len())) {
            result
        } else {
            OpResult::Failed { error: self.refusal() }
        }
    }

    /// Spends `cost` bytes if that many are left.
    pub fn try_spend(&mut self, cost: u64) -> bool {
        let fits = cost <= self.left;
        if fits {
            self.left -= cost;
        }
        fits
    }

    /// The error for a result that does not fit.
    #[must_use]
    pub fn refusal(&self) -> CoreError {
        CoreError::AnswerTooLarge { limit_bytes: self.limit }
    }
}

impl Default for AnswerBudget {
    fn default() -> Self {
        Self::new(MAX_SHARD_ANSWER_BYTES)
    }
}

/// The budget of one shard's call in a batch whose cache reads are spread over several shards:
/// the shards' total ([`MAX_SHARD_ANSWER_BYTES`], which holds more than the batch answer's
/// budget once decoded) shared by their number of cache reads, and never less than one entry
/// of the largest size. The worker holds every shard's answer at once, so this bounds its
/// memory by the total plus one largest entry per shard, while the batch answer itself keeps
/// to [`MAX_BATCH_ANSWER_BYTES`] in request order.
#[must_use]
pub fn shard_share(reads_here: usize, reads_in_batch: usize) -> u64 {
    if reads_here == 0 {
        return 0;
    }
    let share = MAX_SHARD_ANSWER_BYTES.saturating_mul(reads_here as u64) / reads_in_batch.max(1) as u64;
    share.clamp(MAX_ENTRY_COST, MAX_SHARD_ANSWER_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(len: usize) -> OpResult {
        OpResult::Entry { value: vec![b'x'; len], content_type: "text/plain".into() }
    }

    #[test]
    fn an_entry_exactly_at_the_budget_fits_and_one_byte_more_does_not() {
        let cost = entry_cost(3000, "text/plain".len());
        let mut exact = AnswerBudget::new(cost);
        assert_eq!(exact.admit(entry(3000)), entry(3000));
        assert_eq!(exact.left(), 0);
        let mut short = AnswerBudget::new(cost - 1);
        assert_eq!(
            short.admit(entry(3000)),
            OpResult::Failed { error: CoreError::AnswerTooLarge { limit_bytes: cost - 1 } }
        );
        assert_eq!(short.left(), cost - 1, "a refused entry costs nothing");
    }

    #[test]
    fn later_small_entries_still_fit_after_a_large_one_is_refused() {
        let mut budget = AnswerBudget::new(entry_cost(100, 10) * 2);
        assert!(matches!(budget.admit(entry(10_000)), OpResult::Failed { .. }));
        assert_eq!(budget.admit(entry(100)), entry(100));
    }

    #[test]
    fn results_other_than_entries_are_never_refused() {
        let mut budget = AnswerBudget::new(0);
        let results = [
            OpResult::Value { value: 1, exists: true, version: 1 },
            OpResult::Stored,
            OpResult::Deleted { deleted: true },
            OpResult::Failed { error: CoreError::NotFound },
        ];
        for result in results {
            assert_eq!(budget.admit(result.clone()), result);
        }
    }

    #[test]
    fn the_budget_never_exceeds_the_maximum() {
        assert_eq!(AnswerBudget::new(u64::MAX).left(), MAX_SHARD_ANSWER_BYTES);
    }

    #[test]
    fn shards_share_the_budget_by_their_reads_but_always_hold_one_largest_entry() {
        assert_eq!(shard_share(0, 10), 0);
        assert_eq!(shard_share(10, 10), MAX_SHARD_ANSWER_BYTES);
        assert_eq!(shard_share(5, 10), MAX_SHARD_ANSWER_BYTES / 2);
        assert_eq!(shard_share(1, 1000), MAX_ENTRY_COST);
        // Six largest entries over any grouping: each read's share holds its entry.
        for here in 1..=6 {
            assert!(shard_share(here, 6) >= here as u64 * entry_cost(MAX_CACHE_VALUE_BYTES, 256));
        }
        // However reads are spread over 16 shards, the shares add up to a bounded total.
        let spread = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 985];
        let total: u64 = spread.iter().map(|&here| shard_share(here, 1000)).sum();
        assert!(total <= MAX_SHARD_ANSWER_BYTES + 16 * MAX_ENTRY_COST);
    }

    #[test]
    fn the_cost_covers_the_encoded_answer() {
        let result = entry(1000);
        let encoded = serde_json::to_string(&result).unwrap();
        assert!(entry_cost(1000, "text/plain".len()) >= encoded.len() as u64, "{}", encoded.len());
    }
}
