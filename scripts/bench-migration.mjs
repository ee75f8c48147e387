// The cost of changing the shard count (`make bench-migration`): through `workerd serve`,
// MIGRATION_KEYS counters (default 1,000,000) are written under MIGRATION_FROM shards
// (default 8), then the count is changed to MIGRATION_TO (default 16) online. It measures:
//
// 1. a mixed load (90% reads, 10% increments of random keys) for MIGRATION_LOAD_SECONDS
//    (default 20) with no change under way;
// 2. the same load right after the change is declared, while shards hand keys over;
// 3. how long the hand-overs take to finish, in all and per key moved.
//
// For each load it reports ops/s, latency percentiles and the runtime's CPU per op (from
// /proc, user plus system), and how busy the runtime was (CPU seconds per second: 1.0 is one
// core). The load generator is this Node process on the same machine, so the figures compare
// the two runs with each other, not with other systems. Writes build/bench-migration/summary.json.
//
// Usage: node scripts/bench-migration.mjs   (MIGRATION_KEYS, MIGRATION_FROM, MIGRATION_TO,
// MIGRATION_LOAD_SECONDS, MIGRATION_CLIENTS, MIGRATION_HAND_OVER_KEYS, MIGRATION_PORT,
// MIGRATION_OUT to change the run)
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { freePort, stopProcess } from "./child-process.mjs";

const KEYS = Number(process.env.MIGRATION_KEYS ?? 1_000_000);
const FROM = Number(process.env.MIGRATION_FROM ?? 8);
const TO = Number(process.env.MIGRATION_TO ?? 16);
const LOAD_SECONDS = Number(process.env.MIGRATION_LOAD_SECONDS ?? 20);
const CLIENTS = Number(process.env.MIGRATION_CLIENTS ?? 16);
const PORT = Number(process.env.MIGRATION_PORT ?? (await freePort()));
// EDGECOUNT_HAND_OVER_KEYS of the deployment that makes the change (the default when unset).
const HAND_OVER_KEYS = process.env.MIGRATION_HAND_OVER_KEYS;
// Bounds on the whole run, so that it always ends.
const MAX_LOAD_MS = 15 * 60 * 1000;
const MAX_MIGRATION_MS = 60 * 60 * 1000;
const BASE = `http://127.0.0.1:${PORT}`;
const DIR = resolve(process.env.MIGRATION_OUT ?? "build/bench-migration");
const NS = "bench-migration";
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (line) => console.log(`[bench-migration] ${line}`);

let runtime;

async function start(vars) {
  // The old runtime must be gone: one still holding the port would keep answering, and the
  // load meant for the new settings would measure the old.
  await stopProcess(runtime);
  const config = join(DIR, "edgecount.capnp");
  const overrides = Object.entries(vars).map(
    ([name, value]) => `${name}=${value}`,
  );
  spawnSync(
    process.execPath,
    [
      "scripts/workerd-config.mjs",
      String(PORT),
      join(DIR, "state"),
      config,
      ...overrides,
    ],
    { stdio: "inherit" },
  );
  runtime = spawn(resolve("node_modules/.bin/workerd"), ["serve", config], {
    stdio: "ignore",
  });
  for (let i = 0; i < 400; i++) {
    try {
      if ((await fetch(`${BASE}/v1/health`)).ok) return;
    } catch {
      // not up yet
    }
    await sleep(50);
  }
  throw new Error("workerd did not start");
}

/** The runtime's CPU seconds so far (user plus system), from /proc. */
function cpuSeconds() {
  const fields = readFileSync(`/proc/${runtime.pid}/stat`, "utf8")
    .split(") ")[1]
    .split(" ");
  // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function post(path, body) {
  const response = await fetch(`${BASE}${path}`, {
    method: "POST",
    body: JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== 200)
    throw new Error(`${path}: ${response.status} ${text.slice(0, 300)}`);
  return JSON.parse(text);
}

/** Writes every counter (each set to its index), 1,000 per batch, 4 batches at a time. */
async function load() {
  const started = Date.now();
  let next = 0;
  const writer = async () => {
    while (next < KEYS) {
      const first = next;
      next += 1000;
      const ops = [];
      for (let i = first; i < Math.min(first + 1000, KEYS); i++) {
        ops.push({ op: "set", ns: NS, key: `k${i}`, value: i });
      }
      await post("/v1/batch", { ops });
      if (first % 100_000 === 0) log(`written ${first} of ${KEYS} keys`);
    }
  };
  await Promise.all(Array.from({ length: 4 }, writer));
  return (Date.now() - started) / 1000;
}

async function totals() {
  const response = await fetch(`${BASE}/v1/stats`);
  if (response.status !== 200) throw new Error(`stats: ${response.status}`);
  return (await response.json()).totals;
}

/** The mixed load for LOAD_SECONDS: ops/s, latency percentiles, CPU per op and busyness. */
async function mixedLoad(label) {
  const latencies = [];
  let errors = 0;
  const until = Date.now() + Math.min(LOAD_SECONDS * 1000, MAX_LOAD_MS);
  const cpuBefore = cpuSeconds();
  const started = performance.now();
  const client = async () => {
    while (Date.now() < until) {
      const key = `k${Math.floor(Math.random() * KEYS)}`;
      const write = Math.random() < 0.1;
      const t0 = performance.now();
      try {
        const response = await fetch(
          `${BASE}/v1/counters/${NS}/${key}${write ? "/incr" : "?consistency=strong"}`,
          write ? { method: "POST" } : {},
        );
        await response.arrayBuffer();
        if (response.status !== 200) errors += 1;
      } catch {
        errors += 1;
      }
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));
  const seconds = (performance.now() - started) / 1000;
  const cpu = cpuSeconds() - cpuBefore;
  latencies.sort((a, b) => a - b);
  const at = (q) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))];
  const row = {
    label,
    ops: latencies.length,
    errors,
    ops_per_s: Math.round(latencies.length / seconds),
    p50_ms: Number(at(0.5).toFixed(2)),
    p99_ms: Number(at(0.99).toFixed(2)),
    runtime_cpu_us_per_op: Math.round((cpu * 1e6) / latencies.length),
    runtime_busy_cores: Number((cpu / seconds).toFixed(2)),
  };
  log(`${label}: ${JSON.stringify(row)}`);
  return row;
}

async function main() {
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(join(DIR, "state"), { recursive: true });
  log(`${KEYS} keys under ${FROM} shards, then ${FROM} -> ${TO}`);
  await start({ EDGECOUNT_SHARDS: String(FROM) });
  const loadSeconds = await load();
  log(`wrote ${KEYS} keys in ${loadSeconds.toFixed(1)} s`);
  const steady = await mixedLoad(
    `mixed load, ${FROM} shards, no change under way`,
  );

  await start({
    EDGECOUNT_SHARDS: String(TO),
    EDGECOUNT_SHARDS_FROM: String(FROM),
    ...(HAND_OVER_KEYS ? { EDGECOUNT_HAND_OVER_KEYS: HAND_OVER_KEYS } : {}),
  });
  const declared = Date.now();
  const cpuAtDeclare = cpuSeconds();
  // The first request wakes every shard to hand its leaving keys over.
  const toMove = (await totals()).keys_to_move;
  log(`keys to move: ${toMove}`);
  const during = await mixedLoad(`mixed load, ${FROM} -> ${TO} under way`);
  let left = toMove;
  let progressed = Date.now();
  while (left > 0 && Date.now() - declared < MAX_MIGRATION_MS) {
    await sleep(5_000);
    const now = (await totals()).keys_to_move;
    if (now < left) progressed = Date.now();
    left = now;
    log(
      `${left} keys left to move after ${((Date.now() - declared) / 1000).toFixed(0)} s`,
    );
    if (Date.now() - progressed > 60_000)
      throw new Error("no key moved for a minute");
  }
  const migrationSeconds = (Date.now() - declared) / 1000;
  const migrationCpu = cpuSeconds() - cpuAtDeclare;
  const after = await totals();
  const summary = {
    date: new Date().toISOString(),
    keys: KEYS,
    from: FROM,
    to: TO,
    clients: CLIENTS,
    load_seconds: loadSeconds,
    hand_over_keys: HAND_OVER_KEYS ?? "default",
    keys_moved: toMove,
    keys_left: left,
    migration_seconds: Number(migrationSeconds.toFixed(1)),
    keys_moved_per_s: Math.round(toMove / migrationSeconds),
    // Includes the mixed load run during the change and the progress polls.
    runtime_cpu_seconds_during_change: Number(migrationCpu.toFixed(1)),
    stored_counters_after: after.stored_counters,
    steady,
    during,
    during_vs_steady_ops: Number(
      (during.ops_per_s / steady.ops_per_s).toFixed(2),
    ),
  };
  writeFileSync(join(DIR, "summary.json"), JSON.stringify(summary, null, 2));
  log(
    `moved ${toMove} keys in ${summary.migration_seconds} s (${summary.keys_moved_per_s} keys/s)`,
  );
  log(
    `ops/s during the change: ${summary.during_vs_steady_ops}x the steady run's`,
  );
  if (left !== 0 || after.stored_counters !== KEYS) {
    throw new Error(
      `the change did not finish cleanly: ${left} left, ${after.stored_counters} stored`,
    );
  }
}

try {
  await main();
} finally {
  await stopProcess(runtime);
}
