// A visitor of a public page: in a public namespace (EDGECOUNT_PUBLIC_NAMESPACES) anyone may
// count (+1, acknowledged or one-way, a counting badge, compat /hit) and read, and nothing else;
// a count token (EDGECOUNT_COUNT_TOKENS) gives the same right elsewhere. Every other write is
// refused with a 4xx JSON error and changes nothing.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freshNamespace, startService, type Service } from "./service";

const ADMIN = "admin-secret-public-spec";
const COUNTER = "count-only-token";
const PUBLIC = freshNamespace("pub");
const COUNTED = freshNamespace("cnt");
const auth = (token: string) => ({ authorization: `Bearer ${token}` });

let service: Service;
beforeAll(async () => {
  service = await startService({
    vars: {
      EDGECOUNT_ADMIN_TOKENS: ADMIN,
      EDGECOUNT_COUNT_TOKENS: `${COUNTER}@${COUNTED}`,
      EDGECOUNT_PUBLIC_NAMESPACES: `${PUBLIC}`,
      // The per-visitor default (10/s) is tested on a service of its own below.
      EDGECOUNT_RATE_LIMIT: "100000",
    },
  });
});
afterAll(() => service.stop());

/** Every way to change a counter other than counting it, as a visitor might try. */
function writesBeyondCounting(
  ns: string,
  key: string,
): [string, RequestInit][] {
  const json = { "content-type": "application/json" };
  const batch = (op: object) => ({
    method: "POST",
    headers: json,
    body: JSON.stringify({ ops: [{ ns, key, ...op }] }),
  });
  return [
    [
      `/v1/counters/${ns}/${key}`,
      { method: "PUT", headers: json, body: '{"value":0}' },
    ],
    [`/v1/counters/${ns}/${key}`, { method: "DELETE" }],
    [`/v1/counters/${ns}/${key}/incr?by=2`, { method: "POST" }],
    [`/v1/counters/${ns}/${key}/incr?by=-1`, { method: "POST" }],
    [`/v1/counters/${ns}/${key}/incr?ttl=1`, { method: "POST" }],
    [`/v1/counters/${ns}/${key}/decr`, { method: "POST" }],
    [`/v1/counters/${ns}/${key}/decr?async=1`, { method: "POST" }],
    [`/v1/counters/${ns}/${key}/incr?by=5&async=1`, { method: "POST" }],
    [`/v1/cache/${ns}/${key}`, { method: "PUT", body: "x" }],
    [`/v1/batch`, batch({ op: "set", value: 0 })],
    [`/v1/batch`, batch({ op: "delete" })],
    [`/v1/batch`, batch({ op: "incr", by: 2 })],
    [`/v1/batch`, batch({ op: "decr" })],
    [`/v1/batch`, batch({ op: "cache_put", value: "x" })],
    [`/v1/batch?async=1`, batch({ op: "incr", by: 3 })],
    [`/set/${ns}/${key}?value=0`, { method: "GET" }],
    [`/update/${ns}/${key}?amount=-1`, { method: "GET" }],
    [`/create?namespace=${ns}&key=${key}-new`, { method: "GET" }],
  ];
}

/** Why `path` was refused: a 4xx of its own, or its only op's error in a batch. */
async function refusal(path: string, response: Response): Promise<string> {
  const body = await response.json();
  if (path.startsWith("/v1/batch")) return `op ${body.results[0].error?.code}`;
  const refused = response.status >= 400 && response.status < 500;
  return refused
    ? "4xx"
    : `answered ${response.status} ${JSON.stringify(body)}`;
}

describe("a public namespace", () => {
  it("lets anyone count and read, acknowledged, one-way, by badge and by /hit", async () => {
    const key = "home";
    const counted = await service.fetch(`/v1/counters/${PUBLIC}/${key}/incr`, {
      method: "POST",
    });
    expect(counted.status).toBe(200);
    expect((await counted.json()).value).toBe(1);
    const oneWay = await service.fetch(
      `/v1/counters/${PUBLIC}/${key}/incr?async=1`,
      {
        method: "POST",
      },
    );
    expect(oneWay.status).toBe(202);
    const badge = await service.fetch(`/v1/badge/${PUBLIC}/${key}.svg?incr=1`);
    expect(badge.status).toBe(200);
    const hit = await service.fetch(`/hit/${PUBLIC}/${key}`);
    expect(hit.status).toBe(200);
    const inBatch = await service.fetch("/v1/batch", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ ops: [{ op: "incr", ns: PUBLIC, key }] }),
    });
    expect((await inBatch.json()).results[0].value).toBeGreaterThan(1);
    // The one-way count is applied within the flush interval; the rest were acknowledged.
    await expect
      .poll(() => service.value(PUBLIC, key), { timeout: 10_000 })
      .toBe(5n);
  });

  it("refuses every other write without a token, with a 4xx JSON error, changing nothing", async () => {
    const key = "guarded";
    await service.fetch(`/v1/counters/${PUBLIC}/${key}/incr`, {
      method: "POST",
    });
    for (const [path, init] of writesBeyondCounting(PUBLIC, key)) {
      const why = await refusal(path, await service.fetch(path, init));
      expect(why, `${init.method} ${path}`).toMatch(
        /^(4xx|op (unauthorized|forbidden|invalid_op))$/,
      );
    }
    expect(await service.value(PUBLIC, `${key}-new`)).toBe(0n);
    expect(await service.value(PUBLIC, key)).toBe(1n);
    expect((await service.fetch(`/v1/cache/${PUBLIC}/${key}`)).status).toBe(
      404,
    );
  });

  it("is not public outside the namespaces named", async () => {
    const other = freshNamespace("private");
    const response = await service.fetch(`/v1/counters/${other}/home/incr`, {
      method: "POST",
    });
    expect(response.status).toBe(401);
    expect(await service.value(other, "home")).toBe(0n);
  });

  it("keeps the statistics for admin tokens, /stats included", async () => {
    for (const path of ["/v1/stats", "/metrics", "/stats"]) {
      const refused = await service.fetch(path);
      expect(refused.status, path).toBe(401);
      expect(
        (await service.fetch(path, { headers: auth(ADMIN) })).status,
        path,
      ).toBe(200);
    }
  });

  it("keeps the admin token's rights", async () => {
    const set = await service.fetch(`/v1/counters/${PUBLIC}/admin-set`, {
      method: "PUT",
      headers: { "content-type": "application/json", ...auth(ADMIN) },
      body: '{"value":42}',
    });
    expect(set.status).toBe(200);
    expect(await service.value(PUBLIC, "admin-set")).toBe(42n);
  });
});

describe("known bots in a public namespace", () => {
  const GOOGLEBOT =
    "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
  const BROWSER =
    "Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0";
  const bot = { "user-agent": GOOGLEBOT };

  it("are answered with the value and not counted, on every counting route", async () => {
    const key = "crawled";
    const stats = async () =>
      (
        await (
          await service.fetch("/v1/stats", { headers: auth(ADMIN) })
        ).json()
      ).edge.bot_counts_not_counted;
    const before = await stats();
    const oneWayAccepted = async () =>
      (
        await (
          await service.fetch("/v1/stats", { headers: auth(ADMIN) })
        ).json()
      ).edge.one_way.accepted;
    const acceptedBefore = await oneWayAccepted();
    const counted = await service.fetch(`/v1/counters/${PUBLIC}/${key}/incr`, {
      method: "POST",
      headers: { "user-agent": BROWSER },
    });
    expect((await counted.json()).value).toBe(1);
    const answered = await service.fetch(`/v1/counters/${PUBLIC}/${key}/incr`, {
      method: "POST",
      headers: bot,
    });
    expect(answered.status).toBe(200);
    expect((await answered.json()).value).toBe(1);
    const oneWay = await service.fetch(
      `/v1/counters/${PUBLIC}/${key}/incr?async=1`,
      {
        method: "POST",
        headers: bot,
      },
    );
    expect(oneWay.status).toBe(202);
    const badge = await service.fetch(`/v1/badge/${PUBLIC}/${key}.svg?incr=1`, {
      headers: bot,
    });
    expect(await badge.text()).toContain(">1<");
    const hit = await service.fetch(`/hit/${PUBLIC}/${key}`, { headers: bot });
    expect(await hit.json()).toEqual({ value: 1 });
    const body = (async: string) =>
      service.fetch(`/v1/batch${async}`, {
        method: "POST",
        headers: { ...bot, "content-type": "application/json" },
        body: JSON.stringify({ ops: [{ op: "incr", ns: PUBLIC, key }] }),
      });
    expect((await (await body("")).json()).results[0]).toEqual({
      value: 1,
      exists: true,
    });
    expect((await (await body("?async=1")).json()).results[0]).toEqual({
      accepted: true,
    });
    expect(await stats()).toBe(before + 6);
    // The one-way ones were never taken into the buffer, so nothing is left to apply later.
    expect(await oneWayAccepted()).toBe(acceptedBefore);
    expect(await service.value(PUBLIC, key)).toBe(1n);
    // A configured token's counts are the operator's, whatever agent sends them.
    const operator = await service.fetch(`/v1/counters/${PUBLIC}/${key}/incr`, {
      method: "POST",
      headers: { ...bot, ...auth(ADMIN) },
    });
    expect((await operator.json()).value).toBe(2);
  });
});

describe("a public namespace's default per-visitor limit", () => {
  it("is 10 a second with a burst of 20, per address, with RateLimit headers", async () => {
    const limited = await startService({
      vars: {
        EDGECOUNT_ADMIN_TOKENS: ADMIN,
        EDGECOUNT_PUBLIC_NAMESPACES: PUBLIC,
      },
    });
    try {
      const count = (address: string) =>
        limited.fetch(`/v1/counters/${PUBLIC}/limited/incr`, {
          method: "POST",
          headers: { "cf-connecting-ip": address },
        });
      const started = performance.now();
      const first = await count("192.0.2.1");
      expect(first.headers.get("ratelimit-limit")).toBe("20");
      const answers = [first];
      for (let i = 0; i < 39; i++) answers.push(await count("192.0.2.1"));
      const seconds = (performance.now() - started) / 1000;
      const counted = answers.filter((a) => a.status === 200).length;
      // What a bucket of 20 refilled at 10/s lets through, however long the requests took.
      expect(counted).toBeGreaterThanOrEqual(20);
      expect(counted).toBeLessThanOrEqual(20 + Math.ceil(10 * seconds) + 1);
      for (const refused of answers.filter((a) => a.status !== 200)) {
        expect(refused.status).toBe(429);
        expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
      }
      // Another address has a bucket of its own; refused counts changed nothing.
      expect((await count("198.51.100.7")).status).toBe(200);
      expect(await limited.value(PUBLIC, "limited")).toBe(BigInt(counted + 1));
      // A visitor's batch may not hold more ops than the burst, whatever it costs; an admin's may.
      const batch = (headers: Record<string, string>) =>
        limited.fetch("/v1/batch", {
          method: "POST",
          headers: { "content-type": "application/json", ...headers },
          body: JSON.stringify({
            ops: Array.from({ length: 21 }, () => ({
              op: "incr",
              ns: PUBLIC,
              key: "batched",
            })),
          }),
        });
      const refused = await batch({ "cf-connecting-ip": "203.0.113.9" });
      expect(refused.status).toBe(413);
      expect((await refused.json()).error.code).toBe("too_many_ops");
      expect(await limited.value(PUBLIC, "batched")).toBe(0n);
      expect((await batch(auth(ADMIN))).status).toBe(200);
      expect(await limited.value(PUBLIC, "batched")).toBe(21n);
    } finally {
      await limited.stop();
    }
  });
});

describe("a count token's visitors", () => {
  it("each have a bucket of their own, by address, not one shared by the token", async () => {
    const limited = await startService({
      vars: {
        EDGECOUNT_COUNT_TOKENS: `${COUNTER}@${COUNTED}`,
        EDGECOUNT_RATE_LIMIT: "1",
        EDGECOUNT_RATE_BURST: "2",
      },
    });
    try {
      const count = (address: string) =>
        limited.fetch(`/v1/counters/${COUNTED}/shared/incr`, {
          method: "POST",
          headers: { ...auth(COUNTER), "cf-connecting-ip": address },
        });
      for (let i = 0; i < 5; i++) await count("192.0.2.77");
      // However the first address fared, a fresh one starts with a full bucket.
      const fresh = await count("192.0.2.78");
      expect(fresh.status).toBe(200);
      expect(fresh.headers.get("ratelimit-remaining")).toBe("1");
    } finally {
      await limited.stop();
    }
  });
});

describe("/hit by a visitor", () => {
  it("gives a counter that never expires no lifetime", async () => {
    const key = "forever";
    await service.fetch(`/v1/counters/${PUBLIC}/${key}`, {
      method: "PUT",
      headers: { "content-type": "application/json", ...auth(ADMIN) },
      body: '{"value":100}',
    });
    expect((await service.fetch(`/hit/${PUBLIC}/${key}`)).status).toBe(200);
    const info = await (await service.fetch(`/info/${PUBLIC}/${key}`)).json();
    expect(info.ttl).toBe(-1);
    expect(info.value).toBe(101);
  });
});

describe("a count token", () => {
  it("counts in its namespace and is refused every other write, changing nothing", async () => {
    const key = "liked";
    const counted = await service.fetch(`/v1/counters/${COUNTED}/${key}/incr`, {
      method: "POST",
      headers: auth(COUNTER),
    });
    expect(counted.status).toBe(200);
    for (const [path, init] of writesBeyondCounting(COUNTED, key)) {
      const response = await service.fetch(path, {
        ...init,
        headers: {
          ...(init.headers as Record<string, string>),
          ...auth(COUNTER),
        },
      });
      const why = await refusal(path, response);
      expect(why, `${init.method} ${path}`).toMatch(
        /^(4xx|op (forbidden|invalid_op))$/,
      );
    }
    expect(await service.value(COUNTED, `${key}-new`)).toBe(0n);
    expect(await service.value(COUNTED, key)).toBe(1n);
  });

  it("is refused outside its namespace, and without it the namespace is closed", async () => {
    const elsewhere = await service.fetch(`/v1/counters/${PUBLIC}x/k/incr`, {
      method: "POST",
      headers: auth(COUNTER),
    });
    expect(elsewhere.status).toBe(403);
    const without = await service.fetch(`/v1/counters/${COUNTED}/k/incr`, {
      method: "POST",
    });
    expect(without.status).toBe(401);
  });
});

describe("a counter created with an owner key, on an open service", () => {
  let open: Service;
  beforeAll(async () => {
    open = await startService();
  });
  afterAll(() => open.stop());

  it("is set, lowered, deleted or re-created only with its key, whatever the route", async () => {
    const ns = freshNamespace("owned");
    const created = await open.fetch(`/create/${ns}/stars?initializer=10`, {
      method: "POST",
    });
    expect(created.status).toBe(201);
    const { admin_key: adminKey } = await created.json();
    // Anyone may still add to it.
    expect((await open.fetch(`/hit/${ns}/stars`)).status).toBe(200);
    const json = { "content-type": "application/json" };
    const batch = (op: object) => ({
      method: "POST",
      headers: json,
      body: JSON.stringify({ ops: [{ ns, key: "stars", ...op }] }),
    });
    const attempts: [string, RequestInit][] = [
      [
        `/v1/counters/${ns}/stars`,
        { method: "PUT", headers: json, body: '{"value":0}' },
      ],
      [`/v1/counters/${ns}/stars`, { method: "DELETE" }],
      [`/v1/counters/${ns}/stars/decr`, { method: "POST" }],
      [`/v1/counters/${ns}/stars/incr?by=-5`, { method: "POST" }],
      [`/v1/counters/${ns}/stars/incr?ttl=1`, { method: "POST" }],
      [`/update/${ns}/stars?amount=-1`, { method: "GET" }],
      [`/set/${ns}/stars?value=0`, { method: "GET" }],
      [`/v1/batch`, batch({ op: "set", value: 0 })],
      [`/v1/batch`, batch({ op: "delete" })],
      [`/v1/batch`, batch({ op: "decr" })],
      [`/create/${ns}/stars`, { method: "POST" }],
      [`/set/${ns}/stars?value=0&token=not-the-key`, { method: "POST" }],
    ];
    for (const [path, init] of attempts) {
      const why = await refusal(path, await open.fetch(path, init));
      expect(why, `${init.method} ${path}`).toMatch(/^(4xx|op forbidden)$/);
    }
    // A one-way decrement is accepted, then refused by the shard when applied.
    await open.fetch(`/v1/counters/${ns}/stars/decr?async=1`, {
      method: "POST",
    });
    // Wait until the isolate has settled it: refused for good, it is counted as dropped.
    await expect
      .poll(
        async () =>
          (await (await open.fetch("/v1/stats")).json()).edge.one_way.dropped,
        {
          timeout: 15_000,
        },
      )
      .toBe(1);
    expect(await open.value(ns, "stars")).toBe(11n);
    // Counts sent one-way beside a refused decrement or TTL are kept apart from it, and applied.
    const oneWay = (query: string) =>
      open.fetch(`/v1/counters/${ns}/stars/incr?async=1${query}`, {
        method: "POST",
      });
    for (let i = 0; i < 3; i++) await oneWay("");
    await oneWay("&ttl=1");
    await open.fetch(`/v1/counters/${ns}/stars/decr?async=1&by=2`, {
      method: "POST",
    });
    await expect
      .poll(() => open.value(ns, "stars"), { timeout: 15_000 })
      .toBe(14n);
    // The key still works, and nobody was handed a new one.
    const set = await open.fetch(
      `/set/${ns}/stars?value=50&token=${adminKey}`,
      { method: "POST" },
    );
    expect(set.status).toBe(200);
    expect(await open.value(ns, "stars")).toBe(50n);
  });
});
