//! A shard's SQLite storage, behind the core's [`CounterStore`], [`CacheStore`] and
//! [`IdempotencyStore`] traits.
//!
//! Counter values are bound and read as decimal text because the JavaScript boundary carries
//! numbers as doubles, exact only up to 2^53; SQLite still stores them as 64-bit integers (the
//! column has integer affinity). Cache values are BLOBs.

use std::cell::Cell;

use edgecount_core::shard::cache_table::{
    entry_charge, EntryMeta, EntryValue, StoredEntry, ENTRY_OVERHEAD_BYTES,
};
use edgecount_core::shard::counter::DayCount;
use edgecount_core::shard::idempotency::{request_digest, IdempotencyRecord, IdempotencyStore, RecordScope};
use edgecount_core::shard::placement::Kept;
use edgecount_core::shard::Atomic;
use edgecount_core::visits::day::Day;
use edgecount_core::{CacheStore, Counter, CounterStore, Key, Namespace, ShardOp, StorageError, StoreResult};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use worker::{Result, SqlCursor, SqlStorage, SqlStorageValue, State};

use crate::shard::transaction::Transactions;

// Idempotency records live in two generation tables (see [`RECORDS`]). Shards written before
// records were scoped to their key keep the older `idempotency` table (one record per
// Idempotency-Key, holding the whole request as JSON). It is not converted: converting a day of
// full requests at start-up could outlast what a start may take. Instead it is read as a
// fallback while its records can still be replayed, and dropped when the first generation of
// records ends, a day after the upgrade began it.
const SCHEMA: [&str; 7] = [
    "CREATE TABLE IF NOT EXISTS counters (
        ns TEXT NOT NULL,
        key TEXT NOT NULL,
        value INTEGER NOT NULL,
        version INTEGER NOT NULL,
        ttl_seconds INTEGER,
        expires_at_ms INTEGER,
        created_ms INTEGER,
        settings TEXT,
        reclaim_after_ms INTEGER,
        PRIMARY KEY (ns, key)
    ) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS cache_entries (
        ns TEXT NOT NULL,
        key TEXT NOT NULL,
        value BLOB NOT NULL,
        content_type TEXT NOT NULL,
        expires_at_ms INTEGER,
        written_at_ms INTEGER NOT NULL,
        PRIMARY KEY (ns, key)
    ) WITHOUT ROWID",
    // The shard count the keys were placed under; only shard-0 keeps it (see
    // edgecount_core::shard::placement).
    "CREATE TABLE IF NOT EXISTS placement (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        shards INTEGER NOT NULL
    )",
    // Keys taken over from another shard during the change of count named with each, the
    // change this shard last ran under until it is declared over, and how far this shard has
    // got with its own hand-overs (see crate::shard::resharding::store).
    "CREATE TABLE IF NOT EXISTS arrivals (
        ns TEXT NOT NULL,
        key TEXT NOT NULL,
        from_shards INTEGER NOT NULL,
        to_shards INTEGER NOT NULL,
        PRIMARY KEY (ns, key)
    ) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS declared_change (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        from_shards INTEGER NOT NULL,
        to_shards INTEGER NOT NULL
    )",
    "CREATE TABLE IF NOT EXISTS hand_overs (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        shard INTEGER NOT NULL,
        done_from INTEGER,
        done_to INTEGER
    )",
    // The stored counters, kept by the triggers in [`COUNTER_TOTAL_TRIGGERS`] so that the
    // statistics never count the table (see [`SqlShardStore::keep_counter_total`]).
    "CREATE TABLE IF NOT EXISTS totals (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        counters INTEGER NOT NULL
    )",
];

/// When the current generation of idempotency records began (see [`RECORDS`]).
const RECORDS_GENERATION: &str = "CREATE TABLE IF NOT EXISTS records_generation (
        id INTEGER PRIMARY KEY CHECK (id = 0),
        since_ms INTEGER NOT NULL
    )";

/// Stamps a counter with a TTL inserted without its due time: by a release before this one
/// (rolled back to, and forward again), which does not know the column. This release's own
/// inserts set it, so the trigger writes nothing for them.
const RECLAIM_AFTER_ON_INSERT: &str = "CREATE TRIGGER IF NOT EXISTS counter_reclaim_on_insert \
     AFTER INSERT ON counters \
     WHEN new.expires_at_ms IS NOT NULL AND new.reclaim_after_ms IS NULL \
     BEGIN UPDATE counters SET reclaim_after_ms = new.expires_at_ms \
     WHERE ns = new.ns AND key = new.key; END";

/// The counters due for the alarm's look, by when (see [`RECLAIM_AFTER`]); made once the
/// column is there.
const COUNTERS_BY_RECLAIM: &str = "CREATE INDEX IF NOT EXISTS counters_by_reclaim \
     ON counters (reclaim_after_ms) WHERE reclaim_after_ms IS NOT NULL";

/// The idempotency records written in the current generation, and in the one before it: one
/// per Idempotency-Key and written key, holding a digest of the request. A record is found by
/// its key, so lapsed ones are not looked for: once the current generation began a window ago,
/// the alarm drops the earlier table whole (every record in it was written before that), renames
/// the current one to take its place, and starts an empty one (see
/// `edgecount_core::shard::engine`). A record so lives one to two windows, and no row is read
/// to reclaim it, nor written to index it.
pub(super) const RECORDS: &str = "idempotency_records";
pub(super) const EARLIER_RECORDS: &str = "idempotency_records_earlier";
/// Both records tables, the current first.
pub(super) const RECORD_TABLES: [&str; 2] = [RECORDS, EARLIER_RECORDS];

fn records_table(name: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {name} (
            ns TEXT NOT NULL,
            key TEXT NOT NULL,
            kind TEXT NOT NULL,
            idempotency_key TEXT NOT NULL,
            request_digest TEXT NOT NULL,
            result TEXT NOT NULL,
            created_at_ms INTEGER NOT NULL,
            PRIMARY KEY (ns, key, kind, idempotency_key)
        ) WITHOUT ROWID"
    )
}

/// When the alarm should next look at a counter with a TTL: its first expiry, written when the
/// row is inserted and never by the upsert that updates it, so that the index on it costs a
/// row only when a counter with a TTL is created, not on every write that slides its expiry.
/// It so stays at or before the counter's expiry; the alarm reclaims the rows due by then that
/// expired, and moves the rest on to their expiry (one row each per TTL, at most). The trigger
/// below moves it earlier in the rare write that makes it late: one that gives a TTL to a
/// counter without one, or shortens it.
const RECLAIM_AFTER: &str = "CREATE TRIGGER IF NOT EXISTS counter_reclaim_earlier \
     AFTER UPDATE OF expires_at_ms ON counters \
     WHEN new.expires_at_ms IS NOT NULL \
     AND (new.reclaim_after_ms IS NULL OR new.reclaim_after_ms > new.expires_at_ms) \
     BEGIN UPDATE counters SET reclaim_after_ms = new.expires_at_ms \
     WHERE ns = new.ns AND key = new.key; END";
// No index on `expires_at_ms` itself: SQLite rewrites an index entry whenever an upsert
// assigns its column, even to the same value, so one on it made every write of a counter with
// a TTL (every compatible route's counter) bill two rows. See [`RECLAIM_AFTER`] instead; and no
// index on records at all (see [`RECORDS`]).

/// What keeps `totals.counters` equal to the rows of `counters`, whichever statement adds or
/// removes them (ops, the alarm, hand-overs to and from other shards): SQLite runs them in the
/// statement's own transaction, so the total cannot drift from the table. An upsert that
/// updates an existing row fires neither, so counting an existing key costs no extra row.
const COUNTER_TOTAL_TRIGGERS: [(&str, &str); 2] = [
    (
        "counter_added",
        "CREATE TRIGGER IF NOT EXISTS counter_added AFTER INSERT ON counters \
         BEGIN UPDATE totals SET counters = counters + 1 WHERE id = 0; END",
    ),
    (
        "counter_removed",
        "CREATE TRIGGER IF NOT EXISTS counter_removed AFTER DELETE ON counters \
         BEGIN UPDATE totals SET counters = counters - 1 WHERE id = 0; END",
    ),
];

/// Columns added to `counters` after its first release, each with its type: a shard stored
/// before them gains them at start-up, and its rows read them as `NULL` (no creation time kept,
/// the default rules).
const ADDED_COUNTER_COLUMNS: [(&str, &str); 5] = [
    ("created_ms", "INTEGER"),
    ("settings", "TEXT"),
    ("reclaim_after_ms", "INTEGER"),
    ("day", "INTEGER"),
    ("day_count", "INTEGER"),
];

/// The records table of shards written before records were scoped and digested.
const LEGACY_RECORDS: &str = "idempotency";

/// The shard's tables.
pub struct SqlShardStore {
    sql: SqlStorage,
    transactions: Transactions,
    /// Whether the legacy records table is still there (see [`LEGACY_RECORDS`]).
    legacy_records: Cell<bool>,
    /// Whether any finished day or visitor sketch may be stored (see
    /// `crate::shard::visit_store`): until one is, a hand-over page skips looking for them.
    pub(super) holds_days: Cell<bool>,
    /// Rows read and written by this object's statements since it started, from the SQL
    /// cursors' own counts: what the platform bills.
    rows_read: Cell<u64>,
    rows_written: Cell<u64>,
}

/// A counter as `load` selects it (see [`CounterRow::counter`]).
#[derive(Deserialize)]
pub(super) struct CounterRow {
    pub(super) value: String,
    pub(super) version: u64,
    pub(super) ttl_seconds: Option<u32>,
    pub(super) expires_at_ms: Option<u64>,
    pub(super) created_ms: Option<u64>,
    pub(super) settings: Option<String>,
    /// The counter's latest day and its count (see `edgecount_core::shard::counter`).
    #[serde(default)]
    pub(super) day: Option<i32>,
    #[serde(default)]
    pub(super) day_count: Option<i64>,
}

/// The [`CounterRow`]'s fields of the counter `c`, in [`FoundRow`]'s order after the key's
/// place: one list for both statements that read counters as JSON.
macro_rules! counter_fields {
    () => {
        "CAST(c.value AS TEXT), c.version, c.ttl_seconds, c.expires_at_ms, c.created_ms, c.settings, \
         c.day, c.day_count"
    };
}

/// A counter row as [`CounterStore::load`] and `load_many` read it, one JSON array: the key's
/// place in the list asked, then the [`CounterRow`]'s fields in order.
type FoundRow =
    (usize, String, u64, Option<u32>, Option<u64>, Option<u64>, Option<String>, Option<i32>, Option<i64>);

fn found_row(row: FoundRow) -> (usize, CounterRow) {
    let (place, value, version, ttl_seconds, expires_at_ms, created_ms, settings, day, day_count) = row;
    (place, CounterRow { value, version, ttl_seconds, expires_at_ms, created_ms, settings, day, day_count })
}

impl CounterRow {
    /// The counter the row stores.
    pub(super) fn counter(self) -> StoreResult<Counter> {
        let value = self.value.parse().map_err(|_| format!("stored value {:?} is not an i64", self.value))?;
        let settings = self
            .settings
            .map(|text| serde_json::from_str(&text).map_err(|e| format!("stored settings {text:?}: {e}")))
            .transpose()?;
        let today = self.day.map(|day| DayCount { day: Day(day), count: self.day_count.unwrap_or(0) });
        Ok(Counter {
            value,
            version: self.version,
            ttl_seconds: self.ttl_seconds,
            expires_at_ms: self.expires_at_ms,
            created_ms: self.created_ms,
            settings,
            today,
        })
    }
}

#[derive(Deserialize)]
struct EntryIndexRow {
    ns: String,
    key: String,
    content_type_bytes: u64,
    value_bytes: u64,
    expires_at_ms: Option<u64>,
    written_at_ms: u64,
}

#[derive(Deserialize)]
pub(super) struct Count {
    pub(super) n: Option<u64>,
}

pub(super) fn text(value: &str) -> SqlStorageValue {
    value.into()
}

/// A number column, as SQLite may answer it (an integer, or a float for a computed value).
pub(super) fn number(value: &SqlStorageValue) -> Option<u64> {
    match value {
        SqlStorageValue::Integer(n) => Some(n.cast_unsigned()),
        SqlStorageValue::Float(n) => Some(*n as u64),
        _ => None,
    }
}

/// A BLOB column's bytes: an empty BLOB may come back as an empty string or null.
pub(super) fn blob(value: &SqlStorageValue) -> Vec<u8> {
    match value {
        SqlStorageValue::Blob(bytes) => bytes.clone(),
        _ => Vec::new(),
    }
}

pub(super) fn integer(value: Option<u64>) -> SqlStorageValue {
    value.map_or(SqlStorageValue::Null, |v| SqlStorageValue::Integer(v.cast_signed()))
}

/// Rows written by one multi-row statement at most: it keeps the one bound JSON text well under
/// SQLite's 2 MB limit on a value, for the longest names and a batch's most ops.
pub(super) const ROWS_PER_STATEMENT: usize = 200;

/// Rows as one JSON array of arrays, bound as one text that the statement reads with
/// `json_each`. Integers stay exact: SQLite reads JSON integers as 64-bit integers.
pub(super) fn json_rows(rows: &impl serde::Serialize) -> StoreResult<SqlStorageValue> {
    serde_json::to_string(rows).map(SqlStorageValue::String).map_err(|e| e.to_string().into())
}

/// `keys` as one JSON array of `[ns, key]`, for `json_each`: a row of a statement over them is
/// led by its key's place in it (`CAST(r.key AS INTEGER)`).
pub(super) fn json_names(keys: &[(Namespace, Key)]) -> StoreResult<SqlStorageValue> {
    let names: Vec<(&str, &str)> = keys.iter().map(|(ns, key)| (ns.as_str(), key.as_str())).collect();
    json_rows(&names)
}

/// An upsert of `rows` rows of `columns` columns, all bound as one JSON array of arrays
/// ([`json_rows`]). One row is read straight from the binding; several through `json_each`,
/// whose virtual rows SQLite counts as rows read (cheap, but not nothing).
pub(super) fn rows_statement(insert: &str, columns: usize, rows: usize, on_conflict: &str) -> String {
    let fields = |field: &dyn Fn(usize) -> String| (0..columns).map(field).collect::<Vec<_>>().join(", ");
    // Each SELECT has a WHERE so that SQLite reads the ON CONFLICT as the upsert's.
    if rows == 1 {
        format!("{insert} SELECT {} WHERE true {on_conflict}", fields(&|i| format!("?1 ->> '$[0][{i}]'")))
    } else {
        let row = fields(&|i| format!("r.value ->> {i}"));
        format!("{insert} SELECT {row} FROM json_each(?1) AS r WHERE true {on_conflict}")
    }
}

/// Writes `rows` with `write`, [`ROWS_PER_STATEMENT`] at a time, in order, up to the first
/// failure (the call's transaction undoes the statements before it).
fn in_statements<T>(rows: &[T], write: impl FnMut(&[T]) -> StoreResult<()>) -> StoreResult<()> {
    rows.chunks(ROWS_PER_STATEMENT).try_for_each(write)
}

/// A failure of a SQL call, as the storage failure it is.
pub(super) fn describe(error: &worker::Error) -> StorageError {
    error.to_string().into()
}

impl SqlShardStore {
    /// Opens the tables of `state`'s storage, creating them on first use (a first generation of
    /// records beginning at `now_ms`), and answers the names of the tables, indexes and triggers
    /// it found made: the days and visitors tables are opened with them
    /// (`crate::shard::visit_store::open`), by the shard that opens both.
    ///
    /// # Errors
    /// When SQLite refuses the schema.
    pub fn open(state: &State, now_ms: u64) -> Result<(Self, Vec<String>)> {
        let store = Self::unopened(state);
        for statement in SCHEMA {
            store.sql.exec(statement, None)?;
        }
        // `sqlite_master` holds each table's, index's and trigger's CREATE statement, as
        // altered: read once, it tells what an older release left to bring up to date.
        #[derive(Deserialize)]
        struct Created {
            name: String,
            sql: String,
        }
        let created: Vec<Created> = store.rows(
            "SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'index', 'trigger') AND sql IS NOT NULL",
            vec![],
        )?;
        let statement = |name: &str| created.iter().find(|c| c.name == name).map(|c| c.sql.as_str());
        let counters = statement("counters").unwrap_or_default();
        for (column, kind) in ADDED_COUNTER_COLUMNS {
            if !counters.contains(&format!("{column} {kind}")) {
                store.change(&format!("ALTER TABLE counters ADD COLUMN {column} {kind}"), vec![])?;
            }
        }
        if !counters.contains("reclaim_after_ms") {
            // Counters stored before: each is due when it expires. One pass, this once.
            store.change(
                "UPDATE counters SET reclaim_after_ms = expires_at_ms WHERE expires_at_ms IS NOT NULL",
                vec![],
            )?;
        }
        // Made once, when missing, so that a shard waking does not run them each time.
        let reclaim_schema = [
            ("counters_by_reclaim", COUNTERS_BY_RECLAIM),
            ("counter_reclaim_earlier", RECLAIM_AFTER),
            ("counter_reclaim_on_insert", RECLAIM_AFTER_ON_INSERT),
        ];
        for (name, create) in reclaim_schema {
            if statement(name).is_none() {
                store.sql.exec(create, None)?;
            }
        }
        for table in RECORD_TABLES.into_iter().filter(|table| statement(table).is_none()) {
            store.sql.exec(&records_table(table), None)?;
        }
        if statement("records_generation").is_none() {
            store.sql.exec(RECORDS_GENERATION, None)?;
            store.change(
                "INSERT INTO records_generation (id, since_ms) VALUES (0, ?)",
                vec![integer(Some(now_ms))],
            )?;
        }
        if !statement("placement").is_some_and(|sql| sql.contains("from_shards")) {
            store.change("ALTER TABLE placement ADD COLUMN from_shards INTEGER", vec![])?;
        }
        store.legacy_records.set(statement(LEGACY_RECORDS).is_some());
        if COUNTER_TOTAL_TRIGGERS.iter().any(|(name, _)| statement(name).is_none()) {
            store.keep_counter_total()?;
        }
        Ok((store, created.into_iter().map(|c| c.name).collect()))
    }

    /// Starts keeping the stored counters' total: a shard stored before the total was kept
    /// counts its table this one time, in the same synchronous run (and so the same
    /// transaction) that installs the triggers, so no write falls between the two.
    fn keep_counter_total(&self) -> Result<()> {
        let stored = self.count("SELECT COUNT(*) AS n FROM counters", vec![])?;
        self.change(
            "INSERT OR REPLACE INTO totals (id, counters) VALUES (0, ?)",
            vec![integer(Some(stored))],
        )?;
        for (_, trigger) in COUNTER_TOTAL_TRIGGERS {
            self.sql.exec(trigger, None)?;
        }
        Ok(())
    }

    /// The tables without creating them, for when [`Self::open`] failed: every op then reports
    /// a storage error rather than the object failing to start.
    #[must_use]
    pub fn unopened(state: &State) -> Self {
        Self {
            sql: state.storage().sql(),
            transactions: Transactions::of(state),
            legacy_records: Cell::new(false),
            holds_days: Cell::new(true),
            rows_read: Cell::new(0),
            rows_written: Cell::new(0),
        }
    }

    /// The placement kept by [`Self::keep_placement`], if any.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn kept_placement(&self) -> StoreResult<Option<Kept>> {
        #[derive(Deserialize)]
        struct Row {
            shards: u32,
            from_shards: Option<u32>,
        }
        let rows: Vec<Row> = self
            .rows("SELECT shards, from_shards FROM placement WHERE id = 0", vec![])
            .map_err(|e| describe(&e))?;
        Ok(rows
            .first()
            .filter(|row| row.shards > 0)
            .map(|row| Kept { shards: row.shards, from: row.from_shards }))
    }

    /// Keeps `kept` as the placement of the keys.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub fn keep_placement(&self, kept: Kept) -> StoreResult<()> {
        self.write(
            "INSERT INTO placement (id, shards, from_shards) VALUES (0, ?, ?) ON CONFLICT (id) \
             DO UPDATE SET shards = excluded.shards, from_shards = excluded.from_shards",
            vec![integer(Some(u64::from(kept.shards))), integer(kept.from.map(u64::from))],
        )
    }

    /// The object's SQL storage, for statements of the other store modules.
    pub(super) fn sql(&self) -> &SqlStorage {
        &self.sql
    }

    /// Rows read and rows written by this object's statements since it started.
    #[must_use]
    pub fn rows_counted(&self) -> (u64, u64) {
        (self.rows_read.get(), self.rows_written.get())
    }

    /// Runs `queries` without counting their rows: the statistics' own counting queries, so that
    /// asking for statistics does not change them (a benchmark asks before and after a run).
    pub fn uncounted<T>(&self, queries: impl FnOnce() -> T) -> T {
        let counted = (self.rows_read.get(), self.rows_written.get());
        let answer = queries();
        self.rows_read.set(counted.0);
        self.rows_written.set(counted.1);
        answer
    }

    /// Adds a consumed cursor's rows to the counts.
    pub(crate) fn tally(&self, cursor: &SqlCursor) {
        self.rows_read.set(self.rows_read.get() + cursor.rows_read() as u64);
        self.rows_written.set(self.rows_written.get() + cursor.rows_written() as u64);
    }

    /// Runs a query and answers its rows, counted.
    pub(super) fn rows<T: DeserializeOwned>(
        &self,
        query: &str,
        bindings: Vec<SqlStorageValue>,
    ) -> Result<Vec<T>> {
        let cursor = self.sql.exec(query, bindings)?;
        let rows = cursor.to_array()?;
        self.tally(&cursor);
        Ok(rows)
    }

    /// Runs a query and answers its rows as column values (BLOBs included, which JSON rows
    /// cannot carry), counted.
    ///
    /// # Errors
    /// A description of the storage failure.
    pub(crate) fn raw_rows(
        &self,
        query: &str,
        bindings: Vec<SqlStorageValue>,
    ) -> StoreResult<Vec<Vec<SqlStorageValue>>> {
        let cursor = self.sql.exec(query, bindings).map_err(|e| describe(&e))?;
        let rows = cursor.raw().collect::<std::result::Result<_, _>>().map_err(|e| describe(&e))?;
        self.tally(&cursor);
        Ok(rows)
    }

    /// Runs a statement that answers no rows, and answers how many rows it wrote, as billed:
    /// index rows and rows written by triggers included. The cursor runs the statement lazily;
    /// draining it makes the counts final.
    pub(super) fn change(&self, query: &str, bindings: Vec<SqlStorageValue>) -> Result<u64> {
        let cursor = self.sql.exec(query, bindings)?;
        let _ = cursor.raw().count();
        self.tally(&cursor);
        Ok(cursor.rows_written() as u64)
    }

    /// Runs a statement that answers no rows, for its effect alone; a failure as its
    /// description.
    pub(super) fn write(&self, query: &str, bindings: Vec<SqlStorageValue>) -> StoreResult<()> {
        self.change(query, bindings).map(drop).map_err(|e| describe(&e))
    }

    pub(super) fn count(&self, query: &str, bindings: Vec<SqlStorageValue>) -> Result<u64> {
        let rows: Vec<Count> = self.rows(query, bindings)?;
        Ok(rows.first().and_then(|c| c.n).unwrap_or(0))
    }

    /// A record in the legacy table for `scope`: one whose request was a write to the same
    /// key, compared by the digest of that request like a current record.
    fn load_legacy_record(&self, scope: &RecordScope) -> StoreResult<Option<IdempotencyRecord>> {
        #[derive(Deserialize)]
        struct Row {
            fingerprint: String,
            result: String,
            created_at_ms: u64,
        }
        let rows: Vec<Row> = self
            .rows(
                &format!(
                    "SELECT fingerprint, result, created_at_ms FROM {LEGACY_RECORDS} WHERE idempotency_key = ?"
                ),
                vec![text(scope.idempotency_key.as_str())],
            )
            .map_err(|e| describe(&e))?;
        // The fingerprint is the request as the shard protocol encodes it; one that no longer
        // parses cannot match any request, so it is no record.
        Ok(rows.into_iter().find_map(|row| {
            let op: ShardOp = serde_json::from_str(&row.fingerprint).ok()?;
            (RecordScope::new(&scope.idempotency_key, &op) == *scope).then(|| IdempotencyRecord {
                request_digest: request_digest(&op),
                result: row.result,
                created_at_ms: row.created_at_ms,
            })
        }))
    }
}

impl CounterStore for SqlShardStore {
    /// Looks at the counters due by `now_ms` (see [`RECLAIM_AFTER`]), at most `most`, by the
    /// index: removes those expired, and moves the rest on to their expiry. Rows read so follow
    /// the rows reclaimed or moved on, never the table.
    fn remove_expired_counters(&self, now_ms: u64, most: u64) -> StoreResult<u64> {
        const DUE: &str = "SELECT ns, key FROM counters WHERE reclaim_after_ms <= ?1 \
                           ORDER BY reclaim_after_ms LIMIT ?2";
        let bindings = || vec![integer(Some(now_ms)), integer(Some(most))];
        // Counted by the rows returned: the rows written include the index's and the total's.
        let removed: Vec<serde::de::IgnoredAny> = self
            .rows(
                &format!(
                    "DELETE FROM counters WHERE (ns, key) IN ({DUE}) AND expires_at_ms <= ?1 RETURNING 1 AS n"
                ),
                bindings(),
            )
            .map_err(|e| describe(&e))?;
        // What is still due did not expire: its expiry slid on (or it has none now).
        self.write(
            &format!(
                "UPDATE counters SET reclaim_after_ms = expires_at_ms WHERE (ns, key) IN ({DUE}) \
                 AND (expires_at_ms IS NULL OR expires_at_ms > ?1)"
            ),
            bindings(),
        )?;
        Ok(removed.len() as u64)
    }

    /// The earliest time a counter is due (by the index): at or before the next expiry.
    fn next_counter_expiry(&self) -> StoreResult<Option<u64>> {
        let next = self
            .count(
                "SELECT MIN(reclaim_after_ms) AS n FROM counters WHERE reclaim_after_ms IS NOT NULL",
                vec![],
            )
            .map_err(|e| describe(&e))?;
        Ok((next > 0).then_some(next))
    }

    /// The kept total, as both figures: telling the lapsed counters the alarm has not yet
    /// removed (within [`edgecount_core::shard::alarm_schedule::MIN_ALARM_GAP_MS`]) from the
    /// live ones would read the table.
    fn count_counters(&self, _now_ms: u64) -> StoreResult<(u64, u64)> {
        let stored =
            self.count("SELECT counters AS n FROM totals WHERE id = 0", vec![]).map_err(|e| describe(&e))?;
        Ok((stored, stored))
    }

    /// One row as one JSON text: a single value across the boundary, not a JavaScript object
    /// read a field at a time (a read of a counter memory does not hold pays this on each call).
    fn load(&self, ns: &Namespace, key: &Key) -> StoreResult<Option<Counter>> {
        let rows = self.raw_rows(
            concat!(
                "SELECT json_array(0, ",
                counter_fields!(),
                ") FROM counters AS c WHERE c.ns = ?1 AND c.key = ?2"
            ),
            vec![text(ns.as_str()), text(key.as_str())],
        )?;
        match rows.first().and_then(|row| row.first()) {
            None => Ok(None),
            Some(SqlStorageValue::String(row)) => {
                let row: FoundRow = serde_json::from_str(row).map_err(|e| e.to_string())?;
                found_row(row).1.counter().map(Some)
            }
            Some(other) => Err(format!("a counter row read as {other:?}, not JSON text").into()),
        }
    }

    /// One statement per [`ROWS_PER_STATEMENT`] keys: the keys go in as one JSON array, and the
    /// rows found come back as one JSON text (one value across the boundary, not a JavaScript
    /// object per row with a crossing per field), each row led by its key's place in the list.
    fn load_many(&self, keys: &[(Namespace, Key)]) -> StoreResult<Vec<Option<Counter>>> {
        #[derive(Deserialize)]
        struct Found {
            rows: String,
        }
        let mut counters = vec![None; keys.len()];
        for (chunk, slots) in keys.chunks(ROWS_PER_STATEMENT).zip(counters.chunks_mut(ROWS_PER_STATEMENT)) {
            let names: Vec<(&str, &str)> =
                chunk.iter().map(|(ns, key)| (ns.as_str(), key.as_str())).collect();
            // CROSS JOIN keeps the key list as the outer loop, each key then found by the
            // primary key, whatever the planner would guess for a table-valued function.
            let found: Vec<Found> = self
                .rows(
                    concat!(
                        "SELECT json_group_array(json_array(r.key, ",
                        counter_fields!(),
                        ")) AS rows FROM json_each(?1) AS r CROSS JOIN counters AS c \
                         ON c.ns = r.value ->> 0 AND c.key = r.value ->> 1"
                    ),
                    vec![json_rows(&names)?],
                )
                .map_err(|e| describe(&e))?;
            let rows = found.into_iter().next().map_or_else(|| "[]".to_owned(), |found| found.rows);
            let rows: Vec<FoundRow> = serde_json::from_str(&rows).map_err(|e| e.to_string())?;
            for (place, row) in rows.into_iter().map(found_row) {
                let slot = slots.get_mut(place).ok_or_else(|| {
                    format!("a found row names key {place}, beyond the {} asked", chunk.len())
                })?;
                *slot = Some(row.counter()?);
            }
        }
        Ok(counters)
    }

    fn save(&self, ns: &Namespace, key: &Key, counter: &Counter) -> StoreResult<()> {
        self.save_all(&[(ns.clone(), key.clone(), *counter)])
    }

    /// One statement per [`ROWS_PER_STATEMENT`] counters: the rows travel as one JSON array,
    /// one binding, instead of six bindings per row.
    fn save_all(&self, counters: &[(Namespace, Key, Counter)]) -> StoreResult<()> {
        in_statements(counters, |chunk| {
            let rows = chunk
                .iter()
                .map(|(ns, key, c)| {
                    let settings = c.settings.map(|s| serde_json::to_string(&s)).transpose();
                    let settings = settings.map_err(|e| e.to_string())?;
                    // The last is the row's reclaim_after_ms, taken only when the row is new.
                    Ok((
                        ns,
                        key,
                        c.value,
                        c.version,
                        c.ttl_seconds,
                        c.expires_at_ms,
                        c.created_ms,
                        settings,
                        c.expires_at_ms,
                        c.today.map(|t| t.day.0),
                        c.today.map(|t| t.count),
                    ))
                })
                .collect::<StoreResult<Vec<_>>>()?;
            self.write(
                &rows_statement(
                    "INSERT INTO counters \
                     (ns, key, value, version, ttl_seconds, expires_at_ms, created_ms, settings, reclaim_after_ms, \
                     day, day_count)",
                    11,
                    rows.len(),
                    "ON CONFLICT (ns, key) DO UPDATE SET \
                     value = excluded.value, version = excluded.version, \
                     ttl_seconds = excluded.ttl_seconds, expires_at_ms = excluded.expires_at_ms, \
                     created_ms = excluded.created_ms, settings = excluded.settings, \
                     day = excluded.day, day_count = excluded.day_count",
                ),
                vec![json_rows(&rows)?],
            )
        })
    }

    fn remove(&self, ns: &Namespace, key: &Key) -> StoreResult<()> {
        self.write(
            "DELETE FROM counters WHERE ns = ? AND key = ?",
            vec![text(ns.as_str()), text(key.as_str())],
        )
    }

    fn finish_day(&self, ns: &Namespace, key: &Key, day: DayCount) -> StoreResult<()> {
        self.add_finished_day(ns, key, day)
    }
}

impl Atomic for SqlShardStore {
    fn atomically<T>(&self, writes: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        self.transactions.atomically(writes)
    }
}

impl IdempotencyStore for SqlShardStore {
    /// One statement per [`ROWS_PER_STATEMENT`] records, as for counters.
    fn save_records(&self, records: &[(RecordScope, IdempotencyRecord)]) -> StoreResult<()> {
        in_statements(records, |chunk| {
            let rows: Vec<_> = chunk
                .iter()
                .map(|(scope, record)| {
                    (
                        &scope.ns,
                        &scope.key,
                        scope.kind,
                        &scope.idempotency_key,
                        format!("{:032x}", record.request_digest),
                        &record.result,
                        record.created_at_ms,
                    )
                })
                .collect();
            self.write(
                &rows_statement(
                    "INSERT INTO idempotency_records \
                     (ns, key, kind, idempotency_key, request_digest, result, created_at_ms)",
                    7,
                    rows.len(),
                    "ON CONFLICT (ns, key, kind, idempotency_key) DO UPDATE SET \
                     request_digest = excluded.request_digest, result = excluded.result, \
                     created_at_ms = excluded.created_at_ms",
                ),
                vec![json_rows(&rows)?],
            )
        })
    }

    fn records_generation(&self) -> StoreResult<Option<u64>> {
        #[derive(Deserialize)]
        struct Row {
            since_ms: u64,
        }
        let legacy = if self.legacy_records.get() { "1 OR " } else { "" };
        let rows: Vec<Row> = self
            .rows(
                &format!(
                    "SELECT since_ms FROM records_generation WHERE id = 0 AND ({legacy}\
                     EXISTS (SELECT 1 FROM {RECORDS}) OR EXISTS (SELECT 1 FROM {EARLIER_RECORDS}))"
                ),
                vec![],
            )
            .map_err(|e| describe(&e))?;
        Ok(rows.first().map(|row| row.since_ms))
    }

    /// Also drops the legacy table: the first generation began when this release first
    /// opened the shard, after every legacy record was written.
    fn start_records_generation(&self, now_ms: u64) -> StoreResult<()> {
        let statements = [
            format!("DROP TABLE IF EXISTS {EARLIER_RECORDS}"),
            format!("ALTER TABLE {RECORDS} RENAME TO {EARLIER_RECORDS}"),
            records_table(RECORDS),
            format!("DROP TABLE IF EXISTS {LEGACY_RECORDS}"),
        ];
        for statement in &statements {
            self.change(statement, vec![]).map_err(|e| describe(&e))?;
        }
        self.legacy_records.set(false);
        self.write("UPDATE records_generation SET since_ms = ? WHERE id = 0", vec![integer(Some(now_ms))])
    }

    fn load_record(&self, scope: &RecordScope) -> StoreResult<Option<IdempotencyRecord>> {
        #[derive(Deserialize)]
        struct Row {
            request_digest: String,
            result: String,
            created_at_ms: u64,
        }
        // Both generations by the primary key; a scope in both was written again after it
        // was set aside (applied again once its record lapsed, or a receipt rewritten with its
        // first send's time), and the current generation's record is the one that counts.
        let rows: Vec<Row> = self
            .rows(
                &format!(
                    "SELECT request_digest, result, created_at_ms FROM ( \
                     SELECT 0 AS generation, * FROM {RECORDS} \
                     WHERE ns = ?1 AND key = ?2 AND kind = ?3 AND idempotency_key = ?4 \
                     UNION ALL \
                     SELECT 1 AS generation, * FROM {EARLIER_RECORDS} \
                     WHERE ns = ?1 AND key = ?2 AND kind = ?3 AND idempotency_key = ?4) \
                     ORDER BY generation LIMIT 1"
                ),
                vec![
                    text(scope.ns.as_str()),
                    text(scope.key.as_str()),
                    text(scope.kind),
                    text(scope.idempotency_key.as_str()),
                ],
            )
            .map_err(|e| describe(&e))?;
        let Some(row) = rows.into_iter().next() else {
            return if self.legacy_records.get() { self.load_legacy_record(scope) } else { Ok(None) };
        };
        let request_digest = u128::from_str_radix(&row.request_digest, 16)
            .map_err(|_| format!("stored request digest {:?} is not hex", row.request_digest))?;
        Ok(Some(IdempotencyRecord { request_digest, result: row.result, created_at_ms: row.created_at_ms }))
    }

    fn save_record(&self, scope: &RecordScope, record: &IdempotencyRecord) -> StoreResult<()> {
        self.save_records(&[(scope.clone(), record.clone())])
    }
}

impl CacheStore for SqlShardStore {
    fn scan_newest_entries(&self, most: u64, each: &mut dyn FnMut(StoredEntry) -> bool) -> StoreResult<()> {
        // Newest first, ties broken by name, so that "an entry and every one listed after it"
        // is the one range of `remove_entries_from`. `length(value)` reads a BLOB's size without
        // loading it; the CAST counts the content type in bytes.
        let cursor = self
            .sql
            .exec(
                "SELECT ns, key, length(CAST(content_type AS BLOB)) AS content_type_bytes, \
                 length(value) AS value_bytes, expires_at_ms, written_at_ms FROM cache_entries \
                 ORDER BY written_at_ms DESC, ns DESC, key DESC LIMIT ?",
                vec![integer(Some(most))],
            )
            .map_err(|e| describe(&e))?;
        for row in cursor.next::<EntryIndexRow>() {
            let row = row.map_err(|e| describe(&e))?;
            // Rows were validated when written; skip any that no longer pass the rules.
            let (Ok(ns), Ok(key)) = (Namespace::new(&row.ns), Key::new(&row.key)) else {
                continue;
            };
            let charge = entry_charge(&ns, &key, row.content_type_bytes, row.value_bytes);
            let meta = EntryMeta { charge, expires_at_ms: row.expires_at_ms };
            if !each(StoredEntry { ns, key, meta, written_at_ms: row.written_at_ms }) {
                break;
            }
        }
        // Run the statement to its end (at most `most` rows): one left part-way stays active,
        // and SQLite refuses to drop a table while any statement is (a records generation's).
        let _ = cursor.raw().count();
        self.tally(&cursor);
        Ok(())
    }

    /// One pass over the table, with the charge as [`entry_charge`] reckons it; no entry is
    /// loaded (`length` of a BLOB reads its size).
    fn stored_entries(&self) -> StoreResult<(u64, u64)> {
        #[derive(Deserialize)]
        struct Figures {
            entries: u64,
            bytes: Option<u64>,
        }
        let figures: Vec<Figures> = self
            .rows(
                &format!(
                    "SELECT COUNT(*) AS entries, SUM({ENTRY_OVERHEAD_BYTES} + length(CAST(ns AS BLOB)) \
                     + length(CAST(key AS BLOB)) + length(CAST(content_type AS BLOB)) + length(value)) \
                     AS bytes FROM cache_entries"
                ),
                vec![],
            )
            .map_err(|e| describe(&e))?;
        Ok(figures.first().map_or((0, 0), |f| (f.entries, f.bytes.unwrap_or(0))))
    }

    fn remove_entries_from(&self, entry: &StoredEntry) -> StoreResult<u64> {
        self.change(
            "DELETE FROM cache_entries WHERE (written_at_ms, ns, key) <= (?, ?, ?)",
            vec![integer(Some(entry.written_at_ms)), text(entry.ns.as_str()), text(entry.key.as_str())],
        )
        .map_err(|e| describe(&e))
    }

    fn load_entry(&self, ns: &Namespace, key: &Key) -> StoreResult<Option<EntryValue>> {
        let cursor = self
            .sql
            .exec(
                "SELECT value, content_type, expires_at_ms FROM cache_entries WHERE ns = ? AND key = ?",
                vec![text(ns.as_str()), text(key.as_str())],
            )
            .map_err(|e| describe(&e))?;
        let row = cursor.raw().next();
        self.tally(&cursor);
        let Some(row) = row else {
            return Ok(None);
        };
        let row = row.map_err(|e| describe(&e))?;
        let [value, SqlStorageValue::String(content_type), expires_at_ms] = row.as_slice() else {
            return Err(format!("unexpected cache row shape: {} columns", row.len()).into());
        };
        Ok(Some(EntryValue {
            value: blob(value),
            content_type: content_type.clone(),
            expires_at_ms: number(expires_at_ms),
        }))
    }

    fn save_entry(
        &self,
        ns: &Namespace,
        key: &Key,
        value: &[u8],
        content_type: &str,
        expires_at_ms: Option<u64>,
        now_ms: u64,
    ) -> StoreResult<()> {
        self.write(
            "INSERT INTO cache_entries (ns, key, value, content_type, expires_at_ms, written_at_ms) \
                 VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (ns, key) DO UPDATE SET \
                 value = excluded.value, content_type = excluded.content_type, \
                 expires_at_ms = excluded.expires_at_ms, written_at_ms = excluded.written_at_ms",
            vec![
                text(ns.as_str()),
                text(key.as_str()),
                SqlStorageValue::Blob(value.to_vec()),
                text(content_type),
                integer(expires_at_ms),
                integer(Some(now_ms)),
            ],
        )
    }

    fn remove_entry(&self, ns: &Namespace, key: &Key) -> StoreResult<()> {
        self.write(
            "DELETE FROM cache_entries WHERE ns = ? AND key = ?",
            vec![text(ns.as_str()), text(key.as_str())],
        )
    }
}
