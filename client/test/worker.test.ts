// The client against the real worker in workerd (the build in build/, started as the
// service specs start it): round trips, automatic batching, cache entries, exact big values,
// and the API's errors arriving typed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  freshNamespace,
  startService,
  type Service,
} from "../../tests/service";
import {
  createClient,
  EdgecountError,
  type Client,
  type ClientOptions,
} from "../src/edgecount";

let service: Service;
/** Requests the client sent, by path without the query. */
let paths: string[] = [];

function client(options: Partial<ClientOptions> = {}): Client {
  return createClient({
    baseUrl: "https://edgecount.test",
    fetch: (url, init) => {
      const { pathname, search } = new URL(url);
      paths.push(pathname);
      return service.fetch(pathname + search, init);
    },
    ...options,
  });
}

beforeAll(async () => {
  service = await startService();
});
afterAll(() => service.stop());

describe("client against the worker", () => {
  it("round-trips incr, get, decr, set and del", async () => {
    const ns = freshNamespace("client");
    const edgecount = client({ batchDelayMs: false });
    expect(await edgecount.get(ns, "a/b")).toBe(0);
    expect(await edgecount.incr(ns, "a/b")).toBe(1);
    expect(await edgecount.incr(ns, "a/b", 10)).toBe(11);
    expect(await edgecount.decr(ns, "a/b", 2)).toBe(9);
    expect(await edgecount.decr(ns, "a/b", -1n)).toBe(10);
    expect(await edgecount.get(ns, "a/b")).toBe(10);
    expect(await service.value(ns, "a/b")).toBe(10n);
    expect(await edgecount.set(ns, "a/b", -5)).toBe(-5);
    expect(await edgecount.del(ns, "a/b")).toBe(true);
    expect(await edgecount.del(ns, "a/b")).toBe(false);
    expect(await edgecount.get(ns, "a/b")).toBe(0);
  });

  it("batches concurrent increments of one key into one request with the right count", async () => {
    const ns = freshNamespace("concurrent");
    const edgecount = client();
    paths = [];
    const values = await Promise.all(
      Array.from({ length: 200 }, () => edgecount.incr(ns, "hits")),
    );
    expect(paths).toEqual(["/v1/batch"]);
    expect([...values].sort((a, b) => Number(a) - Number(b))).toEqual(
      Array.from({ length: 200 }, (_, i) => i + 1),
    );
    expect(await edgecount.get(ns, "hits")).toBe(200);
  });

  it("mixes ops in one batch and routes each answer to its caller", async () => {
    const ns = freshNamespace("mixed");
    const edgecount = client();
    paths = [];
    const [a, b, put, entry, missing] = await Promise.all([
      edgecount.incr(ns, "a", 3),
      edgecount.set(ns, "b", 42),
      edgecount.cachePut(ns, "frag", "<b>42 readers</b>", {
        contentType: "text/html",
        ttl: 300,
      }),
      edgecount.cacheGet(ns, "frag"),
      edgecount.cacheGet(ns, "nothing"),
    ]);
    expect(paths).toEqual(["/v1/batch"]);
    expect([a, b, put, missing]).toEqual([3, 42, undefined, null]);
    expect(entry?.text).toBe("<b>42 readers</b>");
    expect(entry?.contentType).toBe("text/html");
  });

  it("puts, gets and deletes cache entries, text and bytes", async () => {
    const ns = freshNamespace("cache");
    const edgecount = client({ batchDelayMs: false });
    await edgecount.cachePut(ns, "sidebar", "<b>hi</b>", {
      contentType: "text/html",
      ttl: 60,
    });
    const text = await edgecount.cacheGet(ns, "sidebar");
    expect(text?.text).toBe("<b>hi</b>");
    expect(text?.contentType).toBe("text/html");

    const bytes = new Uint8Array([0, 1, 2, 255, 254]);
    await edgecount.cachePut(ns, "logo/small", bytes, {
      contentType: "image/x-test",
    });
    const read = await edgecount.cacheGet(ns, "logo/small");
    expect(read?.bytes).toEqual(bytes);
    expect(read?.contentType).toBe("image/x-test");
    // Through a batch, bytes that are not UTF-8 come back as base64 and are decoded.
    const [batched] = await edgecount.batch([
      { op: "cache_get", ns, key: "logo/small" },
    ]);
    expect((batched as { bytes: Uint8Array }).bytes).toEqual(bytes);

    expect(await edgecount.cacheDelete(ns, "sidebar")).toBe(true);
    expect(await edgecount.cacheDelete(ns, "sidebar")).toBe(false);
    expect(await edgecount.cacheGet(ns, "sidebar")).toBeNull();
  });

  it("keeps values past 2^53 exact, alone and batched", async () => {
    const ns = freshNamespace("big");
    const edgecount = client();
    expect(await edgecount.set(ns, "big", 9007199254740993n)).toBe(
      9007199254740993n,
    );
    expect(await edgecount.incr(ns, "big", 2)).toBe(9007199254740995n);
    expect(await service.value(ns, "big")).toBe(9007199254740995n);
    const [max, read] = await Promise.all([
      edgecount.set(ns, "max", 9223372036854775807n),
      edgecount.get(ns, "big"),
    ]);
    expect([max, read]).toEqual([9223372036854775807n, 9007199254740995n]);
    const error = await edgecount.incr(ns, "max").catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EdgecountError);
    expect(error).toMatchObject({ status: 422, code: "overflow" });
  });

  it("rejects a bad key with invalid_key, alone and in a batch", async () => {
    const ns = freshNamespace("bad");
    const edgecount = client();
    for (const key of ["", "\u0001", "x".repeat(257)]) {
      const error = await edgecount.incr(ns, key).catch((e: unknown) => e);
      expect(error, JSON.stringify(key)).toBeInstanceOf(EdgecountError);
      expect(error).toMatchObject({ status: 400, code: "invalid_key" });
    }
    const [good, bad] = await Promise.allSettled([
      edgecount.incr(ns, "ok"),
      edgecount.incr(ns, "\u0001"),
    ]);
    expect(good).toEqual({ status: "fulfilled", value: 1 });
    expect((bad as PromiseRejectedResult).reason).toMatchObject({
      status: 400,
      code: "invalid_key",
    });
    expect(
      await edgecount.get("bad ns", "k").catch((e: EdgecountError) => e.code),
    ).toBe("invalid_namespace");
  });

  it("applies a retried write once: the same idempotency key replays the first answer", async () => {
    const ns = freshNamespace("idem");
    const edgecount = client();
    const options = { idempotencyKey: "like-post42-user7" };
    expect(await edgecount.incr(ns, "likes", 1, options)).toBe(1);
    expect(await edgecount.incr(ns, "likes", 1, options)).toBe(1);
    const [first, again] = await Promise.all([
      edgecount.incr(ns, "other", 5, { idempotencyKey: "order-1" }),
      edgecount.incr(ns, "other", 5, { idempotencyKey: "order-1" }),
    ]);
    expect([first, again]).toEqual([5, 5]);
    expect(await service.value(ns, "likes")).toBe(1n);
    expect(await service.value(ns, "other")).toBe(5n);
  });

  it("counts unique visitors, batched or one-way, and reads a counter's days", async () => {
    const ns = freshNamespace("days");
    // Every request of these clients comes from one address and user agent: one visitor.
    const visitor = (address: string) =>
      client({
        fetch: (url, init) => {
          const { pathname, search } = new URL(url);
          paths.push(pathname + search);
          const headers = new Headers(init?.headers);
          headers.set("cf-connecting-ip", address);
          headers.set("user-agent", "ClientSpec/1.0");
          return service.fetch(pathname + search, { ...init, headers });
        },
      });
    paths = [];
    const first = visitor("192.0.2.10");
    await Promise.all([
      first.incr(ns, "home", 1, { unique: true }),
      first.incr(ns, "home", 1, { unique: true }),
    ]);
    expect(paths).toEqual(["/v1/batch"]);
    await visitor("192.0.2.11").incr(ns, "home", 1, {
      unique: true,
      async: true,
    });
    expect(paths[1]).toBe(`/v1/counters/${ns}/home/incr?by=1&unique=1&async=1`);
    await expect
      .poll(
        async () =>
          (await first.days(ns, "home", { period: "today", unique: true }))
            .uniques,
        {
          timeout: 10_000,
        },
      )
      .toBe(2);
    const today = await first.days(ns, "home", { period: "7d", unique: true });
    expect([today.count, today.value, today.days.length]).toEqual([3, 3, 7]);
    expect(today.timeZone).toBe("UTC");
    expect(today.days[6]).toMatchObject({ count: 3, uniques: 2 });
    await expect(
      first.days(ns, "home", { period: "week" }),
    ).rejects.toMatchObject({
      status: 400,
      code: "invalid_parameter",
    });
    await expect(
      first.decr(ns, "home", 1, { unique: true } as never),
    ).rejects.toMatchObject({
      code: "invalid_op",
    });
  });
});
