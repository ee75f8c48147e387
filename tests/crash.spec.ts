// Crash safety: kill the runtime with SIGKILL in the middle of a stream of increments, start it
// again over the same state, and check every counter against Jepsen's counter bounds: at least
// every acknowledged increment, at most every attempted one.
import { type ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { freshNamespace } from "./service";
import { startWorkerd } from "./workerd";

const PORT = 8797;
const BASE = `http://127.0.0.1:${PORT}`;
const dir = mkdtempSync(join(tmpdir(), "edgecount-crash-"));
let runtime: ChildProcess | undefined;
afterAll(() => {
  runtime?.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

/** Starts `workerd serve` over `dir`'s state. */
async function startRuntime(): Promise<ChildProcess> {
  return (await startWorkerd(PORT, dir)).process;
}

/** Lets `clients` run, kills the runtime with SIGKILL under them, stops them, starts it again. */
async function killMidStream(
  clients: Promise<void>[],
  stop: () => void,
): Promise<void> {
  await new Promise((r) => setTimeout(r, 1_500));
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
  await killMidStream(clients, () => (running = false));
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
  expect(totalAcknowledged).toBeGreaterThan(100); // the kill really landed mid-stream
});

it("with idempotency keys and retries, counts every distinct increment exactly once", async () => {
  mkdirSync(join(dir, "state"), { recursive: true });
  const ns = freshNamespace("exact");
  const keys = ["a", "b", "c"];
  const pending: { key: string; id: string }[] = [];
  const issued = new Map(keys.map((k) => [k, 0]));
  runtime?.kill("SIGKILL");
  runtime = await startRuntime();

  const send = async (key: string, id: string) => {
    const response = await fetch(`${BASE}/v1/counters/${ns}/${key}/incr`, {
      method: "POST",
      headers: { "idempotency-key": id },
    });
    await response.text();
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
  await killMidStream(clients, () => (running = false));
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
