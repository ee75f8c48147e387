//! What a shard holds of a namespace's period (see `edgecount_core::visits::namespace`): its
//! keys' counts by day and its top keys.
//!
//! A key's latest day is in its `counters` row (`day`, `day_count`), its finished days in
//! `counter_days`. Two statements, one by day and one for the top keys, each walk the
//! namespace's live counters and, for each, seek its finished days in the period by the days
//! table's key (`ns`, `key`, `day`): each reads the namespace's counters on the shard and the
//! key-days of the period, never the days outside it. Nothing is copied aside, and nothing is
//! written or indexed per count for them.

use edgecount_core::shard::counter::DayCount;
use edgecount_core::visits::day::Day;
use edgecount_core::visits::namespace::{KeyCount, ShardPart};
use edgecount_core::{Namespace, StoreResult};
use serde::Deserialize;
use worker::SqlStorageValue;

use crate::shard::sql_store::{describe, text, SqlShardStore};

/// The namespace's counts by day in the period: each live counter's latest day (in its row)
/// and its finished days in the period (sought by the days table's key, the counter driving
/// the loop). `?1` the namespace, `?2`..`?3` the days, `?4` now. `SUM` becomes `TOTAL` when a
/// sum passes the 64-bit range (see [`SqlShardStore::namespace_part`]).
const BY_DAY: &str = "SELECT day AS name, SUM(count) AS count FROM (
        SELECT d.day AS day, d.count AS count FROM counters AS c CROSS JOIN counter_days AS d
        WHERE c.ns = ?1 AND (c.expires_at_ms IS NULL OR c.expires_at_ms > ?4)
          AND d.ns = ?1 AND d.key = c.key AND d.day BETWEEN ?2 AND ?3
        UNION ALL
        SELECT day, day_count FROM counters
        WHERE ns = ?1 AND (expires_at_ms IS NULL OR expires_at_ms > ?4) AND day BETWEEN ?2 AND ?3
    ) GROUP BY day";

/// The namespace's `?5` top keys in the period, a live counter at a time: its latest day's
/// count if in the period and the sum of its finished days in it; keys whose counts in the
/// period sum to 0 (none, most often) are left out. SQLite keeps only the top `?5` while it
/// sorts.
const TOP: &str = "SELECT name, count FROM (
        SELECT c.key AS name,
            (CASE WHEN c.day BETWEEN ?2 AND ?3 THEN c.day_count ELSE 0 END)
            + COALESCE((SELECT SUM(d.count) FROM counter_days AS d
                        WHERE d.ns = ?1 AND d.key = c.key AND d.day BETWEEN ?2 AND ?3), 0) AS count
        FROM counters AS c
        WHERE c.ns = ?1 AND (c.expires_at_ms IS NULL OR c.expires_at_ms > ?4)
    ) WHERE count <> 0 ORDER BY count DESC, name LIMIT ?5";

#[derive(Deserialize)]
struct Row<N> {
    name: N,
    count: f64,
}

/// A count as it comes back through a JSON number: exact to 2^53, clamped past the 64-bit range.
fn clamped(count: f64) -> i64 {
    count.clamp(i64::MIN as f64, i64::MAX as f64) as i64
}

impl SqlShardStore {
    /// This shard's part of `ns` over `from..=to` at `now_ms`, with its `top` keys.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn namespace_part(
        &self,
        ns: &Namespace,
        (from, to): (Day, Day),
        top: u32,
        now_ms: u64,
    ) -> StoreResult<ShardPart> {
        let bindings = |count: usize| {
            let mut all = vec![
                text(ns.as_str()),
                SqlStorageValue::Integer(i64::from(from.0)),
                SqlStorageValue::Integer(i64::from(to.0)),
                SqlStorageValue::Integer(i64::try_from(now_ms).unwrap_or(i64::MAX)),
                SqlStorageValue::Integer(i64::from(top)),
            ];
            all.truncate(count);
            all
        };
        let (rows_before, _) = self.rows_counted();
        let days: Vec<Row<i32>> = self.summed(BY_DAY, bindings(4))?;
        let top: Vec<Row<String>> = self.summed(TOP, bindings(5))?;
        let (rows_after, _) = self.rows_counted();
        let mut part = ShardPart { rows_read: rows_after - rows_before, ..ShardPart::default() };
        part.days =
            days.into_iter().map(|row| DayCount { day: Day(row.name), count: clamped(row.count) }).collect();
        part.top = top.into_iter().map(|row| KeyCount { key: row.name, count: clamped(row.count) }).collect();
        part.days.sort_by_key(|d| d.day);
        Ok(part)
    }

    /// The rows of `query`, whose sums pass to `TOTAL` (floating point, later clamped, as a
    /// day's count saturates) when SQLite's `SUM` refuses to leave the 64-bit range.
    fn summed<T: serde::de::DeserializeOwned>(
        &self,
        query: &str,
        bindings: Vec<SqlStorageValue>,
    ) -> StoreResult<Vec<T>> {
        match self.rows(query, bindings.clone()) {
            Ok(rows) => Ok(rows),
            Err(error) if error.to_string().contains("integer overflow") => {
                self.rows(&query.replace("SUM(", "TOTAL("), bindings).map_err(|e| describe(&e))
            }
            Err(error) => Err(describe(&error)),
        }
    }
}
