// Rate limits (a token bucket per token, IPv4 address or IPv6 /64: 429 with Retry-After and
// RateLimit-*) and shard overload (503 shard_overloaded with Retry-After), each refusing
// without applying.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

const WRITER = "limits-writer-1";
const OTHER_WRITER = "limits-writer-2";
const BATCH_WRITER = "limits-writer-3";
const BURST_BATCH_WRITER = "limits-writer-4";
const BIG_BATCH_WRITER = "limits-writer-5";

describe("rate limits", () => {
  let service: Service;
  beforeAll(async () => {
    // One request per second, five saved up: enough to see the bucket empty within a test.
    service = await startService({
      vars: {
        EDGECOUNT_RATE_LIMIT: "1",
        EDGECOUNT_RATE_BURST: "5",
        EDGECOUNT_WRITE_TOKENS: [
          WRITER,
          OTHER_WRITER,
          BATCH_WRITER,
          BURST_BATCH_WRITER,
          BIG_BATCH_WRITER,
        ].join(","),
      },
    });
  });
  afterAll(() => service.stop());

  const incr = (ns: string, headers: Record<string, string>) =>
    service.fetch(`/v1/counters/${ns}/k/incr`, { method: "POST", headers });
  const batchOf = (n: number, ns: string, token: string) =>
    service.fetch("/v1/batch", {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${token}`,
      },
      body: JSON.stringify({
        ops: Array.from({ length: n }, () => ({ op: "incr", ns, key: "k" })),
      }),
    });
  // Reads the count from an address of its own, so checking costs no test's bucket.
  let readers = 0;
  const count = async (ns: string) => {
    const answer = await service.fetch(`/v1/counters/${ns}/k`, {
      headers: { "cf-connecting-ip": `198.51.100.${++readers}` },
    });
    return (await answer.json()).value;
  };
  const expectRateLimited = async (answer: Response) => {
    expect(answer.status).toBe(429);
    expect((await answer.json()).error.code).toBe("rate_limited");
    expect(Number(answer.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(answer.headers.get("ratelimit-limit")).toBe("5");
    expect(answer.headers.get("ratelimit-remaining")).toBe("0");
    expect(
      Number(answer.headers.get("ratelimit-reset")),
    ).toBeGreaterThanOrEqual(1);
  };

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

  it("passes a batch of the burst's size, or larger, on a full bucket and charges it the burst", async () => {
    for (const [token, size] of [
      [BURST_BATCH_WRITER, 5],
      [BIG_BATCH_WRITER, 8],
    ] as const) {
      const ns = freshNamespace("rl-big-batch");
      const batch = await batchOf(size, ns, token);
      expect(batch.status).toBe(200);
      expect(batch.headers.get("ratelimit-remaining")).toBe("0");
      const { results } = await batch.json();
      expect(results.map((r: { value: number }) => r.value)).toEqual(
        Array.from({ length: size }, (_, i) => i + 1),
      );
      // It took the whole bucket: the token's next request waits.
      await expectRateLimited(
        await incr(ns, { authorization: `Bearer ${token}` }),
      );
      expect(await count(ns)).toBe(size);
    }
  });

  it("charges refused authentications to the address until they get 429 with Retry-After and RateLimit-*", async () => {
    const ns = freshNamespace("rl-auth");
    const guesser = { "cf-connecting-ip": "192.0.2.40" };
    const remaining: string[] = [];
    for (let i = 0; i < 5; i++) {
      const refused = await incr(ns, {
        ...guesser,
        authorization: `Bearer guess-${i}`,
      });
      expect(refused.status).toBe(401);
      remaining.push(refused.headers.get("ratelimit-remaining") ?? "");
    }
    expect(remaining).toEqual(["4", "3", "2", "1", "0"]);
    await expectRateLimited(await incr(ns, guesser));
    await expectRateLimited(
      await incr(ns, { ...guesser, authorization: "Bearer guess-5" }),
    );
    // Another address still gets its own answer, and nothing was applied.
    expect((await incr(ns, { "cf-connecting-ip": "192.0.2.41" })).status).toBe(
      401,
    );
    expect(await count(ns)).toBe(0);
  });

  it("counts the addresses of one IPv6 /64 as one client, and an IPv4-mapped address as its IPv4 address", async () => {
    const ns = freshNamespace("rl-v6");
    const read = (address: string) =>
      service.fetch(`/v1/counters/${ns}/k`, {
        headers: { "cf-connecting-ip": address },
      });
    for (const address of [
      "2001:db8:a:b::1",
      "2001:db8:a:b::2",
      "2001:db8:a:b:ffff:ffff:ffff:ffff",
      "2001:db8:a:b:1234::5",
      "2001:db8:a:b::6",
    ]) {
      expect((await read(address)).status).toBe(200);
    }
    await expectRateLimited(await read("2001:db8:a:b::7"));
    expect((await read("2001:db8:a:c::1")).status).toBe(200);
    for (let i = 0; i < 5; i++) {
      expect((await read("192.0.2.50")).status).toBe(200);
    }
    await expectRateLimited(await read("::ffff:192.0.2.50"));
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
