//! The counter state machine: exact signed 64-bit arithmetic, versions, and TTL expiry.
//!
//! A counter that was never written, was deleted, or has expired does not exist and reads 0.
//! A write with a TTL of S seconds makes the counter expire S seconds after that write; a later
//! write without a TTL keeps the counter's TTL and restarts its clock, so "expires S seconds
//! after its last write" holds for every write.
//!
//! Increments and decrements sent with their day also count in the counter's **today**: the
//! count of its latest day, kept in the counter's own row so that counting by day writes no
//! more rows than counting alone. When a write comes for a later day, the storage moves the
//! finished day to its own row (`counter_days`, once a key and day); a write sent for an earlier
//! day than the counter's (a resend that crossed midnight) counts in the counter's latest day.
//! A set changes the total and leaves the day's count as it was.

use serde::{Deserialize, Serialize};

use crate::shard::settings::CounterSettings;
use crate::visits::day::Day;
use crate::CoreError;

/// The stored state of one live counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counter {
    pub value: i64,
    /// Starts at 1 and grows by one with every write; it becomes the read's `ETag`.
    pub version: u64,
    /// The TTL the counter was last written with, if any.
    pub ttl_seconds: Option<u32>,
    /// When the counter stops existing, in ms since the epoch.
    pub expires_at_ms: Option<u64>,
    /// When the counter was first written, in ms since the epoch; `None` for one stored before
    /// creation times were kept.
    pub created_ms: Option<u64>,
    /// Its own rules, if it was created with some (see [`crate::shard::settings`]).
    pub settings: Option<CounterSettings>,
    /// The count of its latest day, if a write was sent with its day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub today: Option<DayCount>,
}

/// What was counted in one day.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayCount {
    pub day: Day,
    pub count: i64,
}

/// A change to a counter. An increment or decrement sent with its day counts in that day too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterWrite {
    Add(i64, Option<Day>),
    Subtract(i64, Option<Day>),
    Set(i64),
}

impl Counter {
    /// Whether the counter has expired at `now_ms`.
    #[must_use]
    pub fn is_expired(&self, now_ms: u64) -> bool {
        self.expires_at_ms.is_some_and(|at| at <= now_ms)
    }

    /// The counter after `write`, starting from `current` (`None` when it does not exist).
    ///
    /// # Errors
    /// [`CoreError::Overflow`] when the result leaves the `i64` range; the caller then keeps
    /// `current` unchanged.
    pub fn apply(
        current: Option<&Counter>,
        write: CounterWrite,
        ttl_seconds: Option<u32>,
        now_ms: u64,
    ) -> Result<Counter, CoreError> {
        let live = current.filter(|c| !c.is_expired(now_ms));
        let old = live.map_or(0, |c| c.value);
        let value = match write {
            CounterWrite::Add(by, _) => old.checked_add(by),
            CounterWrite::Subtract(by, _) => old.checked_sub(by),
            CounterWrite::Set(value) => Some(value),
        }
        .ok_or(CoreError::Overflow)?;
        let kept_today = live.and_then(|c| c.today);
        let today = match write {
            CounterWrite::Add(by, Some(day)) => Some(counted_in(kept_today, day, |n| n.saturating_add(by))),
            CounterWrite::Subtract(by, Some(day)) => {
                Some(counted_in(kept_today, day, |n| n.saturating_sub(by)))
            }
            _ => kept_today,
        };
        let ttl_seconds = ttl_seconds.or_else(|| live.and_then(|c| c.ttl_seconds));
        Ok(Counter {
            value,
            version: live.map_or(1, |c| c.version + 1),
            ttl_seconds,
            expires_at_ms: expiry(ttl_seconds, now_ms),
            // A counter that starts again after expiring is a new one, without the old rules.
            created_ms: live.map_or(Some(now_ms), |c| c.created_ms),
            settings: live.and_then(|c| c.settings),
            today,
        })
    }

    /// A new counter holding `value` under `settings`.
    #[must_use]
    pub fn create(value: i64, ttl_seconds: Option<u32>, settings: CounterSettings, now_ms: u64) -> Counter {
        Counter {
            value,
            version: 1,
            ttl_seconds,
            expires_at_ms: expiry(ttl_seconds, now_ms),
            created_ms: Some(now_ms),
            settings: Some(settings),
            today: None,
        }
    }

    /// The rules the counter follows: its own, or the defaults.
    #[must_use]
    pub fn rules(&self) -> CounterSettings {
        self.settings.unwrap_or_default()
    }
}

/// The latest day's count after a write sent for `day`: the same day's count changed, or a new
/// day's (a later one starts from 0; an earlier one counts in the kept, later day). A day's
/// count saturates rather than refuse a write its counter takes (one after a `set`, say).
fn counted_in(kept: Option<DayCount>, day: Day, change: impl Fn(i64) -> i64) -> DayCount {
    let (day, before) = match kept {
        Some(kept) if kept.day >= day => (kept.day, kept.count),
        _ => (day, 0),
    };
    DayCount { day, count: change(before) }
}

fn expiry(ttl_seconds: Option<u32>, now_ms: u64) -> Option<u64> {
    ttl_seconds.map(|s| now_ms.saturating_add(u64::from(s) * 1000))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_700_000_000_000;

    fn counter(value: i64) -> Counter {
        Counter {
            value,
            version: 1,
            ttl_seconds: None,
            expires_at_ms: None,
            created_ms: None,
            settings: None,
            today: None,
        }
    }

    #[test]
    fn add_to_missing_counter_starts_from_zero() {
        let c = Counter::apply(None, CounterWrite::Add(5, None), None, NOW).unwrap();
        assert_eq!((c.value, c.version), (5, 1));
    }

    #[test]
    fn writes_bump_the_version() {
        let c = Counter::apply(Some(&counter(1)), CounterWrite::Subtract(3, None), None, NOW).unwrap();
        assert_eq!((c.value, c.version), (-2, 2));
    }

    #[test]
    fn overflow_at_both_ends_is_an_error() {
        let max = counter(i64::MAX);
        let min = counter(i64::MIN);
        assert_eq!(
            Counter::apply(Some(&max), CounterWrite::Add(1, None), None, NOW),
            Err(CoreError::Overflow)
        );
        assert_eq!(
            Counter::apply(Some(&min), CounterWrite::Subtract(1, None), None, NOW),
            Err(CoreError::Overflow)
        );
        assert_eq!(
            Counter::apply(Some(&min), CounterWrite::Add(-1, None), None, NOW),
            Err(CoreError::Overflow)
        );
        assert_eq!(
            Counter::apply(Some(&counter(0)), CounterWrite::Subtract(i64::MIN, None), None, NOW),
            Err(CoreError::Overflow)
        );
        assert_eq!(
            Counter::apply(Some(&counter(-1)), CounterWrite::Subtract(i64::MIN, None), None, NOW)
                .unwrap()
                .value,
            i64::MAX
        );
    }

    #[test]
    fn ttl_is_kept_and_clock_restarts_on_each_write() {
        let first = Counter::apply(None, CounterWrite::Add(1, None), Some(10), NOW).unwrap();
        assert_eq!(first.expires_at_ms, Some(NOW + 10_000));
        let second = Counter::apply(Some(&first), CounterWrite::Add(1, None), None, NOW + 5_000).unwrap();
        assert_eq!(second.ttl_seconds, Some(10));
        assert_eq!(second.expires_at_ms, Some(NOW + 15_000));
    }

    #[test]
    fn expired_counter_restarts_from_zero_without_its_ttl() {
        let first = Counter::apply(None, CounterWrite::Add(7, None), Some(1), NOW).unwrap();
        assert!(first.is_expired(NOW + 1_000));
        let again = Counter::apply(Some(&first), CounterWrite::Add(1, None), None, NOW + 2_000).unwrap();
        assert_eq!((again.value, again.version, again.ttl_seconds), (1, 1, None));
    }

    #[test]
    fn a_counter_keeps_its_creation_time_and_rules_until_it_expires() {
        let settings = CounterSettings { enable_reset: true, ..CounterSettings::default() };
        let created = Counter::create(3, Some(10), settings, NOW);
        let later = Counter::apply(Some(&created), CounterWrite::Add(1, None), None, NOW + 5_000).unwrap();
        assert_eq!((later.created_ms, later.settings), (Some(NOW), Some(settings)));
        let reborn = Counter::apply(Some(&later), CounterWrite::Add(1, None), None, NOW + 60_000).unwrap();
        assert_eq!((reborn.created_ms, reborn.settings), (Some(NOW + 60_000), None));
        assert_eq!(reborn.rules(), CounterSettings::default());
    }

    #[test]
    fn counts_sent_with_their_day_count_in_it_and_a_later_day_starts_from_zero() {
        let (monday, tuesday) = (Some(Day(20_000)), Some(Day(20_001)));
        let c = Counter::apply(None, CounterWrite::Add(3, monday), None, NOW).unwrap();
        assert_eq!(c.today, Some(DayCount { day: Day(20_000), count: 3 }));
        let c = Counter::apply(Some(&c), CounterWrite::Subtract(1, monday), None, NOW).unwrap();
        assert_eq!(c.today, Some(DayCount { day: Day(20_000), count: 2 }));
        let c = Counter::apply(Some(&c), CounterWrite::Add(5, tuesday), None, NOW).unwrap();
        assert_eq!((c.value, c.today), (7, Some(DayCount { day: Day(20_001), count: 5 })));
        // A resend for Monday that arrives on Tuesday counts in Tuesday.
        let c = Counter::apply(Some(&c), CounterWrite::Add(1, monday), None, NOW).unwrap();
        assert_eq!(c.today, Some(DayCount { day: Day(20_001), count: 6 }));
    }

    #[test]
    fn writes_without_a_day_and_sets_leave_the_day_s_count() {
        let c = Counter::apply(None, CounterWrite::Add(3, Some(Day(9))), None, NOW).unwrap();
        let c = Counter::apply(Some(&c), CounterWrite::Add(10, None), None, NOW).unwrap();
        let c = Counter::apply(Some(&c), CounterWrite::Set(100), None, NOW).unwrap();
        assert_eq!((c.value, c.today), (100, Some(DayCount { day: Day(9), count: 3 })));
    }

    #[test]
    fn a_day_s_count_saturates_rather_than_refuse_a_write_the_total_takes() {
        let c = Counter::apply(None, CounterWrite::Add(i64::MAX, Some(Day(9))), None, NOW).unwrap();
        let c = Counter::apply(Some(&c), CounterWrite::Set(0), None, NOW).unwrap();
        let c = Counter::apply(Some(&c), CounterWrite::Add(1, Some(Day(9))), None, NOW).unwrap();
        assert_eq!((c.value, c.today), (1, Some(DayCount { day: Day(9), count: i64::MAX })));
    }
}
