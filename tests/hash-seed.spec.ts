// Every table keyed by client-chosen names hashes under a seed from the runtime's random
// source (core/src/hashing.rs, worker/src/shared/hash_seed.rs). The seed must be handed in
// before the first table is made, in the worker and in each shard, or those tables hash with
// keys anyone can compute from the published Wasm; the worker logs when that happens. So the
// runtime is driven through every kind of table (counters, cache entries, hot keys, one-way
// sums, rate-limit buckets) and its log read for that line.
import { afterAll, expect, it } from "vitest";
import { freshNamespace } from "./service";
import { startScratchWorkerd, type ScratchRuntime } from "./workerd";

let runtime: ScratchRuntime | undefined;
afterAll(() => runtime?.stop());

it("seeds the hash tables before any is made", async () => {
  runtime = await startScratchWorkerd("hash-seed", {
    // Rate limits on (a bucket per client) and a key hot after a few reads.
    EDGECOUNT_RATE_LIMIT: "1000",
    EDGECOUNT_HOT_THRESHOLD: "1",
  });
  const ns = freshNamespace();
  const call = async (path: string, init: RequestInit = {}) => {
    const response = await fetch(`${runtime!.url}${path}`, init);
    await response.arrayBuffer();
    return response.status;
  };
  expect(await call(`/v1/counters/${ns}/views/incr`, { method: "POST" })).toBe(
    200,
  );
  for (let i = 0; i < 20; i++) {
    expect(await call(`/v1/counters/${ns}/views`)).toBe(200);
  }
  expect(
    await call(`/v1/counters/${ns}/pings/incr?async=1`, { method: "POST" }),
  ).toBe(202);
  expect(
    await call(`/v1/cache/${ns}/page`, {
      method: "PUT",
      headers: { "content-type": "text/plain" },
      body: "cached",
    }),
  ).toBe(204);
  expect(await call(`/v1/cache/${ns}/page`)).toBe(200);
  // Once the one-way sum is applied (within a second, waited for up to 15 s), its shard call
  // has made the flush's tables too.
  let pings = 0;
  for (let i = 0; i < 150 && pings !== 1; i++) {
    await new Promise((r) => setTimeout(r, 100));
    const read = await fetch(
      `${runtime.url}/v1/counters/${ns}/pings?consistency=strong`,
    );
    pings = (await read.json()).value;
  }
  expect(pings).toBe(1);
  expect(runtime.log()).not.toContain("before the random seed");
  // And seeded at all: the stats say whether the seed came from the runtime.
  const stats = await (await fetch(`${runtime.url}/v1/stats`)).json();
  expect(stats.edge.hash_seeded).toBe(true);
});
