// Rate limits (a token bucket per token, IPv4 address or IPv6 /64: 429 with Retry-After and
// RateLimit-*) and shard overload (503 shard_overloaded with Retry-After), each refusing
// without applying.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  edgeStats,
  freshNamespace,
  startService,
  untilEdge,
  type Service,
} from "./service";

/** How many times a test of a bucket's exact edges is tried, each time with a fresh client. */
const ATTEMPTS = 5;
/** Write tokens by test and attempt, so every attempt starts with a full bucket of its own. */
const writer = (test: string, attempt: number) =>
  `limits-${test}-writer-${attempt}`;
const WRITER_TESTS = ["burst", "reader", "batch", "burst-batch", "big-batch"];

/**
 * A bucket of one request a second refills one request a second, so how many requests pass
 * is exact only for requests that come within a second of the bucket's first: runs `attempt`
 * (numbered from 0, each with clients of its own) until one run takes less than a second, at
 * most ATTEMPTS times, and answers what that run saw, for the test to check.
 */
async function withinARefill<T>(
  attempt: (n: number) => Promise<T>,
): Promise<T> {
  for (let n = 0; ; n++) {
    const started = Date.now();
    const seen = await attempt(n);
    if (Date.now() - started < 1_000 || n === ATTEMPTS - 1) return seen;
  }
}

/** What a test checks of an answer, read at once (the run is checked after it ends). */
async function answerOf(response: Response) {
  const text = await response.text();
  const header = (name: string) => response.headers.get(name);
  return {
    status: response.status,
    body: text.startsWith("{") ? JSON.parse(text) : text,
    header,
  };
}
type Answer = Awaited<ReturnType<typeof answerOf>>;

describe("rate limits", () => {
  let service: Service;
  beforeAll(async () => {
    // One request per second, five saved up: enough to see the bucket empty within a test.
    service = await startService({
      vars: {
        EDGECOUNT_RATE_LIMIT: "1",
        EDGECOUNT_RATE_BURST: "5",
        EDGECOUNT_WRITE_TOKENS: WRITER_TESTS.flatMap((test) =>
          Array.from({ length: ATTEMPTS }, (_, n) => writer(test, n)),
        ).join(","),
      },
    });
  });
  afterAll(() => service.stop());

  const incr = async (ns: string, headers: Record<string, string>) =>
    answerOf(
      await service.fetch(`/v1/counters/${ns}/k/incr`, {
        method: "POST",
        headers,
      }),
    );
  const batchOf = async (n: number, ns: string, token: string) =>
    answerOf(
      await service.fetch("/v1/batch", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: `Bearer ${token}`,
        },
        body: JSON.stringify({
          ops: Array.from({ length: n }, () => ({ op: "incr", ns, key: "k" })),
        }),
      }),
    );
  const read = async (ns: string, headers: Record<string, string>) =>
    answerOf(await service.fetch(`/v1/counters/${ns}/k`, { headers }));
  // Reads the count from an address of its own, so checking costs no test's bucket.
  let readers = 0;
  const count = async (ns: string) =>
    (await read(ns, { "cf-connecting-ip": `198.51.100.${++readers}` })).body
      .value;
  const expectRateLimited = (answer: Answer) => {
    expect(answer.status).toBe(429);
    expect(answer.body.error.code).toBe("rate_limited");
    expect(Number(answer.header("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(answer.header("ratelimit-limit")).toBe("5");
    expect(answer.header("ratelimit-remaining")).toBe("0");
    expect(Number(answer.header("ratelimit-reset"))).toBeGreaterThanOrEqual(1);
  };

  it("lets a burst through, then answers 429 with Retry-After and RateLimit-* and applies nothing", async () => {
    const { ns, burst, limited } = await withinARefill(async (n) => {
      const ns = freshNamespace("rl");
      const headers = { authorization: `Bearer ${writer("burst", n)}` };
      const burst: Answer[] = [];
      for (let i = 0; i < 5; i++) burst.push(await incr(ns, headers));
      return { ns, burst, limited: await incr(ns, headers) };
    });
    for (const ok of burst) {
      expect(ok.status).toBe(200);
      expect(ok.header("ratelimit-limit")).toBe("5");
    }
    expect(burst.map((ok) => ok.header("ratelimit-remaining"))).toEqual([
      "4",
      "3",
      "2",
      "1",
      "0",
    ]);
    expectRateLimited(limited);
    expect(limited.header("content-type")).toMatch(/^application\/json/);
    expect(limited.header("x-edgecount-shard")).toMatch(/^\d+$/);
    // Another token has its own bucket, and it reads the count: the refused write changed nothing.
    const other = await read(ns, {
      authorization: `Bearer ${writer("reader", 0)}`,
    });
    expect(other.status).toBe(200);
    expect(other.body.value).toBe(5);
  });

  it("gives each client address its own bucket, and unknown tokens count as the address", async () => {
    const ns = freshNamespace("rl-ip");
    const seen = await withinARefill(async (n) => {
      const a = { "cf-connecting-ip": `203.0.113.${n + 1}` };
      const b = { "cf-connecting-ip": `203.0.113.${n + 101}` };
      const burst: Answer[] = [];
      for (let i = 0; i < 5; i++) burst.push(await read(ns, a));
      const limited = await read(ns, a);
      // An invented token does not buy a fresh bucket for the same address.
      const invented = await read(ns, {
        ...a,
        authorization: "Bearer made-up-token-1",
      });
      return { burst, limited, invented, other: await read(ns, b) };
    });
    expect(seen.burst.map((answer) => answer.status)).toEqual([
      200, 200, 200, 200, 200,
    ]);
    expect(seen.limited.status).toBe(429);
    expect(seen.invented.status).toBe(429);
    expect(seen.other.status).toBe(200);
  });

  it("charges a batch one request per op and refuses it whole when they do not fit", async () => {
    const { ns, first, second } = await withinARefill(async (n) => {
      const ns = freshNamespace("rl-batch");
      const token = writer("batch", n);
      return {
        ns,
        first: await batchOf(3, ns, token),
        second: await batchOf(4, ns, token),
      };
    });
    expect(first.status).toBe(200);
    expect(first.header("ratelimit-remaining")).toBe("2");
    expect(first.body.results.map((r: { value: number }) => r.value)).toEqual([
      1, 2, 3,
    ]);
    expect(second.status).toBe(429);
    expect(second.body.error.code).toBe("rate_limited");
    expect(await count(ns)).toBe(3);
  });

  it("passes a batch of the burst's size, or larger, on a full bucket and charges it the burst", async () => {
    for (const [test, size] of [
      ["burst-batch", 5],
      ["big-batch", 8],
    ] as const) {
      const { ns, batch, next } = await withinARefill(async (n) => {
        const ns = freshNamespace("rl-big-batch");
        const token = writer(test, n);
        const batch = await batchOf(size, ns, token);
        // It took the whole bucket: the token's next request waits.
        const next = await incr(ns, { authorization: `Bearer ${token}` });
        return { ns, batch, next };
      });
      expect(batch.status).toBe(200);
      expect(batch.header("ratelimit-remaining")).toBe("0");
      expect(batch.body.results.map((r: { value: number }) => r.value)).toEqual(
        Array.from({ length: size }, (_, i) => i + 1),
      );
      expectRateLimited(next);
      expect(await count(ns)).toBe(size);
    }
  });

  it("charges refused authentications to the address until they get 429 with Retry-After and RateLimit-*", async () => {
    const ns = freshNamespace("rl-auth");
    const seen = await withinARefill(async (n) => {
      const guesser = { "cf-connecting-ip": `192.0.2.${n + 40}` };
      const refused: Answer[] = [];
      for (let i = 0; i < 5; i++) {
        refused.push(
          await incr(ns, { ...guesser, authorization: `Bearer guess-${i}` }),
        );
      }
      return {
        refused,
        bare: await incr(ns, guesser),
        guessing: await incr(ns, {
          ...guesser,
          authorization: "Bearer guess-5",
        }),
        // Another address still gets its own answer.
        other: await incr(ns, { "cf-connecting-ip": `192.0.2.${n + 140}` }),
      };
    });
    expect(seen.refused.map((answer) => answer.status)).toEqual([
      401, 401, 401, 401, 401,
    ]);
    expect(
      seen.refused.map((answer) => answer.header("ratelimit-remaining")),
    ).toEqual(["4", "3", "2", "1", "0"]);
    expectRateLimited(seen.bare);
    expectRateLimited(seen.guessing);
    expect(seen.other.status).toBe(401);
    // Nothing was applied.
    expect(await count(ns)).toBe(0);
  });

  it("counts the addresses of one IPv6 /64 as one client, and an IPv4-mapped address as its IPv4 address", async () => {
    const ns = freshNamespace("rl-v6");
    const fromAddress = (address: string) =>
      read(ns, { "cf-connecting-ip": address });
    const v6 = await withinARefill(async (n) => {
      const net = `2001:db8:${n.toString(16)}`;
      const burst: Answer[] = [];
      for (const address of [
        `${net}:b::1`,
        `${net}:b::2`,
        `${net}:b:ffff:ffff:ffff:ffff`,
        `${net}:b:1234::5`,
        `${net}:b::6`,
      ]) {
        burst.push(await fromAddress(address));
      }
      return {
        burst,
        limited: await fromAddress(`${net}:b::7`),
        otherNet: await fromAddress(`${net}:c::1`),
      };
    });
    expect(v6.burst.map((answer) => answer.status)).toEqual([
      200, 200, 200, 200, 200,
    ]);
    expectRateLimited(v6.limited);
    expect(v6.otherNet.status).toBe(200);
    const v4 = await withinARefill(async (n) => {
      const burst: Answer[] = [];
      for (let i = 0; i < 5; i++)
        burst.push(await fromAddress(`192.0.2.${n + 50}`));
      return { burst, mapped: await fromAddress(`::ffff:192.0.2.${n + 50}`) };
    });
    expect(v4.burst.map((answer) => answer.status)).toEqual([
      200, 200, 200, 200, 200,
    ]);
    expectRateLimited(v4.mapped);
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
    // One shard, at most one call under way to it from the isolate, and the isolate's first
    // shard call sent and then waited on as if its shard never answered
    // (EDGECOUNT_DRILL_STALLED_CALLS): that call holds the one place until its answer's 15 s
    // deadline, so every op that arrives meanwhile is past the bound, however they arrive.
    service = await startService({
      vars: {
        EDGECOUNT_SHARDS: "1",
        EDGECOUNT_SHARD_QUEUE_LIMIT: "1",
        EDGECOUNT_DRILL_STALLED_CALLS: "1",
      },
    });
  });
  afterAll(() => service.stop());

  it("sheds calls past the bound of calls under way with 503 shard_overloaded and Retry-After, and applies none of them", async () => {
    const ns = freshNamespace("overload");
    const incr = () =>
      service.fetch(`/v1/counters/${ns}/k/incr`, { method: "POST" });
    const edge = () => edgeStats(service);
    const stalled = incr();
    stalled.catch(() => {}); // awaited below
    await untilEdge(service, (e) => e.calls_under_way === 1);

    const answers = await Promise.all(Array.from({ length: 40 }, incr));
    for (const answer of answers) {
      expect(answer.status).toBe(503);
      expect(answer.headers.get("retry-after")).toBe("1");
      expect((await answer.json()).error.code).toBe("shard_overloaded");
    }
    expect((await edge()).shard_calls).toBe(1);
    const answer = await stalled;
    expect(answer.status).toBe(503);
    expect((await answer.json()).error.code).toBe("outcome_unknown");
    // The stalled increment was applied ("unknown" was the truth); none of the shed ones.
    const value = await service.fetch(
      `/v1/counters/${ns}/k?consistency=strong`,
      { headers: { accept: "text/plain" } },
    );
    expect(await value.text()).toBe("1");
    const after = await edge();
    expect(after.ops_shed_overloaded).toBe(40);
    expect(after.calls_under_way).toBe(0);
  });
});
