//! What a shard stores for a change of the shard count (see
//! [`edgecount_core::shard::migration`]): the [`Parcel`]s of keys it hands over, the keys it
//! took over (`arrivals`, each marked with the change it arrived in), and how far its own
//! hand-overs have got (`hand_overs`).
//!
//! A parcel is stored whole in one turn with its arrival mark, so both are durable together or
//! not at all; a parcel for a key already marked is ignored.

use edgecount_core::shard::migration::{Migration, Parcel, ParcelEntry, ParcelRecord};
use edgecount_core::{CounterStore, Key, Namespace};
use serde::Deserialize;
use worker::SqlStorageValue;

use crate::shard::sql_store::{describe, integer, json_rows, text, SqlShardStore};

/// The kinds of idempotency record that belong to one key and travel with it (a receipt's
/// `request` record stays where its request was applied).
const PER_KEY_RECORDS: &str = "kind IN ('counter', 'cache')";

type Result<T> = std::result::Result<T, String>;

/// How far this shard has got with the change of count under way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandOvers {
    /// This shard's index, once a caller has told it.
    pub shard: Option<u32>,
    /// The change whose hand-overs this shard has finished, if any.
    pub done: Option<Migration>,
}

impl SqlShardStore {
    /// Forgets the arrivals of any change but `migration` (all of them when none is under way),
    /// so that a later change starts with none.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn settle_arrivals(&self, migration: Option<Migration>) -> Result<()> {
        let (from, to) = migration.map_or((0, 0), |m| (m.from, m.to));
        self.change(
            "DELETE FROM arrivals WHERE from_shards != ? OR to_shards != ?",
            vec![integer(Some(u64::from(from))), integer(Some(u64::from(to)))],
        )
        .map(drop)
        .map_err(|e| describe(&e))
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
        self.change(
            "INSERT INTO hand_overs (id, shard) VALUES (0, ?) ON CONFLICT (id) DO UPDATE SET shard = excluded.shard",
            vec![integer(Some(u64::from(shard)))],
        )
        .map(drop)
        .map_err(|e| describe(&e))
    }

    /// Keeps that every key leaving this shard in `migration` has been handed over.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn finish_hand_overs(&self, migration: Migration) -> Result<()> {
        self.change(
            "UPDATE hand_overs SET done_from = ?, done_to = ? WHERE id = 0",
            vec![integer(Some(u64::from(migration.from))), integer(Some(u64::from(migration.to)))],
        )
        .map(drop)
        .map_err(|e| describe(&e))
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
                vec![
                    json_rows(&names)?,
                    integer(Some(u64::from(migration.from))),
                    integer(Some(u64::from(migration.to))),
                ],
            )
            .map_err(|e| describe(&e))?;
        Ok(places.into_iter().map(|p| p.place).collect())
    }

    /// The parcels of `keys`, in order, as many as fit `budget` bytes of
    /// [`Parcel::weight`] (the first one always).
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn parcels(&self, keys: &[(Namespace, Key)], budget: usize) -> Result<Vec<Parcel>> {
        let mut parcels = Vec::new();
        let mut weight = 0;
        for (ns, key) in keys {
            let parcel = self.parcel(ns, key)?;
            weight += parcel.weight();
            if !parcels.is_empty() && weight > budget {
                break;
            }
            parcels.push(parcel);
        }
        Ok(parcels)
    }

    fn parcel(&self, ns: &Namespace, key: &Key) -> Result<Parcel> {
        let names = || vec![text(ns.as_str()), text(key.as_str())];
        let counter = self.load(ns, key)?;
        let cursor = self
            .sql()
            .exec(
                "SELECT value, content_type, expires_at_ms, written_at_ms FROM cache_entries \
                 WHERE ns = ? AND key = ?",
                names(),
            )
            .map_err(|e| describe(&e))?;
        let row = cursor.raw().next().transpose().map_err(|e| describe(&e))?;
        self.tally(&cursor);
        let cache = row.map(|row| entry(&row)).transpose()?;
        let records: Vec<ParcelRecord> = self
            .rows(
                &format!(
                    "SELECT kind, idempotency_key, request_digest, result, created_at_ms \
                     FROM idempotency_records WHERE ns = ? AND key = ? AND {PER_KEY_RECORDS}"
                ),
                names(),
            )
            .map_err(|e| describe(&e))?;
        Ok(Parcel { counter, cache, records, ..Parcel::empty(ns.clone(), key.clone()) })
    }

    /// Stores each parcel whose key has not arrived in `migration` yet, in place of anything
    /// stored under its name, with the key's arrival mark; answers the keys stored.
    ///
    /// # Errors
    /// A description of the storage failure; parcels stored before it stay stored.
    pub fn adopt(&self, parcels: &[Parcel], migration: Migration) -> Result<Vec<(Namespace, Key)>> {
        let names: Vec<(&Namespace, &Key)> = parcels.iter().map(|p| (&p.ns, &p.key)).collect();
        let unarrived = self.unarrived(&names, migration)?;
        let mut adopted = Vec::with_capacity(unarrived.len());
        for place in unarrived {
            let parcel = &parcels[place];
            self.remove_key(&parcel.ns, &parcel.key)?;
            if let Some(counter) = &parcel.counter {
                self.save(&parcel.ns, &parcel.key, counter)?;
            }
            if let Some(entry) = &parcel.cache {
                self.change(
                    "INSERT INTO cache_entries (ns, key, value, content_type, expires_at_ms, written_at_ms) \
                     VALUES (?, ?, ?, ?, ?, ?)",
                    vec![
                        text(parcel.ns.as_str()),
                        text(parcel.key.as_str()),
                        SqlStorageValue::Blob(entry.value.clone()),
                        text(&entry.content_type),
                        integer(entry.expires_at_ms),
                        integer(Some(entry.written_at_ms)),
                    ],
                )
                .map_err(|e| describe(&e))?;
            }
            for record in &parcel.records {
                self.change(
                    "INSERT INTO idempotency_records \
                     (ns, key, kind, idempotency_key, request_digest, result, created_at_ms) \
                     VALUES (?, ?, ?, ?, ?, ?, ?)",
                    vec![
                        text(parcel.ns.as_str()),
                        text(parcel.key.as_str()),
                        text(&record.kind),
                        text(&record.idempotency_key),
                        text(&record.request_digest),
                        text(&record.result),
                        integer(Some(record.created_at_ms)),
                    ],
                )
                .map_err(|e| describe(&e))?;
            }
            self.change(
                "INSERT INTO arrivals (ns, key, from_shards, to_shards) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (ns, key) DO UPDATE SET from_shards = excluded.from_shards, \
                 to_shards = excluded.to_shards",
                vec![
                    text(parcel.ns.as_str()),
                    text(parcel.key.as_str()),
                    integer(Some(u64::from(migration.from))),
                    integer(Some(u64::from(migration.to))),
                ],
            )
            .map_err(|e| describe(&e))?;
            adopted.push((parcel.ns.clone(), parcel.key.clone()));
        }
        Ok(adopted)
    }

    /// Deletes what is stored of `keys`: they were handed over, and their new home holds them.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn release(&self, keys: &[(Namespace, Key)]) -> Result<()> {
        keys.iter().try_for_each(|(ns, key)| self.remove_key(ns, key))
    }

    fn remove_key(&self, ns: &Namespace, key: &Key) -> Result<()> {
        for statement in [
            "DELETE FROM counters WHERE ns = ?1 AND key = ?2".to_owned(),
            "DELETE FROM cache_entries WHERE ns = ?1 AND key = ?2".to_owned(),
            format!("DELETE FROM idempotency_records WHERE ns = ?1 AND key = ?2 AND {PER_KEY_RECORDS}"),
        ] {
            self.change(&statement, vec![text(ns.as_str()), text(key.as_str())]).map_err(|e| describe(&e))?;
        }
        Ok(())
    }

    /// Up to `most` names with anything stored (a counter, a cache entry or a per-key record),
    /// in name order, after `after`.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn names_after(&self, after: Option<&(Namespace, Key)>, most: u64) -> Result<Vec<(Namespace, Key)>> {
        #[derive(Deserialize)]
        struct Name {
            ns: String,
            key: String,
        }
        let (ns, key) = after.map_or(("", ""), |(ns, key)| (ns.as_str(), key.as_str()));
        let names: Vec<Name> = self
            .rows(
                &format!(
                    "SELECT ns, key FROM (SELECT ns, key FROM counters UNION SELECT ns, key FROM cache_entries \
                     UNION SELECT ns, key FROM idempotency_records WHERE {PER_KEY_RECORDS}) \
                     WHERE (ns, key) > (?, ?) ORDER BY ns, key LIMIT ?"
                ),
                vec![text(ns), text(key), integer(Some(most))],
            )
            .map_err(|e| describe(&e))?;
        // Names were validated when written; any that no longer pass the rules is skipped.
        Ok(names
            .into_iter()
            .filter_map(|n| Some((Namespace::new(&n.ns).ok()?, Key::new(&n.key).ok()?)))
            .collect())
    }
}

/// A cache row (`value, content_type, expires_at_ms, written_at_ms`) as a parcel's entry.
fn entry(row: &[SqlStorageValue]) -> Result<ParcelEntry> {
    let number = |value: &SqlStorageValue| match value {
        SqlStorageValue::Integer(n) => Some(n.cast_unsigned()),
        SqlStorageValue::Float(n) => Some(*n as u64),
        _ => None,
    };
    match row {
        [value, SqlStorageValue::String(content_type), expires, written] => Ok(ParcelEntry {
            // An empty BLOB may come back as an empty string or null.
            value: match value {
                SqlStorageValue::Blob(bytes) => bytes.clone(),
                _ => Vec::new(),
            },
            content_type: content_type.clone(),
            expires_at_ms: number(expires),
            written_at_ms: number(written).unwrap_or(0),
        }),
        other => Err(format!("unexpected cache row shape: {} columns", other.len())),
    }
}
