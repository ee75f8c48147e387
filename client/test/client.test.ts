// Unit tests of the client against a fake fetch: automatic batching and result routing,
// retries and idempotency keys, typed errors, exact big values, and batch splitting.
import { afterEach, describe, expect, it, vi } from "vitest";
import {
  createClient,
  EdgecountError,
  type ClientOptions,
} from "../src/edgecount";
import {
  apiError,
  counterStore,
  fakeFetch,
  json,
  type Handler,
} from "./fake-fetch";
import { mayRetry } from "../src/transport";

const BASE = "https://edgecount.test";

function setup(handler: Handler, options: Partial<ClientOptions> = {}) {
  const fake = fakeFetch(handler);
  const client = createClient({
    baseUrl: BASE,
    fetch: fake.fetch,
    retryBaseMs: 1,
    ...options,
  });
  return { client, sent: fake.sent };
}

/** The rejection of a promise, which must reject with an EdgecountError. */
async function failure(promise: Promise<unknown>): Promise<EdgecountError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(EdgecountError);
  return error as EdgecountError;
}

afterEach(() => {
  vi.useRealTimers();
  vi.restoreAllMocks();
});

describe("automatic batching", () => {
  it("sends the calls of one tick as one batch and routes each result to its caller", async () => {
    const { client, sent } = setup(() =>
      json(
        `{"results":[{"value":3,"exists":true},{"value":0,"exists":false},{"deleted":true},` +
          `{"value":"<b>hi</b>","content_type":"text/html"},` +
          `{"error":{"code":"not_found","message":"No live entry has this key."}},` +
          `{"error":{"code":"overflow","message":"too big"}},{"stored":true},{"value":-4,"exists":true}]}`,
      ),
    );
    const calls = [
      client.incr("pages", "home", 2, { ttl: 60 }),
      client.get("pages", "about"),
      client.del("pages", "old"),
      client.cacheGet("frag", "side"),
      client.cacheGet("frag", "gone"),
      client.set("pages", "big", 9223372036854775807n),
      client.cachePut("frag", "side", "<b>hi</b>", {
        contentType: "text/html",
        ttl: 30,
      }),
      client.decr("pages", "x", 4n),
    ];
    const settled = await Promise.allSettled(calls);
    expect(sent).toHaveLength(1);
    expect(sent[0].method).toBe("POST");
    expect(sent[0].path).toBe("/v1/batch");
    expect(sent[0].headers["content-type"]).toBe("application/json");
    const ops = sent[0].ops;
    expect(ops.map((op) => op.op)).toEqual([
      "incr",
      "get",
      "delete",
      "cache_get",
      "cache_get",
      "set",
      "cache_put",
      "decr",
    ]);
    expect(ops[0]).toMatchObject({ ns: "pages", key: "home", by: 2, ttl: 60 });
    expect(ops[6]).toMatchObject({
      value: "<b>hi</b>",
      content_type: "text/html",
      ttl: 30,
    });
    // Writes carry their own idempotency key, but counts (one row instead of two) and reads
    // (the service refuses it on reads) none.
    const keys = ops.map((op) => op.idempotency_key);
    for (const i of [2, 5, 6]) expect(keys[i]).toMatch(/^[0-9a-f-]{32,36}$/);
    for (const i of [0, 1, 3, 4, 7]) expect(keys[i]).toBeUndefined();
    expect(new Set(keys.filter(Boolean)).size).toBe(3);
    // The set's value went out with every digit.
    expect(sent[0].body).toContain('"value":9223372036854775807');

    const [incr, get, del, hit, miss, set, put, decr] = settled;
    expect(incr).toEqual({ status: "fulfilled", value: 3 });
    expect(get).toEqual({ status: "fulfilled", value: 0 });
    expect(del).toEqual({ status: "fulfilled", value: true });
    expect(hit.status).toBe("fulfilled");
    const entry = (hit as PromiseFulfilledResult<any>).value;
    expect(entry.contentType).toBe("text/html");
    expect(entry.text).toBe("<b>hi</b>");
    expect(entry.bytes).toEqual(new TextEncoder().encode("<b>hi</b>"));
    expect(miss).toEqual({ status: "fulfilled", value: null });
    expect(set.status).toBe("rejected");
    const error = (set as PromiseRejectedResult).reason;
    expect(error).toBeInstanceOf(EdgecountError);
    expect(error).toMatchObject({
      status: 422,
      code: "overflow",
      message: "too big",
    });
    expect(put).toEqual({ status: "fulfilled", value: undefined });
    expect(decr).toEqual({ status: "fulfilled", value: -4 });
  });

  it("sends a call alone to its single-key route, key percent-encoded, with the token", async () => {
    const { client, sent } = setup(
      () => json('{"ns":"votes","key":"poll/42 ?","value":7,"exists":true}'),
      { token: "site-writer-token", baseUrl: `${BASE}/` },
    );
    expect(
      await client.incr("votes", "poll/42 ?", 2, {
        ttl: 3600,
        exactlyOnce: true,
      }),
    ).toBe(7);
    expect(await client.get("votes", "poll/42 ?")).toBe(7);
    expect(sent.map((r) => `${r.method} ${r.path}`)).toEqual([
      "POST /v1/counters/votes/poll%2F42%20%3F/incr?by=2&ttl=3600",
      "GET /v1/counters/votes/poll%2F42%20%3F",
    ]);
    expect(sent[0].headers.authorization).toBe("Bearer site-writer-token");
    expect(sent[0].headers["idempotency-key"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent[1].headers["idempotency-key"]).toBeUndefined();
  });

  it("uses each route's method and body", async () => {
    const { client, sent } = setup((request) => {
      if (request.method === "DELETE") return json('{"deleted":false}');
      if (request.path.startsWith("/v1/cache/") && request.method === "PUT")
        return new Response(null, { status: 204 });
      if (request.path.startsWith("/v1/cache/")) {
        return new Response(new Uint8Array([0, 255]), {
          headers: { "content-type": "image/x-test" },
        });
      }
      return json('{"ns":"n","key":"k","value":5,"exists":true}');
    });
    expect(await client.set("n", "k", 5)).toBe(5);
    expect(await client.del("n", "k")).toBe(false);
    await client.cachePut("n", "c", new Uint8Array([0, 255]), { ttl: 9 });
    const entry = await client.cacheGet("n", "c");
    expect(entry?.bytes).toEqual(new Uint8Array([0, 255]));
    expect(entry?.contentType).toBe("image/x-test");
    expect(await client.cacheDelete("n", "c")).toBe(false);
    expect(
      sent.map(
        (r) => `${r.method} ${r.path} ${r.headers["content-type"] ?? "-"}`,
      ),
    ).toEqual([
      "PUT /v1/counters/n/k application/json",
      "DELETE /v1/counters/n/k -",
      "PUT /v1/cache/n/c?ttl=9 application/octet-stream",
      "GET /v1/cache/n/c -",
      "DELETE /v1/cache/n/c -",
    ]);
    expect(sent[0].body).toBe('{"value":5}');
  });

  it("answers null for a missing cache entry on its own route", async () => {
    const { client } = setup(() => apiError(404, "not_found"));
    expect(await client.cacheGet("n", "missing")).toBeNull();
  });

  it("sends cache bytes to their own route, beside the batch of the other calls", async () => {
    const store = counterStore();
    const { client, sent } = setup((request) =>
      request.path === "/v1/batch"
        ? store(request)
        : new Response(null, { status: 204 }),
    );
    await Promise.all([
      client.incr("n", "a"),
      client.cachePut("n", "bin", new Uint8Array([1, 2, 3])),
      client.incr("n", "b"),
    ]);
    expect(sent.map((r) => r.path).sort()).toEqual([
      "/v1/batch",
      "/v1/cache/n/bin",
    ]);
    expect(sent.find((r) => r.path === "/v1/batch")?.ops).toHaveLength(2);
  });

  it("sends names `.` and `..`, which a URL path cannot carry, in a batch", async () => {
    const { client, sent } = setup(() =>
      json(
        '{"results":[{"error":{"code":"invalid_key","message":"cannot be `.` or `..`"}}]}',
      ),
    );
    const error = await failure(client.get("..", "."));
    expect(error).toMatchObject({ status: 400, code: "invalid_key" });
    expect(sent[0].path).toBe("/v1/batch");
    // Bytes can travel neither way, so the client refuses them.
    const bytes = await failure(client.cachePut(".", "k", new Uint8Array([1])));
    expect(bytes).toMatchObject({ status: 0, code: "invalid_namespace" });
    expect(sent).toHaveLength(1);
  });

  it("splits a tick's calls into batches of at most 1000 ops, sent in call order", async () => {
    const store = counterStore();
    let inFlight = 0;
    let mostInFlight = 0;
    const { client, sent } = setup(async (request) => {
      mostInFlight = Math.max(mostInFlight, ++inFlight);
      await new Promise((resolve) => setTimeout(resolve, 1));
      inFlight--;
      return store(request);
    });
    const values = await Promise.all(
      Array.from({ length: 2500 }, () => client.incr("n", "hot")),
    );
    expect(sent.map((r) => r.ops.length)).toEqual([1000, 1000, 500]);
    expect(mostInFlight).toBe(1);
    expect(values).toEqual(Array.from({ length: 2500 }, (_, i) => i + 1));
  });

  it("splits batches by size too, under the service's 8 MiB", async () => {
    const { client, sent } = setup((request) =>
      json(
        `{"results":[${request.ops.map(() => '{"stored":true}').join(",")}]}`,
      ),
    );
    const value = "é".repeat(512 * 1024); // 1 MiB of UTF-8
    await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        client.cachePut("n", `k${i}`, value),
      ),
    );
    expect(sent.map((r) => r.ops.length)).toEqual([7, 3]);
    for (const request of sent) {
      expect(new TextEncoder().encode(request.body).length).toBeLessThanOrEqual(
        8 * 1024 * 1024,
      );
    }
  });

  it("turns off with batchDelayMs false, and widens with a positive delay", async () => {
    const single = () => json('{"ns":"n","key":"k","value":1,"exists":true}');
    const off = setup(single, { batchDelayMs: false });
    await Promise.all([off.client.get("n", "a"), off.client.get("n", "b")]);
    expect(off.sent.map((r) => r.path)).toEqual([
      "/v1/counters/n/a",
      "/v1/counters/n/b",
    ]);

    // On fake timers: a call 5 ms into a 20 ms window joins it, however late a real 5 ms
    // timer would fire on a loaded machine.
    vi.useFakeTimers();
    const wide = setup(counterStore(), { batchDelayMs: 20 });
    const first = wide.client.incr("n", "a");
    await vi.advanceTimersByTimeAsync(5);
    const second = wide.client.incr("n", "b");
    expect(wide.sent).toHaveLength(0);
    await vi.advanceTimersByTimeAsync(15);
    await Promise.all([first, second]);
    expect(wide.sent).toHaveLength(1);
    expect(wide.sent[0].ops).toHaveLength(2);
    vi.useRealTimers();

    const flushed = setup(counterStore(), { batchDelayMs: 60_000 });
    const pending = Promise.all([
      flushed.client.incr("n", "a"),
      flushed.client.incr("n", "b"),
    ]);
    flushed.client.flush();
    expect(await pending).toEqual([1, 1]);
  });
});

describe("explicit batch", () => {
  it("answers each op's result or error in its place", async () => {
    const { client, sent } = setup(() =>
      json(
        '{"results":[{"value":1,"exists":true},{"error":{"code":"invalid_namespace","message":"bad"}},' +
          '{"value_base64":"AP8=","content_type":"x/y"},{"stored":true},{"deleted":true}]}',
      ),
    );
    const [incr, bad, entry, stored, deleted, local] = await client.batch([
      { op: "incr", ns: "n", key: "a" },
      { op: "incr", ns: "bad ns", key: "a" },
      { op: "cache_get", ns: "n", key: "c" },
      {
        op: "cache_put",
        ns: "n",
        key: "c",
        value: "v",
        idempotencyKey: "put-c-1",
      },
      { op: "delete", ns: "n", key: "a" },
      { op: "incr", ns: "n", key: "a", by: 0.5 },
    ]);
    expect(incr).toBe(1);
    expect(bad).toBeInstanceOf(EdgecountError);
    expect(bad).toMatchObject({ status: 400, code: "invalid_namespace" });
    expect(entry).toMatchObject({
      contentType: "x/y",
      bytes: new Uint8Array([0, 255]),
    });
    expect(stored).toBeUndefined();
    expect(deleted).toBe(true);
    expect(local).toMatchObject({ status: 0, code: "invalid_number" });
    expect(sent).toHaveLength(1);
    expect(sent[0].ops).toHaveLength(5);
    expect(sent[0].ops[3]).toMatchObject({
      content_type: "text/plain; charset=utf-8",
      idempotency_key: "put-c-1",
    });
  });

  it("puts a whole request's failure in every op's place", async () => {
    const { client } = setup(() => apiError(413, "payload_too_large"));
    const results = await client.batch([
      { op: "get", ns: "n", key: "a" },
      { op: "get", ns: "n", key: "b" },
    ]);
    expect(results.map((r) => (r as EdgecountError).code)).toEqual([
      "payload_too_large",
      "payload_too_large",
    ]);
  });
});

describe("retries", () => {
  it("retries a 429 with the same Idempotency-Key, not before Retry-After", async () => {
    vi.useFakeTimers();
    vi.spyOn(Math, "random").mockReturnValue(0.5);
    const { client, sent } = setup(
      (_, i) =>
        i === 0
          ? apiError(429, "rate_limited", { "retry-after": "2" })
          : json('{"ns":"n","key":"k","value":1,"exists":true}'),
      { retryBaseMs: 100 },
    );
    const answer = client.incr("n", "k");
    await vi.advanceTimersByTimeAsync(1999);
    expect(sent).toHaveLength(1);
    // Retry-After (2 s) plus at most half of the first backoff step as jitter.
    await vi.advanceTimersByTimeAsync(51);
    expect(sent).toHaveLength(2);
    expect(await answer).toBe(1);
    expect(sent[1].headers["idempotency-key"]).toBe(
      sent[0].headers["idempotency-key"],
    );
    expect(sent[1].path).toBe(sent[0].path);
  });

  it("retries a 503 batch whole, each op keeping its idempotency key", async () => {
    const store = counterStore();
    const { client, sent } = setup((request, i) =>
      i === 0
        ? apiError(503, "shard_unavailable", { "retry-after": "0" })
        : store(request),
    );
    expect(
      await Promise.all([
        client.incr("n", "a", 1, { exactlyOnce: true }),
        client.set("n", "b", 0),
        client.get("n", "c"),
      ]),
    ).toEqual([1, 0, 0]);
    expect(sent).toHaveLength(2);
    expect(sent[1].body).toBe(sent[0].body);
    expect(sent[0].ops[0].idempotency_key).toBeTypeOf("string");
  });

  it("retries an outcome_unknown write only with its idempotency key", async () => {
    const { client, sent } = setup((_, i) =>
      i === 0
        ? apiError(503, "outcome_unknown")
        : json('{"ns":"n","key":"k","value":1,"exists":true}'),
    );
    expect(await client.incr("n", "k", 1, { exactlyOnce: true })).toBe(1);
    expect(sent).toHaveLength(2);
    expect(sent[0].headers["idempotency-key"]).toMatch(/^[0-9a-f-]{36}$/);
    expect(sent[1].headers["idempotency-key"]).toBe(
      sent[0].headers["idempotency-key"],
    );
  });

  it("sends a count without a key by default, and never again after a lost answer", async () => {
    const unknown = setup(() => apiError(503, "outcome_unknown"));
    await expect(unknown.client.incr("n", "k")).rejects.toMatchObject({
      code: "outcome_unknown",
    });
    expect(unknown.sent).toHaveLength(1);
    expect(unknown.sent[0].headers["idempotency-key"]).toBeUndefined();
    const lost = setup(() => {
      throw new TypeError("Failed to fetch");
    });
    await expect(lost.client.decr("n", "k")).rejects.toMatchObject({
      code: "network_error",
    });
    expect(lost.sent).toHaveLength(1);
    // Nothing was applied: sent again, still without a key.
    const busy = setup((_, i) =>
      i === 0
        ? apiError(503, "shard_overloaded", { "retry-after": "0" })
        : json('{"ns":"n","key":"k","value":1,"exists":true}'),
    );
    expect(await busy.client.incr("n", "k")).toBe(1);
    expect(busy.sent).toHaveLength(2);
  });

  it("never retries an op that could apply twice unless the service applied nothing", () => {
    const unknown = { status: 503, code: "outcome_unknown" };
    expect(mayRetry(unknown, true)).toBe(false);
    expect(mayRetry(unknown, false)).toBe(true);
    expect(mayRetry({ status: 503, code: "shard_unavailable" }, true)).toBe(
      true,
    );
    expect(mayRetry({ status: 429, code: "rate_limited" }, true)).toBe(true);
    // A proxy's answer says nothing of what the service applied.
    expect(mayRetry({ status: 502, code: "bad_response" }, true)).toBe(false);
    expect(mayRetry({ status: 503, code: "bad_response" }, true)).toBe(false);
    expect(mayRetry({ status: 502, code: "bad_response" }, false)).toBe(true);
    expect(mayRetry({ status: 422, code: "overflow" }, false)).toBe(false);
  });

  it("retries only the ops of a batch that failed transiently", async () => {
    const { client, sent } = setup((request, i) =>
      i === 0
        ? json(
            '{"results":[{"value":1,"exists":true},' +
              '{"error":{"code":"shard_unavailable","message":"retry shortly"}},' +
              '{"error":{"code":"storage_unavailable","message":"retry shortly"}}]}',
          )
        : json(
            `{"results":[${request.ops.map(() => '{"value":9,"exists":true}').join(",")}]}`,
          ),
    );
    const first = [
      client.incr("n", "a", 1, { exactlyOnce: true }),
      client.incr("n", "b", 1, { exactlyOnce: true }),
      client.get("n", "c"),
    ];
    expect(await Promise.all(first)).toEqual([1, 9, 9]);
    expect(sent).toHaveLength(2);
    expect(sent[1].ops.map((op) => op.key)).toEqual(["b", "c"]);
    expect(sent[1].ops[0].idempotency_key).toBe(sent[0].ops[1].idempotency_key);
  });

  it("retries network failures, then gives up with network_error", async () => {
    let calls = 0;
    const flaky = setup(() => {
      if (++calls < 3) throw new TypeError("Failed to fetch");
      return json('{"ns":"n","key":"k","value":2,"exists":true}');
    });
    expect(await flaky.client.incr("n", "k", 1, { exactlyOnce: true })).toBe(2);
    expect(
      new Set(flaky.sent.map((r) => r.headers["idempotency-key"])).size,
    ).toBe(1);

    const down = setup(
      () => {
        throw new TypeError("Failed to fetch");
      },
      { maxRetries: 2 },
    );
    const error = await failure(
      down.client.incr("n", "k", 1, { exactlyOnce: true }),
    );
    expect(error).toMatchObject({ status: 0, code: "network_error" });
    expect(error.cause).toBeInstanceOf(TypeError);
    expect(down.sent).toHaveLength(3);
  });

  it("stops after maxRetries and reports the last error with its Retry-After", async () => {
    const { client, sent } = setup(
      () => apiError(503, "storage_unavailable", { "retry-after": "0" }),
      {
        maxRetries: 3,
      },
    );
    const error = await failure(client.get("n", "k"));
    expect(error).toMatchObject({
      status: 503,
      code: "storage_unavailable",
      retryAfter: 0,
    });
    expect(sent).toHaveLength(4);
  });

  it("does not wait for a Retry-After longer than maxRetryDelayMs", async () => {
    const { client, sent } = setup(() =>
      apiError(429, "rate_limited", { "retry-after": "120" }),
    );
    const error = await failure(client.incr("n", "k"));
    expect(error).toMatchObject({
      status: 429,
      code: "rate_limited",
      retryAfter: 120,
    });
    expect(sent).toHaveLength(1);
  });

  it("does not retry other 4xx answers", async () => {
    for (const [status, code] of [
      [400, "invalid_key"],
      [401, "unauthorized"],
      [403, "forbidden"],
      [422, "idempotency_mismatch"],
    ] as const) {
      const { client, sent } = setup(() => apiError(status, code));
      const error = await failure(client.incr("n", "k"));
      expect(error).toMatchObject({ status, code });
      expect(error.message).toBe(`${code} happened`);
      expect(sent).toHaveLength(1);
    }
  });

  it("reports an answer that is not the API's JSON as bad_response", async () => {
    const { client } = setup(
      () => new Response("<html>bad gateway</html>", { status: 502 }),
    );
    const error = await failure(client.get("n", "k"));
    expect(error).toMatchObject({ status: 502, code: "bad_response" });
  });
});

describe("exact values", () => {
  it("answers numbers for safe integers and exact bigints past 2^53", async () => {
    const answers = [
      "9007199254740991",
      "9007199254740993",
      "-9223372036854775808",
      "9223372036854775807",
    ];
    const { client, sent } = setup((request) => {
      if (request.path === "/v1/batch") {
        return json(
          `{"results":[${answers.map((v) => `{"exists":true,"value":${v}}`).join(",")}]}`,
        );
      }
      return json(`{"ns":"n","key":"k","value":${answers[1]},"exists":true}`);
    });
    expect(await client.incr("n", "k", 9007199254740992n)).toBe(
      9007199254740993n,
    );
    expect(sent[0].path).toBe("/v1/counters/n/k/incr?by=9007199254740992");
    const values = await Promise.all(
      answers.map((_, i) => client.get("n", `k${i}`)),
    );
    expect(values).toEqual([
      9007199254740991,
      9007199254740993n,
      -9223372036854775808n,
      9223372036854775807n,
    ]);
    expect(typeof values[0]).toBe("number");
  });

  it("writes bigint and large number inputs with every digit", async () => {
    const { client, sent } = setup(() => json('{"value":1,"exists":true}'), {
      batchDelayMs: false,
    });
    await client.set("n", "k", -9223372036854775808n);
    await client.set("n", "k", 2 ** 60);
    expect(sent.map((r) => r.body)).toEqual([
      '{"value":-9223372036854775808}',
      '{"value":1152921504606846976}',
    ]);
  });

  it("refuses amounts and TTLs that are not integers, without a request", async () => {
    const { client, sent } = setup(() => json("{}"));
    expect(await failure(client.incr("n", "k", 1.5))).toMatchObject({
      status: 0,
      code: "invalid_number",
    });
    expect(await failure(client.set("n", "k", Number.NaN))).toMatchObject({
      code: "invalid_number",
    });
    expect(await failure(client.incr("n", "k", 1, { ttl: 0.5 }))).toMatchObject(
      { code: "invalid_ttl" },
    );
    expect(sent).toHaveLength(0);
  });
});

describe("one-way counts", () => {
  it("sends each at once to its route with ?async=1 and keepalive, no preflighted header and no idempotency key", async () => {
    const { client, sent } = setup(() => json('{"status":"accepted"}', 202));
    const [first, second] = await Promise.all([
      client.incr("pages", "home", undefined, { async: true }),
      client.decr("pages", "home", 2, { async: true, ttl: 60 }),
    ]);
    expect(first).toBeUndefined();
    expect(second).toBeUndefined();
    expect(sent.map((r) => [r.method, r.path])).toEqual([
      ["POST", "/v1/counters/pages/home/incr?async=1"],
      ["POST", "/v1/counters/pages/home/decr?by=2&ttl=60&async=1"],
    ]);
    for (const request of sent) {
      expect(request.headers).toEqual({});
      expect(request.keepalive).toBe(true);
    }
  });

  it("retries when nothing was accepted (503 one_way_buffer_full), after Retry-After", async () => {
    const { client, sent } = setup((_, i) =>
      i === 0
        ? apiError(503, "one_way_buffer_full", { "retry-after": "0" })
        : json('{"status":"accepted"}', 202),
    );
    expect(await client.incr("n", "k", 1, { async: true })).toBeUndefined();
    expect(sent).toHaveLength(2);
  });

  it("never sends one again after a network failure or a gateway error, which may hide an accepted write", async () => {
    const down = setup(() => {
      throw new TypeError("Failed to fetch");
    });
    const error = await failure(down.client.incr("n", "k", 1, { async: true }));
    expect(error).toMatchObject({ code: "network_error" });
    expect(down.sent).toHaveLength(1);
    const gateway = setup(() => new Response("bad gateway", { status: 502 }));
    const refused = await failure(
      gateway.client.incr("n", "k", 1, { async: true }),
    );
    expect(refused).toMatchObject({ status: 502, code: "bad_response" });
    expect(gateway.sent).toHaveLength(1);
  });

  it("refuses a non-integer amount without a request", async () => {
    const { client, sent } = setup(() => json("{}", 202));
    const error = await failure(client.incr("n", "k", 1.5, { async: true }));
    expect(error).toMatchObject({ code: "invalid_number" });
    expect(sent).toHaveLength(0);
  });
});

describe("timeouts and gateways", () => {
  it("retries a keyed write after a proxy's 502 or 504 with the same key", async () => {
    const { client, sent } = setup((_, i) =>
      i === 0
        ? new Response("<html>bad gateway</html>", { status: 502 })
        : i === 1
          ? new Response("gateway timeout", { status: 504 })
          : json('{"ns":"n","key":"k","value":1,"exists":true}'),
    );
    expect(await client.incr("n", "k", 1, { exactlyOnce: true })).toBe(1);
    expect(sent).toHaveLength(3);
    expect(new Set(sent.map((r) => r.headers["idempotency-key"])).size).toBe(1);
  });

  it("abandons a request past timeoutMs and reports it as a network failure", async () => {
    const { client, sent } = setup(
      (request) =>
        new Promise<Response>((_, reject) => {
          request.signal?.addEventListener("abort", () =>
            reject(request.signal?.reason),
          );
        }),
      { timeoutMs: 20, maxRetries: 1 },
    );
    const error = await failure(client.get("n", "k"));
    expect(error).toMatchObject({ code: "network_error" });
    expect(sent).toHaveLength(2);
    expect(sent.every((r) => r.signal !== undefined)).toBe(true);
  });
});

describe("leaving the page", () => {
  /** A browser page's globals: `document` hidden or not, `navigator.sendBeacon`, and the
   * page's listeners, so a test can fire `pagehide`. */
  function page(hidden: boolean) {
    const listeners: Record<string, () => void> = {};
    const beacons: string[] = [];
    vi.stubGlobal("document", {
      visibilityState: hidden ? "hidden" : "visible",
      addEventListener: () => {},
    });
    vi.stubGlobal("addEventListener", (type: string, listener: () => void) => {
      listeners[type] = listener;
    });
    vi.stubGlobal("navigator", {
      sendBeacon: (url: string) => {
        beacons.push(url);
        return true;
      },
    });
    return { fire: (type: string) => listeners[type]?.(), beacons };
  }

  /** A client on the global fetch (a beacon can stand in for it). */
  function onGlobalFetch(
    handler: Handler,
    options: Partial<ClientOptions> = {},
  ) {
    const fake = fakeFetch(handler);
    vi.stubGlobal("fetch", fake.fetch);
    const client = createClient({ baseUrl: BASE, retryBaseMs: 1, ...options });
    return { client, sent: fake.sent };
  }

  afterEach(() => vi.unstubAllGlobals());

  it("while the page is only hidden, sends one-way counts by fetch, so a refusal is seen and retried", async () => {
    const { beacons } = page(true);
    const { client, sent } = onGlobalFetch((_, i) =>
      i === 0
        ? apiError(429, "rate_limited", { "retry-after": "0" })
        : json('{"status":"accepted"}', 202),
    );
    expect(await client.incr("n", "k", 1, { async: true })).toBeUndefined();
    expect(beacons).toEqual([]);
    expect(sent).toHaveLength(2);
    expect(sent[1].keepalive).toBe(true);
  });

  it("once the page is being left, sends them by beacon, unless the caller's own fetch must", async () => {
    const { fire, beacons } = page(true);
    const { client, sent } = onGlobalFetch(() => json("{}", 202));
    fire("pagehide");
    await client.incr("n", "k", undefined, { async: true });
    expect(beacons).toEqual([`${BASE}/v1/counters/n/k/incr?async=1`]);
    expect(sent).toHaveLength(0);
    // A fetch of the caller's own may add headers a beacon cannot carry.
    const own = setup(() => json('{"status":"accepted"}', 202));
    fire("pagehide");
    await own.client.incr("n", "k", 1, { async: true });
    expect(own.sent).toHaveLength(1);
    expect(beacons).toHaveLength(1);
  });

  it("sends the calls of a tick made while the page is hidden with that tick, not after the batch window", async () => {
    page(true);
    vi.useFakeTimers();
    const { client, sent } = setup(
      () =>
        json(
          '{"results":[{"ns":"n","key":"k","value":1,"exists":true},{"ns":"n","key":"j","value":0,"exists":false}]}',
        ),
      { batchDelayMs: 50 },
    );
    const counted = Promise.all([client.incr("n", "k"), client.get("n", "j")]);
    // Within the tick, well before the 50 ms window: and the tick's calls still together.
    await vi.advanceTimersByTimeAsync(1);
    expect(sent).toHaveLength(1);
    expect(sent[0].path).toBe("/v1/batch");
    vi.useRealTimers();
    await counted;
  });
});

describe("idempotency keys given by the caller", () => {
  it("refuses one the service would refuse, without a request, rather than send the write unkeyed", async () => {
    const { client, sent } = setup(() => json("{}"));
    for (const key of ["", "has space", "x".repeat(129), "é"]) {
      const error = await failure(
        client.incr("n", "k", 1, { idempotencyKey: key }),
      );
      expect(error).toMatchObject({ code: "invalid_idempotency_key" });
    }
    expect(sent).toHaveLength(0);
  });

  it("makes a count asked for one-way an acknowledged write, as the service does", async () => {
    const { client, sent } = setup(() =>
      json('{"ns":"n","key":"k","value":1,"exists":true}'),
    );
    expect(
      await client.incr("n", "k", 1, { async: true, idempotencyKey: "like-7" }),
    ).toBe(1);
    expect(sent[0].path).toBe("/v1/counters/n/k/incr?by=1");
    expect(sent[0].headers["idempotency-key"]).toBe("like-7");
  });
});

describe("cache reads batched by the client", () => {
  it("reads on its own an entry the batch's answer budget left out", async () => {
    const { client, sent } = setup((request) =>
      request.path === "/v1/batch"
        ? json(
            JSON.stringify({
              results: [
                { value: "a", content_type: "text/plain" },
                {
                  error: {
                    code: "payload_too_large",
                    message: "read it on its own",
                  },
                },
              ],
            }),
          )
        : new Response("b", { headers: { "content-type": "text/plain" } }),
    );
    const [a, b] = await Promise.all([
      client.cacheGet("n", "a"),
      client.cacheGet("n", "b"),
    ]);
    expect(a?.text).toBe("a");
    expect(b?.text).toBe("b");
    expect(sent.map((r) => r.path)).toEqual(["/v1/batch", "/v1/cache/n/b"]);
  });

  it("leaves the refusal in its place in a batch the caller made", async () => {
    const { client } = setup(() =>
      json(
        JSON.stringify({
          results: [
            {
              error: {
                code: "payload_too_large",
                message: "read it on its own",
              },
            },
          ],
        }),
      ),
    );
    const [result] = await client.batch([
      { op: "cache_get", ns: "n", key: "b" },
    ]);
    expect(result).toMatchObject({ code: "payload_too_large" });
  });
});
