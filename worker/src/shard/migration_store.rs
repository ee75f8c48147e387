//! What a shard stores for a change of the shard count (see
//! [`edgecount_core::shard::migration`]): the [`Parcel`]s of keys it hands over, the keys it
//! took over (`arrivals`, each marked with the change it arrived in), and how far its own
//! hand-overs have got (`hand_overs`).
//!
//! A parcel is stored whole in one turn with its arrival mark, so both are durable together or
//! not at all; a parcel for a key already marked is ignored.

use edgecount_core::shard::cache_table::CacheStore;
use edgecount_core::shard::migration::{Migration, Parcel, ParcelEntry, ParcelRecord};
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

/// The names of a statement's keys, bound as one JSON array (`?1`), each with its place in it.
const NAMED: &str = "json_each(?1) AS r";
/// A key's place among the names.
const PLACE: &str = "CAST(r.key AS INTEGER) AS place";
/// Joins a table `t` to the names.
const ON_NAME: &str = "ON t.ns = r.value ->> 0 AND t.key = r.value ->> 1";

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

    /// The places in `keys` of those not yet taken over in `migration`.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn unarrived(&self, keys: &[(&Namespace, &Key)], migration: Migration) -> Result<Vec<usize>> {
        #[derive(Deserialize)]
        struct Place {
            place: usize,
        }
        let names: Vec<(&str, &str)> = keys.iter().map(|(ns, key)| (ns.as_str(), key.as_str())).collect();
        let places: Vec<Place> = self
            .rows(
                "SELECT CAST(r.key AS INTEGER) AS place FROM json_each(?1) AS r WHERE NOT EXISTS \
                 (SELECT 1 FROM arrivals AS a WHERE a.ns = r.value ->> 0 AND a.key = r.value ->> 1 \
                 AND a.from_shards = ?2 AND a.to_shards = ?3)",
                [vec![json_rows(&names)?], counts_of(migration)].concat(),
            )
            .map_err(|e| describe(&e))?;
        Ok(places.into_iter().map(|p| p.place).collect())
    }

    /// The parcels of `keys`, in order, as many as fit `budget` bytes of
    /// [`Parcel::weight`] (the first one always). Sizes are read first, so values past the
    /// budget are never loaded.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn parcels(&self, keys: &[(Namespace, Key)], budget: usize) -> Result<Vec<Parcel>> {
        self.parcels_with(keys, budget, true)
    }

    /// [`Self::parcels`], with the keys' idempotency records or without them (an export's).
    pub(super) fn parcels_with(
        &self,
        keys: &[(Namespace, Key)],
        budget: usize,
        with_records: bool,
    ) -> Result<Vec<Parcel>> {
        let keys = &keys[..self.fitting(keys, budget, with_records)?];
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
        if !with_records {
            return Ok(parcels);
        }
        // Both generations of records, the current first: a scope in both was applied again
        // after its earlier record lapsed, and only the newer record travels.
        for table in RECORD_TABLES {
            let records: Vec<Placed<ParcelRecord>> = self
                .rows(
                    &format!(
                        "SELECT {PLACE}, t.kind, t.idempotency_key, t.request_digest, t.result, t.created_at_ms \
                         FROM {NAMED} JOIN {table} AS t {ON_NAME} AND t.{PER_KEY_RECORDS}"
                    ),
                    vec![names()?],
                )
                .map_err(|e| describe(&e))?;
            for Placed { place, row } in records {
                let parcel = parcels.get_mut(place).ok_or("a record of no asked key")?;
                let same = |r: &ParcelRecord| r.kind == row.kind && r.idempotency_key == row.idempotency_key;
                if !parcel.records.iter().any(same) {
                    parcel.records.push(row);
                }
            }
        }
        Ok(parcels)
    }

    /// How many of `keys`, from the first, have parcels within `budget` bytes (at least one).
    fn fitting(&self, keys: &[(Namespace, Key)], budget: usize, with_records: bool) -> Result<usize> {
        #[derive(Deserialize)]
        struct Size {
            place: usize,
            bytes: u64,
        }
        // As Parcel::weight counts them: a value in base64, and the content type; each record's
        // texts plus 96.
        let sizes = |query: &str| -> Result<Vec<Size>> {
            self.rows(query, vec![json_names(keys)?]).map_err(|e| describe(&e))
        };
        let mut weights: Vec<usize> =
            keys.iter().map(|(ns, key)| ns.as_str().len() + key.as_str().len() + 256).collect();
        let entries = sizes(&format!(
            "SELECT {PLACE}, (length(t.value) + 2) / 3 * 4 + length(CAST(t.content_type AS BLOB)) + 64 AS bytes \
             FROM {NAMED} JOIN cache_entries AS t {ON_NAME}"
        ))?;
        let mut records = Vec::new();
        if with_records {
            for table in RECORD_TABLES {
                records.extend(sizes(&format!(
                    "SELECT {PLACE}, SUM(length(CAST(t.kind AS BLOB)) + length(CAST(t.idempotency_key AS BLOB)) \
                     + length(CAST(t.request_digest AS BLOB)) + length(CAST(t.result AS BLOB)) + 96) AS bytes \
                     FROM {NAMED} JOIN {table} AS t {ON_NAME} AND t.{PER_KEY_RECORDS} GROUP BY r.key"
                ))?);
            }
        }
        let days = visit_store::parcel_weights(self, keys)?.into_iter();
        let sizes = entries.into_iter().chain(records).map(|size| (size.place, size.bytes)).chain(days);
        for (place, bytes) in sizes {
            if let Some(weight) = weights.get_mut(place) {
                *weight += usize::try_from(bytes).unwrap_or(usize::MAX);
            }
        }
        let mut total = 0_usize;
        let fitting = weights.iter().take_while(|&&weight| {
            total = total.saturating_add(weight);
            total <= budget
        });
        Ok(fitting.count().max(1).min(keys.len()))
    }

    /// Stores each parcel whose key has not arrived in `migration` yet, in place of anything
    /// stored under its name, with the key's arrival mark; answers the keys stored. A few
    /// statements for all of them (one per cache entry). A parcel that carries nothing replaces
    /// nothing: under a change, a key's new home holds nothing of it before it arrives, unless
    /// the change was already done once and declared over (then declared again, by a rollback
    /// say), when what it holds is the key itself and its old home has nothing left.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn adopt(&self, parcels: &[Parcel], migration: Migration) -> Result<Vec<(Namespace, Key)>> {
        let names: Vec<(&Namespace, &Key)> = parcels.iter().map(|p| (&p.ns, &p.key)).collect();
        let fresh: Vec<&Parcel> =
            self.unarrived(&names, migration)?.into_iter().map(|place| &parcels[place]).collect();
        let adopted: Vec<(Namespace, Key)> = fresh.iter().map(|p| (p.ns.clone(), p.key.clone())).collect();
        if adopted.is_empty() {
            return Ok(adopted);
        }
        let replaced: Vec<(Namespace, Key)> =
            fresh.iter().filter(|p| !p.holds_nothing()).map(|p| (p.ns.clone(), p.key.clone())).collect();
        self.release(&replaced)?;
        let counters: Vec<(Namespace, Key, Counter)> =
            fresh.iter().filter_map(|p| Some((p.ns.clone(), p.key.clone(), p.counter?))).collect();
        self.save_all(&counters)?;
        visit_store::save_parcel_days(self, &fresh)?;
        for parcel in &fresh {
            if let Some(entry) = &parcel.cache {
                self.save_parcel_entry(&parcel.ns, &parcel.key, entry)?;
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
            let insert = "INSERT INTO idempotency_records \
                          (ns, key, kind, idempotency_key, request_digest, result, created_at_ms)";
            self.write(&rows_statement(insert, 7, chunk.len(), ""), vec![json_rows(&chunk)?])?;
        }
        let arrivals: Vec<_> =
            adopted.iter().map(|(ns, key)| (ns, key, migration.from, migration.to)).collect();
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
        Ok(adopted)
    }

    /// Stores a parcel's cache entry as `ns`/`key`, through the cache put's own upsert.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub(super) fn save_parcel_entry(&self, ns: &Namespace, key: &Key, entry: &ParcelEntry) -> Result<()> {
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
    /// in name order, after the name `after`.
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
        let rows: Vec<Name> = self
            .rows(
                &format!(
                    "SELECT ns, key FROM (SELECT ns, key FROM counters UNION SELECT ns, key FROM cache_entries \
                     UNION SELECT ns, key FROM {RECORDS} WHERE {PER_KEY_RECORDS} \
                     UNION SELECT ns, key FROM {EARLIER_RECORDS} WHERE {PER_KEY_RECORDS}) \
                     WHERE (ns, key) > (?, ?) ORDER BY ns, key LIMIT ?"
                ),
                vec![text(ns), text(key), integer(Some(most))],
            )
            .map_err(|e| describe(&e))?;
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

/// The counts of `migration`, bound as two integers: the count left, then the one reached.
fn counts_of(migration: Migration) -> Vec<SqlStorageValue> {
    vec![integer(Some(u64::from(migration.from))), integer(Some(u64::from(migration.to)))]
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
