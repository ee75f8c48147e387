// What a read of unique visitors costs a shard, and what a loop of them does to the writes of
// other keys on that shard. Starts the built worker on workerd with one shard (every key on
// it), imports three counters whose 1, 30 and 400 days each hold a dense sketch (a HyperLogLog
// of about 100,000 visitors, 12,288 bytes), then:
//
// - reads each one's counter, its period's counts, its visitors (`unique=1`) of the same
//   period again and again, then of a different range each time (which nothing kept can
//   answer), and counts a view with a new visitor, and reports the median and 90th percentile
//   of the answers' times and the shard's rows read and written per request (its own
//   `rows_read` and `rows_written`, less what asking for them costs);
// - has 8 clients increment other keys for a while, alone, then beside 2 clients reading the
//   400 days' visitors (the same period, then a different range each time), and reports the
//   increments' rate and times; then once more, a different range each time, served again
//   with no rate limit configured (where a read of over 40 days' visitors is limited all the
//   same), each reader from an address of its own asking again at once when refused.
//
// Times are on loopback from Node, serial per client, on whatever else the machine runs: a
// ratio between lines of one run means more than a figure alone.
//
// Usage (after `make build`):
//   node_modules/.bin/node scripts/visitor-reads.mjs [reads] [seconds]
// (30 reads of each kind and 5 s for each phase of the writes by default).
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, run, stopProcess, waitUntilUp } from "./child-process.mjs";

const reads = Math.min(Number(process.argv[2] ?? 30), 1_000);
const seconds = Math.min(Number(process.argv[3] ?? 5), 60);
const PORT = await freePort();
const base = `http://127.0.0.1:${PORT}`;
const DAY_MS = 86_400_000;
const today = Math.floor(Date.now() / DAY_MS);
const ns = `visits-${Date.now().toString(36)}`;

const dir = mkdtempSync(join(tmpdir(), "edgecount-visitor-reads-"));
mkdirSync(join(dir, "state"));
let workerd = await start([
  // Measured without a rate limit first: what the shard does, not what a client may ask.
  "EDGECOUNT_RATE_LIMIT=0",
]);

try {
  console.log(
    `| days | request | median ms | p90 ms | rows read a request | rows written a request |`,
  );
  console.log(`|---:|---|---:|---:|---:|---:|`);
  for (const days of [1, 30, 400]) {
    await importDense(`d${days}`, days);
    const key = `${base}/v1/counters/${ns}/d${days}`;
    const rows = [
      ["counter", () => key],
      [
        "a view with a new visitor",
        (i) => [
          `${key}/incr?unique=1`,
          {
            method: "POST",
            headers: { "cf-connecting-ip": `10.${days}.${i >> 8}.${i & 255}` },
          },
        ],
      ],
      ["days, no unique", () => `${key}/days?period=${days}d`],
      ["visitors, same period", () => `${key}/days?period=${days}d&unique=1`],
      [
        "visitors, a new range each",
        (i) =>
          `${key}/days?from=${date(today - days + 1)}&to=${date(today - (i % Math.max(days - 1, 1)))}&unique=1`,
      ],
    ];
    for (const [name, url] of rows) {
      const request = (i) => [url(i)].flat();
      await timed(...request(0)); // the first, which may keep what later ones reuse
      const before = await rowsCounted();
      const times = [];
      for (let i = 1; i <= reads; i++) times.push(await timed(...request(i)));
      const after = await rowsCounted();
      const cost = await statsCost();
      const per = (field) =>
        ((after[field] - before[field] - cost[field]) / reads).toFixed(1);
      console.log(
        `| ${days} | ${name} | ${pct(times, 0.5)} | ${pct(times, 0.9)} | ${per("rows_read")} | ${per("rows_written")} |`,
      );
    }
  }
  console.log(
    `\n| beside the writes | writes/s | write median ms | write p99 ms | reads done | reads refused |`,
  );
  console.log(`|---|---:|---:|---:|---:|---:|`);
  const visitors = `${base}/v1/counters/${ns}/d400/days`;
  // 400 ranges of 361 to 400 days, none asked twice in a phase.
  const newRange = (i) =>
    `${visitors}?from=${date(today - 399 + (i % 20))}&to=${date(today - (Math.floor(i / 20) % 20))}&unique=1`;
  for (const [name, readUrl] of [
    ["nothing", null],
    [
      "400 days' visitors, same period",
      () => `${visitors}?period=400d&unique=1`,
    ],
    ["400 days' visitors, a new range each", newRange],
    ["400 days' visitors, a new range each, at the default limit", newRange],
  ]) {
    if (name.includes("limit")) {
      // The same state, served again as deployed with nothing configured.
      await stopProcess(workerd);
      workerd = await start([]);
    }
    const { rate, times, done, refused } = await writesBeside(readUrl);
    console.log(
      `| ${name} | ${rate.toFixed(0)} | ${pct(times, 0.5)} | ${pct(times, 0.99)} | ${done} | ${refused} |`,
    );
  }
} finally {
  await stopProcess(workerd);
  rmSync(dir, { recursive: true, force: true });
}

/** Imports `key` with `days` days up to today, each with a count and a dense sketch. */
async function importDense(key, days) {
  const first = today - days + 1;
  const line = JSON.stringify({
    ns,
    key,
    counter: { value: days, version: 1, today: { day: today, count: 1 } },
    days: Array.from({ length: days - 1 }, (_, i) => ({
      day: first + i,
      count: 1,
    })),
    sketches: Array.from({ length: days }, (_, i) => ({
      day: first + i,
      sketch: denseSketch(),
    })),
  });
  const answer = await fetch(`${base}/v1/import`, {
    method: "POST",
    body: `${line}\n`,
  });
  const text = await answer.text();
  if (!answer.ok || !text.includes('"ok":true'))
    throw new Error(`import ${key}: ${answer.status} ${text}`);
}

/** A dense sketch's stored bytes, in base64: 2^14 registers of 6 bits, each the longest run
 * of about 6 visitors (about 100,000 in all), packed as `Sketch::to_bytes` packs them. */
function denseSketch() {
  const packed = new Uint8Array(12_288);
  for (let at = 0; at < 16_384; at++) {
    let register = 0;
    for (let v = 0; v < 6; v++) {
      const bits = (Math.random() * 2 ** 32) >>> 0;
      const run = bits === 0 ? 33 : Math.clz32(bits & -bits) ^ 31;
      register = Math.max(register, run + 1);
    }
    const bit = at * 6;
    const pair = register << (bit % 8);
    packed[bit >> 3] |= pair & 0xff;
    if ((bit >> 3) + 1 < packed.length) packed[(bit >> 3) + 1] |= pair >> 8;
  }
  return Buffer.from(packed).toString("base64");
}

function date(day) {
  return new Date(day * DAY_MS).toISOString().slice(0, 10);
}

/** Milliseconds for one answer, read whole; a failed answer stops the run. */
async function timed(url, init) {
  const start = performance.now();
  const answer = await fetch(url, init);
  const body = await answer.text();
  if (!answer.ok) throw new Error(`${url}: ${answer.status} ${body}`);
  return performance.now() - start;
}

/** The shard's rows read and written so far. */
async function rowsCounted() {
  const { rows_read, rows_written } = (
    await (await fetch(`${base}/v1/stats`)).json()
  ).totals;
  return { rows_read, rows_written };
}

/** The rows that asking for the figures reads and writes itself. */
async function statsCost() {
  const before = await rowsCounted();
  const after = await rowsCounted();
  return {
    rows_read: after.rows_read - before.rows_read,
    rows_written: after.rows_written - before.rows_written,
  };
}

/** 8 clients increment their own keys for `seconds`, beside 2 clients reading `readUrl`'s
 * answers (none when null). */
async function writesBeside(readUrl) {
  const until = performance.now() + seconds * 1000;
  const times = [];
  let done = 0;
  const writer = async (w) => {
    for (let i = 0; performance.now() < until; i++)
      times.push(
        await timed(`${base}/v1/counters/${ns}/w${w}-${i % 50}/incr`, {
          method: "POST",
        }),
      );
  };
  let refused = 0;
  // Each reader from an address of its own; one refused (429) asks again at once.
  const reader = async (r) => {
    const init = { headers: { "cf-connecting-ip": `192.0.2.${r + 1}` } };
    for (let i = r; performance.now() < until; i += 2) {
      const answer = await fetch(readUrl(i), init);
      await answer.arrayBuffer();
      if (answer.status === 429) refused++;
      else if (answer.ok) done++;
      else throw new Error(`${readUrl(i)}: ${answer.status}`);
    }
  };
  await Promise.all([
    ...Array.from({ length: 8 }, (_, w) => writer(w)),
    ...(readUrl ? [reader(0), reader(1)] : []),
  ]);
  return { rate: times.length / seconds, times, done, refused };
}

function pct(values, p) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[
    Math.min(sorted.length - 1, Math.floor(p * sorted.length))
  ].toFixed(1);
}

/** Serves the built worker on workerd over the run's state, with one shard and the shard's
 * figures fresh on every ask, and `vars` (NAME=value) besides. */
async function start(vars) {
  const config = join(dir, "config.capnp");
  await run(process.execPath, [
    "scripts/workerd-config.mjs",
    String(PORT),
    join(dir, "state"),
    config,
    "EDGECOUNT_SHARDS=1",
    "EDGECOUNT_STATS_MAX_AGE_MS=0",
    ...vars,
  ]);
  const child = spawn("node_modules/.bin/workerd", ["serve", config], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  await waitUntilUp(`${base}/v1/health`);
  return child;
}
