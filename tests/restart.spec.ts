// Acknowledged writes survive a restart of the runtime: a new workerd over the same state; and
// a restarted shard loads no more cache entries than its bounds, deleting the older ones, and
// none of them until a cache op needs them.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import {
  cacheEntryCharge,
  freshNamespace,
  startService,
  type Service,
} from "./service";

const persistDir = mkdtempSync(join(tmpdir(), "edgecount-restart-"));
afterAll(() => rmSync(persistDir, { recursive: true, force: true }));

it("keeps every acknowledged counter write and cache entry across a restart", async () => {
  const ns = freshNamespace("durable");
  const first = await startService({ persistDir });
  const keys = Array.from({ length: 40 }, (_, i) => `key-${i}`);
  await Promise.all(
    keys.map(async (key, i) => {
      const response = await first.fetch(
        `/v1/counters/${ns}/${key}/incr?by=${i + 1}`,
        {
          method: "POST",
        },
      );
      expect(response.status).toBe(200);
    }),
  );
  await first.fetch(`/v1/counters/${ns}/big`, {
    method: "PUT",
    body: '{"value":-9223372036854775808}',
  });
  await first.fetch(`/v1/counters/${ns}/key-0`, { method: "DELETE" });
  // A counter with rules (CountAPI's create) and one with a time to live: after the restart
  // they come back through the shard's read of many counters at once (a batch), rules and all.
  await first.fetch(
    `/create?namespace=${ns}&key=ruled&value=5&update_lowerbound=-2&update_upperbound=10`,
  );
  await first.fetch(`/v1/counters/${ns}/lasting/incr?by=7&ttl=3600`, {
    method: "POST",
  });
  const ruledInfo = await (await first.fetch(`/info/${ns}/ruled`)).json();
  const blob = new Uint8Array([9, 8, 7, 0, 255]);
  const put = await first.fetch(`/v1/cache/${ns}/blob`, {
    method: "PUT",
    headers: { "content-type": "application/x-blob" },
    body: blob,
  });
  expect(put.status).toBe(204);
  await first.stop();

  const second = await startService({ persistDir });
  try {
    const read = [...keys, "big", "ruled", "lasting"];
    const batch = await second.fetch("/v1/batch", {
      method: "POST",
      body: JSON.stringify({
        ops: read.map((key) => ({ op: "get", ns, key })),
      }),
    });
    expect(batch.status).toBe(200);
    // Values as text: the smallest i64 is no exact JavaScript number.
    const values = [...(await batch.text()).matchAll(/"value":(-?\d+)/g)];
    expect(values.map((match) => match[1])).toEqual([
      ...keys.map((_, i) => (i === 0 ? "0" : String(i + 1))),
      "-9223372036854775808",
      "5",
      "7",
    ]);
    // What the batch read: its rules, creation time and time to live too.
    const info = await (await second.fetch(`/info/${ns}/ruled`)).json();
    expect(info.ttl).toBeGreaterThan(0);
    expect(info).toEqual({ ...ruledInfo, ttl: info.ttl });
    const outside = await second.fetch(`/update/${ns}/ruled?amount=11`);
    expect(outside.status).toBe(403);
    for (const [i, key] of keys.entries()) {
      expect(await second.value(ns, key)).toBe(i === 0 ? 0n : BigInt(i + 1));
    }
    expect(await second.value(ns, "big")).toBe(-9223372036854775808n);
    const gone = await second.fetch(`/v1/counters/${ns}/key-0`);
    expect((await gone.json()).exists).toBe(false);
    const entry = await second.fetch(`/v1/cache/${ns}/blob`);
    expect(entry.headers.get("content-type")).toBe("application/x-blob");
    expect(new Uint8Array(await entry.arrayBuffer())).toEqual(blob);
  } finally {
    await second.stop();
  }
});

it("restarts a shard with at most its cache bounds, the newest entries, and deletes the rest", async () => {
  const dir = mkdtempSync(join(tmpdir(), "edgecount-restart-bounds-"));
  const ns = freshNamespace("bounded");
  const start = (vars: Record<string, string> = {}) =>
    startService({ persistDir: dir, vars: { EDGECOUNT_SHARDS: "1", ...vars } });
  const keys = Array.from({ length: 30 }, (_, i) => `e${i + 10}`); // one length: one charge
  const shardStats = async (service: Service) =>
    (await (await service.fetch("/v1/stats")).json()).shards[0];
  const live = async (service: Service) => {
    const found = [];
    for (const key of keys) {
      const read = await service.fetch(`/v1/cache/${ns}/${key}`);
      if (read.status === 200) found.push(key);
    }
    return found;
  };
  try {
    const first = await start();
    for (const key of keys) {
      const put = await first.fetch(`/v1/cache/${ns}/${key}`, {
        method: "PUT",
        headers: { "content-type": "text/plain" },
        body: key,
      });
      expect(put.status).toBe(204);
      // Entries written in one millisecond have no order between them.
      await new Promise((resolve) => setTimeout(resolve, 3));
    }
    expect((await shardStats(first)).cache_entries).toBe(30);
    await first.stop();

    // A restarted shard that serves a counter reads none of the entries' rows: the index is
    // rebuilt when a cache op first needs it (the stats count storage, their rows uncounted).
    // What it reads beside them (its schema, the counter) is what a shard without entries
    // reads on the same path.
    const restartedCounting = async (persistDir: string, key = "hits") => {
      const service = await startService({
        persistDir,
        vars: { EDGECOUNT_SHARDS: "1" },
      });
      try {
        const incr = await service.fetch(`/v1/counters/${ns}/${key}/incr`, {
          method: "POST",
        });
        expect(incr.status).toBe(200);
        return await shardStats(service);
      } finally {
        await service.stop();
      }
    };
    const emptyDir = mkdtempSync(join(tmpdir(), "edgecount-restart-empty-"));
    try {
      // Made once, then restarted: its count of a new key reads what the other's does.
      await restartedCounting(emptyDir, "made");
      const withoutEntries = await restartedCounting(emptyDir);
      const stats = await restartedCounting(dir);
      expect(stats.rows_read - withoutEntries.rows_read).toBeLessThan(
        keys.length,
      );
      expect(stats.cache_entries).toBe(30);
    } finally {
      rmSync(emptyDir, { recursive: true, force: true });
    }

    const fewer = await start({ EDGECOUNT_SHARD_CACHE_ENTRIES: "10" });
    // An op that changes entries loads the index, and with it applies a lowered bound.
    const changeEntries = async (service: Service) => {
      const deleted = await service.fetch(`/v1/cache/${ns}/absent`, {
        method: "DELETE",
      });
      expect(deleted.status).toBe(200);
    };
    try {
      // Until then the stats count what storage holds, and reads need their own rows alone:
      // 30 reads read about 30 rows, not the 30 entries each time.
      expect((await shardStats(fewer)).cache_entries).toBe(30);
      expect(await live(fewer)).toEqual(keys);
      const afterReads = await shardStats(fewer);
      expect(afterReads).toMatchObject({ cache_entries: 30, evictions: 0 });
      expect(afterReads.rows_read).toBeLessThan(3 * keys.length);
      await changeEntries(fewer);
      expect(await live(fewer)).toEqual(keys.slice(20));
      expect(await shardStats(fewer)).toMatchObject({
        cache_entries: 10,
        evictions: 20,
      });
    } finally {
      await fewer.stop();
    }

    const charge = cacheEntryCharge(ns, keys[0], "text/plain", 3);
    const smaller = await start({
      EDGECOUNT_SHARD_CACHE_BYTES: String(5 * charge),
    });
    try {
      await changeEntries(smaller);
      expect((await smaller.fetch(`/v1/cache/${ns}/${keys[29]}`)).status).toBe(
        200,
      );
      expect(await shardStats(smaller)).toMatchObject({
        cache_entries: 5,
        cache_bytes: 5 * charge,
        evictions: 5,
      });
    } finally {
      await smaller.stop();
    }

    // The rows past the bounds were deleted, not just left unloaded.
    const again = await start();
    try {
      expect((await shardStats(again)).cache_entries).toBe(5);
      expect(await live(again)).toEqual(keys.slice(25));
    } finally {
      await again.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
