// Concurrent writes to one key: none lost, none applied twice, each caller its own value.
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  exactValue,
  freshNamespace,
  shardOfNewCounter,
  startService,
  type Service,
} from "./service";

let service: Service;
beforeAll(async () => {
  service = await startService();
});
afterAll(() => service.stop());

it("1,000 concurrent increments on one key give exactly 1,000, distinct values, few shard calls", async () => {
  const ns = freshNamespace("race");
  const before = (await (await service.fetch("/v1/stats")).json()).edge;
  const responses = await Promise.all(
    Array.from({ length: 1_000 }, () =>
      service.fetch(`/v1/counters/${ns}/hot/incr`, { method: "POST" }),
    ),
  );
  const values = await Promise.all(
    responses.map(async (response) => {
      expect(response.status).toBe(200);
      return exactValue(await response.text());
    }),
  );
  expect(new Set(values).size).toBe(1_000);
  expect(values.reduce((a, b) => (a > b ? a : b))).toBe(1_000n);
  expect(await service.value(ns, "hot")).toBe(1_000n);
  const after = (await (await service.fetch("/v1/stats")).json()).edge;
  const calls = after.shard_calls - before.shard_calls;
  const ops = after.ops_submitted - before.ops_submitted;
  expect(ops).toBe(1_001); // the increments and the final read
  expect(calls).toBeLessThan(ops / 4); // coalesced: far fewer shard calls than requests
  expect(after.coalesced_ops - before.coalesced_ops).toBe(ops - calls);
  console.log(
    `1,000 increments: ${calls} shard calls (${(ops / calls).toFixed(1)} ops per call)`,
  );
});

it("100 concurrent increments of one key write its row once per shard call, not 100 times", async () => {
  const ns = freshNamespace("rows");
  const { shardStats } = await shardOfNewCounter(service, ns, "hot");
  const before = await shardStats();
  const responses = await Promise.all(
    Array.from({ length: 100 }, () =>
      service.fetch(`/v1/counters/${ns}/hot/incr`, { method: "POST" }),
    ),
  );
  const values = await Promise.all(
    responses.map(async (response) => {
      expect(response.status).toBe(200);
      return exactValue(await response.text());
    }),
  );
  const after = await shardStats();
  // Each caller still gets its own value, and every increment is stored.
  expect(new Set(values).size).toBe(100);
  expect(await service.value(ns, "hot")).toBe(101n);
  // How many calls the increments travel in depends on timing (a busy machine makes smaller
  // groups); that each call writes the key's row once, whatever it carries, does not.
  const calls = after.calls - before.calls;
  const rows = after.rows_written - before.rows_written;
  console.log(
    `100 concurrent increments of one key: ${calls} shard calls, ${rows / 100} rows written per op`,
  );
  expect(rows).toBe(calls);
  expect(calls).toBeLessThanOrEqual(50);
});
