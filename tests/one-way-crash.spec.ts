// One-way writes through a SIGKILL: the runtime dies in the middle of a stream of one-way
// increments and starts again over the same state. What its isolate had accepted and not yet
// flushed is lost (the documented window); every count a flush applied survives, and no key
// ends above what was sent to it.
import { type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { freePort } from "../scripts/child-process.mjs";
import { freshNamespace } from "./service";
import { startWorkerd } from "./workerd";

const VARS = { EDGECOUNT_ONE_WAY_INTERVAL_MS: "200" };
/** The running runtime's address: each start takes a port free at the time. */
let BASE = "";
const dir = mkdtempSync(join(tmpdir(), "edgecount-one-way-crash-"));
let runtime: ChildProcess | undefined;
afterAll(() => {
  runtime?.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

async function storedValue(ns: string, key: string): Promise<number> {
  const response = await fetch(
    `${BASE}/v1/counters/${ns}/${key}?consistency=strong`,
    { headers: { accept: "text/plain" } },
  );
  expect(response.status).toBe(200);
  return Number(await response.text());
}

it("loses at most what was accepted and not flushed, and never counts more than was sent", async () => {
  const ns = freshNamespace("oneway-crash");
  const keys = ["a", "b", "c", "d", "e"];
  const attempted = new Map(keys.map((k) => [k, 0]));
  const accepted = new Map(keys.map((k) => [k, 0]));
  const start = async () => {
    const started = await startWorkerd(await freePort(), dir, VARS);
    BASE = started.url;
    runtime = started.process;
  };
  await start();

  let running = true;
  let flushed = 0;
  const client = async (worker: number) => {
    for (let i = 0; running; i++) {
      const key = keys[(worker + i) % keys.length];
      attempted.set(key, attempted.get(key)! + 1);
      try {
        const response = await fetch(
          `${BASE}/v1/counters/${ns}/${key}/incr?async=1`,
          { method: "POST" },
        );
        await response.text();
        if (response.status === 202) accepted.set(key, accepted.get(key)! + 1);
      } catch {
        // The runtime died under this request.
      }
    }
  };
  // What the isolate reports applied, read while the stream runs: every one of these was
  // stored by its shard before the flush that carried it was answered.
  const watch = async () => {
    while (running) {
      try {
        const stats = await (await fetch(`${BASE}/v1/stats`)).json();
        flushed = Math.max(flushed, stats.edge.one_way.flushed);
      } catch {
        // The runtime died under this request.
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  };
  const clients = [...Array.from({ length: 16 }, (_, w) => client(w)), watch()];
  // Kill after 1.5 s, and not before more than 100 writes were accepted and a flush was seen
  // applied, however long the machine takes to get there.
  const total = () => [...accepted.values()].reduce((a, b) => a + b, 0);
  const started = Date.now();
  while (total() <= 100 || flushed === 0 || Date.now() - started < 1_500) {
    if (Date.now() - started > 30_000) {
      running = false;
      throw new Error(
        `in 30 s, ${total()} writes accepted and ${flushed} seen flushed, before any kill`,
      );
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  runtime!.kill("SIGKILL");
  await new Promise((r) => setTimeout(r, 200));
  running = false;
  await Promise.all(clients);
  await start();

  let stored = 0;
  let totalAccepted = 0;
  for (const key of keys) {
    const value = await storedValue(ns, key);
    expect(value, key).toBeLessThanOrEqual(attempted.get(key)!);
    stored += value;
    totalAccepted += accepted.get(key)!;
  }
  console.log(
    `accepted ${totalAccepted}, flushed (last seen) ${flushed}, stored ${stored} after the kill`,
  );
  expect(totalAccepted).toBeGreaterThan(100); // the kill landed mid-stream
  expect(flushed).toBeGreaterThan(0); // flushes had happened before it
  expect(stored).toBeGreaterThanOrEqual(flushed);
  expect(stored).toBeLessThanOrEqual(totalAccepted + 16); // at most one unanswered per client
});
