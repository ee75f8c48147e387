// Crash safety: kill the runtime with SIGKILL in the middle of a stream of increments, start it
// again over the same state, and check every counter against Jepsen's counter bounds: at least
// every acknowledged increment, at most every attempted one.
import { type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { freePort } from "../scripts/child-process.mjs";
import { freshNamespace } from "./service";
import { startWorkerd } from "./workerd";

const dir = mkdtempSync(join(tmpdir(), "edgecount-crash-"));
let runtime: ChildProcess | undefined;
/** The running runtime's address: each start takes a port free at the time. */
let BASE = "";
afterAll(() => {
  runtime?.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

/** Starts `workerd serve` over `dir`'s state. */
async function startRuntime(): Promise<ChildProcess> {
  const started = await startWorkerd(await freePort(), dir);
  BASE = started.url;
  return started.process;
}

/** Lets `clients` run for 1.5 s, and on until `answered()` reaches `answers` (however long the
 * machine takes to get there), kills the runtime with SIGKILL under them, stops them, starts
 * it again. */
async function killMidStream(
  clients: Promise<void>[],
  stop: () => void,
  answered: () => number,
  answers = 200,
): Promise<void> {
  const started = Date.now();
  const deadline = started + 30_000;
  while (answered() < answers || Date.now() - started < 1_500) {
    if (Date.now() > deadline) {
      stop();
      throw new Error(`${answered()} answers in 30 s, before any kill`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  runtime!.kill("SIGKILL");
  await new Promise((r) => setTimeout(r, 200));
  stop();
  await Promise.all(clients);
  runtime = await startRuntime();
}

/** A counter's value as the shard holds it. */
async function storedValue(ns: string, key: string): Promise<number> {
  const response = await fetch(
    `${BASE}/v1/counters/${ns}/${key}?consistency=strong`,
    {
      headers: { accept: "text/plain" },
    },
  );
  return Number(await response.text());
}

it("keeps every acknowledged increment through a SIGKILL, and invents none", async () => {
  mkdirSync(join(dir, "state"), { recursive: true });
  const ns = freshNamespace("crash");
  const keys = ["a", "b", "c", "d", "e"];
  const attempted = new Map(keys.map((k) => [k, 0]));
  const acknowledged = new Map(keys.map((k) => [k, 0]));
  runtime = await startRuntime();

  let running = true;
  const client = async (worker: number) => {
    for (let i = 0; running; i++) {
      const key = keys[(worker + i) % keys.length];
      attempted.set(key, attempted.get(key)! + 1);
      try {
        const response = await fetch(`${BASE}/v1/counters/${ns}/${key}/incr`, {
          method: "POST",
        });
        if (response.status === 200) {
          await response.text();
          acknowledged.set(key, acknowledged.get(key)! + 1);
        }
      } catch {
        // The runtime died under this request: attempted, not acknowledged.
      }
    }
  };
  const clients = Array.from({ length: 16 }, (_, w) => client(w));
  const total = (counts: Map<string, number>) =>
    [...counts.values()].reduce((a, b) => a + b, 0);
  await killMidStream(
    clients,
    () => (running = false),
    () => total(acknowledged),
  );
  let totalAcknowledged = 0;
  for (const key of keys) {
    const value = await storedValue(ns, key);
    expect(value, key).toBeGreaterThanOrEqual(acknowledged.get(key)!);
    expect(value, key).toBeLessThanOrEqual(attempted.get(key)!);
    totalAcknowledged += acknowledged.get(key)!;
    console.log(
      `${key}: acknowledged ${acknowledged.get(key)} <= stored ${value} <= attempted ${attempted.get(key)}`,
    );
  }
  expect(totalAcknowledged).toBeGreaterThanOrEqual(200); // the kill landed mid-stream
});

it("with idempotency keys and retries, counts every distinct increment exactly once", async () => {
  mkdirSync(join(dir, "state"), { recursive: true });
  const ns = freshNamespace("exact");
  const keys = ["a", "b", "c"];
  const pending: { key: string; id: string }[] = [];
  const issued = new Map(keys.map((k) => [k, 0]));
  runtime?.kill("SIGKILL");
  runtime = await startRuntime();

  let answered = 0;
  const send = async (key: string, id: string) => {
    const response = await fetch(`${BASE}/v1/counters/${ns}/${key}/incr`, {
      method: "POST",
      headers: { "idempotency-key": id },
    });
    await response.text();
    if (response.status === 200) answered++;
    return response.status === 200;
  };
  let running = true;
  const client = async (worker: number) => {
    for (let i = 0; running; i++) {
      const key = keys[(worker + i) % keys.length];
      const id = `w${worker}-op${i}`;
      issued.set(key, issued.get(key)! + 1);
      try {
        if (!(await send(key, id))) pending.push({ key, id });
      } catch {
        pending.push({ key, id }); // outcome unknown: retried below with the same key
      }
    }
  };
  const clients = Array.from({ length: 12 }, (_, w) => client(w));
  await killMidStream(
    clients,
    () => (running = false),
    () => answered,
  );
  for (const { key, id } of pending) {
    expect(await send(key, id), `${key} ${id}`).toBe(true);
  }
  for (const key of keys) {
    expect(await storedValue(ns, key), key).toBe(issued.get(key));
  }
  console.log(
    `${[...issued.values()].reduce((a, b) => a + b)} distinct increments, ${pending.length} retried after the kill`,
  );
});
