// Where one request path spends its CPU inside the isolate: starts the built worker on workerd
// with its inspector on loopback, sends a bounded number of requests, records them with V8's
// sampling profiler and prints the functions with the most time, self and inclusive, per
// request. Rust functions show under their names (the Wasm keeps its name section), the
// JavaScript glue under index.js and entry.js, and the runtime's own work under names such as
// `Response` or `exec`. Not a capacity figure (uncapped, profiler on): it orders what to change.
//
// Usage (after `make build`):
//   node_modules/.bin/node scripts/profile.mjs <path> [method] [requests] [concurrency] [top]
// e.g. `... scripts/profile.mjs '/v1/counters/p/k{i}' GET 5000 16`: `{i}` in the path becomes
// the request's number modulo 1000, to spread requests over keys.
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, run, stopProcess, waitUntilUp } from "./child-process.mjs";

const [path, method = "GET", count = "5000", concurrency = "16", top = "30"] =
  process.argv.slice(2);
if (!path) {
  console.error(
    "usage: profile.mjs <path> [method] [requests] [concurrency] [top]",
  );
  process.exit(2);
}
// Ports no other server on the machine holds (the test suite runs servers of its own).
const HTTP_PORT = await freePort();
const INSPECTOR_PORT = await freePort();
const requests = Math.min(Number(count), 100_000);
const base = `http://127.0.0.1:${HTTP_PORT}`;

const dir = mkdtempSync(join(tmpdir(), "edgecount-profile-"));
const config = join(dir, "config.capnp");
mkdirSync(join(dir, "state"));
const node = process.execPath;
await run(node, [
  "scripts/workerd-config.mjs",
  String(HTTP_PORT),
  join(dir, "state"),
  config,
]);
const workerd = spawn(
  "node_modules/.bin/workerd",
  ["serve", config, `--inspector-addr=127.0.0.1:${INSPECTOR_PORT}`],
  { stdio: ["ignore", "ignore", "inherit"] },
);

try {
  await waitUntilUp(`${base}/v1/health`);
  // Warm up: compile, fill caches, make keys hot.
  await load(Math.min(2000, requests));
  const inspector = await connect(`ws://127.0.0.1:${INSPECTOR_PORT}/edgecount`);
  await inspector.call("Profiler.enable");
  await inspector.call("Profiler.setSamplingInterval", { interval: 50 });
  await inspector.call("Profiler.start");
  await load(requests);
  const { profile } = await inspector.call("Profiler.stop");
  inspector.close();
  report(profile, requests, Number(top));
} finally {
  await stopProcess(workerd);
  rmSync(dir, { recursive: true, force: true });
}

/** Sends `total` requests from `concurrency` clients, each waiting for its answer. */
async function load(total) {
  let sent = 0;
  let failed = 0;
  const client = async () => {
    while (sent < total) {
      const n = sent++;
      const response = await fetch(
        base + path.replaceAll("{i}", String(n % 1000)),
        { method },
      );
      await response.arrayBuffer();
      if (response.status >= 400) failed++;
    }
  };
  await Promise.all(Array.from({ length: Number(concurrency) }, client));
  if (failed > 0) console.error(`${failed} of ${total} answers were errors`);
}

/** The Chrome DevTools protocol over the inspector's WebSocket. */
async function connect(url) {
  const socket = new WebSocket(url);
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  const pending = new Map();
  let next = 0;
  socket.onmessage = (event) => {
    const message = JSON.parse(event.data);
    pending.get(message.id)?.(message.result);
    pending.delete(message.id);
  };
  return {
    call(command, params = {}) {
      const id = ++next;
      socket.send(JSON.stringify({ id, method: command, params }));
      return new Promise((resolve, reject) => {
        // A lost answer fails the run instead of holding it forever.
        const timer = setTimeout(
          () => reject(new Error(`the inspector did not answer ${command}`)),
          30_000,
        );
        pending.set(id, (result) => {
          clearTimeout(timer);
          resolve(result);
        });
      });
    },
    close: () => socket.close(),
  };
}

function report(profile, perRequest, rows) {
  const name = ({ callFrame: f }) =>
    `${f.functionName || "(anonymous)"} ${f.url.split("/").pop()}`;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map();
  for (const node of profile.nodes)
    for (const child of node.children ?? []) parent.set(child, node.id);
  const sampled = new Map();
  profile.samples.forEach((id, i) =>
    sampled.set(id, (sampled.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)),
  );
  const self = new Map();
  const inclusive = new Map();
  for (const [id, micros] of sampled) {
    const own = name(byId.get(id));
    self.set(own, (self.get(own) ?? 0) + micros);
    const seen = new Set();
    for (let at = id; at !== undefined; at = parent.get(at)) {
      const label = name(byId.get(at));
      if (seen.has(label)) continue;
      seen.add(label);
      inclusive.set(label, (inclusive.get(label) ?? 0) + micros);
    }
  }
  const print = (title, table) => {
    console.log(`\n${title} (µs per request)`);
    [...table]
      .sort((a, b) => b[1] - a[1])
      .slice(0, rows)
      .forEach(([label, micros]) =>
        console.log(
          `${(micros / perRequest).toFixed(1).padStart(8)}  ${label}`,
        ),
      );
  };
  print("self", self);
  print("inclusive", inclusive);
}
