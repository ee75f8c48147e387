//! What a shard stores for a change of the shard count (see
//! [`edgecount_core::shard::migration`]): the [`Parcel`]s of keys it hands over, the keys it
//! took over (`arrivals`, each marked with the change it arrived in), and how far its own
//! hand-overs have got (`hand_overs`).
//!
//! A key's parcel is stored with its arrival mark in one transaction, so both are durable
//! together or not at all, after any pages of its records that came before it; parcels and
//! pages for a key already marked are ignored.

use std::cmp::Ordering;
use std::collections::BTreeSet;

use edgecount_core::shard::cache_table::CacheStore;
use edgecount_core::shard::idempotency::IDEMPOTENCY_WINDOW_MS;
use edgecount_core::shard::migration::{
    self, Migration, Parcel, ParcelEntry, ParcelRecord, RecordsAfter, MAX_PARCEL_BYTES_PER_CALL,
    MAX_RECORDS_PER_CALL,
};
use edgecount_core::{Counter, CounterStore, Key, Namespace};
use serde::Deserialize;
use worker::SqlStorageValue;

use crate::shard::sql_store::{
    blob, describe, integer, json_names, json_rows, number, rows_statement, text, CounterRow, SqlShardStore,
    EARLIER_RECORDS, RECORDS, RECORD_TABLES, ROWS_PER_STATEMENT,
};
use crate::shard::visit_store;

/// The kinds of idempotency record that belong to one key and travel with it (a receipt's
/// `request` record stays where its request was applied).
const PER_KEY_RECORDS: &str = "kind IN ('counter', 'cache')";
/// The kinds of [`PER_KEY_RECORDS`], in order.
const PER_KEY_KINDS: [&str; 2] = ["cache", "counter"];

/// The names of a statement's keys, bound as one JSON array (`?1`), each with its place in it.
const NAMED: &str = "json_each(?1) AS r";
/// A key's place among the names.
const PLACE: &str = "CAST(r.key AS INTEGER) AS place";
/// Joins a table `t` to the names.
const ON_NAME: &str = "ON t.ns = r.value ->> 0 AND t.key = r.value ->> 1";
/// A table `t`'s rows of the name `r` (in a subquery over the names).
const WHERE_NAME: &str = "WHERE t.ns = r.value ->> 0 AND t.key = r.value ->> 1";

type Result<T> = edgecount_core::StoreResult<T>;

/// How far this shard has got with the change of count under way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandOvers {
    /// This shard's index, once a caller has told it.
    pub shard: Option<u32>,
    /// The change whose hand-overs this shard has finished, if any.
    pub done: Option<Migration>,
}

impl SqlShardStore {
    /// Forgets the arrivals of any change but `migration`, so that a later change starts with
    /// none.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn settle_arrivals(&self, migration: Migration) -> Result<()> {
        self.write("DELETE FROM arrivals WHERE from_shards != ? OR to_shards != ?", counts_of(migration))
    }

    /// The change of count this shard last ran under and that has not been declared over
    /// since (see [`Self::settle_change`]).
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn declared_change(&self) -> Result<Option<Migration>> {
        #[derive(Deserialize)]
        struct Row {
            from_shards: u32,
            to_shards: u32,
        }
        let rows: Vec<Row> = self
            .rows("SELECT from_shards, to_shards FROM declared_change WHERE id = 0", vec![])
            .map_err(|e| describe(&e))?;
        Ok(rows.first().map(|row| Migration { from: row.from_shards, to: row.to_shards }))
    }

    /// Keeps `migration` as the change this shard runs under.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn declare_change(&self, migration: Migration) -> Result<()> {
        self.write(
            "INSERT INTO declared_change (id, from_shards, to_shards) VALUES (0, ?, ?) ON CONFLICT (id) \
             DO UPDATE SET from_shards = excluded.from_shards, to_shards = excluded.to_shards",
            counts_of(migration),
        )
    }

    /// Forgets `migration` once it is declared over: its arrival marks, and that this shard ran
    /// under it.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn settle_change(&self, migration: Migration) -> Result<()> {
        for statement in [
            "DELETE FROM arrivals WHERE from_shards = ? AND to_shards = ?",
            "DELETE FROM declared_change WHERE from_shards = ? AND to_shards = ?",
        ] {
            self.write(statement, counts_of(migration))?;
        }
        Ok(())
    }

    /// What [`Self::learn_shard`] and [`Self::finish_hand_overs`] kept.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn hand_overs(&self) -> Result<HandOvers> {
        #[derive(Deserialize)]
        struct Row {
            shard: u32,
            done_from: Option<u32>,
            done_to: Option<u32>,
        }
        let rows: Vec<Row> = self
            .rows("SELECT shard, done_from, done_to FROM hand_overs WHERE id = 0", vec![])
            .map_err(|e| describe(&e))?;
        Ok(rows.first().map_or_else(HandOvers::default, |row| HandOvers {
            shard: Some(row.shard),
            done: row.done_from.zip(row.done_to).map(|(from, to)| Migration { from, to }),
        }))
    }

    /// Keeps this shard's index, for its alarm after a restart.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn learn_shard(&self, shard: u32) -> Result<()> {
        self.write(
            "INSERT INTO hand_overs (id, shard) VALUES (0, ?) ON CONFLICT (id) DO UPDATE SET shard = excluded.shard",
            vec![integer(Some(u64::from(shard)))],
        )
    }

    /// Keeps that every key leaving this shard in `migration` has been handed over.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn finish_hand_overs(&self, migration: Migration) -> Result<()> {
        self.write("UPDATE hand_overs SET done_from = ?, done_to = ? WHERE id = 0", counts_of(migration))
    }

    /// Whether each of `keys` has arrived in `migration`: is marked, or holds a counter or cache
    /// entry here. A key's new home stores neither before the key arrives, so one it holds
    /// arrived, if not in this change then in the same change declared over once already (its
    /// mark forgotten then, once every old home had handed its keys over) and now declared
    /// again. Marks are forgotten at no other time: a shard whose change is still under way,
    /// opened under another, forgets none and runs nothing (see
    /// [`crate::shard::resharding::state::HandOverState::open`]), so a copy its old home still
    /// holds is never taken for a key that arrived here and was written since.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn arrived(&self, keys: &[(&Namespace, &Key)], migration: Migration) -> Result<Vec<bool>> {
        #[derive(Deserialize)]
        struct Place {
            place: usize,
        }
        let names: Vec<(&str, &str)> = keys.iter().map(|(ns, key)| (ns.as_str(), key.as_str())).collect();
        // Those that arrived are read, usually the fewer.
        let arrived: Vec<Place> = self
            .rows(
                &format!(
                    "SELECT {PLACE} FROM {NAMED} WHERE EXISTS (SELECT 1 FROM arrivals AS t {WHERE_NAME} \
                     AND t.from_shards = ?2 AND t.to_shards = ?3) \
                     OR EXISTS (SELECT 1 FROM counters AS t {WHERE_NAME}) \
                     OR EXISTS (SELECT 1 FROM cache_entries AS t {WHERE_NAME})"
                ),
                [vec![json_rows(&names)?], counts_of(migration)].concat(),
            )
            .map_err(|e| describe(&e))?;
        let mut has_arrived = vec![false; keys.len()];
        for Place { place } in arrived {
            *has_arrived.get_mut(place).ok_or("an arrival of no asked key")? = true;
        }
        Ok(has_arrived)
    }

    /// What the next hand-over call carries of `keys` (see [`edgecount_core::shard::migration`]),
    /// their idempotency records live at `now_ms` with them: the parcels of as many as fit one
    /// call, or, for a first key with more records than one call carries, a page of its records
    /// (its whole parcel with the last page). `after` is where the first key's records continue,
    /// when the call before carried a page of them.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn parcels(
        &self,
        keys: &[(Namespace, Key)],
        after: Option<&RecordsAfter>,
        now_ms: u64,
    ) -> Result<Vec<Parcel>> {
        // A lapsed record is never replayed, so it stays behind; so does the earlier of two
        // records of one scope (one in each generation), which lapsed before the later was made.
        let live = now_ms.saturating_sub(IDEMPOTENCY_WINDOW_MS);
        let Some(first) = keys.first() else { return Ok(Vec::new()) };
        if let Some(after) = after {
            return self.paged_parcel(first, after, live);
        }
        let keys = &keys[..self.fitting(keys, MAX_PARCEL_BYTES_PER_CALL)?];
        let counts = self.record_counts(keys, live)?;
        let whole = migration::whole_keys(counts.iter().copied());
        if whole == 0 {
            return self.paged_parcel(first, &RecordsAfter::start(), live);
        }
        let mut parcels = self.parcels_with(&keys[..whole])?;
        if counts[..whole].iter().any(|&n| n > 0) {
            let records: Vec<Placed<ParcelRecord>> = self
                .rows(
                    &format!("{} UNION ALL {}", records_of(RECORDS), records_of(EARLIER_RECORDS)),
                    vec![json_names(&keys[..whole])?, integer(Some(live))],
                )
                .map_err(|e| describe(&e))?;
            for Placed { place, row } in records {
                parcels.get_mut(place).ok_or("a record of no asked key")?.records.push(row);
            }
        }
        Ok(parcels)
    }

    /// The first key's next page of records (live since `live`) after `after` and, if it is the
    /// last, the rest of its parcel with it.
    fn paged_parcel(
        &self,
        (ns, key): &(Namespace, Key),
        after: &RecordsAfter,
        live: u64,
    ) -> Result<Vec<Parcel>> {
        // Each table and kind from the cursor on, merged in order: a kind's rows are sought by
        // `kind = ? AND idempotency_key > ?`, where a comparison of the pair (or a list of
        // kinds) would step through every record of the kind before the cursor.
        let arms: Vec<String> = RECORD_TABLES
            .iter()
            .flat_map(|table| PER_KEY_KINDS.iter().map(move |kind| (table, kind)))
            .filter_map(|(table, kind)| {
                let from = match (*kind).cmp(after.kind.as_str()) {
                    Ordering::Less => return None,
                    Ordering::Equal => " AND idempotency_key > ?4",
                    Ordering::Greater => "",
                };
                Some(format!(
                    "SELECT 0 AS place, kind, idempotency_key, request_digest, result, created_at_ms FROM {table} \
                     WHERE ns = ?1 AND key = ?2 AND kind = '{kind}'{from} AND created_at_ms > ?3"
                ))
            })
            .collect();
        let records: Vec<Placed<ParcelRecord>> = if arms.is_empty() {
            Vec::new()
        } else {
            self.rows(
                &format!("{} ORDER BY kind, idempotency_key LIMIT ?5", arms.join(" UNION ALL ")),
                vec![
                    text(ns.as_str()),
                    text(key.as_str()),
                    integer(Some(live)),
                    text(&after.idempotency_key),
                    integer(Some(MAX_RECORDS_PER_CALL as u64 + 1)),
                ],
            )
            .map_err(|e| describe(&e))?
        };
        let mut records: Vec<ParcelRecord> = records.into_iter().map(|placed| placed.row).collect();
        if records.len() > MAX_RECORDS_PER_CALL {
            records.truncate(MAX_RECORDS_PER_CALL);
            let page = Parcel { records, records_follow: true, ..Parcel::empty(ns.clone(), key.clone()) };
            return Ok(vec![page]);
        }
        let mut parcels = self.parcels_with(&[(ns.clone(), key.clone())])?;
        if let Some(parcel) = parcels.first_mut() {
            parcel.records = records;
        }
        Ok(parcels)
    }

    /// The parcels of `keys`, in order, without their idempotency records.
    pub(in crate::shard) fn parcels_with(&self, keys: &[(Namespace, Key)]) -> Result<Vec<Parcel>> {
        let mut parcels: Vec<Parcel> =
            keys.iter().map(|(ns, key)| Parcel::empty(ns.clone(), key.clone())).collect();
        if keys.is_empty() {
            return Ok(parcels);
        }
        let names = || json_names(keys);
        let counters: Vec<Placed<CounterRow>> = self
            .rows(
                &format!(
                    "SELECT {PLACE}, CAST(t.value AS TEXT) AS value, t.version, t.ttl_seconds, t.expires_at_ms, \
                     t.created_ms, t.settings, t.day, t.day_count FROM {NAMED} JOIN counters AS t {ON_NAME}"
                ),
                vec![names()?],
            )
            .map_err(|e| describe(&e))?;
        for Placed { place, row } in counters {
            parcels.get_mut(place).ok_or("a counter row of no asked key")?.counter = Some(row.counter()?);
        }
        visit_store::fill_parcels(self, keys, &mut parcels)?;
        let rows = self.raw_rows(
            &format!(
                "SELECT {PLACE}, t.value, t.content_type, t.expires_at_ms, t.written_at_ms \
                 FROM {NAMED} JOIN cache_entries AS t {ON_NAME}"
            ),
            vec![names()?],
        )?;
        for row in rows {
            let (Some(place), Some(columns)) = (row.first().and_then(number), row.get(1..)) else {
                return Err("unexpected cache row shape".into());
            };
            let parcel = usize::try_from(place).ok().and_then(|place| parcels.get_mut(place));
            parcel.ok_or("a cache row of no asked key")?.cache = Some(entry(columns)?);
        }
        Ok(parcels)
    }

    /// How many per-key records live since `live` each of `keys` holds, counted up to one past
    /// what a call carries: enough to tell whether they fit, without reading a busy key's all.
    fn record_counts(&self, keys: &[(Namespace, Key)], live: u64) -> Result<Vec<usize>> {
        #[derive(Deserialize)]
        struct Count {
            place: usize,
            records: usize,
        }
        let counted = |table: &str| {
            format!(
                "(SELECT COUNT(*) FROM (SELECT 1 FROM {table} AS t {WHERE_NAME} AND t.{PER_KEY_RECORDS} \
                 AND t.created_at_ms > ?3 LIMIT ?2))"
            )
        };
        // Only keys that hold any come back: most hold none.
        let rows: Vec<Count> = self
            .rows(
                &format!(
                    "SELECT place, records FROM (SELECT {PLACE}, {} + {} AS records FROM {NAMED}) WHERE records > 0",
                    counted(RECORDS),
                    counted(EARLIER_RECORDS)
                ),
                vec![json_names(keys)?, integer(Some(MAX_RECORDS_PER_CALL as u64 + 1)), integer(Some(live))],
            )
            .map_err(|e| describe(&e))?;
        let mut counts = vec![0; keys.len()];
        for Count { place, records } in rows {
            *counts.get_mut(place).ok_or("a count of no asked key")? = records;
        }
        Ok(counts)
    }

    /// How many of `keys`, from the first, have parcels within `budget` bytes, their records
    /// aside (at least one).
    pub(in crate::shard) fn fitting(&self, keys: &[(Namespace, Key)], budget: usize) -> Result<usize> {
        if keys.len() <= 1 {
            return Ok(keys.len());
        }
        #[derive(Deserialize)]
        struct Size {
            place: usize,
            bytes: u64,
        }
        // About what the JSON takes: a value in base64 and the content type, the days and
        // sketches, names, and a counter's fields with the rest in a fixed 256.
        let mut weights: Vec<usize> =
            keys.iter().map(|(ns, key)| ns.as_str().len() + key.as_str().len() + 256).collect();
        let entries: Vec<Size> = self
            .rows(
                &format!(
                    "SELECT {PLACE}, (length(t.value) + 2) / 3 * 4 + length(CAST(t.content_type AS BLOB)) + 64 \
                     AS bytes FROM {NAMED} JOIN cache_entries AS t {ON_NAME}"
                ),
                vec![json_names(keys)?],
            )
            .map_err(|e| describe(&e))?;
        let days = visit_store::parcel_weights(self, keys)?.into_iter();
        for (place, bytes) in entries.into_iter().map(|size| (size.place, size.bytes)).chain(days) {
            if let Some(weight) = weights.get_mut(place) {
                *weight += usize::try_from(bytes).unwrap_or(usize::MAX);
            }
        }
        let mut total = 0_usize;
        let fitting = weights.iter().take_while(|&&weight| {
            total = total.saturating_add(weight);
            total <= budget
        });
        Ok(fitting.count().max(1))
    }

    /// Stores what `parcels` carry of each key that has not arrived in `migration` yet (see
    /// [`Self::arrived`]): the records of every one, then the rest of those that carry their
    /// last page, with their arrival marks; answers the keys that arrived, and those whose
    /// parcels were ignored as they had arrived before. A few statements for
    /// all of them (one per cache entry). Under a change a key's new home holds nothing of it
    /// before it arrives but the pages of records that came before it: ops on it wait for its
    /// arrival, and reads of it are read at its old home.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn adopt(&self, parcels: &[Parcel], migration: Migration) -> Result<Adopted> {
        let names: Vec<(&Namespace, &Key)> = parcels.iter().map(|p| (&p.ns, &p.key)).collect();
        let arrived = self.arrived(&names, migration)?;
        let (mut fresh, mut there_before) = (Vec::new(), Vec::new());
        for (parcel, arrived) in parcels.iter().zip(arrived) {
            if arrived {
                there_before.push((parcel.ns.clone(), parcel.key.clone()));
            } else {
                fresh.push(parcel);
            }
        }
        let records: Vec<_> = fresh
            .iter()
            .flat_map(|p| {
                p.records.iter().map(|r| {
                    (
                        &p.ns,
                        &p.key,
                        &r.kind,
                        &r.idempotency_key,
                        &r.request_digest,
                        &r.result,
                        r.created_at_ms,
                    )
                })
            })
            .collect();
        for chunk in records.chunks(ROWS_PER_STATEMENT) {
            // A page stored again stores the same records.
            self.write(
                &rows_statement(
                    "INSERT INTO idempotency_records \
                     (ns, key, kind, idempotency_key, request_digest, result, created_at_ms)",
                    7,
                    chunk.len(),
                    "ON CONFLICT (ns, key, kind, idempotency_key) DO NOTHING",
                ),
                vec![json_rows(&chunk)?],
            )?;
        }
        let arriving: Vec<&Parcel> = fresh.into_iter().filter(|p| !p.records_follow).collect();
        let counters: Vec<(Namespace, Key, Counter)> =
            arriving.iter().filter_map(|p| Some((p.ns.clone(), p.key.clone(), p.counter?))).collect();
        self.save_all(&counters)?;
        visit_store::save_parcel_days(self, &arriving)?;
        for parcel in &arriving {
            if let Some(entry) = &parcel.cache {
                self.save_parcel_entry(&parcel.ns, &parcel.key, entry)?;
            }
        }
        let arrivals: Vec<_> =
            arriving.iter().map(|p| (&p.ns, &p.key, migration.from, migration.to)).collect();
        for chunk in arrivals.chunks(ROWS_PER_STATEMENT) {
            self.write(
                &rows_statement(
                    "INSERT INTO arrivals (ns, key, from_shards, to_shards)",
                    4,
                    chunk.len(),
                    "ON CONFLICT (ns, key) DO UPDATE SET from_shards = excluded.from_shards, \
                     to_shards = excluded.to_shards",
                ),
                vec![json_rows(&chunk)?],
            )?;
        }
        Ok(Adopted {
            arrived: arriving.iter().map(|p| (p.ns.clone(), p.key.clone())).collect(),
            there_before,
        })
    }

    /// Stores a parcel's cache entry as `ns`/`key`, through the cache put's own upsert.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub(in crate::shard) fn save_parcel_entry(
        &self,
        ns: &Namespace,
        key: &Key,
        entry: &ParcelEntry,
    ) -> Result<()> {
        self.save_entry(ns, key, &entry.value, &entry.content_type, entry.expires_at_ms, entry.written_at_ms)
    }

    /// Deletes what is stored of `keys` (their counters, cache entries and per-key records):
    /// they were handed over, and their new home holds them.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn release(&self, keys: &[(Namespace, Key)]) -> Result<()> {
        for chunk in keys.chunks(ROWS_PER_STATEMENT) {
            for table in ["counters", "cache_entries", RECORDS, EARLIER_RECORDS] {
                let only = if RECORD_TABLES.contains(&table) {
                    format!(" AND {PER_KEY_RECORDS}")
                } else {
                    String::new()
                };
                self.write(
                    &format!(
                        "DELETE FROM {table} WHERE (ns, key) IN (SELECT r.value ->> 0, r.value ->> 1 FROM json_each(?1) AS r){only}"
                    ),
                    vec![json_names(chunk)?],
                )?;
            }
        }
        Ok(())
    }

    /// Up to `most` names with anything stored (a counter, a cache entry or a per-key record),
    /// in name order, after the name `after`. Each table is read from `after` on through its
    /// primary key, so a page costs about `most` rows of each, however much is stored, and a
    /// key's records are passed by one seek, not read row by row.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn names_after(&self, after: Option<&(String, String)>, most: u64) -> Result<NamePage> {
        #[derive(Deserialize)]
        struct Name {
            ns: String,
            key: String,
        }
        let (ns, key) = after.map_or(("", ""), |(ns, key)| (ns.as_str(), key.as_str()));
        let page_of = |table: &str| {
            format!("SELECT ns, key FROM {table} WHERE (ns, key) > (?1, ?2) ORDER BY ns, key LIMIT ?3")
        };
        let first: Vec<Name> = self
            .rows(
                &format!(
                    "SELECT * FROM ({}) UNION SELECT * FROM ({}) ORDER BY ns, key LIMIT ?3",
                    page_of("counters"),
                    page_of("cache_entries")
                ),
                vec![text(ns), text(key), integer(Some(most))],
            )
            .map_err(|e| describe(&e))?;
        let mut found: BTreeSet<(String, String)> = first.into_iter().map(|n| (n.ns, n.key)).collect();
        let most_names = usize::try_from(most).unwrap_or(usize::MAX);
        for table in RECORD_TABLES {
            // A name past the page's `most`-th so far cannot make the page.
            let bound = found.last().filter(|_| found.len() >= most_names).cloned();
            let (bound_ns, bound_key) = match &bound {
                Some((ns, key)) => (text(ns), text(key)),
                None => (integer(None), integer(None)),
            };
            let names: Vec<Name> = self
                .rows(
                    &record_names(table),
                    vec![text(ns), text(key), integer(Some(most)), bound_ns, bound_key],
                )
                .map_err(|e| describe(&e))?;
            found.extend(names.into_iter().map(|n| (n.ns, n.key)));
            while found.len() > most_names {
                found.pop_last();
            }
        }
        let rows: Vec<Name> = found.into_iter().map(|(ns, key)| Name { ns, key }).collect();
        let last = rows.last().map(|n| (n.ns.clone(), n.key.clone()));
        let full = rows.len() as u64 >= most;
        // Names were validated when written; any that no longer pass the rules is skipped (the
        // page's fullness and last name still count it, so the sweep neither stops early nor
        // reads it again).
        let names = rows
            .into_iter()
            .filter_map(|n| Some((Namespace::new(&n.ns).ok()?, Key::new(&n.key).ok()?)))
            .collect();
        Ok(NamePage { names, last, full })
    }
}

/// A page of [`SqlShardStore::names_after`].
pub struct NamePage {
    pub names: Vec<(Namespace, Key)>,
    /// The last name read, valid or not: where the next page starts.
    pub last: Option<(String, String)>,
    /// Whether the page holds as many names as asked for: more may follow.
    pub full: bool,
}

/// A row of a table joined to the names (see [`NAMED`]), with the place of its key among them.
#[derive(Deserialize)]
struct Placed<T> {
    place: usize,
    #[serde(flatten)]
    row: T,
}

/// What [`SqlShardStore::adopt`] did with one call's parcels.
pub struct Adopted {
    /// Keys that arrived with the call.
    pub arrived: Vec<(Namespace, Key)>,
    /// Keys whose parcels it ignored, as they had arrived before (taken over by a request):
    /// their old home may delete its copies without sending the rest of their records.
    pub there_before: Vec<(Namespace, Key)>,
}

/// The counts of `migration`, bound as two integers: the count left, then the one reached.
fn counts_of(migration: Migration) -> Vec<SqlStorageValue> {
    vec![integer(Some(u64::from(migration.from))), integer(Some(u64::from(migration.to)))]
}

/// The per-key records of the names (`?1`) in `table` made after `?2`, each with its key's place.
fn records_of(table: &str) -> String {
    format!(
        "SELECT {PLACE}, t.kind, t.idempotency_key, t.request_digest, t.result, t.created_at_ms \
         FROM {NAMED} JOIN {table} AS t {ON_NAME} AND t.{PER_KEY_RECORDS} AND t.created_at_ms > ?2"
    )
}

/// Up to `?3` names of keys with per-key records in `table` after the name (`?1`, `?2`), in
/// order, stopping at the first at or past the name (`?4`, `?5`) when `?4` is not null. A table
/// of records holds many rows a key, which a `SELECT DISTINCT` would read one by one: each next
/// name is found instead by seeking past the one before, in the same namespace and then in the
/// next (a row-value comparison on the first two of the key's four columns would step through
/// the rows of the name it starts at).
fn record_names(table: &str) -> String {
    // Ordered by the key alone within a namespace: by both, the planner sorts every later row.
    let next = |column: &str, namespace: &str, order: &str| {
        format!(
            "(SELECT t.{column} FROM {table} AS t WHERE {namespace} AND t.{PER_KEY_RECORDS} \
             ORDER BY {order} LIMIT 1)"
        )
    };
    let same = "t.ns = a.ns AND t.key > a.key";
    let later = "t.ns > a.ns";
    format!(
        "WITH RECURSIVE seen(ns, key) AS (SELECT ?1, ?2 UNION ALL \
         SELECT COALESCE({}, {}), COALESCE({}, {}) FROM seen AS a \
         WHERE a.ns IS NOT NULL AND (?4 IS NULL OR (a.ns, a.key) < (?4, ?5)) LIMIT ?3 + 1) \
         SELECT ns, key FROM seen WHERE ns IS NOT NULL AND (ns, key) > (?1, ?2)",
        next("ns", same, "t.key"),
        next("ns", later, "t.ns, t.key"),
        next("key", same, "t.key"),
        next("key", later, "t.ns, t.key")
    )
}

/// A cache row (`value, content_type, expires_at_ms, written_at_ms`) as a parcel's entry.
fn entry(row: &[SqlStorageValue]) -> Result<ParcelEntry> {
    match row {
        [value, SqlStorageValue::String(content_type), expires, written] => Ok(ParcelEntry {
            value: blob(value),
            content_type: content_type.clone(),
            expires_at_ms: number(expires),
            written_at_ms: number(written).unwrap_or(0),
        }),
        other => Err(format!("unexpected cache row shape: {} columns", other.len()).into()),
    }
}
