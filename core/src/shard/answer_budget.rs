//! The byte budget of an answer: how many bytes of cache values and days one shard answer, and
//! so one batch answer, may carry.
//!
//! A shard answers a call over RPC, whose result the runtime caps at 32 MiB; a result past that
//! fails the whole call after its writes are committed, and the worker could then only report
//! every op of the call as "outcome unknown". So the answer is kept far below the cap, and only
//! reads are ever refused for it: the results of writes are a few dozen bytes each and always
//! fit, so an answer cannot fail because of what a write returned.
//!
//! Only cache entries and reads of days are large. An entry is charged what it costs in the
//! shard's JSON answer (base64 of its value, its content type and a fixed overhead); a read of
//! days, a tally of each day it found (up to `EDGECOUNT_DAYS`, 3,660 at most, about 290 KB), at
//! most what each costs ([`days_cost`]). A result that does not fit in what is left is
//! answered `payload_too_large` in its place, and the ops after it still run. A read of days
//! travels in a call of its own, so its answer (at most about 290 KB) always fits.

use crate::shard::cache_table::MAX_CACHE_VALUE_BYTES;
use crate::shard::protocol::{DaysAnswer, OpResult};
use crate::CoreError;

/// Bytes of cache values (as the shard encodes them, base64) and days that one shard answer
/// may carry: 12 MiB, well under the runtime's 32 MiB RPC result cap, so that counters and
/// error messages never bring an answer near the cap.
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

/// The most one day's tally costs in an answer, as JSON at the widest of each number:
/// `{"day":-2147483648,"count":-9223372036854775808,"uniques":18446744073709551615},`.
pub const DAY_TALLY_BYTES: u64 = 80;

/// JSON around the days of a read of days: the total, `exists` and the period's visitors.
const DAYS_OVERHEAD_BYTES: u64 = 128;

/// What a read of days costs in an answer: its days at [`DAY_TALLY_BYTES`] each, and the
/// fields around them.
#[must_use]
pub fn days_cost(answer: &DaysAnswer) -> u64 {
    DAYS_OVERHEAD_BYTES + DAY_TALLY_BYTES * answer.days.len() as u64
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

    /// Passes `result` through, charging it to the budget; an entry or a read of days that does
    /// not fit becomes a `payload_too_large` failure (both are reads, so nothing is lost by
    /// refusing them).
    #[must_use]
    pub fn admit(&mut self, result: OpResult) -> OpResult {
        let cost = match &result {
            OpResult::Entry { value, content_type } => entry_cost(value.len(), content_type.len()),
            OpResult::Days(answer) => days_cost(answer),
            _ => return result,
        };
        if self.try_spend(cost) {
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

/// The budgets of a batch's calls, one per shard, from each shard's number of cache reads (in
/// the order given). Each shard gets its part of [`MAX_SHARD_ANSWER_BYTES`] by its reads, so
/// the shards together hold more than the batch answer's budget once decoded; a shard whose
/// part is under one entry of the largest size is raised to one, so that any entry can come
/// back, for as many shards as twice [`MAX_SHARD_ANSWER_BYTES`] more pays for (all of them in
/// a batch over the default 16 shards). The worker holds every shard's answer at once, so they
/// are bounded by three times that total however many shards a batch reaches; a large entry on a shard past those comes back `payload_too_large` in its
/// place, to be read on its own. The batch answer itself keeps to [`MAX_BATCH_ANSWER_BYTES`]
/// in request order.
#[must_use]
pub fn shard_shares(reads: &[usize]) -> Vec<u64> {
    let total_reads = reads.iter().sum::<usize>().max(1) as u64;
    let mut raises_left = 2 * MAX_SHARD_ANSWER_BYTES;
    reads
        .iter()
        .map(|&here| {
            if here == 0 {
                return 0;
            }
            let share = (MAX_SHARD_ANSWER_BYTES.saturating_mul(here as u64) / total_reads)
                .min(MAX_SHARD_ANSWER_BYTES);
            let raise = MAX_ENTRY_COST.saturating_sub(share);
            if raise > 0 && raise <= raises_left {
                raises_left -= raise;
                return share + raise;
            }
            share
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shard::protocol::DayTally;
    use crate::visits::day::Day;

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

    fn days(count: usize) -> OpResult {
        let day = |n| DayTally { day: Day(i32::MIN + n), count: i64::MIN, uniques: Some(u64::MAX) };
        let days = (0..count).map(|n| day(i32::try_from(n).unwrap())).collect();
        OpResult::Days(Box::new(DaysAnswer { value: i64::MIN, exists: true, days, uniques: Some(u64::MAX) }))
    }

    #[test]
    fn a_read_of_days_is_charged_each_day_and_refused_one_byte_past_the_budget() {
        let longest = days(3_660);
        let OpResult::Days(answer) = &longest else { unreachable!() };
        let cost = days_cost(answer);
        let encoded = serde_json::to_string(&longest).unwrap();
        assert!(cost >= encoded.len() as u64, "{cost} against {}", encoded.len());
        let mut exact = AnswerBudget::new(cost);
        assert_eq!(exact.admit(longest.clone()), longest);
        assert_eq!(exact.left(), 0);
        let mut short = AnswerBudget::new(cost - 1);
        assert_eq!(
            short.admit(longest),
            OpResult::Failed { error: CoreError::AnswerTooLarge { limit_bytes: cost - 1 } }
        );
        assert_eq!(short.admit(days(0)), days(0), "a short one still fits");
        // A call of many such reads stays under the budget: the ones past it are refused.
        let mut call = AnswerBudget::default();
        let answered = (0..100).map(|_| call.admit(days(3_660))).filter(|r| matches!(r, OpResult::Days(_)));
        assert_eq!(answered.count() as u64, MAX_SHARD_ANSWER_BYTES / cost);
    }

    #[test]
    fn the_budget_never_exceeds_the_maximum() {
        assert_eq!(AnswerBudget::new(u64::MAX).left(), MAX_SHARD_ANSWER_BYTES);
    }

    #[test]
    fn shards_share_the_budget_by_their_reads_and_hold_one_largest_entry_while_that_is_paid_for() {
        assert_eq!(shard_shares(&[0, 10]), [0, MAX_SHARD_ANSWER_BYTES]);
        assert_eq!(shard_shares(&[5, 5]), [MAX_SHARD_ANSWER_BYTES / 2; 2]);
        // Six largest entries over any grouping: each read's share holds its entry.
        for here in 1..=5 {
            let shares = shard_shares(&[here, 6 - here]);
            assert!(shares[0] >= here as u64 * entry_cost(MAX_CACHE_VALUE_BYTES, 256));
            assert!(shares[1] >= (6 - here) as u64 * entry_cost(MAX_CACHE_VALUE_BYTES, 256));
        }
        // Spread over 16 shards, every one can still return a largest entry.
        let mut spread = vec![1; 15];
        spread.push(985);
        assert!(shard_shares(&spread).iter().all(|&share| share >= MAX_ENTRY_COST));
    }

    #[test]
    fn the_shares_are_bounded_however_many_shards_a_batch_reaches() {
        for shards in [1, 16, 64, 1_000] {
            let shares = shard_shares(&vec![1; shards]);
            assert!(shares.iter().sum::<u64>() <= 3 * MAX_SHARD_ANSWER_BYTES, "{shards} shards");
        }
    }

    #[test]
    fn the_cost_covers_the_encoded_answer() {
        let result = entry(1000);
        let encoded = serde_json::to_string(&result).unwrap();
        assert!(entry_cost(1000, "text/plain".len()) >= encoded.len() as u64, "{}", encoded.len());
    }
}
