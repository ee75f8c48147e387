// TTL expiry: expired keys vanish at once, and their storage is reclaimed by the shard's alarm
// even if nobody reads them again.
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  cacheEntryCharge,
  freshNamespace,
  startService,
  type Service,
} from "./service";

let service: Service;
beforeAll(async () => {
  service = await startService({ vars: { EDGECOUNT_SHARDS: "1" } });
});
afterAll(() => service.stop());

const shardStats = async () =>
  (await (await service.fetch("/v1/stats")).json()).shards[0];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it("reclaims expired counters and cache entries without being read", async () => {
  const ns = freshNamespace("reclaim");
  const reclaimedBefore = (await shardStats()).reclaimed;
  const written = Date.now();
  await service.fetch(`/v1/counters/${ns}/short/incr?ttl=1`, {
    method: "POST",
  });
  await service.fetch(`/v1/counters/${ns}/kept/incr`, { method: "POST" });
  const text = { "content-type": "text/plain" };
  await service.fetch(`/v1/cache/${ns}/short?ttl=1`, {
    method: "PUT",
    headers: text,
    body: "x",
  });
  await service.fetch(`/v1/cache/${ns}/kept`, {
    method: "PUT",
    headers: text,
    body: "y",
  });
  const kept = cacheEntryCharge(ns, "kept", "text/plain", 1);
  const before = await shardStats();
  // All four are stored, unless the machine paused past the short ones' second (then the
  // reclaiming below still shows they were).
  if (Date.now() - written < 1_000) {
    expect(before).toMatchObject({
      keys: 2,
      stored_counters: 2,
      cache_entries: 2,
      cache_bytes: kept + cacheEntryCharge(ns, "short", "text/plain", 1),
    });
  }

  // The shard's alarm is due when the first of them lapses; wait for it (a busy machine may
  // run it late), at most 15 s.
  let after = await shardStats();
  for (let i = 0; i < 150 && after.reclaimed - reclaimedBefore < 2; i++) {
    await sleep(100);
    after = await shardStats();
  }
  expect(after).toMatchObject({
    keys: 1,
    stored_counters: 1,
    cache_entries: 1,
    cache_bytes: kept,
  });
  expect(after.reclaimed - reclaimedBefore).toBe(2);
  expect(await service.value(ns, "kept")).toBe(1n);
  expect((await service.fetch(`/v1/cache/${ns}/kept`)).status).toBe(200);
});

it("hides an expired counter at once, before any reclaiming", async () => {
  const ns = freshNamespace("hide");
  await service.fetch(`/v1/counters/${ns}/c`, {
    method: "PUT",
    body: '{"value": 9}',
  });
  await service.fetch(`/v1/counters/${ns}/c/incr?ttl=1`, { method: "POST" });
  await sleep(1_050);
  const response = await service.fetch(`/v1/counters/${ns}/c`);
  expect(await response.json()).toEqual({
    ns,
    key: "c",
    value: 0,
    exists: false,
  });
  const batch = await service.fetch("/v1/batch", {
    method: "POST",
    body: JSON.stringify({ ops: [{ op: "incr", ns, key: "c" }] }),
  });
  expect((await batch.json()).results[0]).toEqual({ value: 1, exists: true });
});

it("writes one row for a write that slides a counter's expiry, however often", async () => {
  // The alarm finds counters by when they are first due, a column written only when the row
  // is created: sliding the expiry on each write must not rewrite an index entry too.
  const ns = freshNamespace("slide");
  const incr = () =>
    service.fetch(`/v1/counters/${ns}/c/incr?ttl=3600`, { method: "POST" });
  expect((await incr()).status).toBe(200);
  const before = await shardStats();
  for (let i = 0; i < 5; i++) expect((await incr()).status).toBe(200);
  const after = await shardStats();
  expect(after.rows_written - before.rows_written).toBe(5);
  expect(await service.value(ns, "c")).toBe(6n);
});

it("reclaims a counter that was given its TTL after it was created", async () => {
  const ns = freshNamespace("late-ttl");
  await service.fetch(`/v1/counters/${ns}/c/incr`, { method: "POST" });
  const before = await shardStats();
  await service.fetch(`/v1/counters/${ns}/c/incr?ttl=1`, { method: "POST" });
  let after = await shardStats();
  for (let i = 0; i < 150 && after.reclaimed === before.reclaimed; i++) {
    await sleep(100);
    after = await shardStats();
  }
  expect(after.reclaimed - before.reclaimed).toBe(1);
  expect(after.stored_counters).toBe(before.stored_counters - 1);
});
