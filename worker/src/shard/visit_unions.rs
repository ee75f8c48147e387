//! A shard's kept unions of visitor sketches in SQLite (see
//! `edgecount_core::shard::visit_union` for what they are and why).
//!
//! One row a key and range, `visitor_unions`. Triggers on `visitor_sketches` keep every row
//! the union of the sketches stored in its days: a sketch written or deleted, by any path (a
//! count, an import, a hand-over, a delete, an expiry, the days kept moving on), deletes the
//! rows whose days hold it. A save keeps at most `UNIONS_PER_KEY` rows a key.

use edgecount_core::shard::visit_union::UNIONS_PER_KEY;
use edgecount_core::visits::day::Day;
use edgecount_core::{Key, Namespace, StoreResult};
use worker::{Result, SqlStorageValue};

use crate::shard::sql_store::{blob, text, SqlShardStore};

/// By `to_day` first: the triggers seek a key's unions that end on or after a day, and a save
/// keeps those ending latest.
const TABLE: &str = "CREATE TABLE IF NOT EXISTS visitor_unions (
        ns TEXT NOT NULL,
        key TEXT NOT NULL,
        to_day INTEGER NOT NULL,
        from_day INTEGER NOT NULL,
        kept BLOB NOT NULL,
        PRIMARY KEY (ns, key, to_day, from_day)
    ) WITHOUT ROWID";

/// The triggers that drop the unions holding a sketch's day when the sketch changes or goes.
const TRIGGERS: [(&str, &str); 3] = [
    (
        "visitor_unions_on_insert",
        "CREATE TRIGGER IF NOT EXISTS visitor_unions_on_insert AFTER INSERT ON visitor_sketches BEGIN \
         DELETE FROM visitor_unions WHERE ns = new.ns AND key = new.key AND to_day >= new.day AND from_day <= new.day; \
         END",
    ),
    (
        "visitor_unions_on_update",
        "CREATE TRIGGER IF NOT EXISTS visitor_unions_on_update AFTER UPDATE ON visitor_sketches BEGIN \
         DELETE FROM visitor_unions WHERE ns = old.ns AND key = old.key AND to_day >= old.day AND from_day <= old.day; \
         DELETE FROM visitor_unions WHERE ns = new.ns AND key = new.key AND to_day >= new.day AND from_day <= new.day; \
         END",
    ),
    (
        "visitor_unions_on_delete",
        "CREATE TRIGGER IF NOT EXISTS visitor_unions_on_delete AFTER DELETE ON visitor_sketches BEGIN \
         DELETE FROM visitor_unions WHERE ns = old.ns AND key = old.key AND to_day >= old.day AND from_day <= old.day; \
         END",
    ),
];

/// Creates the table and its triggers when missing; `created` names what `sqlite_master`
/// holds.
///
/// # Errors
/// When SQLite refuses the schema.
pub(super) fn open(store: &SqlShardStore, created: &[String]) -> Result<()> {
    let has = |name: &str| created.iter().any(|c| c == name);
    if !has("visitor_unions") {
        store.sql().exec(TABLE, None)?;
    }
    for (name, create) in TRIGGERS {
        if !has(name) {
            store.sql().exec(create, None)?;
        }
    }
    Ok(())
}

fn bindings(ns: &Namespace, key: &Key, (from, to): (Day, Day)) -> Vec<SqlStorageValue> {
    vec![
        text(ns.as_str()),
        text(key.as_str()),
        SqlStorageValue::Integer(i64::from(to.0)),
        SqlStorageValue::Integer(i64::from(from.0)),
    ]
}

/// The kept union of `ns`/`key` over `days`, as stored.
///
/// # Errors
/// A description of the storage failure.
pub(super) fn load(
    store: &SqlShardStore,
    ns: &Namespace,
    key: &Key,
    days: (Day, Day),
) -> StoreResult<Option<Vec<u8>>> {
    let rows = store.raw_rows(
        "SELECT kept FROM visitor_unions WHERE ns = ? AND key = ? AND to_day = ? AND from_day = ?",
        bindings(ns, key, days),
    )?;
    Ok(rows.first().and_then(|row| row.first()).map(blob))
}

/// Keeps `kept` as the union of `ns`/`key` over `days`, then the key's [`UNIONS_PER_KEY`]
/// ending latest (of those ending the same day, the longest): one row written, and one
/// deleted when it held as many already.
///
/// # Errors
/// A description of the storage failure.
pub(super) fn save(
    store: &SqlShardStore,
    ns: &Namespace,
    key: &Key,
    days: (Day, Day),
    kept: &[u8],
) -> StoreResult<()> {
    let mut row = bindings(ns, key, days);
    row.push(SqlStorageValue::Blob(kept.to_vec()));
    store.write(
        "INSERT INTO visitor_unions (ns, key, to_day, from_day, kept) VALUES (?, ?, ?, ?, ?) \
         ON CONFLICT (ns, key, to_day, from_day) DO UPDATE SET kept = excluded.kept",
        row,
    )?;
    let most = i64::try_from(UNIONS_PER_KEY).unwrap_or(i64::MAX);
    store.write(
        "DELETE FROM visitor_unions WHERE ns = ?1 AND key = ?2 AND (to_day, from_day) NOT IN \
         (SELECT to_day, from_day FROM visitor_unions WHERE ns = ?1 AND key = ?2 \
         ORDER BY to_day DESC, from_day ASC LIMIT ?3)",
        vec![text(ns.as_str()), text(key.as_str()), SqlStorageValue::Integer(most)],
    )
}
