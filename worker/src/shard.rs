//! The `Shard` Durable Object: the authority for the keys that hash to it.
//!
//! Counters live in the object's SQLite storage and in a [`CounterTable`] in memory. SQLite
//! calls are synchronous and the runtime's output gate holds every response until the writes
//! made before it are durable, so an answered write is a kept write, and ops from concurrent
//! requests never interleave (nothing awaits between reading and writing a counter).

use std::cell::RefCell;

use edgecount_core::protocol::{ShardRequest, ShardResponse, ShardStats};
use edgecount_core::{Counter, CounterStore, CounterTable, Key, Namespace};
use serde::Deserialize;
use worker::{
    durable_object, Date, DurableObject, Env, Method, Request, Response, Result, SqlStorage,
    SqlStorageValue, State,
};

const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS counters (
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    value INTEGER NOT NULL,
    version INTEGER NOT NULL,
    ttl_seconds INTEGER,
    expires_at_ms INTEGER,
    PRIMARY KEY (ns, key)
) WITHOUT ROWID";

/// Counters in the object's SQLite database. Values are bound and read as decimal text because
/// the JavaScript boundary carries numbers as doubles, which are exact only up to 2^53; SQLite
/// still stores them as 64-bit integers (the column has integer affinity).
pub struct SqlCounterStore {
    sql: SqlStorage,
}

#[derive(Deserialize)]
struct CounterRow {
    value: String,
    version: u64,
    ttl_seconds: Option<u32>,
    expires_at_ms: Option<u64>,
}

fn sql_error(error: worker::Error) -> String {
    error.to_string()
}

fn optional_integer(value: Option<u64>) -> SqlStorageValue {
    value.map_or(SqlStorageValue::Null, |v| {
        SqlStorageValue::Integer(v.cast_signed())
    })
}

impl CounterStore for SqlCounterStore {
    fn load(&self, ns: &Namespace, key: &Key) -> std::result::Result<Option<Counter>, String> {
        let rows: Vec<CounterRow> = self
            .sql
            .exec(
                "SELECT CAST(value AS TEXT) AS value, version, ttl_seconds, expires_at_ms \
                 FROM counters WHERE ns = ? AND key = ?",
                vec![ns.as_str().into(), key.as_str().into()],
            )
            .and_then(|cursor| cursor.to_array())
            .map_err(sql_error)?;
        rows.into_iter()
            .next()
            .map(|row| {
                let value = row
                    .value
                    .parse()
                    .map_err(|_| format!("stored value {:?} is not an i64", row.value))?;
                Ok(Counter {
                    value,
                    version: row.version,
                    ttl_seconds: row.ttl_seconds,
                    expires_at_ms: row.expires_at_ms,
                })
            })
            .transpose()
    }

    fn save(
        &self,
        ns: &Namespace,
        key: &Key,
        counter: &Counter,
    ) -> std::result::Result<(), String> {
        self.sql
            .exec(
                "INSERT INTO counters (ns, key, value, version, ttl_seconds, expires_at_ms) \
                 VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (ns, key) DO UPDATE SET \
                 value = excluded.value, version = excluded.version, \
                 ttl_seconds = excluded.ttl_seconds, expires_at_ms = excluded.expires_at_ms",
                vec![
                    ns.as_str().into(),
                    key.as_str().into(),
                    counter.value.to_string().into(),
                    optional_integer(Some(counter.version)),
                    optional_integer(counter.ttl_seconds.map(u64::from)),
                    optional_integer(counter.expires_at_ms),
                ],
            )
            .map(drop)
            .map_err(sql_error)
    }

    fn remove(&self, ns: &Namespace, key: &Key) -> std::result::Result<(), String> {
        self.sql
            .exec(
                "DELETE FROM counters WHERE ns = ? AND key = ?",
                vec![ns.as_str().into(), key.as_str().into()],
            )
            .map(drop)
            .map_err(sql_error)
    }
}

impl SqlCounterStore {
    fn live_keys(&self, now_ms: u64) -> Result<u64> {
        #[derive(Deserialize)]
        struct Count {
            n: u64,
        }
        let rows: Vec<Count> = self
            .sql
            .exec(
                "SELECT COUNT(*) AS n FROM counters WHERE expires_at_ms IS NULL OR expires_at_ms > ?",
                vec![optional_integer(Some(now_ms))],
            )?
            .to_array()?;
        Ok(rows.first().map_or(0, |c| c.n))
    }
}

#[durable_object]
pub struct Shard {
    store: SqlCounterStore,
    table: RefCell<CounterTable>,
}

fn now_ms() -> u64 {
    Date::now().as_millis()
}

impl DurableObject for Shard {
    fn new(state: State, _env: Env) -> Self {
        let sql = state.storage().sql();
        // A failure here surfaces on the first op as a storage error, never as a panic.
        let _ = sql.exec(SCHEMA, None);
        Self {
            store: SqlCounterStore { sql },
            table: RefCell::new(CounterTable::new()),
        }
    }

    async fn fetch(&self, mut req: Request) -> Result<Response> {
        match (req.method(), req.path().as_str()) {
            (Method::Post, "/ops") => {
                let text = req.text().await?;
                let Ok(request) = serde_json::from_str::<ShardRequest>(&text) else {
                    return Response::error("malformed shard request", 400);
                };
                let now = now_ms();
                let mut table = self.table.borrow_mut();
                let results = request
                    .ops
                    .iter()
                    .map(|op| table.execute(&self.store, op, now))
                    .collect();
                Response::from_json(&ShardResponse { results })
            }
            (Method::Get, "/stats") => {
                let stats = ShardStats {
                    ops: self.table.borrow().ops(),
                    keys: self.store.live_keys(now_ms())?,
                };
                Response::from_json(&stats)
            }
            _ => Response::error("no such shard route", 404),
        }
    }
}
