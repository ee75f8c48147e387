//! A namespace's counts across its keys: its views by day and its top keys of a period, what a
//! site's dashboard opens on.
//!
//! Keys live on their shards, so a read asks every shard for its part ([`ShardPart`]: its
//! keys' counts by day and its own top keys) and [`merge`]s the parts. The merge is exact:
//! each key lives on one shard, so the top `n` of the namespace are among the top `n` of the
//! shards they live on. What each shard reads is bounded by what it holds of the period (see
//! `docs/dashboard.md`): nothing is kept or indexed per count for it.
//!
//! A merged read is kept for [`KEPT_MS`] in the isolate that made it ([`NamespaceReads`]), so
//! a dashboard open in many tabs, or reloaded, asks the shards once in that time.

use lru::LruCache;
use serde::{Deserialize, Serialize};
use std::num::NonZeroUsize;

use crate::hashing::KeyHashing;
use crate::http::query::{parse_period, read_known_parameters};
use crate::shard::counter::DayCount;
use crate::visits::day::{Day, Period};
use crate::{CoreError, Namespace};

/// Most top keys a read asks for.
pub const MAX_TOP: u32 = 100;
/// How long a merged read is kept in the isolate.
pub const KEPT_MS: u64 = 10_000;
/// Most merged reads an isolate keeps.
pub const MAX_KEPT_READS: usize = 256;

/// Top keys a read answers unless it asks for another number (`?limit=`).
pub const DEFAULT_TOP: u32 = 10;

/// What a namespace read asks: its period (`?period=` or `?from=&to=`, as a counter's days;
/// none is the last 30 days, and `total` is refused: a namespace has no total of its own) and
/// how many top keys (`?limit=`, 1 to [`MAX_TOP`]).
///
/// # Errors
/// [`CoreError::InvalidParameter`] naming the parameter, or a repeated one.
pub fn parse_query(query: &str, most_days: i32) -> Result<(Period, u32), CoreError> {
    let mut period = parse_period(query, most_days)?;
    let named = form_urlencoded::parse(query.as_bytes()).any(|(name, _)| name == "period" || name == "from");
    if period == Period::Total {
        if named {
            return Err(CoreError::InvalidParameter {
                name: "period".to_owned(),
                expected: "`today`, `yesterday`, `7d`, `30d`, any `Nd` or `from` and `to`".to_owned(),
            });
        }
        period = Period::Last(30.min(most_days));
    }
    let mut top = DEFAULT_TOP;
    read_known_parameters(query, &["limit"], |_, value| {
        top = value.parse().ok().filter(|n| (1..=MAX_TOP).contains(n)).ok_or_else(|| {
            CoreError::InvalidParameter {
                name: "limit".to_owned(),
                expected: format!("a whole number from 1 to {MAX_TOP}"),
            }
        })?;
        Ok(())
    })?;
    Ok((period, top))
}

/// One key's count in the period.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyCount {
    pub key: String,
    pub count: i64,
}

/// What one shard holds of a namespace's period: the counts of its keys by day (days with
/// counts only, in order) and its top keys (highest count first, then by name).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardPart {
    pub days: Vec<DayCount>,
    pub top: Vec<KeyCount>,
    /// The SQLite rows the shard read for it, as billed.
    pub rows_read: u64,
}

/// The namespace's period, merged from every shard's part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespacePeriod {
    /// Every day of the period in order, zeros included.
    pub days: Vec<DayCount>,
    /// The period's count: the days' sum, saturating at the 64-bit bounds as a day does.
    pub count: i64,
    /// The top keys, at most the number asked for.
    pub top: Vec<KeyCount>,
    pub rows_read: u64,
}

/// Merges the shards' `parts` of the period `from..=to` into the namespace's, keeping the top
/// `top` keys.
#[must_use]
pub fn merge(parts: Vec<ShardPart>, (from, to): (Day, Day), top: usize) -> NamespacePeriod {
    let span = usize::try_from(to.0.saturating_sub(from.0).saturating_add(1)).unwrap_or(0);
    let mut days: Vec<DayCount> =
        (0..span).map(|i| DayCount { day: Day(from.0 + i as i32), count: 0 }).collect();
    let mut keys = Vec::new();
    let mut rows_read = 0_u64;
    for part in parts {
        rows_read = rows_read.saturating_add(part.rows_read);
        for counted in part.days {
            if let Some(day) = usize::try_from(counted.day.0 - from.0).ok().and_then(|i| days.get_mut(i)) {
                day.count = day.count.saturating_add(counted.count);
            }
        }
        keys.extend(part.top);
    }
    keys.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
    keys.truncate(top);
    let count = days.iter().fold(0_i64, |sum, day| sum.saturating_add(day.count));
    NamespacePeriod { days, count, top: keys, rows_read }
}

/// The merged reads an isolate keeps, by namespace and period, each for [`KEPT_MS`]; the top
/// keys kept are [`MAX_TOP`], whatever number a read asked for.
#[derive(Debug)]
pub struct NamespaceReads {
    kept: LruCache<(Namespace, Day, Day), (u64, NamespacePeriod), KeyHashing>,
}

impl Default for NamespaceReads {
    fn default() -> Self {
        let bound = NonZeroUsize::new(MAX_KEPT_READS).unwrap_or(NonZeroUsize::MIN);
        Self { kept: LruCache::with_hasher(bound, KeyHashing::default()) }
    }
}

impl NamespaceReads {
    /// The read of `ns` over `from..=to` kept at `now_ms`, if one is at most [`KEPT_MS`] old.
    pub fn get(&mut self, ns: &Namespace, (from, to): (Day, Day), now_ms: u64) -> Option<NamespacePeriod> {
        let slot = (ns.clone(), from, to);
        match self.kept.get(&slot) {
            Some((at, read)) if now_ms.saturating_sub(*at) < KEPT_MS => Some(read.clone()),
            Some(_) => {
                self.kept.pop(&slot);
                None
            }
            None => None,
        }
    }

    /// Keeps `read` of `ns` over `from..=to`, made at `now_ms`.
    pub fn put(&mut self, ns: &Namespace, (from, to): (Day, Day), read: NamespacePeriod, now_ms: u64) {
        self.kept.put((ns.clone(), from, to), (now_ms, read));
    }

    /// How many reads are kept.
    #[must_use]
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(days: &[(i32, i64)], top: &[(&str, i64)]) -> ShardPart {
        ShardPart {
            days: days.iter().map(|&(day, count)| DayCount { day: Day(day), count }).collect(),
            top: top.iter().map(|&(key, count)| KeyCount { key: key.into(), count }).collect(),
            rows_read: 10,
        }
    }

    #[test]
    fn parts_merge_into_every_day_of_the_period_and_the_top_keys_of_all() {
        let merged = merge(
            vec![
                part(&[(100, 5), (102, 1)], &[("home", 4), ("about", 2)]),
                part(&[(100, 3), (101, 7)], &[("blog", 9), ("shop", 2)]),
                part(&[], &[]),
            ],
            (Day(100), Day(102)),
            3,
        );
        let days: Vec<(i32, i64)> = merged.days.iter().map(|d| (d.day.0, d.count)).collect();
        assert_eq!(days, [(100, 8), (101, 7), (102, 1)]);
        assert_eq!(merged.count, 16);
        let top: Vec<(&str, i64)> = merged.top.iter().map(|k| (k.key.as_str(), k.count)).collect();
        assert_eq!(top, [("blog", 9), ("home", 4), ("about", 2)], "ties by name");
        assert_eq!(merged.rows_read, 30);
    }

    #[test]
    fn sums_saturate_and_days_outside_the_period_are_ignored() {
        let merged = merge(
            vec![part(&[(1, i64::MAX), (9, 5)], &[]), part(&[(1, 1), (0, 3)], &[])],
            (Day(1), Day(1)),
            10,
        );
        assert_eq!((merged.days[0].count, merged.count), (i64::MAX, i64::MAX));
    }

    #[test]
    fn a_query_names_a_period_and_a_number_of_keys_or_is_refused_by_name() {
        assert_eq!(parse_query("", 400), Ok((Period::Last(30), DEFAULT_TOP)));
        assert_eq!(parse_query("period=7d&limit=3", 400), Ok((Period::Last(7), 3)));
        assert_eq!(parse_query("period=today&limit=100", 400), Ok((Period::Today, 100)));
        assert_eq!(parse_query("", 7), Ok((Period::Last(7), DEFAULT_TOP)), "no longer than the days kept");
        let refused = |query: &str| match parse_query(query, 400) {
            Err(CoreError::InvalidParameter { name, .. } | CoreError::DuplicateParameter { name }) => name,
            other => panic!("{query}: {other:?}"),
        };
        assert_eq!(refused("period=total"), "period");
        assert_eq!(refused("period=500d"), "period");
        assert_eq!(refused("limit=0"), "limit");
        assert_eq!(refused("limit=101"), "limit");
        assert_eq!(refused("limit=ten"), "limit");
        assert_eq!(refused("limit=1&limit=2"), "limit");
        assert_eq!(refused("from=2026-01-02"), "from");
    }

    #[test]
    fn a_kept_read_serves_for_its_time_and_is_bounded() {
        let mut reads = NamespaceReads::default();
        let ns = Namespace::new("site").unwrap();
        let period = (Day(1), Day(7));
        reads.put(&ns, period, NamespacePeriod { count: 3, ..NamespacePeriod::default() }, 1_000);
        assert_eq!(reads.get(&ns, period, 1_000 + KEPT_MS - 1).map(|r| r.count), Some(3));
        assert_eq!(reads.get(&ns, (Day(2), Day(7)), 1_000), None, "another period");
        assert_eq!(reads.get(&ns, period, 1_000 + KEPT_MS), None, "too old");
        assert!(reads.is_empty(), "an old read is dropped when found");
        for i in 0..(MAX_KEPT_READS as i32 + 10) {
            reads.put(&ns, (Day(i), Day(i)), NamespacePeriod::default(), 0);
        }
        assert_eq!(reads.len(), MAX_KEPT_READS);
    }
}
