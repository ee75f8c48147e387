// One k6 script for every scenario of the benchmark; loadtest/bench.py runs it per system and
// scenario with the environment below. Open model (constant-arrival-rate) unless MODE says a
// closed probe or a client sweep.
//   RATE, RAMP               open model: iterations/s, reached after RAMP seconds
//
//   BASE_URL, SYSTEM         the target and how it spells operations (lib/targets.js)
//   SCENARIO                 health | read | write | write-async | mixed | hot | batch |
//                            batch-async | cache | ncache | clients | page-view
//   MODE                     open (RATE iterations/s) | closed (VUS virtual users)
//   DURATION                 e.g. 10s
//   KEYS_DIR                 precomputed uniform.json / zipf.json (keys.py)
//   VALUE_BYTES              cache scenario value size
//   SUMMARY                  where to write the JSON summary
import { check, fail } from "k6";
import exec from "k6/execution";
import http from "k6/http";
import { SharedArray } from "k6/data";
import { target } from "./lib/targets.js";

const SCENARIO = __ENV.SCENARIO || "read";
const MODE = __ENV.MODE || "open";
const BATCH_SIZE = 50;
const HOT_KEYS = 10;

const api = target(__ENV.SYSTEM, __ENV.BASE_URL);
const sequence = new SharedArray("keys", () => {
  const file =
    SCENARIO === "page-view"
      ? "pages.json"
      : ["mixed", "batch", "clients", "write-async", "batch-async"].includes(
            SCENARIO,
          )
        ? "zipf.json"
        : "uniform.json";
  return JSON.parse(open(`${__ENV.KEYS_DIR}/${file}`));
});
const value = "v".repeat(Number(__ENV.VALUE_BYTES || 100));

// A cache get of a key never put is a 404, a normal outcome for a cache.
http.setResponseCallback(
  http.expectedStatuses(200, 202, 204, ...(SCENARIO === "cache" ? [404] : [])),
);

// The open model ramps to RATE over RAMP seconds, then holds it for DURATION: VUs open their
// connections gradually instead of in one storm that stalls a server pinned to one core.
const rate = Number(__ENV.RATE);
const executor =
  MODE === "open"
    ? {
        executor: "ramping-arrival-rate",
        startRate: Math.max(1, Math.floor(rate / 10)),
        timeUnit: "1s",
        stages: [
          { target: rate, duration: `${__ENV.RAMP || 2}s` },
          { target: rate, duration: __ENV.DURATION },
        ],
        preAllocatedVUs: Number(__ENV.VUS || 200),
        maxVUs: Number(__ENV.MAX_VUS || 400),
      }
    : {
        executor: "constant-vus",
        vus: Number(__ENV.VUS || 32),
        duration: __ENV.DURATION,
      };

export const options = {
  discardResponseBodies: true,
  summaryTrendStats: ["avg", "min", "med", "p(95)", "p(99)", "max"],
  scenarios: { [SCENARIO]: executor },
  // The goals a run must meet to count (BENCH.md): under 0.1% errors, no dropped iterations.
  thresholds: {
    http_req_failed: ["rate<0.001"],
    ...(MODE === "open" ? { dropped_iterations: ["count<1"] } : {}),
  },
};

export function setup() {
  const response = api.health();
  if (response.status < 200 || response.status >= 300) {
    fail(
      `${__ENV.SYSTEM} at ${__ENV.BASE_URL} is not answering (status ${response.status})`,
    );
  }
}

const nextKey = () => sequence[exec.scenario.iterationInTest % sequence.length];

const iterations = {
  health: () => api.health(),
  read: () => api.get(nextKey()),
  write: () => api.incr(nextKey()),
  // A page view: one-way, counting its visitor (keys.py draws the page and the visitor).
  "page-view": () => api.pageView(...nextKey()),
  // One-way where the system has it (202 at once, applied within a second), else its incr.
  "write-async": () => (api.incrOneWay || api.incr)(nextKey()),
  mixed: () =>
    exec.scenario.iterationInTest % 5 === 0
      ? api.incr(nextKey())
      : api.get(nextKey()),
  clients: () => iterations.mixed(),
  hot: () => api.get(exec.scenario.iterationInTest % HOT_KEYS),
  cache: () =>
    exec.scenario.iterationInTest % 5 === 0
      ? api.cachePut(nextKey(), value)
      : api.cacheGet(nextKey()),
  ncache: () => {
    const base = exec.scenario.iterationInTest * BATCH_SIZE;
    const ops = [];
    for (let i = 0; i < BATCH_SIZE; i++) {
      const key = sequence[(base + i) % sequence.length];
      ops.push(
        (base + i) % 5 === 0 ? ["cache_put", key, value] : ["cache_get", key],
      );
    }
    return api.batch(ops);
  },
  // 50 one-way increments of Zipf keys in one request (202 at once, applied within a second).
  "batch-async": () => {
    const base = exec.scenario.iterationInTest * BATCH_SIZE;
    const ops = [];
    for (let i = 0; i < BATCH_SIZE; i++) {
      ops.push(["incr", sequence[(base + i) % sequence.length]]);
    }
    return api.batch(ops, "?async=1");
  },
  batch: () => {
    const base = exec.scenario.iterationInTest * BATCH_SIZE;
    const ops = [];
    for (let i = 0; i < BATCH_SIZE; i++) {
      const key = sequence[(base + i) % sequence.length];
      ops.push([(base + i) % 5 === 0 ? "incr" : "get", key]);
    }
    return api.batch(ops);
  },
};

export default function () {
  const response = iterations[SCENARIO]();
  check(response, {
    "status is 2xx": (r) => r.status >= 200 && r.status < 300,
  });
}

export function handleSummary(data) {
  const reqs = data.metrics.http_reqs ? data.metrics.http_reqs.values.rate : 0;
  return {
    stdout: `  ${__ENV.SYSTEM} ${SCENARIO} ${MODE}: ${reqs.toFixed(0)} req/s\n`,
    [__ENV.SUMMARY]: JSON.stringify(data),
  };
}
