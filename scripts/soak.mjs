// The soak run (`make soak`): mixed load through `workerd serve` for SOAK_SECONDS (default 600)
// with clients that reset their connections, oversized and hostile requests mixed in, and the
// runtime killed with SIGKILL at random moments and started again over its state. At the end it
// checks every counter against Jepsen's counter bounds (at least the acknowledged increments,
// at most the attempted ones), that every shard answers promptly, and that the runtime's memory
// came back near where it started. Prints a summary and writes it to build/soak/summary.json.
//
// Usage: node scripts/soak.mjs   (SOAK_SECONDS, SOAK_CLIENTS, SOAK_SEED, SOAK_KILLS=0 to change
// the run)
import { spawn, spawnSync } from "node:child_process";
import {
  mkdirSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { connect } from "node:net";
import { join, resolve } from "node:path";

const SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
const CLIENTS = Number(process.env.SOAK_CLIENTS ?? 24);
const PORT = Number(process.env.SOAK_PORT ?? 8799);
const URL_BASE = `http://127.0.0.1:${PORT}`;
const DIR = resolve("build/soak");
const KEYS = Array.from({ length: 48 }, (_, i) => `k${i}`);
const NS = `soak-${Date.now().toString(36)}`;
// SOAK_KILLS=0 runs without SIGKILLs, so the memory figures describe one runtime's whole run.
const KILLS = process.env.SOAK_KILLS !== "0";

// A small seeded generator (mulberry32), so a run can be repeated.
let seed = Number(process.env.SOAK_SEED ?? Date.now()) >>> 0;
const initialSeed = seed;
function random() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (list) => list[Math.floor(random() * list.length)];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const counts = {
  requests: 0,
  resets: 0,
  hostile: 0,
  hostileRefused: 0,
  kills: 0,
  answered: {},
  unexpected: [],
};
const attempted = new Map(KEYS.map((k) => [k, 0]));
const acknowledged = new Map(KEYS.map((k) => [k, 0]));
const bump = (map, key, by = 1) => map.set(key, map.get(key) + by);

let runtime;
function rssMiB(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    return Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
  } catch {
    return NaN;
  }
}

async function startRuntime() {
  const config = join(DIR, "edgecount.capnp");
  spawnSync(
    process.execPath,
    ["scripts/workerd-config.mjs", String(PORT), join(DIR, "state"), config],
    { stdio: "inherit" },
  );
  // The runtime's own log (uncaught errors, warnings) is kept for diagnosis.
  const log = openSync(join(DIR, "workerd.log"), "a");
  const child = spawn(
    resolve("node_modules/.bin/workerd"),
    ["serve", "--verbose", config],
    { stdio: ["ignore", log, log] },
  );
  for (let i = 0; i < 400; i++) {
    try {
      if ((await fetch(`${URL_BASE}/v1/health`)).ok) return child;
    } catch {
      // not up yet
    }
    await sleep(50);
  }
  throw new Error("workerd did not start");
}

function note(status) {
  counts.answered[status] = (counts.answered[status] ?? 0) + 1;
}

/** A fetch that never throws and never waits more than 20 s: the status, or 0 for no answer. */
async function request(path, init = {}) {
  counts.requests++;
  try {
    const response = await fetch(`${URL_BASE}${path}`, {
      ...init,
      signal: AbortSignal.timeout(20_000),
    });
    const body = await response.text();
    note(response.status);
    return { status: response.status, body };
  } catch {
    note(0);
    return { status: 0, body: "" };
  }
}

/** Sends a request and hangs up with a TCP reset a few milliseconds later. */
function resetMidRequest(path) {
  counts.resets++;
  return new Promise((done) => {
    const socket = connect({ host: "127.0.0.1", port: PORT }, () => {
      socket.write(
        `POST ${path} HTTP/1.1\r\nHost: soak\r\nContent-Length: 0\r\n\r\n`,
      );
      setTimeout(
        () => {
          socket.resetAndDestroy();
          done();
        },
        Math.floor(random() * 20),
      );
    });
    socket.on("error", () => done());
  });
}

const HOSTILE = [
  () => request(`/v1/counters/bad%20ns/k/incr`, { method: "POST" }),
  () => request(`/v1/counters/${NS}/%00/incr`, { method: "POST" }),
  () =>
    request(`/v1/counters/${NS}/k`, {
      method: "PUT",
      headers: { "content-type": "application/json" },
      body: `{"value": ${"9".repeat(5000)}}`,
    }),
  () =>
    request(`/v1/cache/${NS}/big`, {
      method: "PUT",
      body: new Uint8Array(2 * 1024 * 1024),
    }),
  () =>
    request(`/v1/batch`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: '{"ops": [{"op": "incr", "ns": ".", "key": "k"}]',
    }),
  () =>
    request(`/v1/batch`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        ops: Array.from({ length: 1001 }, () => ({
          op: "get",
          ns: NS,
          key: "k",
        })),
      }),
    }),
  () =>
    request(`/v1/counters/${NS}/k0/incr?by=9223372036854775808`, {
      method: "POST",
    }),
  () => request(`/v1/counters/${NS}/k0`, { method: "PROPFIND" }),
];

async function hostile() {
  counts.hostile++;
  const { status } = await pick(HOSTILE)();
  // A refusal is a 4xx; during a kill there may be no answer at all.
  if (status >= 400 && status < 500) counts.hostileRefused++;
  else if (status !== 0 && status !== 503)
    counts.unexpected.push(`hostile request answered ${status}`);
}

async function increment(key) {
  bump(attempted, key);
  const { status, body } = await request(`/v1/counters/${NS}/${key}/incr`, {
    method: "POST",
  });
  if (status === 200) bump(acknowledged, key);
  else if (status !== 0 && status !== 503)
    counts.unexpected.push(`incr answered ${status}: ${body.slice(0, 120)}`);
}

async function batch() {
  const ops = Array.from({ length: 1 + Math.floor(random() * 20) }, () =>
    random() < 0.6
      ? { op: "incr", ns: NS, key: pick(KEYS) }
      : random() < 0.5
        ? { op: "get", ns: NS, key: pick(KEYS) }
        : { op: "cache_get", ns: NS, key: "page" },
  );
  for (const op of ops) if (op.op === "incr") bump(attempted, op.key);
  const { status, body } = await request("/v1/batch", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ops }),
  });
  if (status !== 200) {
    if (status !== 0 && status !== 503)
      counts.unexpected.push(`batch answered ${status}`);
    return;
  }
  JSON.parse(body).results.forEach((result, i) => {
    if (ops[i].op === "incr" && result.value !== undefined)
      bump(acknowledged, ops[i].key);
  });
}

async function client(until) {
  while (Date.now() < until) {
    const roll = random();
    if (roll < 0.55) await increment(pick(KEYS));
    else if (roll < 0.65) await resetIncrement();
    else if (roll < 0.77)
      await request(`/v1/counters/${NS}/${pick(KEYS)}`).then(({ status }) => {
        if (status !== 200 && status !== 0 && status !== 503)
          counts.unexpected.push(`read answered ${status}`);
      });
    else if (roll < 0.87) await batch();
    else if (roll < 0.92)
      await request(`/v1/cache/${NS}/page`, {
        method: "PUT",
        headers: { "content-type": "text/html" },
        body: "x".repeat(Math.floor(random() * 200_000)),
      });
    else await hostile();
  }
}

/** Resets count as attempted increments of their key: account for them where they are sent. */
async function resetIncrement() {
  const key = pick(KEYS);
  bump(attempted, key);
  await resetMidRequest(`/v1/counters/${NS}/${key}/incr`);
}

async function killer(until) {
  while (KILLS && Date.now() < until - 20_000) {
    await sleep(30_000 + random() * 60_000);
    if (Date.now() >= until - 20_000) break;
    runtime.kill("SIGKILL");
    counts.kills++;
    await sleep(300 + random() * 1_000);
    runtime = await startRuntime();
  }
}

async function main() {
  rmSync(DIR, { recursive: true, force: true });
  mkdirSync(join(DIR, "state"), { recursive: true });
  runtime = await startRuntime();
  // Warm up, then take the memory figure the run should come back near.
  for (let i = 0; i < 200; i++) await increment(pick(KEYS));
  await sleep(2_000);
  const startMiB = rssMiB(runtime.pid);
  const started = Date.now();
  const until = started + SECONDS * 1000;
  console.log(
    `[soak] ${SECONDS} s, ${CLIENTS} clients, seed ${initialSeed}, workerd RSS ${startMiB.toFixed(0)} MiB`,
  );
  let peakMiB = startMiB;
  const sampler = setInterval(() => {
    peakMiB = Math.max(peakMiB, rssMiB(runtime.pid) || 0);
  }, 1_000);
  const progress = setInterval(() => {
    const elapsed = Math.round((Date.now() - started) / 1000);
    console.log(
      `[soak] ${elapsed}/${SECONDS} s: ${counts.requests} requests, ${counts.resets} resets, ${counts.kills} kills, RSS ${rssMiB(runtime.pid).toFixed(0)} MiB`,
    );
  }, 30_000);
  const resetters = Array.from({ length: 2 }, async () => {
    while (Date.now() < until) {
      await resetIncrement();
      await sleep(5 + random() * 20);
    }
  });
  await Promise.all([
    ...Array.from({ length: CLIENTS }, () => client(until)),
    ...resetters,
    killer(until),
  ]);
  clearInterval(progress);
  clearInterval(sampler);

  // After a quiet spell, the runtime that is left must answer on every shard at once.
  await sleep(10_000);
  const shards = new Set();
  let wedged = 0;
  for (let i = 0; shards.size < 16 && i < 2_000; i++) {
    const key = `probe${i}`;
    const t0 = Date.now();
    try {
      const response = await fetch(`${URL_BASE}/v1/counters/${NS}/${key}`, {
        signal: AbortSignal.timeout(5_000),
      });
      await response.text();
      const shard = response.headers.get("x-edgecount-shard");
      if (response.status !== 200 || Date.now() - t0 > 5_000) wedged++;
      shards.add(shard);
    } catch {
      wedged++;
      break;
    }
  }
  const endMiB = rssMiB(runtime.pid);

  let outside = 0;
  let lost = 0;
  const rows = [];
  for (const key of KEYS) {
    const response = await fetch(
      `${URL_BASE}/v1/counters/${NS}/${key}?consistency=strong`,
      { headers: { accept: "text/plain" } },
    );
    const stored = Number(await response.text());
    const low = acknowledged.get(key);
    const high = attempted.get(key);
    if (stored < low) lost += low - stored;
    if (stored < low || stored > high) outside++;
    rows.push({ key, acknowledged: low, stored, attempted: high });
  }
  runtime.kill("SIGKILL");

  const summary = {
    seconds: SECONDS,
    clients: CLIENTS,
    seed: initialSeed,
    requests: counts.requests,
    answered: counts.answered,
    resets: counts.resets,
    hostile_requests: counts.hostile,
    hostile_refused_4xx: counts.hostileRefused,
    kills: counts.kills,
    counters: KEYS.length,
    acknowledged_increments: [...acknowledged.values()].reduce((a, b) => a + b),
    attempted_increments: [...attempted.values()].reduce((a, b) => a + b),
    counters_outside_bounds: outside,
    acknowledged_increments_lost: lost,
    shards_probed: shards.size,
    shards_wedged: wedged,
    rss_start_mib: Math.round(startMiB),
    rss_peak_mib: Math.round(peakMiB),
    rss_end_mib: Math.round(endMiB),
    unexpected: counts.unexpected.slice(0, 20),
    unexpected_total: counts.unexpected.length,
    counters_detail: rows,
  };
  writeFileSync(join(DIR, "summary.json"), JSON.stringify(summary, null, 2));
  const { counters_detail: _, ...short } = summary;
  console.log(JSON.stringify(short, null, 2));
  const ok =
    outside === 0 &&
    wedged === 0 &&
    counts.unexpected.length === 0 &&
    shards.size === 16 &&
    endMiB < startMiB + 256;
  console.log(`soak: ${ok ? "passed" : "FAILED"}`);
  process.exit(ok ? 0 : 1);
}

main().catch((error) => {
  runtime?.kill("SIGKILL");
  console.error(error);
  process.exit(1);
});
