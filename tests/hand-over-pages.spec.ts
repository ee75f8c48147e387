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

  // One key per alarm: the keys move one by one, and the first write to one that has not
  // arrived takes it over.
  const moving = await startService({
    persistDir,
    vars: {
      EDGECOUNT_SHARDS: "2",
      EDGECOUNT_SHARDS_FROM: "1",
      EDGECOUNT_HAND_OVER_KEYS: "1",
    },
    previousDeployment: { EDGECOUNT_SHARDS: "1" },
  });
  try {
    const expectReplays = async (key: string) => {
      const replays = await batch(moving, increments(key));
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
      const other = await moving.fetch(`${path}?by=2`, {
        method: "POST",
        headers,
      });
      expect(other.status).toBe(422);
      expect((await other.json()).error.code).toBe("idempotency_mismatch");
      const previous = await moving.fetchPrevious(path, {
        method: "POST",
        headers,
      });
      expect(previous.status).toBe(200);
      expect(previous.headers.get("idempotent-replayed")).toBe("true");
      expect(await moving.value(NS, key)).toBe(BigInt(RECORDS));
    };
    // Written to right away, by three requests at once: each that finds the key not arrived
    // takes it over, and a page stored twice stores the same records, so every write replays.
    const first = increments(takenOver).slice(0, PAGE);
    const answers = await Promise.all(
      [0, 1, 2].map(() => batch(moving, first)),
    );
    for (const replays of answers)
      expect(replays.filter((r) => !r.replayed)).toEqual([]);
    await expectReplays(takenOver);
    // Left to the alarm, which sends its pages unasked.
    for (let i = 0; i < 600; i++) {
      const stats = await moving.fetch("/v1/stats");
      if ((await stats.json()).totals.keys_to_move === 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await expectReplays(handedOver);
    const totals = (await (await moving.fetch("/v1/stats")).json()).totals;
    expect(totals.keys_to_move).toBe(0);
    expect(totals.stored_counters).toBe(2);
  } finally {
    await moving.stop();
  }
}, 120_000);
