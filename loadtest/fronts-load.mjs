// Page views offered at a fixed rate, spread over several front services (loadtest/fronts.py):
// one-way increments with unique visitors, keys drawn by Zipf's law, and per key how many were
// accepted (202) and how many were attempted, with when each was accepted, for the count check.
//
// Usage: node fronts-load.mjs <out.json> <rate/s> <seconds> <keys> <ns> <url> [<url> ...]
import { writeFileSync } from "node:fs";

const [out, rateArg, secondsArg, keysArg, ns, ...urls] = process.argv.slice(2);
const rate = Number(rateArg);
const seconds = Number(secondsArg);
const keys = Number(keysArg);
if (!out || !rate || !seconds || !keys || !ns || urls.length === 0) {
  console.error(
    "usage: node fronts-load.mjs <out.json> <rate/s> <seconds> <keys> <ns> <url> [<url> ...]",
  );
  process.exit(2);
}

// Zipf's law (s = 1) over `keys` keys, by its cumulative weights.
const cumulative = new Float64Array(keys);
let total = 0;
for (let k = 0; k < keys; k++) {
  total += 1 / (k + 1);
  cumulative[k] = total;
}
function zipfKey() {
  const target = Math.random() * total;
  let lo = 0;
  let hi = keys - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (cumulative[mid] < target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const attempted = new Array(keys).fill(0);
const accepted = new Array(keys).fill(0);
// Accepted views per 100 ms since the start: what a crash at a given time could lose.
const acceptedByTick = [];
const statuses = {};
let inFlight = 0;
let sent = 0;
const MAX_IN_FLIGHT = 512;
const started = Date.now();

async function view() {
  const key = zipfKey();
  const url = urls[sent % urls.length];
  sent += 1;
  attempted[key] += 1;
  inFlight += 1;
  const visitor = Math.floor(Math.random() * 1_000_000);
  try {
    const response = await fetch(
      `${url}/v1/counters/${ns}/p${key}/incr?unique=1`,
      {
        method: "POST",
        headers: {
          prefer: "respond-async",
          "cf-connecting-ip": `10.${(visitor >> 16) & 255}.${(visitor >> 8) & 255}.${visitor & 255}`,
          "user-agent": "fronts-load/1.0",
        },
        signal: AbortSignal.timeout(10_000),
      },
    );
    await response.arrayBuffer();
    statuses[response.status] = (statuses[response.status] ?? 0) + 1;
    if (response.status === 202) {
      accepted[key] += 1;
      const tick = Math.floor((Date.now() - started) / 100);
      acceptedByTick[tick] = (acceptedByTick[tick] ?? 0) + 1;
    }
  } catch {
    statuses.failed = (statuses.failed ?? 0) + 1;
  } finally {
    inFlight -= 1;
  }
}

// Every 10 ms, the views due by then (none past MAX_IN_FLIGHT under way: a front that stops
// answering is not buried).
await new Promise((resolve) => {
  const timer = setInterval(() => {
    const elapsed = (Date.now() - started) / 1000;
    if (elapsed >= seconds) {
      clearInterval(timer);
      resolve();
      return;
    }
    const due = Math.floor(elapsed * rate) - sent;
    for (let i = 0; i < due && inFlight < MAX_IN_FLIGHT; i++) void view();
  }, 10);
});
while (inFlight > 0) await new Promise((r) => setTimeout(r, 20));

writeFileSync(
  out,
  JSON.stringify({
    started_ms: started,
    seconds,
    rate,
    fronts: urls.length,
    sent,
    statuses,
    attempted,
    accepted,
    accepted_by_tick: Array.from(acceptedByTick, (n) => n ?? 0),
  }),
);
