// Rate limits (a token bucket per token or address: 429 with Retry-After and RateLimit-*) and
// shard overload (503 shard_overloaded with Retry-After), each refusing without applying.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

const WRITER = "limits-writer-1";
const OTHER_WRITER = "limits-writer-2";
const BATCH_WRITER = "limits-writer-3";

describe("rate limits", () => {
  let service: Service;
  beforeAll(async () => {
    // One request per second, five saved up: enough to see the bucket empty within a test.
    service = await startService({
      vars: {
        EDGECOUNT_RATE_LIMIT: "1",
        EDGECOUNT_RATE_BURST: "5",
        EDGECOUNT_WRITE_TOKENS: `${WRITER},${OTHER_WRITER},${BATCH_WRITER}`,
      },
    });
  });
  afterAll(() => service.stop());

  const incr = (ns: string, headers: Record<string, string>) =>
    service.fetch(`/v1/counters/${ns}/k/incr`, { method: "POST", headers });

  it("lets a burst through, then answers 429 with Retry-After and RateLimit-* and applies nothing", async () => {
    const ns = freshNamespace("rl");
    const headers = { authorization: `Bearer ${WRITER}` };
    const remaining: string[] = [];
    for (let i = 0; i < 5; i++) {
      const ok = await incr(ns, headers);
      expect(ok.status).toBe(200);
      expect(ok.headers.get("ratelimit-limit")).toBe("5");
      remaining.push(ok.headers.get("ratelimit-remaining") ?? "");
    }
    expect(remaining).toEqual(["4", "3", "2", "1", "0"]);
    const limited = await incr(ns, headers);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("content-type")).toMatch(/^application\/json/);
    expect(Number(limited.headers.get("retry-after"))).toBeGreaterThanOrEqual(
      1,
    );
    expect(limited.headers.get("ratelimit-remaining")).toBe("0");
    expect(
      Number(limited.headers.get("ratelimit-reset")),
    ).toBeGreaterThanOrEqual(1);
    expect((await limited.json()).error.code).toBe("rate_limited");
    expect(limited.headers.get("x-edgecount-shard")).toMatch(/^\d+$/);
    // Another token has its own bucket, and it reads the count: the refused write changed nothing.
    const read = await service.fetch(`/v1/counters/${ns}/k`, {
      headers: { authorization: `Bearer ${OTHER_WRITER}` },
    });
    expect(read.status).toBe(200);
    expect((await read.json()).value).toBe(5);
  });

  it("gives each client address its own bucket, and unknown tokens count as the address", async () => {
    const ns = freshNamespace("rl-ip");
    const a = { "cf-connecting-ip": "192.0.2.10" };
    const b = { "cf-connecting-ip": "192.0.2.11" };
    const reads = (headers: Record<string, string>) =>
      service.fetch(`/v1/counters/${ns}/k`, { headers });
    for (let i = 0; i < 5; i++) expect((await reads(a)).status).toBe(200);
    expect((await reads(a)).status).toBe(429);
    // An invented token does not buy a fresh bucket for the same address.
    const invented = await reads({
      ...a,
      authorization: "Bearer made-up-token-1",
    });
    expect(invented.status).toBe(429);
    expect((await reads(b)).status).toBe(200);
  });

  it("charges a batch one request per op and refuses it whole when they do not fit", async () => {
    const ns = freshNamespace("rl-batch");
    const headers = {
      "content-type": "application/json",
      authorization: `Bearer ${BATCH_WRITER}`,
    };
    const ops = (n: number) =>
      JSON.stringify({
        ops: Array.from({ length: n }, () => ({ op: "incr", ns, key: "k" })),
      });
    const first = await service.fetch("/v1/batch", {
      method: "POST",
      headers,
      body: ops(3),
    });
    expect(first.status).toBe(200);
    expect(first.headers.get("ratelimit-remaining")).toBe("2");
    const { results } = await first.json();
    expect(results.map((r: { value: number }) => r.value)).toEqual([1, 2, 3]);
    const second = await service.fetch("/v1/batch", {
      method: "POST",
      headers,
      body: ops(4),
    });
    expect(second.status).toBe(429);
    expect((await second.json()).error.code).toBe("rate_limited");
    const value = await service.fetch(`/v1/counters/${ns}/k`, {
      headers: { "cf-connecting-ip": "192.0.2.21" },
    });
    expect((await value.json()).value).toBe(3);
  });

  it("never limits health checks or preflights", async () => {
    const headers = { "cf-connecting-ip": "192.0.2.30" };
    for (let i = 0; i < 8; i++) {
      expect((await service.fetch("/v1/health", { headers })).status).toBe(200);
      const preflight = await service.fetch("/v1/batch", {
        method: "OPTIONS",
        headers: { ...headers, origin: "https://example.com" },
      });
      expect(preflight.status).toBe(204);
    }
  });
});

describe("shard overload", () => {
  let service: Service;
  beforeAll(async () => {
    // One shard and a queue of one: concurrent writes overflow it at once.
    service = await startService({
      vars: { EDGECOUNT_SHARDS: "1", EDGECOUNT_SHARD_QUEUE_LIMIT: "1" },
    });
  });
  afterAll(() => service.stop());

  it("sheds ops past the queue limit with 503 shard_overloaded and Retry-After, applying only what it acknowledged", async () => {
    const ns = freshNamespace("overload");
    let acknowledged = 0;
    let shed = 0;
    // Bounded: a few rounds of 40 concurrent increments, until some are shed.
    for (let round = 0; round < 5 && shed === 0; round++) {
      const answers = await Promise.all(
        Array.from({ length: 40 }, () =>
          service.fetch(`/v1/counters/${ns}/k/incr`, { method: "POST" }),
        ),
      );
      for (const answer of answers) {
        if (answer.status === 200) {
          acknowledged++;
        } else {
          expect(answer.status).toBe(503);
          expect(answer.headers.get("retry-after")).toBe("1");
          expect((await answer.json()).error.code).toBe("shard_overloaded");
          shed++;
        }
      }
    }
    expect(shed).toBeGreaterThan(0);
    expect(acknowledged).toBeGreaterThan(0);
    expect(await service.value(ns, "k")).toBe(BigInt(acknowledged));
    const stats = await (await service.fetch("/v1/stats")).json();
    expect(stats.edge.ops_shed_overloaded).toBe(shed);
  });
});
