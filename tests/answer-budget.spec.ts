// Answers have a byte budget: a batch of reads cannot make the service build an answer of
// any size, and a write in a batch is never reported as failed because of what reads beside
// it returned.
import { afterAll, beforeAll, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

const MIB = 1024 * 1024;
/** `MAX_ANSWER_BYTES` in core/src/shard/answer_budget.rs. */
const ANSWER_BUDGET = 8 * MIB;

let service: Service;
beforeAll(async () => {
  service = await startService();
});
afterAll(() => service.stop());

async function putBigEntry(ns: string, key: string): Promise<void> {
  const response = await service.fetch(`/v1/cache/${ns}/${key}`, {
    method: "PUT",
    headers: { "content-type": "text/plain" },
    body: "a".repeat(MIB),
  });
  expect(response.status).toBe(204);
}

async function batch(ops: object[]) {
  const response = await service.fetch("/v1/batch", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ops }),
  });
  expect(response.status).toBe(200);
  const text = await response.text();
  return { bytes: text.length, results: JSON.parse(text).results as any[] };
}

it("a batch of reads answers at most the budget, the reads past it payload_too_large", async () => {
  const ns = freshNamespace("budget");
  await putBigEntry(ns, "big");
  const { bytes, results } = await batch(
    Array.from({ length: 80 }, () => ({ op: "cache_get", ns, key: "big" })),
  );
  expect(bytes).toBeLessThanOrEqual(ANSWER_BUDGET + 64 * 1024);
  const read = results.filter((r) => r.value !== undefined);
  const refused = results.filter((r) => r.error?.code === "payload_too_large");
  expect(read.length).toBeGreaterThanOrEqual(1);
  expect(read[0].value).toHaveLength(MIB);
  expect(read.length + refused.length).toBe(80);
  // Refusals come after the reads that fit, in request order.
  expect(results.findIndex((r) => r.error)).toBe(read.length);
});

it("an increment batched with reads past the RPC limit is applied once and reported applied", async () => {
  const ns = freshNamespace("applied");
  // The counter and the entry share a name, so they share a shard and one shard call, whose
  // answer without a budget would be about 55 MB, past the runtime's 32 MiB RPC limit.
  await putBigEntry(ns, "big");
  const ops = [
    { op: "incr", ns, key: "big" },
    ...Array.from({ length: 40 }, () => ({ op: "cache_get", ns, key: "big" })),
  ];
  for (const expected of [1, 2, 3]) {
    const { results } = await batch(ops);
    expect(results[0]).toEqual({ value: expected, exists: true });
    expect(results.at(-1).error.code).toBe("payload_too_large");
  }
});

it("an entry exactly filling what one shard may answer still comes back whole", async () => {
  // One 1 MiB entry per shard across many shards: each shard's share of the budget always
  // holds at least one entry of the largest size.
  const ns = freshNamespace("shares");
  const keys = Array.from({ length: 6 }, (_, i) => `e${i}`);
  for (const key of keys) await putBigEntry(ns, key);
  const { bytes, results } = await batch(
    keys.map((key) => ({ op: "cache_get", ns, key })),
  );
  expect(results.every((r) => r.value?.length === MIB)).toBe(true);
  expect(bytes).toBeLessThanOrEqual(ANSWER_BUDGET);
});
