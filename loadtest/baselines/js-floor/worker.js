// The floor of edgecount's architecture on workerd: a JavaScript worker calling JavaScript
// Durable Objects over RPC, which run the same SQLite statements as an edgecount shard. What it
// leaves out is what edgecount adds: the Rust/Wasm path, validation, tokens, rate limits,
// coalescing, the isolate and shard caches, idempotency. The benchmark reports each edgecount
// shard scenario as a ratio to this system's CPU per op.
//
// It speaks just enough of API v1 for the benchmark: GET /v1/health, GET /v1/stats, GET
// /v1/counters/:ns/:key, POST /v1/counters/:ns/:key/incr and POST /v1/batch with get, incr and
// set ops, grouped by shard with one RPC per shard, as edgecount does.
import { DurableObject } from "cloudflare:workers";

const SHARDS = 16;
const JSON_TYPE = { "content-type": "application/json; charset=utf-8" };

// edgecount's schema and statements (worker/src/shard/sql_store.rs), unchanged.
const SCHEMA = `CREATE TABLE IF NOT EXISTS counters (
  ns TEXT NOT NULL, key TEXT NOT NULL, value INTEGER NOT NULL, version INTEGER NOT NULL,
  ttl_seconds INTEGER, expires_at_ms INTEGER, PRIMARY KEY (ns, key)) WITHOUT ROWID`;
const SELECT = `SELECT CAST(value AS TEXT) AS value, version, ttl_seconds, expires_at_ms
  FROM counters WHERE ns = ? AND key = ?`;
const UPSERT = `INSERT INTO counters (ns, key, value, version, ttl_seconds, expires_at_ms)
  VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (ns, key) DO UPDATE SET
  value = excluded.value, version = excluded.version,
  ttl_seconds = excluded.ttl_seconds, expires_at_ms = excluded.expires_at_ms`;

export class FloorShard extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(SCHEMA);
    // What edgecount's shards count too, so the benchmark can price both alike.
    this.counts = { calls: 0, rows_read: 0, rows_written: 0 };
  }

  exec(query, ...bindings) {
    const cursor = this.sql.exec(query, ...bindings);
    const rows = cursor.toArray();
    this.counts.rows_read += cursor.rowsRead;
    this.counts.rows_written += cursor.rowsWritten;
    return rows;
  }

  stats() {
    return this.counts;
  }

  /** Runs ops in order; each is [op, ns, key, value?]. Answers one value per op. */
  run(ops) {
    this.counts.calls++;
    return ops.map(([op, ns, key, value]) => {
      const row = op === "set" ? null : this.exec(SELECT, ns, key)[0];
      if (op === "get") return row ? Number(row.value) : 0;
      // Counter values cross as decimal text, as in edgecount (exact beyond 2^53).
      const next =
        op === "set" ? BigInt(value) : BigInt(row ? row.value : 0) + 1n;
      const version = row ? row.version + 1 : 1;
      this.exec(UPSERT, ns, key, next.toString(), version, null, null);
      return Number(next);
    });
  }
}

// FNV-1a over "ns\0key", then modulo: any uniform placement does for a floor.
function shardOf(ns, key) {
  let hash = 0x811c9dc5;
  const text = `${ns}\0${key}`;
  for (let i = 0; i < text.length; i++) {
    hash = Math.imul(hash ^ text.charCodeAt(i), 0x01000193);
  }
  return (hash >>> 0) % SHARDS;
}

const stub = (env, shard) =>
  env.SHARDS.get(env.SHARDS.idFromName(`shard-${shard}`));
const json = (body, status = 200) =>
  new Response(JSON.stringify(body), { status, headers: JSON_TYPE });

async function batch(env, request) {
  const { ops } = await request.json();
  const groups = new Map();
  ops.forEach(({ op, ns, key, value }, index) => {
    const shard = shardOf(ns, key);
    if (!groups.has(shard)) groups.set(shard, { indices: [], ops: [] });
    const group = groups.get(shard);
    group.indices.push(index);
    group.ops.push([op, ns, key, value]);
  });
  const results = new Array(ops.length);
  await Promise.all(
    [...groups].map(async ([shard, group]) => {
      const values = await stub(env, shard).run(group.ops);
      values.forEach((value, i) => {
        results[group.indices[i]] = { ok: true, value };
      });
    }),
  );
  return json({ results });
}

// The totals of every shard, in the shape of edgecount's /v1/stats that the benchmark reads.
async function stats(env) {
  const totals = { calls: 0, rows_read: 0, rows_written: 0 };
  for (let shard = 0; shard < SHARDS; shard++) {
    const counts = await stub(env, shard).stats();
    for (const name of Object.keys(totals)) totals[name] += counts[name];
  }
  return json({ totals, edge: { hits: 0, misses: 0, coalesced_ops: 0 } });
}

export default {
  async fetch(request, env) {
    const path = new URL(request.url).pathname.split("/");
    // ["", "v1", "counters", ns, key, "incr"?]
    if (path[1] !== "v1") return json({ error: "not_found" }, 404);
    if (path[2] === "health") return json({ status: "ok" });
    if (path[2] === "stats") return stats(env);
    if (path[2] === "batch" && request.method === "POST")
      return batch(env, request);
    if (path[2] === "counters" && path.length >= 5) {
      const [ns, key] = [path[3], path[4]];
      const op =
        path[5] === "incr" && request.method === "POST" ? "incr" : "get";
      const [value] = await stub(env, shardOf(ns, key)).run([[op, ns, key]]);
      return json({ ns, key, value });
    }
    return json({ error: "not_found" }, 404);
  },
};
