// A change of the shard count through SIGKILLs: the runtime is killed again and again while
// shards hand keys over in the background and writers take keys over by writing to them, and
// is started again over the same state each time. Every increment is sent with an
// Idempotency-Key and those whose answer was lost are sent again, so at the end every counter
// must be exact (none lost, none doubled) and every key stored in exactly one shard.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { freePort } from "../scripts/child-process.mjs";
import { startWorkerd, type Runtime } from "./workerd";

const dir = mkdtempSync(join(tmpdir(), "edgecount-migration-crash-"));
let runtime: Runtime | undefined;
afterAll(() => {
  runtime?.process.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

const NS = "moving";
const KEYS = 5000;
const key = (i: number) => `key-${i}`;
// Ten keys per alarm: the hand-overs take long enough for kills to land among them.
const GROWING = {
  EDGECOUNT_SHARDS: "7",
  EDGECOUNT_SHARDS_FROM: "4",
  EDGECOUNT_HAND_OVER_KEYS: "10",
};

async function batch(ops: object[]): Promise<{ value?: number }[]> {
  const results = [];
  for (let i = 0; i < ops.length; i += 1000) {
    const response = await fetch(`${runtime!.url}/v1/batch`, {
      method: "POST",
      body: JSON.stringify({ ops: ops.slice(i, i + 1000) }),
    });
    expect(response.status).toBe(200);
    results.push(...(await response.json()).results);
  }
  return results;
}

async function totals(): Promise<{
  keys_to_move: number;
  stored_counters: number;
}> {
  const response = await fetch(`${runtime!.url}/v1/stats`);
  expect(response.status).toBe(200);
  return (await response.json()).totals;
}

async function restart(vars: Record<string, string>): Promise<void> {
  runtime?.process.kill("SIGKILL");
  // Each start takes a port free at the time.
  runtime = await startWorkerd(await freePort(), dir, vars);
}

it("loses and doubles nothing when the runtime is killed during hand-overs and take-overs", async () => {
  const expected = Array.from({ length: KEYS }, (_, i) => (i % 7) + 1);
  await restart({ EDGECOUNT_SHARDS: "4" });
  await batch(
    expected.map((by, i) => ({ op: "incr", ns: NS, key: key(i), by })),
  );

  await restart(GROWING);
  const initial = (await totals()).keys_to_move;
  expect(initial).toBeGreaterThan(KEYS / 10);

  // Writers whose every increment carries its own Idempotency-Key; an increment whose answer
  // was lost is kept and sent again once the runtime is back.
  const unanswered: { i: number; id: string }[] = [];
  let running = true;
  const send = async (i: number, id: string) => {
    const response = await fetch(
      `${runtime!.url}/v1/counters/${NS}/${key(i)}/incr`,
      {
        method: "POST",
        headers: { "idempotency-key": id },
      },
    );
    await response.text();
    return response.status === 200;
  };
  const writer = async (w: number) => {
    for (let n = 0; running; n++) {
      const i = Math.floor(Math.random() * KEYS);
      const id = `w${w}-${n}`;
      expected[i] += 1;
      try {
        if (!(await send(i, id))) unanswered.push({ i, id });
      } catch {
        unanswered.push({ i, id });
      }
    }
  };
  const writing = Array.from({ length: 8 }, (_, w) => writer(w));

  // Kill the runtime again and again, soon after each start: the alarms' hand-overs and the
  // writers' take-overs are cut short wherever they are. Keys left to move are read just after
  // each start (which is also what sets the hand-overs going again), and each kill waits until
  // some have moved since, however long the machine takes for that.
  const leftAfterKill: number[] = [];
  for (let kill = 0; kill < 5; kill++) {
    const atStart = leftAfterKill.at(-1) ?? initial;
    const started = Date.now();
    await new Promise((r) => setTimeout(r, 40 + 30 * kill));
    for (let left = atStart; left >= atStart && left > 0;) {
      if (Date.now() - started > 30_000)
        throw new Error(`no key moved in 30 s after start ${kill + 1}`);
      left = (await totals()).keys_to_move;
      if (left >= atStart) await new Promise((r) => setTimeout(r, 10));
    }
    await restart(GROWING);
    leftAfterKill.push((await totals()).keys_to_move);
  }
  running = false;
  await Promise.all(writing);
  // A kill landed in the middle: keys had moved, and keys were left to move.
  expect(leftAfterKill.some((left) => left > 0 && left < initial)).toBe(true);

  for (const { i, id } of unanswered) {
    expect(await send(i, id), `${key(i)} ${id}`).toBe(true);
  }
  let left = -1;
  for (let wait = 0; wait < 600 && left !== 0; wait++) {
    left = (await totals()).keys_to_move;
    if (left !== 0) await new Promise((r) => setTimeout(r, 100));
  }
  expect(left).toBe(0);
  expect((await totals()).stored_counters).toBe(KEYS);
  const reads = Array.from({ length: KEYS }, (_, i) => ({
    op: "get",
    ns: NS,
    key: key(i),
  }));
  expect((await batch(reads)).map((r) => r.value)).toEqual(expected);
  console.log(
    `keys to move: ${initial} at first, ${leftAfterKill.join(", ")} after each kill; ` +
      `${unanswered.length} increments resent after a kill`,
  );
}, 180_000);
