// One-way writes: an increment or decrement sent with `Prefer: respond-async` or `?async=1`
// is answered 202 at once and applied within the flush interval, exactly once, whatever the
// concurrency; refusals happen before the 202; a full buffer answers 503 and grows no further;
// a flush whose answer is lost is sent again and applied once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

const ASYNC = { prefer: "respond-async" };

interface OneWayStats {
  accepted: number;
  refused: number;
  pending: number;
  flushed: number;
  flush_calls: number;
  retried: number;
  dropped: number;
  pending_keys: number;
  pending_bytes: number;
  interval_ms: number;
}

async function oneWayStats(
  service: Service,
  headers: Record<string, string> = {},
): Promise<OneWayStats> {
  const response = await service.fetch("/v1/stats", { headers });
  expect(response.status).toBe(200);
  return (await response.json()).edge.one_way;
}

/** Waits until the isolate holds no accepted write unapplied (at most `ms`). */
async function drained(
  service: Service,
  ms = 10_000,
  headers: Record<string, string> = {},
): Promise<OneWayStats> {
  const deadline = Date.now() + ms;
  for (;;) {
    const stats = await oneWayStats(service, headers);
    if (stats.pending === 0 || Date.now() > deadline) return stats;
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function strongValue(
  service: Service,
  ns: string,
  key: string,
): Promise<bigint> {
  const response = await service.fetch(
    `/v1/counters/${ns}/${key}?consistency=strong`,
    { headers: { accept: "text/plain" } },
  );
  expect(response.status).toBe(200);
  return BigInt(await response.text());
}

describe("one-way writes", () => {
  let service: Service;
  beforeAll(async () => {
    service = await startService({
      vars: { EDGECOUNT_ONE_WAY_INTERVAL_MS: "200" },
    });
  });
  afterAll(() => service.stop());

  it("answers 202 with no value and applies the sum within the interval", async () => {
    const ns = freshNamespace("oneway");
    const header = await service.fetch(`/v1/counters/${ns}/views/incr?by=5`, {
      method: "POST",
      headers: ASYNC,
    });
    expect(header.status).toBe(202);
    expect(header.headers.get("preference-applied")).toBe("respond-async");
    expect(header.headers.get("cache-control")).toBe("no-store");
    expect(await header.json()).toEqual({ status: "accepted" });
    const query = await service.fetch(
      `/v1/counters/${ns}/views/decr?by=2&async=1`,
      { method: "POST" },
    );
    expect(query.status).toBe(202);
    expect(query.headers.get("preference-applied")).toBeNull();
    const stats = await drained(service);
    expect(stats.pending).toBe(0);
    expect(stats.interval_ms).toBe(200);
    expect(await strongValue(service, ns, "views")).toBe(3n);
  });

  it("ends exact after 10,000 one-way increments over 100 keys from 50 callers, in few flush calls", async () => {
    const ns = freshNamespace("oneway-load");
    const { shards } = await (await service.fetch("/v1/health")).json();
    const started = Date.now();
    const before = await oneWayStats(service);
    const keys = Array.from({ length: 100 }, (_, i) => `page-${i}`);
    let next = 0;
    const caller = async () => {
      for (let i = next++; i < 10_000; i = next++) {
        // Half ask by header, half by query, as a beacon would.
        const key = keys[i % keys.length];
        const response =
          i % 2 === 0
            ? await service.fetch(`/v1/counters/${ns}/${key}/incr`, {
                method: "POST",
                headers: ASYNC,
              })
            : await service.fetch(`/v1/counters/${ns}/${key}/incr?async=1`, {
                method: "POST",
              });
        expect(response.status).toBe(202);
      }
    };
    await Promise.all(Array.from({ length: 50 }, caller));
    const after = await drained(service, 20_000);
    const elapsed = Date.now() - started;
    expect(after.pending).toBe(0);
    expect(after.accepted - before.accepted).toBe(10_000);
    expect(after.flushed - before.flushed).toBe(10_000);
    expect(after.dropped).toBe(before.dropped);
    // Sums travel per key and shard: a shard's sums go when the oldest is an interval old,
    // all of them, so at most once an interval, or sooner once 1,000 ops wait (each such flush
    // then carries 1,000 ops or more). However the writes were spread over the run, that bounds
    // the flush calls by its length (resends aside, which a healthy shard never needs).
    const flushCalls = after.flush_calls - before.flush_calls;
    const bound =
      shards * (Math.floor(elapsed / after.interval_ms) + 1) +
      10_000 / 1_000 +
      (after.retried - before.retried);
    console.log(
      `10,000 one-way increments in ${elapsed} ms: ${flushCalls} flush calls (at most ${bound})`,
    );
    expect(flushCalls).toBeLessThanOrEqual(bound);
    for (const key of keys) {
      expect(await strongValue(service, ns, key)).toBe(100n);
    }
  });

  it("writes each flushed key once, and one idempotency record per flush, not per key", async () => {
    // One shard whose sums go once 30 ops wait for it (and not before, the interval being
    // 20 s): the 30 keys' sums go in one flush, whenever each write arrives, so a record per
    // key and a record per flush cannot be mistaken for each other. Each new key also adds 1 to
    // the shard's kept key total (a row written per new key, tests/shard-totals.spec.ts).
    const one = await startService({
      vars: {
        EDGECOUNT_SHARDS: "1",
        EDGECOUNT_ONE_WAY_FLUSH_OPS: "30",
        EDGECOUNT_ONE_WAY_INTERVAL_MS: "20000",
      },
    });
    try {
      const ns = freshNamespace("oneway-rows");
      const rowsWritten = async () =>
        (await (await one.fetch("/v1/stats")).json()).totals.rows_written;
      const rowsBefore = await rowsWritten();
      const keys = Array.from({ length: 30 }, (_, i) => `item-${i}`);
      await Promise.all(
        keys.map(async (key) => {
          const response = await one.fetch(
            `/v1/counters/${ns}/${key}/incr?by=2&async=1`,
            { method: "POST" },
          );
          expect(response.status).toBe(202);
        }),
      );
      const after = await drained(one);
      expect(after.flushed).toBe(30);
      expect(after.retried).toBe(0);
      expect(after.flush_calls).toBe(1);
      expect((await rowsWritten()) - rowsBefore).toBe(30 + 30 + 1);
      for (const key of keys) {
        expect(await strongValue(one, ns, key)).toBe(2n);
      }
    } finally {
      await one.stop();
    }
  });

  it("ignores the preference where it does not apply, and answers as usual", async () => {
    const ns = freshNamespace("oneway-ignored");
    const set = await service.fetch(`/v1/counters/${ns}/k?async=1`, {
      method: "PUT",
      headers: { ...ASYNC, "content-type": "application/json" },
      body: '{"value":7}',
    });
    expect(set.status).toBe(200);
    expect((await set.json()).value).toBe(7);
    const keyed = await service.fetch(`/v1/counters/${ns}/k/incr?async=1`, {
      method: "POST",
      headers: { ...ASYNC, "idempotency-key": "once" },
    });
    expect(keyed.status).toBe(200);
    expect((await keyed.json()).value).toBe(8);
    const read = await service.fetch(`/v1/counters/${ns}/k?async=1`, {
      headers: ASYNC,
    });
    expect(read.status).toBe(200);
    expect((await read.json()).value).toBe(8);
    const put = await service.fetch(`/v1/cache/${ns}/entry`, {
      method: "PUT",
      headers: { ...ASYNC, "content-type": "text/plain" },
      body: "x",
    });
    expect(put.status).toBe(204);
    const deleted = await service.fetch(`/v1/counters/${ns}/k?async=1`, {
      method: "DELETE",
      headers: ASYNC,
    });
    expect(deleted.status).toBe(200);
    expect(await deleted.json()).toEqual({ deleted: true });
  });

  it("refuses bad one-way writes before accepting them, and changes nothing", async () => {
    const ns = freshNamespace("oneway-bad");
    const before = await oneWayStats(service);
    const refusals: [string, number, string][] = [
      [`/v1/counters/${ns}/k/incr?by=x&async=1`, 400, "invalid_number"],
      [`/v1/counters/${ns}/k/incr?async=maybe`, 400, "invalid_parameter"],
      [`/v1/counters/${ns}/k/incr?ttl=0&async=1`, 400, "invalid_ttl"],
      [
        `/v1/counters/${ns}/k/incr?by=1&by=2&async=1`,
        400,
        "duplicate_parameter",
      ],
      [
        `/v1/counters/${ns}/${"x".repeat(300)}/incr?async=1`,
        400,
        "invalid_key",
      ],
    ];
    for (const [path, status, code] of refusals) {
      const response = await service.fetch(path, {
        method: "POST",
        headers: ASYNC,
      });
      expect(response.status, path).toBe(status);
      expect((await response.json()).error.code, path).toBe(code);
    }
    const badKey = await service.fetch(`/v1/counters/${ns}/k/incr?async=1`, {
      method: "POST",
      headers: { "idempotency-key": "bad key with spaces" },
    });
    expect(badKey.status).toBe(400);
    const after = await oneWayStats(service);
    expect(after.accepted).toBe(before.accepted);
    expect(await strongValue(service, ns, "k")).toBe(0n);
  });
});

describe("one-way batches", () => {
  it("accepts the incr and decr ops, refuses the others in their place, and applies the sums", async () => {
    const service = await startService({
      vars: { EDGECOUNT_ONE_WAY_INTERVAL_MS: "100" },
    });
    try {
      const ns = freshNamespace("oneway-batch");
      const ops = [
        { op: "incr", ns, key: "a", by: 5 },
        { op: "decr", ns, key: "a" },
        { op: "get", ns, key: "a" },
        { op: "incr", ns, key: "b", idempotency_key: "needs-an-answer" },
        { op: "set", ns, key: "c", value: 9 },
        { op: "incr", ns: "bad ns", key: "a" },
        ...Array.from({ length: 44 }, () => ({ op: "incr", ns, key: "b" })),
      ];
      const response = await service.fetch("/v1/batch?async=1", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ops }),
      });
      expect(response.status).toBe(202);
      const { results } = await response.json();
      expect(results).toHaveLength(50);
      expect(results.slice(0, 2)).toEqual([
        { accepted: true },
        { accepted: true },
      ]);
      for (const refused of results.slice(2, 5)) {
        expect(refused.error.code).toBe("invalid_op");
      }
      expect(results[5].error.code).toBe("invalid_namespace");
      expect(results.slice(6).every((r: object) => "accepted" in r)).toBe(true);
      const stats = await drained(service);
      expect(stats.flushed).toBe(46);
      expect(await strongValue(service, ns, "a")).toBe(4n);
      expect(await strongValue(service, ns, "b")).toBe(44n);
      expect(await strongValue(service, ns, "c")).toBe(0n);
      // Asked by header, the same.
      const byHeader = await service.fetch("/v1/batch", {
        method: "POST",
        headers: { "content-type": "application/json", ...ASYNC },
        body: JSON.stringify({ ops: [{ op: "incr", ns, key: "a" }] }),
      });
      expect(byHeader.status).toBe(202);
      expect((await byHeader.json()).results).toEqual([{ accepted: true }]);
    } finally {
      await service.stop();
    }
  });
});

describe("one-way writes under tokens", () => {
  it("needs the write token before a 202", async () => {
    const service = await startService({
      vars: { EDGECOUNT_WRITE_TOKENS: "writer-token-0123456789abcdef" },
    });
    try {
      const ns = freshNamespace("oneway-auth");
      const refused = await service.fetch(`/v1/counters/${ns}/k/incr?async=1`, {
        method: "POST",
      });
      expect(refused.status).toBe(401);
      const accepted = await service.fetch(
        `/v1/counters/${ns}/k/incr?async=1`,
        {
          method: "POST",
          headers: { authorization: "Bearer writer-token-0123456789abcdef" },
        },
      );
      expect(accepted.status).toBe(202);
    } finally {
      await service.stop();
    }
  });
});

describe("a full one-way buffer", () => {
  it("answers 503 with Retry-After for a new key, holds no more, and still takes pending keys", async () => {
    // Nothing flushes within the test: the buffer only fills.
    const service = await startService({
      vars: {
        EDGECOUNT_ONE_WAY_KEYS: "5",
        // Once allowed, now past the longest interval that works: taken as 20 s.
        EDGECOUNT_ONE_WAY_INTERVAL_MS: "60000",
      },
    });
    try {
      const ns = freshNamespace("oneway-full");
      for (let i = 0; i < 5; i++) {
        const response = await service.fetch(
          `/v1/counters/${ns}/k${i}/incr?async=1`,
          { method: "POST" },
        );
        expect(response.status).toBe(202);
      }
      const full = await oneWayStats(service);
      expect(full.interval_ms).toBe(20_000);
      expect(full.pending_keys).toBe(5);
      for (let i = 0; i < 200; i++) {
        const refused = await service.fetch(
          `/v1/counters/${ns}/other${i}/incr?async=1`,
          { method: "POST" },
        );
        expect(refused.status).toBe(503);
        expect(refused.headers.get("retry-after")).toBe("1");
        expect((await refused.json()).error.code).toBe("one_way_buffer_full");
      }
      const pendingKey = await service.fetch(
        `/v1/counters/${ns}/k0/incr?async=1`,
        { method: "POST" },
      );
      expect(pendingKey.status).toBe(202);
      // An acknowledged write does not need the buffer.
      const acknowledged = await service.fetch(
        `/v1/counters/${ns}/other0/incr`,
        { method: "POST" },
      );
      expect(acknowledged.status).toBe(200);
      const after = await oneWayStats(service);
      expect(after.refused).toBe(200);
      expect(after.pending_keys).toBe(5);
      expect(after.pending_bytes).toBe(full.pending_bytes);
      expect(after.pending).toBe(6);
    } finally {
      await service.stop();
    }
  });
});

describe("a flush whose answer is lost", () => {
  it("is sent again under the same receipt and applied once", async () => {
    const service = await startService({
      vars: {
        EDGECOUNT_ONE_WAY_INTERVAL_MS: "100",
        EDGECOUNT_DRILL_LOST_FLUSH_ANSWERS: "2",
      },
    });
    try {
      const ns = freshNamespace("oneway-lost");
      for (let i = 0; i < 30; i++) {
        const response = await service.fetch(
          `/v1/counters/${ns}/k${i % 3}/incr?async=1`,
          { method: "POST" },
        );
        expect(response.status).toBe(202);
      }
      const stats = await drained(service, 15_000);
      expect(stats.pending).toBe(0);
      expect(stats.retried).toBe(2);
      expect(stats.flushed).toBe(30);
      expect(stats.dropped).toBe(0);
      for (let i = 0; i < 3; i++) {
        expect(await strongValue(service, ns, `k${i}`)).toBe(10n);
      }
    } finally {
      await service.stop();
    }
  });
});

describe("a one-way sum no counter could hold", () => {
  it("is refused at once with 422 overflow, and what was accepted before it stays pending", async () => {
    // Nothing flushes within the test: the sums only grow.
    const service = await startService({
      vars: { EDGECOUNT_ONE_WAY_INTERVAL_MS: "20000" },
    });
    try {
      const ns = freshNamespace("oneway-overflow");
      const max = "9223372036854775807";
      const send = (by: string) =>
        service.fetch(`/v1/counters/${ns}/big/incr?async=1&by=${by}`, {
          method: "POST",
        });
      expect((await send(max)).status).toBe(202);
      expect((await send(max)).status).toBe(202);
      // 3 x i64::MAX is past what a counter could absorb from i64::MIN up.
      const refused = await send(max);
      expect(refused.status).toBe(422);
      expect((await refused.json()).error.code).toBe("overflow");
      const batch = await service.fetch("/v1/batch?async=1", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          ops: [
            { op: "incr", ns, key: "big", by: Number.MAX_SAFE_INTEGER },
            { op: "incr", ns, key: "small" },
          ],
        }),
      });
      expect(batch.status).toBe(202);
      const { results } = await batch.json();
      expect(results[0].error.code).toBe("overflow");
      expect(results[1]).toEqual({ accepted: true });
      const stats = await oneWayStats(service);
      expect(stats.accepted).toBe(3);
      expect(stats.pending).toBe(3);
      expect(stats.pending_keys).toBe(2);
    } finally {
      await service.stop();
    }
  });
});

describe("one-way writes by an operator", () => {
  it("apply an operator's decrement of an owned counter, as its acknowledged write would", async () => {
    const [WRITER, ADMIN] = ["one-way-writer-token", "one-way-admin-token"];
    const service = await startService({
      vars: {
        EDGECOUNT_ONE_WAY_INTERVAL_MS: "200",
        EDGECOUNT_WRITE_TOKENS: WRITER,
        EDGECOUNT_ADMIN_TOKENS: ADMIN,
      },
    });
    try {
      const ns = freshNamespace("one-way-owned");
      const auth = { authorization: `Bearer ${WRITER}` };
      const created = await service.fetch(
        `/create/${ns}/stars?initializer=100`,
        { method: "POST", headers: auth },
      );
      expect(created.status).toBe(201);
      const single = await service.fetch(
        `/v1/counters/${ns}/stars/decr?by=30&async=1`,
        { method: "POST", headers: auth },
      );
      expect(single.status).toBe(202);
      const batch = await service.fetch("/v1/batch?async=1", {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({
          ops: [{ op: "decr", ns, key: "stars", by: 5 }],
        }),
      });
      expect(batch.status).toBe(202);
      expect((await batch.json()).results).toEqual([{ accepted: true }]);
      const stats = await drained(service, 10_000, {
        authorization: `Bearer ${ADMIN}`,
      });
      expect([stats.pending, stats.dropped]).toEqual([0, 0]);
      expect(
        await (
          await service.fetch(`/v1/counters/${ns}/stars?consistency=strong`, {
            headers: { ...auth, accept: "text/plain" },
          })
        ).text(),
      ).toBe("65");
    } finally {
      await service.stop();
    }
  });
});
