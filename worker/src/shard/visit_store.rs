//! A shard's finished days, visitor sketches and day salts in SQLite (see
//! `edgecount_core::shard::visit_table` for what they are).
//!
//! A counter's latest day lives in its own row (`counters.day`, `day_count`). When a write
//! brings a later day, the engine stores the finished day in `counter_days`
//! ([`SqlShardStore::finish_day`]), and the trigger [`pruning`] drops the key's days past the
//! days kept: once per key and day. [`DAYS_REMOVED`] deletes a counter's days and sketches with
//! it (a delete, an expiry, a hand-over's release), so nothing outlives its counter, and the
//! triggers of [`visit_unions`] drop the kept unions of the sketches that change or go.

use edgecount_core::shard::counter::DayCount;
use edgecount_core::shard::migration::{Parcel, ParcelSketch};
use edgecount_core::shard::visit_table::{EachSketch, VisitStore, MAX_SKETCH_DAYS, SALT_DAYS};
use edgecount_core::visits::day::Day;
use edgecount_core::visits::visitor::Salt;
use edgecount_core::{Key, Namespace, StoreResult};
use serde::Deserialize;
use worker::{Result, SqlStorageValue};

use crate::shard::sql_store::{
    blob, describe, json_names, json_rows, rows_statement, text, SqlShardStore, ROWS_PER_STATEMENT,
};
use crate::shard::visit_unions;
use crate::shared::hash_seed::fill_random;

const TABLES: [&str; 3] = [
    "CREATE TABLE IF NOT EXISTS counter_days (
        ns TEXT NOT NULL,
        key TEXT NOT NULL,
        day INTEGER NOT NULL,
        count INTEGER NOT NULL,
        PRIMARY KEY (ns, key, day)
    ) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS visitor_sketches (
        ns TEXT NOT NULL,
        key TEXT NOT NULL,
        day INTEGER NOT NULL,
        sketch BLOB NOT NULL,
        PRIMARY KEY (ns, key, day)
    ) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS visitor_salts (
        day INTEGER PRIMARY KEY,
        salt BLOB NOT NULL
    )",
];

/// Deletes a counter's days and sketches with its row.
const DAYS_REMOVED: &str = "CREATE TRIGGER IF NOT EXISTS counter_days_removed AFTER DELETE ON counters \
     BEGIN DELETE FROM counter_days WHERE ns = old.ns AND key = old.key; \
     DELETE FROM visitor_sketches WHERE ns = old.ns AND key = old.key; END";

/// The name of the trigger that keeps `kept` days: named by the number, so that a change of
/// `EDGECOUNT_DAYS` replaces it at the next start.
fn pruning_name(kept: i32) -> String {
    format!("counter_days_pruned_{kept}")
}

/// When a write moves a counter on to another day, drops the key's days and sketches older
/// than the `kept` latest: once per key and day, inside the write's own statement. (The
/// finished day itself is stored by the engine, [`SqlShardStore::finish_day`].)
fn pruning(kept: i32) -> String {
    format!(
        "CREATE TRIGGER IF NOT EXISTS {name} AFTER UPDATE OF day ON counters \
         WHEN new.day IS NOT NULL AND new.day IS NOT old.day \
         BEGIN \
         DELETE FROM counter_days WHERE ns = old.ns AND key = old.key AND day <= new.day - {kept}; \
         DELETE FROM visitor_sketches WHERE ns = old.ns AND key = old.key AND day <= new.day - {sketched}; \
         END",
        name = pruning_name(kept),
        sketched = kept.min(MAX_SKETCH_DAYS),
    )
}

/// Creates what is missing of the tables and triggers; `created` names what `sqlite_master`
/// holds. A trigger for another number of days kept is replaced.
///
/// # Errors
/// When SQLite refuses the schema.
pub(super) fn open(store: &SqlShardStore, created: &[String], kept: i32) -> Result<()> {
    let has = |name: &str| created.iter().any(|c| c == name);
    if !has("counter_days") || !has("visitor_sketches") || !has("visitor_salts") {
        for table in TABLES {
            store.sql().exec(table, None)?;
        }
    }
    if !has("counter_days_removed") {
        store.sql().exec(DAYS_REMOVED, None)?;
    }
    #[derive(Deserialize)]
    struct Held {
        n: Option<u64>,
    }
    // Two rows read at most, once a start: a shard that never counted by day or visitor (or
    // holds no such row now) hands keys over without looking for them.
    let held: Vec<Held> = store.rows(
        "SELECT EXISTS (SELECT 1 FROM counter_days) + EXISTS (SELECT 1 FROM visitor_sketches) AS n",
        vec![],
    )?;
    store.holds_days.set(held.first().and_then(|h| h.n).unwrap_or(1) > 0);
    let wanted = pruning_name(kept);
    if !has(&wanted) {
        // A trigger of an earlier build that stored the finished day itself goes too: the
        // engine stores it now, and both would count it twice.
        let ours = |name: &&String| {
            name.starts_with("counter_days_pruned_") || name.starts_with("counter_day_moved_")
        };
        for other in created.iter().filter(ours) {
            store.sql().exec(&format!("DROP TRIGGER IF EXISTS {other}"), None)?;
        }
        store.sql().exec(&pruning(kept), None)?;
    }
    Ok(())
}

/// Adds to `parcels` (one per key of `keys`, in order) the keys' finished days and sketches:
/// two statements for all of them.
///
/// # Errors
/// A description of the storage failure.
pub(super) fn fill_parcels(
    store: &SqlShardStore,
    keys: &[(Namespace, Key)],
    parcels: &mut [Parcel],
) -> StoreResult<()> {
    if !store.holds_days.get() {
        return Ok(());
    }
    #[derive(Deserialize)]
    struct Row {
        place: usize,
        day: i32,
        count: i64,
    }
    let days: Vec<Row> = store
        .rows(
            "SELECT CAST(r.key AS INTEGER) AS place, t.day, t.count FROM json_each(?1) AS r \
             JOIN counter_days AS t ON t.ns = r.value ->> 0 AND t.key = r.value ->> 1 ORDER BY place, t.day",
            vec![json_names(keys)?],
        )
        .map_err(|e| describe(&e))?;
    for row in days {
        let parcel = parcels.get_mut(row.place).ok_or("a day of no asked key")?;
        parcel.days.push(DayCount { day: Day(row.day), count: row.count });
    }
    let rows = store.raw_rows(
        "SELECT CAST(r.key AS INTEGER) AS place, t.day, t.sketch FROM json_each(?1) AS r \
         JOIN visitor_sketches AS t ON t.ns = r.value ->> 0 AND t.key = r.value ->> 1 ORDER BY place, t.day",
        vec![json_names(keys)?],
    )?;
    for row in rows {
        let [SqlStorageValue::Integer(place), SqlStorageValue::Integer(day), sketch] = row.as_slice() else {
            return Err("unexpected sketch row shape".into());
        };
        let parcel = usize::try_from(*place).ok().and_then(|place| parcels.get_mut(place));
        let day = Day(i32::try_from(*day).map_err(|_| "a stored day out of range")?);
        parcel.ok_or("a sketch of no asked key")?.sketches.push(ParcelSketch { day, sketch: blob(sketch) });
    }
    Ok(())
}

/// The bytes each of `keys`' days and sketches add to its parcel, as [`Parcel::weight`] counts
/// them: `(place, bytes)`.
///
/// # Errors
/// A description of the storage failure.
pub(super) fn parcel_weights(
    store: &SqlShardStore,
    keys: &[(Namespace, Key)],
) -> StoreResult<Vec<(usize, u64)>> {
    if !store.holds_days.get() {
        return Ok(Vec::new());
    }
    #[derive(Deserialize)]
    struct Size {
        place: usize,
        bytes: u64,
    }
    let mut sizes = Vec::new();
    for query in [
        "SELECT CAST(r.key AS INTEGER) AS place, COUNT(*) * 40 AS bytes FROM json_each(?1) AS r \
         JOIN counter_days AS t ON t.ns = r.value ->> 0 AND t.key = r.value ->> 1 GROUP BY r.key",
        "SELECT CAST(r.key AS INTEGER) AS place, SUM((length(t.sketch) + 2) / 3 * 4 + 32) AS bytes \
         FROM json_each(?1) AS r JOIN visitor_sketches AS t ON t.ns = r.value ->> 0 AND t.key = r.value ->> 1 \
         GROUP BY r.key",
    ] {
        let rows: Vec<Size> = store.rows(query, vec![json_names(keys)?]).map_err(|e| describe(&e))?;
        sizes.extend(rows.into_iter().map(|size| (size.place, size.bytes)));
    }
    Ok(sizes)
}

/// Stores `parcels`' days and sketches over what their keys hold of those days.
///
/// # Errors
/// A description of the storage failure.
pub(super) fn save_parcel_days(store: &SqlShardStore, parcels: &[&Parcel]) -> StoreResult<()> {
    if parcels.iter().any(|p| !p.days.is_empty() || !p.sketches.is_empty()) {
        store.holds_days.set(true);
    }
    let days: Vec<(&str, &str, i32, i64)> = parcels
        .iter()
        .flat_map(|p| p.days.iter().map(|d| (p.ns.as_str(), p.key.as_str(), d.day.0, d.count)))
        .collect();
    for chunk in days.chunks(ROWS_PER_STATEMENT) {
        store.write(
            &rows_statement(
                "INSERT INTO counter_days (ns, key, day, count)",
                4,
                chunk.len(),
                "ON CONFLICT (ns, key, day) DO UPDATE SET count = excluded.count",
            ),
            vec![json_rows(&chunk)?],
        )?;
    }
    for parcel in parcels {
        for sketch in &parcel.sketches {
            store.save_sketch(&parcel.ns, &parcel.key, sketch.day, &sketch.sketch)?;
        }
    }
    Ok(())
}

fn names(ns: &Namespace, key: &Key) -> Vec<SqlStorageValue> {
    vec![text(ns.as_str()), text(key.as_str())]
}

fn day_value(day: Day) -> SqlStorageValue {
    SqlStorageValue::Integer(i64::from(day.0))
}

impl SqlShardStore {
    /// Adds `day`'s count to `ns`/`key`'s finished days (see `CounterStore::finish_day`).
    ///
    /// # Errors
    /// A description of the storage failure.
    pub(super) fn add_finished_day(&self, ns: &Namespace, key: &Key, day: DayCount) -> StoreResult<()> {
        self.holds_days.set(true);
        let mut bindings = names(ns, key);
        bindings.extend([day_value(day.day), SqlStorageValue::Integer(day.count)]);
        self.write(
            // Saturating at the 64-bit bounds, as counts of a day do: SQLite would make a REAL.
            "INSERT INTO counter_days (ns, key, day, count) VALUES (?, ?, ?, ?) \
             ON CONFLICT (ns, key, day) DO UPDATE SET count = CASE \
             WHEN excluded.count > 0 AND count > 9223372036854775807 - excluded.count THEN 9223372036854775807 \
             WHEN excluded.count < 0 AND count < (-9223372036854775807 - 1) - excluded.count THEN (-9223372036854775807 - 1) \
             ELSE count + excluded.count END",
            bindings,
        )
    }
}

impl VisitStore for SqlShardStore {
    fn day_salt(&self, day: Day) -> StoreResult<Salt> {
        let rows = self.raw_rows("SELECT salt FROM visitor_salts WHERE day = ?", vec![day_value(day)])?;
        if let Some(salt) = rows.first().and_then(|row| row.first()).map(blob) {
            return salt.try_into().map_err(|_| "a stored salt is not 32 bytes".into());
        }
        let mut salt: Salt = [0; 32];
        fill_random(&mut salt);
        self.write(
            "INSERT INTO visitor_salts (day, salt) VALUES (?, ?)",
            vec![day_value(day), SqlStorageValue::Blob(salt.to_vec())],
        )?;
        // The days before it within SALT_DAYS stay, for the counts that cross midnight.
        self.write("DELETE FROM visitor_salts WHERE day < ?", vec![day_value(day.before(SALT_DAYS))])?;
        Ok(salt)
    }

    fn forget_salts_before(&self, day: Day) -> StoreResult<Option<Day>> {
        #[derive(Deserialize)]
        struct Oldest {
            day: Option<i32>,
        }
        self.write("DELETE FROM visitor_salts WHERE day < ?", vec![day_value(day)])?;
        let oldest: Vec<Oldest> =
            self.rows("SELECT MIN(day) AS day FROM visitor_salts", vec![]).map_err(|e| describe(&e))?;
        Ok(oldest.first().and_then(|o| o.day).map(Day))
    }

    fn load_sketch(&self, ns: &Namespace, key: &Key, day: Day) -> StoreResult<Option<Vec<u8>>> {
        let mut bindings = names(ns, key);
        bindings.push(day_value(day));
        let rows = self
            .raw_rows("SELECT sketch FROM visitor_sketches WHERE ns = ? AND key = ? AND day = ?", bindings)?;
        Ok(rows.first().and_then(|row| row.first()).map(blob))
    }

    fn save_sketch(&self, ns: &Namespace, key: &Key, day: Day, sketch: &[u8]) -> StoreResult<()> {
        self.holds_days.set(true);
        let mut bindings = names(ns, key);
        bindings.extend([day_value(day), SqlStorageValue::Blob(sketch.to_vec())]);
        self.write(
            "INSERT INTO visitor_sketches (ns, key, day, sketch) VALUES (?, ?, ?, ?) \
             ON CONFLICT (ns, key, day) DO UPDATE SET sketch = excluded.sketch",
            bindings,
        )
    }

    fn stored_days(&self, ns: &Namespace, key: &Key, from: Day, to: Day) -> StoreResult<Vec<DayCount>> {
        #[derive(Deserialize)]
        struct Row {
            day: i32,
            count: i64,
        }
        let mut bindings = names(ns, key);
        bindings.extend([day_value(from), day_value(to)]);
        let rows: Vec<Row> = self
            .rows(
                "SELECT day, count FROM counter_days WHERE ns = ? AND key = ? AND day BETWEEN ? AND ? ORDER BY day",
                bindings,
            )
            .map_err(|e| describe(&e))?;
        Ok(rows.into_iter().map(|row| DayCount { day: Day(row.day), count: row.count }).collect())
    }

    fn each_sketch(
        &self,
        ns: &Namespace,
        key: &Key,
        (from, to): (Day, Day),
        each: &mut EachSketch<'_>,
    ) -> StoreResult<()> {
        let mut bindings = names(ns, key);
        bindings.extend([day_value(from), day_value(to)]);
        let cursor = self
            .sql()
            .exec(
                "SELECT day, sketch FROM visitor_sketches WHERE ns = ? AND key = ? AND day BETWEEN ? AND ? \
                 ORDER BY day",
                bindings,
            )
            .map_err(|e| describe(&e))?;
        // Row by row: a period's sketches are never all in memory at once.
        for row in cursor.raw() {
            let row = row.map_err(|e| describe(&e))?;
            let [SqlStorageValue::Integer(day), sketch] = row.as_slice() else {
                return Err("unexpected sketch row shape".into());
            };
            each(Day(i32::try_from(*day).map_err(|_| "a stored day out of range")?), &blob(sketch))?;
        }
        self.tally(&cursor);
        Ok(())
    }

    fn load_union(&self, ns: &Namespace, key: &Key, days: (Day, Day)) -> StoreResult<Option<Vec<u8>>> {
        visit_unions::load(self, ns, key, days)
    }

    fn save_union(&self, ns: &Namespace, key: &Key, days: (Day, Day), kept: &[u8]) -> StoreResult<()> {
        visit_unions::save(self, ns, key, days, kept)
    }
}
