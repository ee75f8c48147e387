// A busy key's idempotency records move with it in pages: keys written with a fresh
// Idempotency-Key for every increment hold more records than one hand-over call carries
// (1,000), so their records travel in several calls before the key itself. After the shard
// count changes, every old Idempotency-Key is still a replay at the key's new home.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { startService, type Service } from "./service";

const persistDir = mkdtempSync(join(tmpdir(), "edgecount-hand-over-pages-"));
afterAll(() => rmSync(persistDir, { recursive: true, force: true }));

const NS = "busy";
/** Records a hand-over call carries at most (`MAX_RECORDS_PER_CALL`). */
const PAGE = 1000;
/** Records of each busy key: several pages, and part of one more. */
const RECORDS = 20 * PAGE + 321;

type Result = { value?: number; replayed?: boolean; error?: { code: string } };

async function batch(service: Service, ops: object[]): Promise<Result[]> {
  const results: Result[] = [];
  for (let i = 0; i < ops.length; i += 1000) {
    const response = await service.fetch("/v1/batch", {
      method: "POST",
      body: JSON.stringify({ ops: ops.slice(i, i + 1000) }),
    });
    expect(response.status).toBe(200);
    results.push(...(await response.json()).results);
  }
  return results;
}

/** `key`'s increments, each under an Idempotency-Key of its own. */
const increments = (key: string) =>
  Array.from({ length: RECORDS }, (_, i) => ({
    op: "incr",
    ns: NS,
    key,
    idempotency_key: `${key}-${i}`,
  }));

/** Two names whose home is shard 1 under two shards: they move when one shard becomes two. */
async function movingKeys(): Promise<string[]> {
  const probe = await startService({ vars: { EDGECOUNT_SHARDS: "2" } });
  const moving = [];
  for (let i = 0; moving.length < 2; i++) {
    const read = await probe.fetch(`/v1/counters/${NS}/key-${i}`);
    await read.text();
    if (read.headers.get("x-edgecount-shard") === "1") moving.push(`key-${i}`);
  }
  await probe.stop();
  return moving;
}

it("moves keys with several pages of records, every old Idempotency-Key still a replay at the new home", async () => {
  const [takenOver, handedOver] = await movingKeys();
  const underOne = await startService({
    persistDir,
    vars: { EDGECOUNT_SHARDS: "1" },
  });
  for (const key of [takenOver, handedOver]) {
    const applied = await batch(underOne, increments(key));
    expect(applied.at(-1)).toEqual({ value: RECORDS, exists: true });
  }
  await underOne.stop();

  // One key per alarm, and none at all while the drill holds the alarms: the first key is
  // taken over by requests before any alarm hands a key over.
  const changeVars = {
    EDGECOUNT_SHARDS: "2",
    EDGECOUNT_SHARDS_FROM: "1",
    EDGECOUNT_HAND_OVER_KEYS: "1",
    EDGECOUNT_STATS_MAX_AGE_MS: "0",
  };
  const previousDeployment = { EDGECOUNT_SHARDS: "1" };
  const expectReplays = async (service: Service, key: string) => {
    const replays = await batch(service, increments(key));
    expect(replays.filter((r) => !r.replayed)).toEqual([]);
    expect(replays.at(-1)).toEqual({
      value: RECORDS,
      exists: true,
      replayed: true,
    });
    // The same Idempotency-Key with another request is still refused, and through the
    // previous deployment (which forwards to the new home) still a replay.
    const path = `/v1/counters/${NS}/${key}/incr`;
    const headers = { "idempotency-key": `${key}-${PAGE + 7}` };
    const other = await service.fetch(`${path}?by=2`, {
      method: "POST",
      headers,
    });
    expect(other.status).toBe(422);
    expect((await other.json()).error.code).toBe("idempotency_mismatch");
    const previous = await service.fetchPrevious(path, {
      method: "POST",
      headers,
    });
    expect(previous.status).toBe(200);
    expect(previous.headers.get("idempotent-replayed")).toBe("true");
    expect(await service.value(NS, key)).toBe(BigInt(RECORDS));
  };
  const stats = async (service: Service) =>
    (await service.fetch("/v1/stats")).json();

  const held = await startService({
    persistDir,
    vars: { ...changeVars, EDGECOUNT_DRILL_HELD_HAND_OVERS: "1" },
    previousDeployment,
  });
  try {
    // Written to right away, by three requests at once: each that finds the key not arrived
    // takes it over, and a page stored twice stores the same records, so every write replays.
    const first = increments(takenOver).slice(0, PAGE);
    const answers = await Promise.all([0, 1, 2].map(() => batch(held, first)));
    for (const replays of answers)
      expect(replays.filter((r) => !r.replayed)).toEqual([]);
    await expectReplays(held, takenOver);
    // Both keys are still stored at their old home: nothing was handed over.
    expect((await stats(held)).totals.keys_to_move).toBe(2);
  } finally {
    await held.stop();
  }

  const moving = await startService({
    persistDir,
    vars: changeVars,
    previousDeployment,
  });
  try {
    // Left to the alarm, which sends the second key's pages unasked. Of the first, which
    // arrived at its new home meanwhile, it sends one page: the new home answers that it holds
    // the key, and the old home deletes its copy without sending the other pages.
    for (let i = 0; i < 600; i++) {
      if ((await stats(moving)).totals.keys_to_move === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const oldHome = (await stats(moving)).shards[0];

    expect(oldHome.keys_to_move).toBe(0);
    // Rows the old home read since it started. Deleting a record reads it twice (as the
    // runtime counts and bills rows), so deleting both keys' reads 4 * RECORDS; sending the
    // second key's records reads RECORDS; counting each key's records to see how it travels,
    // and the one page of the first key, a few pages more. Sending all the first key's pages
    // again would read another RECORDS.
    expect(oldHome.rows_read).toBeGreaterThan(5 * RECORDS);
    expect(oldHome.rows_read).toBeLessThan(5 * RECORDS + 10 * PAGE);
    await expectReplays(moving, handedOver);
    await expectReplays(moving, takenOver);
    const totals = (await stats(moving)).totals;
    expect(totals.keys_to_move).toBe(0);
    expect(totals.stored_counters).toBe(2);
  } finally {
    await moving.stop();
  }
}, 120_000);
